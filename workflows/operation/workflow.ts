/**
 * One AdCP operation = one workflow run (continued-as-new when history grows). It makes the call, then follows the
 * task through every status until a terminal one. Every route a result can take — the call's answer, verified
 * webhooks (signals), polls, reconciliation, cancel — feeds one state machine (./observations.ts), also while a call
 * is in flight. Handlers only record facts; this loop acts.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  ParentClosePolicy,
  TimeoutFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  currentUpdateInfo,
  isCancellation,
  log,
  metricMeter,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { OperationActivities } from '../../activities';
import type { CallPlan, CallTimeouts, ReadMethod, ReadTaskOutcome, SendCallInput } from '../../contract/activities';
import { SA_INPUT_REASON, SA_PRINCIPAL, SA_STATUS, SA_TASK_ID, SA_TENANT } from '../../config/search-attributes';
import { type AdcpError, INTERRUPTED_STATUSES, normaliseStatus, taskSpec } from '../../protocol';
import { type WaitPlan, planWait } from './cadence';
import {
  type AuditEntry,
  type CancelRequest,
  type CarriedState,
  type OperationInput,
  type OperationState,
  type ProvidedInput,
  type WebhookDelivery,
  OPERATION_FAILED,
  OPERATION_REJECTED,
  OPERATION_STATE_MEMO,
  adoptTaskSignal,
  cancelOperationUpdate,
  credentialsRefreshedUpdate,
  pollNowSignal,
  provideInputUpdate,
  statusQuery,
  webhookReceivedSignal,
  webhookRefusedSignal,
} from '../../contract/operation';
import {
  type BuyerNotification,
  NOTIFICATION_WORKFLOW_TYPE,
  type NotificationEvent,
} from '../../contract/notification';
import { Observations, isQuietRepeat, iso } from './observations';
import {
  actorProblem,
  cancelRequestProblem,
  credentialsRefreshProblem,
  providedInputProblem,
} from '../../contract/validators';

const MAX_SEEN_EVENT_KEYS = 1_000;
/** Audit entries kept in state (history keeps every update's arguments, so none is lost beyond this). */
const MAX_AUDIT_ENTRIES = 50;
const TEMPORAL_CANCEL: CancelRequest = {
  requestedBy: 'temporal',
  reason: 'workflow cancellation requested through Temporal',
};
const DEFAULT_INTERACTION_DEADLINE_MS = 60 * 60_000;
const DEFAULT_MAX_INPUT_ROUNDS = 3;
const DEFAULT_AUTH_DEADLINE_MS = 60 * 60_000;
/** Until a call records the worker's timeouts. */
const DEFAULT_TIMEOUTS: CallTimeouts = { callMs: 60_000, readMs: 60_000 };
/** Start-to-close is the hard call timeout plus room to report the failure. */
const ACTIVITY_MARGIN_MS = 10_000;
/** A killed worker's call is retried within about this long (heartbeats every few seconds). */
const HEARTBEAT_TIMEOUT = '5s';
/** The largest result kept in the memo that reads answer from when no worker can; larger ones are summarised. */
const MEMO_RESULT_LIMIT = 32 * 1024;

/** Errors a retry cannot fix: bad configuration, answers that break the protocol, calls the seller refused. */
const NON_RETRYABLE = ['ConfigError', 'ProtocolViolation', 'IdempotencyKeyRefused', 'AnswerTooLarge'];

const planning = proxyLocalActivities<OperationActivities>({
  startToCloseTimeout: '10s',
  retry: {
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '5s',
    maximumAttempts: 5,
    nonRetryableErrorTypes: NON_RETRYABLE,
  },
});

function callActivities(input: OperationInput, timeouts: CallTimeouts) {
  const defaults = taskSpec(input.task).retry;
  return proxyActivities<OperationActivities>({
    startToCloseTimeout: `${timeouts.callMs + ACTIVITY_MARGIN_MS}ms`,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: {
      initialInterval: `${input.retry?.initialIntervalMs ?? defaults.initialIntervalMs}ms`,
      backoffCoefficient: 2,
      maximumInterval: `${input.retry?.maximumIntervalMs ?? defaults.maximumIntervalMs}ms`,
      maximumAttempts: input.retry?.maximumAttempts ?? defaults.maximumAttempts,
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
}

/**
 * Reads (non-mutating tasks) are called as local activities: a synchronous answer then costs one marker in the
 * workflow task that asked, not a scheduled/started/completed trio and a second workflow task. A read that goes
 * async continues like any other operation. Mutations stay ordinary activities (heartbeats, cancellation reach).
 */
function localCallActivities(input: OperationInput, timeouts: CallTimeouts) {
  const defaults = taskSpec(input.task).retry;
  return proxyLocalActivities<OperationActivities>({
    startToCloseTimeout: `${timeouts.callMs + ACTIVITY_MARGIN_MS}ms`,
    retry: {
      initialInterval: `${input.retry?.initialIntervalMs ?? defaults.initialIntervalMs}ms`,
      backoffCoefficient: 2,
      maximumInterval: `${input.retry?.maximumIntervalMs ?? defaults.maximumIntervalMs}ms`,
      maximumAttempts: input.retry?.maximumAttempts ?? defaults.maximumAttempts,
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
}

function readActivities(timeouts: CallTimeouts) {
  return proxyActivities<OperationActivities>({
    // A read tries the seller's read methods in turn: room for a few of them.
    startToCloseTimeout: `${timeouts.readMs * 2 + ACTIVITY_MARGIN_MS}ms`,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: {
      initialInterval: '1s',
      backoffCoefficient: 2,
      maximumInterval: '10s',
      maximumAttempts: 3,
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
}

/**
 * A read planned inside its one call records no plan, so its timeouts are not known before it; the local activity
 * gets room for the longest call a worker may be configured with (the activity bounds the call itself).
 */
const UNPLANNED_READ_TIMEOUTS: CallTimeouts = { callMs: 5 * 60_000, readMs: 2 * 60_000 };
/** A poll lost with its worker is made again this long after its heartbeat timed out. */
const LOST_POLL_RETRY = '1s';

/**
 * The polls of one wait as one activity that keeps the cadence itself (`nextRetryDelay` on each attempt,
 * contract/activities.ts AwaitTaskMoveOnCadenceInput). The retry policy only applies to attempts that were lost.
 */
function cadencedPollingActivities(budgetMs: number, timeouts: CallTimeouts) {
  return proxyActivities<OperationActivities>({
    startToCloseTimeout: `${timeouts.readMs * 2 + ACTIVITY_MARGIN_MS}ms`,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    scheduleToCloseTimeout: `${Math.max(budgetMs, 1_000)}ms`,
    retry: {
      initialInterval: LOST_POLL_RETRY,
      backoffCoefficient: 1,
      maximumInterval: LOST_POLL_RETRY,
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
}

/** The polling activity stopped because its time budget (deadline or working window) ended, not because it failed. */
function budgetRanOut(failure: unknown): boolean {
  if (!(failure instanceof ActivityFailure)) return false;
  return failure.cause instanceof TimeoutFailure || failure.retryState === 'TIMEOUT';
}

function pollsBeforeBudgetRanOut(failure: unknown): number {
  const cause = failure instanceof ActivityFailure ? failure.cause : undefined;
  const detail =
    cause instanceof ApplicationFailure ? (cause.details?.[0] as { polls?: unknown } | undefined) : undefined;
  return typeof detail?.polls === 'number' ? detail.polls : 0;
}

/** The error an activity failure carries, in our one error model (activities attach it as details[0]). */
function errorFromFailure(failure: unknown): AdcpError {
  let cause: unknown = failure;
  if (cause instanceof ActivityFailure) cause = cause.cause;
  if (cause instanceof TimeoutFailure)
    return { code: 'TIMEOUT', message: `the activity timed out (${cause.timeoutType})`, recovery: 'transient' };
  if (cause instanceof ApplicationFailure) {
    const detail = cause.details?.[0] as AdcpError | undefined;
    if (detail && typeof detail.code === 'string') return detail;
    return {
      code: cause.type ?? 'ACTIVITY_FAILED',
      message: cause.message,
      recovery: cause.nonRetryable ? 'terminal' : 'transient',
    };
  }
  return {
    code: 'ACTIVITY_FAILED',
    message: cause instanceof Error ? cause.message : String(cause),
    recovery: 'terminal',
  };
}

function accountOf(params: Record<string, unknown>): { account?: unknown } {
  return params.account !== undefined ? { account: params.account } : {};
}

/** The tenant for activity inputs: only operations started with one carry it. */
function tenantOf(input: OperationInput): { tenant?: string } {
  return input.tenant !== undefined ? { tenant: input.tenant } : {};
}

export async function adcpOperation(input: OperationInput): Promise<OperationState> {
  const info = workflowInfo();
  const spec = taskSpec(input.task);
  const startedAtMs = Date.now();
  const state: OperationState = input.carried?.state ?? {
    operationId: info.workflowId,
    sellerId: input.sellerId,
    task: input.task,
    // Only operations started with a tenant carry these fields.
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
    ...(input.principal !== undefined ? { principal: input.principal } : {}),
    ...(input.principal !== undefined
      ? { audit: [{ at: iso(startedAtMs), action: 'started' as const, principal: input.principal }] }
      : {}),
    status: 'pending',
    inputRounds: 0,
    webhookRegistered: false,
    pollCount: 0,
    webhooksApplied: 0,
    transitions: [],
    transitionCount: 0,
    anomalies: [],
    startedAt: iso(startedAtMs),
    updatedAt: iso(startedAtMs),
    deadline: iso(startedAtMs + (input.budgetMs ?? spec.defaultBudgetMs)),
  };
  const deadlineMs = Date.parse(state.deadline);
  // The starter indexes an operation only where the namespace has the AdCP search attributes registered (not on
  // the time-skipping test server, for one); the workflow keeps them (and the memo) current only then.
  const indexed = info.typedSearchAttributes.get(SA_STATUS) !== undefined;
  // The starter indexes the tenant with the other attributes; one started without them (a child of a media buy, a
  // tool) indexes it here.
  if (
    indexed &&
    input.tenant !== undefined &&
    !input.carried &&
    info.typedSearchAttributes.get(SA_TENANT) !== input.tenant
  ) {
    upsertSearchAttributes([
      { key: SA_TENANT, value: input.tenant },
      ...(input.principal !== undefined ? [{ key: SA_PRINCIPAL, value: input.principal }] : []),
    ]);
  }
  // ---- notifications to the buyer's systems ------------------------------------------------------
  // Each is an abandoned child workflow: starting one costs this operation a start, never the delivery (retries,
  // a slow receiver). Its workflow ID is the idempotency key, so an event is started once even across runs.
  const notifies = input.tenant !== undefined && input.notify === true;
  const notified = new Set<string>();
  async function notifyBuyer(event: NotificationEvent, suffix = ''): Promise<void> {
    if (!notifies) return;
    const idempotencyKey = `${state.operationId}:${event}${suffix}`;
    if (notified.has(idempotencyKey)) return;
    notified.add(idempotencyKey);
    const notification: BuyerNotification = {
      idempotency_key: idempotencyKey,
      event,
      operation_id: state.operationId,
      tenant: input.tenant!,
      task: state.task,
      agent_id: state.sellerId,
      status: state.status,
      occurred_at: iso(Date.now()),
      ...(event === 'completed' && state.resource?.mediaBuyId
        ? { resource: { media_buy_id: state.resource.mediaBuyId } }
        : {}),
      ...(event === 'input_required' && state.inputRequest
        ? {
            input_request: {
              ...(state.inputRequest.reason !== undefined ? { reason: state.inputRequest.reason } : {}),
              ...(state.inputRequest.message !== undefined ? { message: state.inputRequest.message } : {}),
              round: state.inputRequest.round,
              deadline: state.inputRequest.deadline,
            },
          }
        : {}),
      ...(event === 'failed' || event === 'rejected' || event === 'timed_out'
        ? {
            failure: {
              ...(state.failure?.reason ? { reason: state.failure.reason } : {}),
              message: state.failure?.message ?? state.message ?? state.errors?.[0]?.message ?? state.status,
            },
          }
        : {}),
    };
    try {
      await CancellationScope.nonCancellable(() =>
        startChild(NOTIFICATION_WORKFLOW_TYPE, {
          workflowId: `notify:${idempotencyKey}`,
          args: [notification],
          parentClosePolicy: ParentClosePolicy.ABANDON,
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          staticSummary: `${event} of ${state.operationId} to tenant ${input.tenant}`,
        }),
      );
    } catch (failure) {
      // Already started (an earlier run sent it) or refused: a notification never fails the operation.
      log.warn('Notification not started', { operationId: state.operationId, event, error: String(failure) });
    }
  }

  /** The final notification, by how the operation ended (canceled operations are not notified). */
  async function notifyEnd(): Promise<void> {
    if (state.status === 'completed') await notifyBuyer('completed');
    else if (state.status === 'rejected') await notifyBuyer('rejected');
    else if (state.status === 'failed') {
      const reason = state.failure?.reason;
      const timedOut = reason === 'timed_out' || reason === 'input_timed_out' || reason === 'auth_timed_out';
      await notifyBuyer(timedOut ? 'timed_out' : 'failed');
    }
  }

  function audit(entry: Omit<AuditEntry, 'at'>): void {
    const trail = (state.audit ??= []);
    trail.push({ at: iso(Date.now()), ...entry });
    if (trail.length > MAX_AUDIT_ENTRIES) trail.shift();
  }
  const machine = new Observations(
    state,
    {
      task: input.task,
      params: input.params,
      deadlineMs,
      interactionDeadlineMs: input.interaction?.deadlineMs ?? DEFAULT_INTERACTION_DEADLINE_MS,
      authDeadlineMs: input.authDeadlineMs ?? DEFAULT_AUTH_DEADLINE_MS,
      now: () => Date.now(),
      onStatusChange: (from, to, source) => {
        // Metrics are not emitted while a workflow replays, and write no history.
        metricMeter
          .createCounter('adcp_operation_transitions', 'transitions', 'AdCP operation status changes')
          .add(1, { task: state.task, agent: state.sellerId, to, source });
        if (from === 'input-required') {
          // Approval time: from entering input-required to the status that followed (answered, rejected, timed out).
          const entered = [...state.transitions]
            .reverse()
            .find((transition) => transition.to === 'input-required' && transition.from !== 'input-required');
          if (entered) {
            metricMeter
              .createHistogram(
                'adcp_operation_input_wait',
                'float',
                'seconds',
                'Time an AdCP operation waited for input',
              )
              .record((Date.now() - Date.parse(entered.at)) / 1000, { task: state.task, agent: state.sellerId, to });
          }
        }
        if (machine.terminal) {
          // Rejection and timeout rates: final statuses with the orchestrator's failure reason ("none" if it had none).
          metricMeter
            .createCounter('adcp_operation_outcomes', 'operations', 'AdCP operations by final status and reason')
            .add(1, { task: state.task, agent: state.sellerId, status: to, reason: state.failure?.reason ?? 'none' });
          metricMeter
            .createHistogram(
              'adcp_operation_duration',
              'float',
              'seconds',
              'From start to the final status of an AdCP operation',
            )
            .record((Date.now() - Date.parse(state.startedAt)) / 1000, {
              task: state.task,
              agent: state.sellerId,
              status: to,
            });
        }
      },
      onAnomaly: (source, note) => log.warn('Operation anomaly', { operationId: state.operationId, source, note }),
    },
    [...(input.carried?.held ?? [])],
  );
  const seenEventKeys = new Set<string>(input.carried?.seenEventKeys ?? []);
  const inbox: WebhookDelivery[] = [...(input.carried?.inbox ?? [])];
  let pendingInput: ProvidedInput | undefined = input.carried?.pendingInput;
  let credentialsRefreshed = input.carried?.pendingCredentialsRefresh ?? false;
  let pendingAdoption = input.carried?.pendingAdoption;
  let keyGeneration = input.carried?.keyGeneration ?? 0;
  let pollRequested = false;
  let cancelRequest: CancelRequest | undefined;
  /** The status a wait's polls are waiting on, while settlePolls waits for them (else undefined). */
  let pollsWaitingOn: OperationState['status'] | undefined;
  /** Each call step's plan, decided once (see contract/activities.ts CallPlan). */
  const plans = new Map<string, CallPlan>(Object.entries(input.carried?.plans ?? {}));

  // ---- handlers: record facts only -------------------------------------------------------------------------
  setHandler(statusQuery, () => state);

  setHandler(webhookReceivedSignal, (delivery) => {
    if (seenEventKeys.has(delivery.eventKey)) return;
    seenEventKeys.add(delivery.eventKey);
    if (seenEventKeys.size > MAX_SEEN_EVENT_KEYS) {
      const oldest = seenEventKeys.values().next().value;
      if (oldest !== undefined) seenEventKeys.delete(oldest);
    }
    if (appliesWithoutWaking(delivery)) {
      machine.receiveWebhook(delivery);
      publish();
      return;
    }
    inbox.push(delivery);
  });

  /**
   * While the polls run, a repeat of the status they wait on, with nothing else pending, changes nothing they depend
   * on and issues no command, so the handler applies it (as drainInbox would) instead of waking the wait. Waking it
   * costs a condition round, a new condition and race, and promises that each capture a stack: most of the worker's
   * CPU per webhook.
   */
  function appliesWithoutWaking(delivery: WebhookDelivery): boolean {
    return (
      pollsWaitingOn !== undefined &&
      inbox.length === 0 &&
      pendingAdoption === undefined &&
      !pollRequested &&
      cancelRequest === undefined &&
      // History is long enough: wake the loop, which then ends the polls to continue as new.
      !workflowInfo().continueAsNewSuggested &&
      isQuietRepeat(state, machine.terminal, pollsWaitingOn, delivery)
    );
  }

  setHandler(webhookRefusedSignal, (notice) => {
    if (!notice || typeof notice.note !== 'string') return;
    const status = normaliseStatus(notice.status) ?? 'unknown';
    machine.recordRefusal({
      reason: notice.reason === 'operation_id_mismatch' ? 'operation_id_mismatch' : 'task_id_mismatch',
      status,
      ...(typeof notice.taskId === 'string' ? { taskId: notice.taskId } : {}),
      ...(typeof notice.operationId === 'string' ? { operationId: notice.operationId } : {}),
      note: `gateway: ${notice.note}`,
    });
  });

  setHandler(adoptTaskSignal, (adoption) => {
    if (
      state.taskId ||
      machine.terminal ||
      pendingAdoption ||
      typeof adoption?.taskId !== 'string' ||
      adoption.taskId === ''
    )
      return;
    pendingAdoption = adoption;
  });

  setHandler(pollNowSignal, () => {
    pollRequested = true;
  });

  setHandler(
    provideInputUpdate,
    (provided) => {
      // Temporal answers a repeated update ID with the first result, so a retried answer is sent once.
      pendingInput = { ...provided, requestId: currentUpdateInfo()?.id };
      if (provided.principal !== undefined)
        audit({
          action: 'input_provided',
          principal: provided.principal,
          ...(provided.providedBy !== undefined ? { note: provided.providedBy } : {}),
        });
      return { accepted: true as const, round: state.inputRounds };
    },
    {
      validator: (provided) => {
        if (state.status !== 'input-required') {
          throw new Error(`Operation is ${state.status}, not input-required: there is no question to answer.`);
        }
        if (pendingInput) throw new Error('An answer for this round is already being sent to the seller.');
        // The same rule the API and the typed client apply, so a caller that skips them is refused the same way.
        const problem = providedInputProblem(provided);
        if (problem) throw new Error(problem);
      },
    },
  );

  setHandler(
    credentialsRefreshedUpdate,
    (request) => {
      credentialsRefreshed = true;
      if (request?.principal !== undefined)
        audit({ action: 'credentials_refreshed', principal: request.principal, note: request.refreshedBy });
      return { accepted: true as const };
    },
    {
      validator: (request) => {
        if (state.status !== 'auth-required') {
          throw new Error(`Operation is ${state.status}, not auth-required.`);
        }
        const problem = credentialsRefreshProblem(request);
        if (problem) throw new Error(problem);
      },
    },
  );

  setHandler(
    cancelOperationUpdate,
    (request) => {
      if (!cancelRequest) {
        cancelRequest = request;
        machine.beginCancel(request);
        if (request.principal !== undefined)
          audit({ action: 'cancel_requested', principal: request.principal, note: request.requestedBy });
      }
      return { accepted: true as const, status: state.status };
    },
    {
      validator: (request) => {
        if (machine.terminal) {
          throw new Error(`Operation already ended ${state.status}; nothing to cancel.`);
        }
        if (!request || actorProblem(request.requestedBy) !== undefined || request.requestedBy.trim() === '') {
          throw new Error('requestedBy must say who asked for the cancellation.');
        }
        if (typeof request.reason !== 'string' || request.reason.trim() === '') {
          throw new Error('reason must say why the operation is canceled.');
        }
        const problem = cancelRequestProblem(request);
        if (problem) throw new Error(problem);
      },
    },
  );

  // ---- publishing: search attributes, memo, current details ---------------------------------------------------
  function describeForHumans(): string {
    const parts = [`${state.task} at ${state.sellerId}: ${state.status}`];
    if (state.taskId) parts.push(`task ${state.taskId}`);
    if (state.resource?.mediaBuyId) parts.push(`media buy ${state.resource.mediaBuyId}`);
    if (state.callInFlight) parts.push(`call in flight (${state.callInFlight.step})`);
    if (state.progress?.percentage !== undefined) parts.push(`${state.progress.percentage}%`);
    if (state.progress?.currentStep) parts.push(state.progress.currentStep);
    if (state.inputRequest) parts.push(`waiting for input (${state.inputRequest.reason ?? 'no reason given'})`);
    if (state.message) parts.push(state.message);
    parts.push(`polls: ${state.pollCount}`);
    return parts.join(' · ');
  }

  function memoState(): OperationState {
    const resultSize = state.result ? JSON.stringify(state.result).length : 0;
    if (resultSize <= MEMO_RESULT_LIMIT) return state;
    return {
      ...state,
      result: { note: `result of ${resultSize} bytes: read it from the running operation or its final result` },
    };
  }

  // What the starter indexed (status pending, no task, no question): the first publish writes only a change.
  let lastIndexed = input.carried ? '' : JSON.stringify({ status: 'pending', taskId: null, inputReason: null });
  let lastMemo = '';
  function publish(): void {
    const values = {
      status: state.status,
      taskId: state.taskId ?? null,
      inputReason: state.status === 'input-required' ? (state.inputRequest?.reason ?? 'UNSPECIFIED') : null,
    };
    // Each upsert is a history event: write only when a value changed.
    const fingerprint = JSON.stringify(values);
    if (indexed && fingerprint !== lastIndexed) {
      lastIndexed = fingerprint;
      upsertSearchAttributes([
        { key: SA_STATUS, value: values.status },
        { key: SA_TASK_ID, value: values.taskId },
        { key: SA_INPUT_REASON, value: values.inputReason },
      ]);
    }
    const memoFingerprint = JSON.stringify([
      values,
      state.failure?.reason ?? null,
      state.outcome ?? null,
      state.resource ?? null,
      state.cancellation?.at ?? null,
    ]);
    if (indexed && memoFingerprint !== lastMemo) {
      lastMemo = memoFingerprint;
      upsertMemo({ [OPERATION_STATE_MEMO]: memoState() });
    }
    setCurrentDetails(describeForHumans());
  }

  function timeouts(): CallTimeouts {
    return state.timeouts ?? DEFAULT_TIMEOUTS;
  }

  function drainInbox(): void {
    while (inbox.length > 0) machine.receiveWebhook(inbox.shift()!);
    publish();
  }

  // ---- the call -----------------------------------------------------------------------------------------------

  /**
   * Makes one call (with its retries) while webhooks keep being applied. A cancel does not abort it: what the seller
   * made must be known before the operation ends. An adoption, or a final result bound to this operation, ends it.
   */
  async function callSeller(step: string, params: Record<string, unknown>): Promise<void> {
    const keyStep = keyGeneration === 0 ? step : `${step}#${keyGeneration}`;
    const taskKnownBefore = state.taskId !== undefined;
    const planInput = {
      operationId: state.operationId,
      sellerId: state.sellerId,
      task: state.task,
      step: keyStep,
      params,
      ...tenantOf(input),
      ...(state.contextId ? { contextId: state.contextId } : {}),
      ...(state.taskId ? { taskId: state.taskId } : {}),
    };
    // A read has no idempotency key whose bytes history must pin, so it is planned inside its one call.
    const plannedInCall = !spec.mutating;
    let sendInput: SendCallInput;
    let callTimeouts: CallTimeouts;
    if (plannedInCall) {
      sendInput = { planInput };
      callTimeouts = state.timeouts ?? UNPLANNED_READ_TIMEOUTS;
    } else {
      // One plan per step: a repeated call of the step (after auth-required, say) re-sends the same bytes.
      let plan = plans.get(keyStep);
      if (!plan) {
        plan = await planning.planCall(planInput);
        plans.set(keyStep, plan);
      }
      sendInput = { plan };
      callTimeouts = plan.timeouts;
      state.timeouts = plan.timeouts;
    }
    const calls = spec.mutating ? callActivities(input, callTimeouts) : localCallActivities(input, callTimeouts);
    state.callInFlight = { step: keyStep, since: iso(Date.now()) };
    // A local call answers within this workflow task: a memo of the state before it would be overwritten unseen.
    if (plannedInCall) setCurrentDetails(describeForHumans());
    else publish();
    // Shielded from the workflow's own cancellation (a cancel waits for the answer); only this loop cancels it.
    let scope: CancellationScope | undefined;
    let settled = false;
    const call = CancellationScope.nonCancellable(() => {
      scope = new CancellationScope();
      return scope.run(() => calls.sendCall(sendInput));
    });
    call.then(
      () => (settled = true),
      () => (settled = true),
    );
    let abortedFor: 'adoption' | 'settled' | undefined;
    let temporalCancel: unknown;
    try {
      while (!settled) {
        await condition(() => settled || inbox.length > 0 || (pendingAdoption !== undefined && !state.taskId));
        if (inbox.length > 0) drainInbox();
        if (settled) break;
        if (machine.terminal && !state.provisional) {
          // A final result bound to this operation arrived first; the call's answer adds nothing.
          abortedFor = 'settled';
          scope?.cancel();
          break;
        }
        if (pendingAdoption && !state.taskId) {
          abortedFor = 'adoption';
          scope?.cancel();
          break;
        }
      }
    } catch (failure) {
      if (!isCancellation(failure)) throw failure;
      // The workflow is being canceled: the call still answers, and what it made is recorded before the cancel.
      temporalCancel = failure;
      machine.beginCancel(cancelRequest ?? TEMPORAL_CANCEL);
    }
    const settle = async (): Promise<void> => {
      try {
        const outcome = await call;
        if (outcome.timeouts) state.timeouts = outcome.timeouts;
        state.webhookRegistered ||= outcome.webhookRegistered;
        machine.applyCallAnswer(
          outcome.snapshot,
          outcome.schemaWarnings?.length ? { schemaWarnings: outcome.schemaWarnings } : {},
        );
        drainInbox();
      } catch (failure) {
        state.callInFlight = undefined;
        if (isCancellation(failure) && abortedFor === 'adoption') {
          if (pendingAdoption && !state.taskId)
            await adopt(pendingAdoption.taskId, `signalled by ${pendingAdoption.requestedBy}`);
          return;
        }
        if (isCancellation(failure) && abortedFor === 'settled') {
          machine.record(`call ${keyStep} stopped: the operation already ended ${state.status}`);
          return;
        }
        if (isCancellation(failure)) throw failure;
        await afterCallFailure(keyStep, step, params, errorFromFailure(failure), !taskKnownBefore);
      } finally {
        publish();
      }
    };
    if (temporalCancel === undefined) {
      await settle();
      return;
    }
    await CancellationScope.nonCancellable(settle);
    throw temporalCancel;
  }

  async function afterCallFailure(
    keyStep: string,
    step: string,
    params: Record<string, unknown>,
    error: AdcpError,
    mayFollowTask: boolean,
  ): Promise<void> {
    if (error.code === 'ANSWER_TOO_LARGE') {
      machine.fail(
        'answer_too_large',
        `The ${state.task} answer from ${state.sellerId} is too large to keep: ${error.message}`,
        error,
      );
      return;
    }
    const decision = machine.decideAfterCallFailure(error, spec.mutating, mayFollowTask);
    switch (decision.action) {
      case 'ignore':
      case 'follow-task':
        machine.note('call', `call ${keyStep} failed (${error.code}); ${decision.why}`);
        return;
      case 'confirm-held':
        machine.note('call', `call ${keyStep} failed (${error.code}); confirming the webhooks that arrived during it`);
        await confirmHeld();
        return;
      case 'fail':
        machine.fail(decision.reason, decision.message, error);
        return;
      case 'reconcile': {
        const found = await reconcileCall(keyStep, error);
        const next = machine.decideAfterReconciliation(error, found, keyGeneration);
        if (next.action === 'rekey' && cancelRequest === undefined) {
          keyGeneration += 1;
          await callSeller(step, params);
        } else if (next.action === 'fail') {
          machine.fail(next.reason, next.message, error);
        } else if (next.action === 'rekey') {
          machine.fail(
            'call_failed',
            `The ${state.task} call to ${state.sellerId} was refused with ${error.code}; the operation was canceled before a new key was tried.`,
            error,
          );
        }
        return;
      }
    }
  }

  /** Ask the seller whether the call's key already made a task; adopt it if so. */
  async function reconcileCall(keyStep: string, error: AdcpError): Promise<'adopted' | 'not_found' | 'unsupported'> {
    const trigger = `${error.code} on call step ${keyStep}`;
    let found;
    try {
      found = await readActivities(timeouts()).findLostTask({
        operationId: state.operationId,
        sellerId: state.sellerId,
        task: state.task,
        step: keyStep,
        ...accountOf(input.params),
        ...tenantOf(input),
        timeouts: timeouts(),
      });
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      machine.recordReconciliation({
        trigger,
        outcome: 'unsupported',
        note: `reconciliation failed: ${errorFromFailure(failure).message}`,
      });
      return 'unsupported';
    }
    if (!found.supported) {
      machine.recordReconciliation({ trigger, outcome: 'unsupported', note: found.note });
      return 'unsupported';
    }
    if (!found.snapshot) {
      machine.recordReconciliation({ trigger, outcome: 'not_found', note: found.note });
      return 'not_found';
    }
    machine.recordReconciliation({
      trigger,
      outcome: 'adopted',
      ...(found.snapshot.taskId ? { taskId: found.snapshot.taskId } : {}),
      note: found.note,
    });
    machine.applyRead(found.snapshot, 'reconciliation');
    publish();
    return 'adopted';
  }

  async function adopt(taskId: string, why: string): Promise<void> {
    pendingAdoption = undefined;
    machine.adopt(taskId, why);
    publish();
    await poll();
  }

  // ---- reads --------------------------------------------------------------------------------------------------

  function readInput(taskId: string) {
    return {
      operationId: state.operationId,
      sellerId: state.sellerId,
      task: state.task,
      taskId,
      ...(state.contextId ? { contextId: state.contextId } : {}),
      ...accountOf(input.params),
      ...tenantOf(input),
      ...(state.resource?.mediaBuyId ? { mediaBuyId: state.resource.mediaBuyId } : {}),
      ...(state.readMethod ? { readMethod: state.readMethod } : {}),
      timeouts: timeouts(),
    };
  }

  function learnReadMethod(method: ReadMethod): void {
    if (state.readMethod !== method) {
      if (state.readMethod)
        machine.note('poll', `reads at ${state.sellerId} now use ${method} (was ${state.readMethod})`);
      state.readMethod = method;
    }
  }

  /** Applies one read; a read that cannot see the task is "cannot see it now", never the task failing. */
  function applyReadOutcome(outcome: ReadTaskOutcome): boolean {
    learnReadMethod(outcome.readMethod);
    if (outcome.snapshot) {
      machine.applyRead(outcome.snapshot, 'poll');
      return true;
    }
    if (outcome.unreadable)
      machine.note(
        'poll',
        `cannot read task ${state.taskId ?? '?'} now (${outcome.unreadable.code}): ${outcome.unreadable.message}`,
      );
    return false;
  }

  async function poll(taskId = state.taskId): Promise<boolean> {
    if (!taskId) return false;
    try {
      const outcome = await readActivities(timeouts()).readTask(readInput(taskId));
      state.pollCount += 1;
      const seen = applyReadOutcome(outcome);
      publish();
      return seen;
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      const error = errorFromFailure(failure);
      // A missed poll is not a failed operation: the next one, a webhook or reconciliation will tell.
      machine.note('poll', `read failed, will poll again: ${error.code}: ${error.message}`);
      publish();
      return false;
    }
  }

  /** Webhooks arrived before the task was bound and the call's answer was lost: a read of their task confirms them. */
  async function confirmHeld(): Promise<void> {
    const taskId = machine.heldTaskId();
    if (taskId) {
      machine.adopt(taskId, 'named by a webhook that arrived while the call was in flight');
      const seen = await poll(taskId);
      if (seen) return;
    }
    machine.acceptHeldUnconfirmed(
      taskId ? `no read of task ${taskId} is possible at ${state.sellerId} now` : 'the webhooks name no task to read',
    );
    publish();
  }

  /** A completion that needs a read to be believed (a create without its media_buy_id). */
  async function confirmProvisional(): Promise<void> {
    const seen = state.taskId ? await poll() : false;
    if (!seen && state.provisional && !machine.terminal) {
      machine.settleProvisional(
        state.taskId ? `task ${state.taskId} cannot be read at ${state.sellerId}` : 'the seller named no task to read',
      );
    } else if (state.provisional && !machine.terminal && seen) {
      // The read did not settle it (it still says something else): keep waiting for the seller.
      machine.note('poll', `the read shows ${state.status}; the completion stays unconfirmed for now`);
    }
    publish();
  }

  /**
   * The end of a wait's polls: raced against what interrupts them (a webhook, an answer, a poll request, a cancel),
   * then applied. Reads never fail the operation.
   */
  async function settlePolls(
    polling: Promise<ReadTaskOutcome & { polls: number }>,
    scope: CancellationScope,
    interrupt: () => boolean,
    plan: WaitPlan,
    untilDeadline: number,
  ): Promise<void> {
    const statusWaitedOn = state.status;
    const polled = polling.then(
      () => 'poll' as const,
      () => 'poll' as const,
    );
    let winner: 'poll' | 'signal';
    // Repeats of the status waited on are applied by the signal handler meanwhile (appliesWithoutWaking).
    pollsWaitingOn = statusWaitedOn;
    try {
      for (;;) {
        winner = await Promise.race([polled, condition(interrupt).then(() => 'signal' as const)]);
        if (winner === 'poll' || !onlyWebhooksArrived()) break;
        // Progress reports and repeats of the status waited on change nothing the polls depend on: cancelling them
        // would cost an activity cancel and a new schedule per webhook. Anything else (a new status, a final or
        // provisional one) ends the polls so the main loop decides again.
        drainInbox();
        if (machine.terminal || state.provisional || state.status !== statusWaitedOn) break;
        // Each webhook adds history and these polls may last until the deadline: end them when Temporal suggests
        // continuing as new (the main loop then does).
        if (workflowInfo().continueAsNewSuggested) break;
      }
    } finally {
      pollsWaitingOn = undefined;
    }
    if (winner === 'signal') scope.cancel();
    try {
      const changed = await polling;
      state.pollCount += changed.polls;
      applyReadOutcome(changed);
      publish();
    } catch (failure) {
      if (isCancellation(failure) && winner === 'signal') return;
      if (isCancellation(failure)) throw failure;
      if (budgetRanOut(failure)) {
        state.pollCount += pollsBeforeBudgetRanOut(failure);
        // At the end of the working window the main loop continues at the slower cadence. Otherwise the next poll
        // would have come after the deadline: wait for it (still interruptible), then the loop takes its last poll.
        const toDeadline = deadlineMs - Date.now();
        if ((plan.windowMs === undefined || plan.windowMs >= untilDeadline) && toDeadline > 0)
          await condition(interrupt, toDeadline);
        return;
      }
      // Note it and let the loop poll again at the next cadence.
      const error = errorFromFailure(failure);
      machine.note('poll', `polling stopped (${error.code}: ${error.message}); polling again later`);
      publish();
      await condition(interrupt, Math.min(plan.maxIntervalMs, Math.max(deadlineMs - Date.now(), 0)));
    }
  }

  /** Only webhooks interrupt the wait: no adoption, poll request or cancel, which must end the polls. */
  function onlyWebhooksArrived(): boolean {
    return inbox.length > 0 && pendingAdoption === undefined && !pollRequested && cancelRequest === undefined;
  }

  /**
   * Polling in one activity, interrupted the moment a webhook, an answer, a poll request or a cancel arrives. The
   * activity makes every poll of the wait and keeps the cadence itself (its first attempt only asks to be retried at
   * the first poll), so a wait costs an activity scheduled and its end, with no durable timer, and a poll lost with a
   * killed worker is made again seconds after its heartbeat times out instead of a backoff interval later.
   */
  async function pollUntilChange(plan: WaitPlan): Promise<void> {
    const interrupt = () =>
      inbox.length > 0 || pendingAdoption !== undefined || pollRequested || cancelRequest !== undefined;
    const untilDeadline = deadlineMs - Date.now();
    if (untilDeadline <= 0) return;
    if (!state.taskId) {
      // Nothing to poll without a task ID: only a webhook, an adoption, a poll request or a cancel can move it now.
      await condition(interrupt, untilDeadline);
      return;
    }
    const budgetMs = Math.min(untilDeadline, plan.windowMs ?? untilDeadline);
    const activities = cadencedPollingActivities(budgetMs, timeouts());
    const scope = new CancellationScope();
    const since = { status: state.status, progress: state.progress ?? null };
    const cadence = {
      firstPollAfterMs: plan.firstPollAfterMs,
      initialIntervalMs: plan.initialIntervalMs,
      maxIntervalMs: plan.maxIntervalMs,
    };
    const polling = scope.run(() => activities.awaitTaskMoveOnCadence({ ...readInput(state.taskId!), since, cadence }));
    await settlePolls(polling, scope, interrupt, plan, untilDeadline);
  }

  // ---- waits on people ----------------------------------------------------------------------------------------

  async function waitForAnswer(): Promise<void> {
    const request = state.inputRequest!;
    const maxRounds = input.interaction?.maxRounds ?? DEFAULT_MAX_INPUT_ROUNDS;
    if (request.round > maxRounds) {
      machine.fail(
        'input_rounds_exhausted',
        `The seller asked for input ${request.round} times; the limit is ${maxRounds}.`,
      );
      return;
    }
    await notifyBuyer('input_required', `:${request.round}`);
    const waitMs = Date.parse(request.deadline) - Date.now();
    const arrived = await condition(
      () => pendingInput !== undefined || inbox.length > 0 || cancelRequest !== undefined || pollRequested,
      Math.max(waitMs, 0),
    );
    if (!arrived) {
      machine.fail(
        'input_timed_out',
        `No answer to the seller's question (${request.reason ?? 'input required'}) by ${request.deadline}.`,
      );
      return;
    }
    if (inbox.length > 0) drainInbox();
    // A final result that arrived first wins: an answer not yet sent is stale and is not sent.
    if (pendingInput && !cancelRequest && !machine.terminal && state.status === 'input-required') {
      const answer = pendingInput;
      machine.record(`input provided by ${answer.principal ?? answer.providedBy ?? 'caller'} (round ${request.round})`);
      // The question is answered: if the seller asks again, that is a new round.
      state.inputRequest = undefined;
      // Resume on the same context with the original arguments plus the answer (§2.4: re-sending is the safe choice).
      await callSeller(`input-${request.round}`, { ...input.params, ...answer.input });
      pendingInput = undefined;
    }
  }

  async function waitForCredentials(): Promise<void> {
    const until = Date.parse(state.authRequired!.deadline);
    const arrived = await condition(
      () => credentialsRefreshed || inbox.length > 0 || cancelRequest !== undefined || pollRequested,
      Math.max(until - Date.now(), 0),
    );
    if (!arrived) {
      machine.fail(
        'auth_timed_out',
        `The seller asked for authentication and no refreshed credentials arrived by ${state.authRequired!.deadline}.`,
      );
      return;
    }
    if (inbox.length > 0) drainInbox();
    if (credentialsRefreshed && !cancelRequest && !machine.terminal) {
      credentialsRefreshed = false;
      // With a task the seller tracks, ask it where it stands; without one, repeat the call with the same key.
      if (state.taskId) await poll();
      else await callSeller('call', input.params);
    }
  }

  async function waitForSeller(pollsInStatus: number, workingSinceMs: number): Promise<void> {
    if (state.status === 'unknown' && pollsInStatus === 0) {
      await poll(); // unknown: learn the truth at once
      return;
    }
    await pollUntilChange(
      planWait({
        status: state.status,
        workingForMs: state.status === 'working' ? Date.now() - workingSinceMs : 0,
        webhookRegistered: state.webhookRegistered,
      }),
    );
  }

  // ---- the main loop -------------------------------------------------------------------------------------
  // Whether Temporal was asked to cancel this workflow (the typed client asks after its cancel update is accepted).
  let cancellationRequested = false;
  CancellationScope.current().cancelRequested.catch(() => {
    cancellationRequested = true;
  });
  // A fresh read publishes with its answer (its call is local: one workflow task), not before it.
  if (spec.mutating || input.carried) publish();
  const main = new CancellationScope();
  let temporalCancelled = false;
  try {
    await main.run(async () => {
      if (state.status === 'pending' && !state.taskId) await callSeller('call', input.params);
      let statusSeen = state.status;
      let pollsInStatus = 0;
      let workingSinceMs = Date.now();
      while (!machine.terminal && cancelRequest === undefined) {
        if (inbox.length > 0) drainInbox();
        if (machine.terminal) break;
        if (machine.held.length > 0 && !state.taskId) {
          await confirmHeld();
          continue;
        }
        if (state.provisional) {
          await confirmProvisional();
          if (state.provisional && !machine.terminal)
            await pollUntilChange(
              planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: state.webhookRegistered }),
            );
          continue;
        }
        if (pendingAdoption && !state.taskId) {
          await adopt(pendingAdoption.taskId, `signalled by ${pendingAdoption.requestedBy}`);
          continue;
        }
        if (pollRequested) {
          pollRequested = false;
          await poll();
          continue;
        }
        if (state.status !== statusSeen) {
          if (state.status === 'working' && statusSeen !== 'working') workingSinceMs = Date.now();
          statusSeen = state.status;
          pollsInStatus = 0;
        }
        if (Date.now() >= deadlineMs) {
          await poll(); // one last poll before giving up
          if (inbox.length > 0) drainInbox();
          if (!machine.terminal) {
            machine.fail(
              'timed_out',
              `No terminal status from ${state.sellerId} within the budget (deadline ${state.deadline}); last status ${state.status}.`,
            );
          }
          break;
        }
        if (workflowInfo().continueAsNewSuggested) break;
        if (state.status === 'input-required') await waitForAnswer();
        else if (state.status === 'auth-required') await waitForCredentials();
        else if (state.status === 'pending' || !INTERRUPTED_STATUSES.has(state.status)) {
          await waitForSeller(pollsInStatus, workingSinceMs);
          pollsInStatus += 1;
        }
      }
    });
  } catch (failure) {
    if (!isCancellation(failure)) throw failure;
    temporalCancelled = true;
  }

  if (cancelRequest || temporalCancelled) {
    const request = cancelRequest ?? TEMPORAL_CANCEL;
    machine.beginCancel(request);
    await CancellationScope.nonCancellable(() => cancelAtSeller(request));
  } else if (!machine.terminal && workflowInfo().continueAsNewSuggested) {
    await condition(allHandlersFinished);
    const carried: CarriedState = {
      state,
      seenEventKeys: [...seenEventKeys],
      inbox,
      held: machine.held,
      keyGeneration,
      plans: Object.fromEntries(plans),
      ...(pendingInput ? { pendingInput } : {}),
      ...(credentialsRefreshed ? { pendingCredentialsRefresh: true } : {}),
      ...(pendingAdoption ? { pendingAdoption } : {}),
    };
    return await continueAsNew<typeof adcpOperation>({ ...input, carried });
  }

  /**
   * A cancel never loses what the seller made: the call in flight has answered by now (callSeller waits for it),
   * so the state knows what exists; then the seller is told where the protocol allows, and the state says what still exists.
   */
  async function cancelAtSeller(request: CancelRequest): Promise<void> {
    if (inbox.length > 0) drainInbox();
    const mediaBuyId = state.resource?.mediaBuyId;
    let atSeller: {
      notified: boolean;
      note: string;
      resource?: { mediaBuyId: string; state: 'canceled' | 'live' | 'unknown' };
    } = {
      notified: false,
      note: 'no seller task existed yet',
    };
    const sellerHasSomething = state.taskId !== undefined || mediaBuyId !== undefined;
    const endedOnItsOwn = machine.terminal && !mediaBuyId;
    if (sellerHasSomething && !endedOnItsOwn) {
      try {
        const told = await readActivities(timeouts()).cancelAtSeller({
          operationId: state.operationId,
          sellerId: state.sellerId,
          task: state.task,
          ...(state.taskId ? { taskId: state.taskId } : {}),
          ...(state.contextId ? { contextId: state.contextId } : {}),
          ...(mediaBuyId ? { mediaBuyId } : {}),
          ...accountOf(input.params),
          ...tenantOf(input),
          timeouts: timeouts(),
        });
        atSeller = { notified: told.notified, note: told.note, ...(told.resource ? { resource: told.resource } : {}) };
      } catch (failure) {
        atSeller = {
          notified: false,
          note: `telling the seller failed: ${errorFromFailure(failure).message}`,
          ...(mediaBuyId ? { resource: { mediaBuyId, state: 'unknown' as const } } : {}),
        };
      }
    } else if (endedOnItsOwn) {
      atSeller = { notified: false, note: `the operation had already ended ${state.status}` };
    }
    machine.cancel(request, atSeller);
    if (request.principal !== undefined && state.cancellation) state.cancellation.principal = request.principal;
    publish();
  }

  // Neither issues a command when there is nothing to do: skipped then, since every promise in workflow code costs the
  // worker a captured stack (bench/README.md, B1).
  if (notifies) await notifyEnd();
  if (!allHandlersFinished()) await condition(allHandlersFinished);
  return endWorkflow();

  /**
   * The workflow's own ending tells the truth in the Web UI: an operation that failed or was rejected ends the
   * workflow Failed (the whole state in the failure's details, where the typed client reads it), one canceled
   * through Temporal ends Canceled; completed ones return their state.
   */
  function endWorkflow(): OperationState {
    if (state.status === 'failed' || state.status === 'rejected') {
      const why = state.failure?.message ?? state.message ?? state.errors?.[0]?.message ?? 'no reason given';
      throw ApplicationFailure.create({
        type: state.status === 'failed' ? OPERATION_FAILED : OPERATION_REJECTED,
        message: `${state.task} at ${state.sellerId} ${state.status}: ${why}`,
        nonRetryable: true,
        details: [state],
      });
    }
    if (state.status === 'canceled' && cancellationRequested) {
      throw new CancelledFailure(state.message ?? 'canceled', [state]);
    }
    return state;
  }
}
