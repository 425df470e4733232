/**
 * FROZEN: the operation workflow as it ran before the convergence rewrite (workflows/operation/workflow.ts), kept so that
 * operations started before it replay and finish unchanged. `adcpOperation` runs this only when `patched()` says the
 * history predates the rewrite. Do not change it; delete it once no such operation can still be running.
 *
 * One AdCP operation = one workflow run (continued-as-new when history grows). It makes the call, then
 * follows the task through every status until a terminal one, driven by the seller's answers, polls on
 * durable timers and verified webhooks delivered as signals. Handlers only record facts; this loop acts.
 */
import {
  ActivityFailure,
  TimeoutFailure,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  currentUpdateInfo,
  isCancellation,
  log,
  metricMeter,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { OperationActivities } from '../../activities';
import { SA_INPUT_REASON, SA_STATUS, SA_TASK_ID } from '../../config/search-attributes';
import {
  type AdcpError,
  type TaskRetryPolicy,
  type TaskSnapshot,
  assessCompletion,
  CATALOG_ADDITIONS,
  INTERRUPTED_STATUSES,
  isTerminal,
  taskSpec,
  unknownTaskSpec,
} from '../../protocol';
import { type WaitPlan, planWait } from '../operation/cadence';
import {
  type CancelRequest,
  type CarriedState,
  type OperationInput,
  type OperationState,
  type OperationStatus,
  type OrchestratorFailureReason,
  type ProvidedInput,
  type TransitionSource,
  type WebhookDelivery,
  adoptTaskSignal,
  cancelOperationUpdate,
  credentialsRefreshedUpdate,
  pollNowSignal,
  provideInputUpdate,
  statusQuery,
  webhookReceivedSignal,
} from '../../contract/operation';

const MAX_TRANSITIONS_KEPT = 100;
const MAX_ANOMALIES_KEPT = 20;
const MAX_SEEN_EVENT_KEYS = 1_000;
const DEFAULT_INTERACTION_DEADLINE_MS = 60 * 60_000;
const DEFAULT_MAX_INPUT_ROUNDS = 3;
const DEFAULT_AUTH_DEADLINE_MS = 60 * 60_000;

/** Errors a retry cannot fix: bad configuration, answers that break the protocol, calls the seller refused. */
const NON_RETRYABLE = ['ConfigError', 'ProtocolViolation', 'SellerRejectedCall', 'IdempotencyKeyRefused'];

/** Which statuses normally follow which (orchestrator-design table, widened); anything else is recorded. */
const EXPECTED_EDGES: Readonly<Record<OperationStatus, readonly OperationStatus[]>> = {
  pending: [
    'submitted',
    'working',
    'input-required',
    'completed',
    'failed',
    'rejected',
    'auth-required',
    'unknown',
    'canceled',
  ],
  submitted: ['working', 'input-required', 'completed', 'failed', 'canceled', 'rejected', 'auth-required', 'unknown'],
  working: ['submitted', 'input-required', 'completed', 'failed', 'canceled', 'auth-required', 'unknown'],
  'input-required': ['submitted', 'working', 'completed', 'failed', 'canceled', 'rejected', 'unknown'],
  'auth-required': ['submitted', 'working', 'input-required', 'completed', 'failed', 'canceled', 'rejected', 'unknown'],
  unknown: ['submitted', 'working', 'input-required', 'completed', 'failed', 'canceled', 'rejected', 'auth-required'],
  completed: [],
  failed: [],
  canceled: [],
  rejected: [],
};

function callActivities(input: OperationInput, defaults: TaskRetryPolicy) {
  return proxyActivities<OperationActivities>({
    startToCloseTimeout: '90s',
    heartbeatTimeout: '20s',
    retry: {
      initialInterval: `${input.retry?.initialIntervalMs ?? defaults.initialIntervalMs}ms`,
      backoffCoefficient: 2,
      maximumInterval: `${input.retry?.maximumIntervalMs ?? defaults.maximumIntervalMs}ms`,
      maximumAttempts: input.retry?.maximumAttempts ?? defaults.maximumAttempts,
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
}

const pollActivities = proxyActivities<OperationActivities>({
  startToCloseTimeout: '45s',
  heartbeatTimeout: '20s',
  retry: {
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '10s',
    maximumAttempts: 3,
    nonRetryableErrorTypes: NON_RETRYABLE,
  },
});

function pollingActivities(plan: WaitPlan, budgetMs: number) {
  return proxyActivities<OperationActivities>({
    startToCloseTimeout: '45s',
    heartbeatTimeout: '20s',
    // Each retry is one look; retries do not write history, so a day of polling costs a few events.
    scheduleToCloseTimeout: `${Math.max(budgetMs, 1_000)}ms`,
    retry: {
      initialInterval: `${plan.initialIntervalMs}ms`,
      backoffCoefficient: 2,
      maximumInterval: `${plan.maxIntervalMs}ms`,
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

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** The error an activity failure carries, in our one error model (activities attach it as details[0]). */
function errorFromFailure(failure: unknown): AdcpError {
  let cause: unknown = failure;
  if (cause instanceof ActivityFailure) cause = cause.cause;
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

export async function operationV1(input: OperationInput): Promise<OperationState> {
  const info = workflowInfo();
  // Runs of this code predate every catalog addition: a task listed since ran as an unknown one.
  const spec = CATALOG_ADDITIONS[input.task] ? unknownTaskSpec(input.task) : taskSpec(input.task);
  const startedAtMs = Date.now();
  const state: OperationState = input.carried?.state ?? {
    operationId: info.workflowId,
    sellerId: input.sellerId,
    task: input.task,
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
  // the time-skipping test server, for one); the workflow keeps them current only then, since an unregistered
  // key would fail every workflow task.
  const indexed = info.typedSearchAttributes.get(SA_STATUS) !== undefined;
  const seenEventKeys = new Set<string>(input.carried?.seenEventKeys ?? []);
  const inbox: WebhookDelivery[] = [...(input.carried?.inbox ?? [])];
  let pendingInput: ProvidedInput | undefined = input.carried?.pendingInput;
  let credentialsRefreshed = input.carried?.pendingCredentialsRefresh ?? false;
  let pendingAdoption = input.carried?.pendingAdoption;
  let pollRequested = false;
  let cancelRequest: CancelRequest | undefined;

  // ---- handlers: record facts only -------------------------------------------------------------------------
  setHandler(statusQuery, () => state);

  setHandler(webhookReceivedSignal, (delivery) => {
    if (seenEventKeys.has(delivery.eventKey)) return;
    seenEventKeys.add(delivery.eventKey);
    if (seenEventKeys.size > MAX_SEEN_EVENT_KEYS) {
      const oldest = seenEventKeys.values().next().value;
      if (oldest !== undefined) seenEventKeys.delete(oldest);
    }
    inbox.push(delivery);
  });

  setHandler(adoptTaskSignal, (adoption) => {
    if (state.taskId || terminal() || pendingAdoption || typeof adoption?.taskId !== 'string' || adoption.taskId === '')
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
      return { accepted: true as const, round: state.inputRounds };
    },
    {
      validator: (provided) => {
        if (state.status !== 'input-required') {
          throw new Error(`Operation is ${state.status}, not input-required: there is no question to answer.`);
        }
        if (pendingInput) throw new Error('An answer for this round is already being sent to the seller.');
        if (
          !provided ||
          typeof provided.input !== 'object' ||
          provided.input === null ||
          Array.isArray(provided.input)
        ) {
          throw new Error('input must be a JSON object of the fields to send to the seller.');
        }
        if (Object.keys(provided.input).length === 0) throw new Error('input must not be empty.');
        if (provided.providedBy !== undefined && typeof provided.providedBy !== 'string') {
          throw new Error('providedBy must be a string.');
        }
      },
    },
  );

  setHandler(
    credentialsRefreshedUpdate,
    (_request) => {
      credentialsRefreshed = true;
      return { accepted: true as const };
    },
    {
      validator: (_request) => {
        if (state.status !== 'auth-required') {
          throw new Error(`Operation is ${state.status}, not auth-required.`);
        }
      },
    },
  );

  setHandler(
    cancelOperationUpdate,
    (request) => {
      cancelRequest ??= request;
      return { accepted: true as const, status: state.status };
    },
    {
      validator: (request) => {
        if (terminal()) {
          throw new Error(`Operation already ended ${state.status}; nothing to cancel.`);
        }
        if (!request || typeof request.requestedBy !== 'string' || request.requestedBy.trim() === '') {
          throw new Error('requestedBy must say who asked for the cancellation.');
        }
        if (typeof request.reason !== 'string' || request.reason.trim() === '') {
          throw new Error('reason must say why the operation is canceled.');
        }
      },
    },
  );

  // ---- state changes -------------------------------------------------------------------------------------
  function terminal(): boolean {
    return state.status !== 'pending' && isTerminal(state.status);
  }

  function note(source: TransitionSource, text: string): void {
    state.anomalies.push({ at: iso(Date.now()), source, note: text });
    if (state.anomalies.length > MAX_ANOMALIES_KEPT) state.anomalies.shift();
    log.warn('Operation anomaly', { operationId: state.operationId, source, note: text });
  }

  function describeForHumans(): string {
    const parts = [`${state.task} at ${state.sellerId}: ${state.status}`];
    if (state.progress?.percentage !== undefined) parts.push(`${state.progress.percentage}%`);
    if (state.progress?.currentStep) parts.push(state.progress.currentStep);
    if (state.inputRequest) parts.push(`waiting for input (${state.inputRequest.reason ?? 'no reason given'})`);
    if (state.message) parts.push(state.message);
    parts.push(`polls: ${state.pollCount}`);
    return parts.join(' · ');
  }

  // What the starter indexed (status pending, no task, no question): the first publish writes only a change.
  let lastIndexed = input.carried ? '' : JSON.stringify({ status: 'pending', taskId: null, inputReason: null });
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
    setCurrentDetails(describeForHumans());
  }

  function setStatus(to: OperationStatus, source: TransitionSource, text?: string): void {
    const from = state.status;
    if (from === to) return;
    // Metrics are not emitted while a workflow replays, and write no history.
    metricMeter
      .createCounter('adcp_operation_transitions', 'transitions', 'AdCP operation status changes')
      .add(1, { task: state.task, agent: state.sellerId, to, source });
    if (to !== 'pending' && isTerminal(to)) {
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
    if (!EXPECTED_EDGES[from].includes(to)) note(source, `unexpected transition ${from} -> ${to}`);
    state.status = to;
    state.transitionCount += 1;
    state.transitions.push({ from, to, source, at: iso(Date.now()), ...(text ? { note: text } : {}) });
    if (state.transitions.length > MAX_TRANSITIONS_KEPT) state.transitions.shift();
  }

  /** Feed one look at the task (call answer, poll or webhook) into the state machine. */
  function apply(snapshot: TaskSnapshot, source: TransitionSource): void {
    const now = Date.now();
    if (terminal()) {
      if (snapshot.status !== state.status)
        note(source, `ignored ${snapshot.status}: the operation already ended ${state.status}`);
      return;
    }
    if (snapshot.updatedAt && state.sellerUpdatedAt && snapshot.updatedAt < state.sellerUpdatedAt) {
      note(
        source,
        `ignored out-of-order ${snapshot.status} from ${snapshot.updatedAt} (last applied ${state.sellerUpdatedAt})`,
      );
      return;
    }
    if (snapshot.taskId) {
      if (state.taskId && state.taskId !== snapshot.taskId)
        note(source, `seller sent task_id ${snapshot.taskId}, keeping ${state.taskId}`);
      else state.taskId = snapshot.taskId;
    }
    if (snapshot.contextId) state.contextId = snapshot.contextId;
    if (snapshot.message) state.message = snapshot.message;
    if (snapshot.progress) state.progress = snapshot.progress;
    if (snapshot.result) state.result = snapshot.result;
    if (snapshot.errors?.length) state.errors = snapshot.errors;
    if (snapshot.updatedAt) state.sellerUpdatedAt = snapshot.updatedAt;
    if (snapshot.status === 'unknown' && snapshot.rawStatus)
      note(source, `seller sent unrecognised status "${snapshot.rawStatus}"`);

    const previous = state.status;
    setStatus(snapshot.status, source, snapshot.rawStatus ? `seller said "${snapshot.rawStatus}"` : undefined);
    if (snapshot.status === 'input-required' && (previous !== 'input-required' || !state.inputRequest)) {
      state.inputRounds += 1;
      const round = state.inputRounds;
      const interactionMs = input.interaction?.deadlineMs ?? DEFAULT_INTERACTION_DEADLINE_MS;
      const reason = typeof snapshot.result?.reason === 'string' ? snapshot.result.reason : undefined;
      const details = snapshot.result ? { ...snapshot.result } : undefined;
      if (details) delete details.reason;
      state.inputRequest = {
        ...(reason ? { reason } : {}),
        ...(snapshot.message ? { message: snapshot.message } : {}),
        ...(details && Object.keys(details).length > 0 ? { details } : {}),
        round,
        deadline: iso(Math.min(now + interactionMs, deadlineMs)),
      };
    } else if (snapshot.status !== 'input-required') {
      state.inputRequest = undefined;
    }
    if (snapshot.status === 'auth-required') {
      state.authRequired ??= {
        since: iso(now),
        deadline: iso(Math.min(now + (input.authDeadlineMs ?? DEFAULT_AUTH_DEADLINE_MS), deadlineMs)),
      };
    } else {
      state.authRequired = undefined;
    }
    if (snapshot.status === 'completed') {
      const assessment = assessCompletion(state.result);
      state.outcome = assessment.outcome;
      if (assessment.notes.length > 0) state.outcomeNotes = assessment.notes;
    }
    state.updatedAt = iso(now);
    publish();
  }

  function fail(reason: OrchestratorFailureReason, message: string, error?: AdcpError): void {
    if (terminal()) return;
    state.failure = { reason, message, ...(error ? { error } : {}) };
    if (error) state.errors = [error];
    state.message = message;
    setStatus('failed', 'orchestrator', reason);
    state.updatedAt = iso(Date.now());
    publish();
  }

  // ---- the steps -----------------------------------------------------------------------------------------
  const calls = callActivities(input, spec.retry);

  /** Codes that say the seller will not replay this key's answer: find out what happened before using a new key. */
  const IDEMPOTENCY_CODES = new Set(['IDEMPOTENCY_CONFLICT', 'IDEMPOTENCY_EXPIRED']);
  let keyGeneration = 0;

  async function callSeller(step: string, params: Record<string, unknown>): Promise<void> {
    const keyStep = keyGeneration === 0 ? step : `${step}#${keyGeneration}`;
    const scope = new CancellationScope();
    const call = scope.run(() =>
      calls.callTask({
        operationId: state.operationId,
        sellerId: state.sellerId,
        task: state.task,
        params,
        step: keyStep,
        ...(state.contextId ? { contextId: state.contextId } : {}),
        ...(state.taskId ? { taskId: state.taskId } : {}),
      }),
    );
    // A cancel aborts the call in flight; an adoption means the seller already has the task this call would create.
    const interrupted = condition(
      () => cancelRequest !== undefined || (pendingAdoption !== undefined && !state.taskId),
    );
    const winner = await Promise.race([
      call.then(
        () => 'call' as const,
        () => 'call' as const,
      ),
      interrupted.then(() => 'interrupt' as const),
    ]);
    if (winner === 'interrupt') scope.cancel();
    try {
      const outcome = await call;
      state.webhookRegistered ||= outcome.webhookRegistered;
      apply(outcome.snapshot, 'call');
    } catch (failure) {
      if (isCancellation(failure) && winner === 'interrupt') {
        if (pendingAdoption && !state.taskId && !cancelRequest)
          await adopt(pendingAdoption.taskId, `signalled by ${pendingAdoption.requestedBy}`);
        return;
      }
      if (isCancellation(failure)) throw failure;
      const error = errorFromFailure(failure);
      const lostOrRefused =
        IDEMPOTENCY_CODES.has(error.code) || (spec.mutating && error.recovery === 'transient' && !state.taskId);
      if (lostOrRefused && (await reconcileCall(keyStep, error))) return;
      if (IDEMPOTENCY_CODES.has(error.code) && keyGeneration === 0 && lastReconciliationFound() === 'not_found') {
        // The seller has no task from the old key: nothing happened there, so a new key cannot duplicate anything.
        keyGeneration += 1;
        await callSeller(step, params);
        return;
      }
      if (IDEMPOTENCY_CODES.has(error.code)) {
        fail(
          'idempotency_unresolved',
          `The ${state.task} call to ${state.sellerId} was refused with ${error.code} and the seller's task could not be found; not retried with a new key to avoid a duplicate: ${error.message}`,
          error,
        );
        return;
      }
      fail('call_failed', `The ${state.task} call to ${state.sellerId} failed: ${error.message}`, error);
    }
  }

  function lastReconciliationFound(): string | undefined {
    return state.reconciliation?.[state.reconciliation.length - 1]?.outcome;
  }

  /** Ask the seller whether the call's key already made a task; adopt it if so. True when adopted. */
  async function reconcileCall(keyStep: string, error: AdcpError): Promise<boolean> {
    const trigger = `${error.code} on call step ${keyStep}`;
    let found: Awaited<ReturnType<typeof pollActivities.findSellerTask>>;
    try {
      found = await pollActivities.findSellerTask({
        operationId: state.operationId,
        sellerId: state.sellerId,
        task: state.task,
        step: keyStep,
      });
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      record({ trigger, outcome: 'unsupported', note: `reconciliation failed: ${errorFromFailure(failure).message}` });
      return false;
    }
    if (!found.supported) {
      record({ trigger, outcome: 'unsupported', note: found.note });
      return false;
    }
    if (!found.snapshot) {
      record({ trigger, outcome: 'not_found', note: found.note });
      return false;
    }
    record({ trigger, outcome: 'adopted', taskId: found.snapshot.taskId, note: found.note });
    apply(found.snapshot, 'reconciliation');
    return true;

    function record(entry: {
      trigger: string;
      outcome: 'adopted' | 'not_found' | 'unsupported';
      taskId?: string;
      note: string;
    }): void {
      state.reconciliation = [...(state.reconciliation ?? []), { at: iso(Date.now()), ...entry }].slice(-10);
    }
  }

  async function adopt(taskId: string, why: string): Promise<void> {
    pendingAdoption = undefined;
    state.taskId = taskId;
    state.reconciliation = [
      ...(state.reconciliation ?? []),
      {
        at: iso(Date.now()),
        trigger: why,
        outcome: 'adopted' as const,
        taskId,
        note: 'seller task adopted; the call was not repeated',
      },
    ].slice(-10);
    state.updatedAt = iso(Date.now());
    publish();
    await poll();
  }

  async function poll(): Promise<void> {
    if (!state.taskId) return;
    try {
      const snapshot = await pollActivities.pollTask({
        operationId: state.operationId,
        sellerId: state.sellerId,
        taskId: state.taskId,
      });
      state.pollCount += 1;
      apply(snapshot, 'poll');
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      const error = errorFromFailure(failure);
      if (error.recovery === 'transient') {
        // A missed look is not a failed operation: the next one (or a webhook) will tell.
        note('poll', `poll failed, will look again: ${error.code}: ${error.message}`);
        return;
      }
      fail('poll_failed', `Could not read task ${state.taskId} at ${state.sellerId}: ${error.message}`, error);
    }
  }

  /**
   * Polling in one activity (its retry policy repeats the look at the plan's cadence), interrupted the moment a
   * webhook, an answer, a poll request or a cancel arrives.
   */
  async function pollUntilChange(plan: WaitPlan): Promise<void> {
    // The first look of a wait is a durable timer (the activity must not hold a worker slot sleeping); the rest
    // are retries of one polling activity.
    const interrupt = () =>
      inbox.length > 0 || pendingAdoption !== undefined || pollRequested || cancelRequest !== undefined;
    const firstPollInMs = Math.min(plan.firstPollAfterMs, deadlineMs - Date.now());
    if (firstPollInMs > 0 && (await condition(interrupt, firstPollInMs))) return;
    const untilDeadline = deadlineMs - Date.now();
    if (untilDeadline <= 0) return;
    if (!state.taskId) {
      // Nothing to poll without a task ID: only a webhook, an adoption, a poll request or a cancel can move it now.
      await condition(interrupt, untilDeadline);
      return;
    }
    const budgetMs = Math.min(
      untilDeadline,
      plan.windowMs === undefined ? untilDeadline : plan.windowMs - plan.firstPollAfterMs,
    );
    const activities = pollingActivities(plan, budgetMs);
    const scope = new CancellationScope();
    const since = { status: state.status, progress: state.progress ?? null };
    const polling = scope.run(() =>
      activities.awaitTaskChange({
        operationId: state.operationId,
        sellerId: state.sellerId,
        taskId: state.taskId!,
        since,
      }),
    );
    const interrupted = condition(interrupt);
    const winner = await Promise.race([
      polling.then(
        () => 'poll' as const,
        () => 'poll' as const,
      ),
      interrupted.then(() => 'signal' as const),
    ]);
    if (winner === 'signal') scope.cancel();
    try {
      const changed = await polling;
      state.pollCount += changed.polls;
      apply(changed.snapshot, 'poll');
    } catch (failure) {
      if (isCancellation(failure) && winner === 'signal') return;
      if (isCancellation(failure)) throw failure;
      if (budgetRanOut(failure)) {
        state.pollCount += pollsBeforeBudgetRanOut(failure);
        // At the end of the working window the main loop continues at the slower cadence. Otherwise the next look
        // would have come after the deadline: wait for it (still interruptible), then the loop takes its last look.
        const toDeadline = deadlineMs - Date.now();
        if ((plan.windowMs === undefined || plan.windowMs >= untilDeadline) && toDeadline > 0)
          await condition(interrupt, toDeadline);
        return;
      }
      const error = errorFromFailure(failure);
      fail('poll_failed', `Could not read task ${state.taskId} at ${state.sellerId}: ${error.message}`, error);
    }
  }

  function drainInbox(): void {
    while (inbox.length > 0 && !terminal()) {
      const delivery = inbox.shift()!;
      state.webhooksApplied += 1;
      apply(delivery.snapshot, 'webhook');
    }
    inbox.length = terminal() ? 0 : inbox.length;
  }

  async function waitForAnswer(): Promise<void> {
    const request = state.inputRequest!;
    const maxRounds = input.interaction?.maxRounds ?? DEFAULT_MAX_INPUT_ROUNDS;
    if (request.round > maxRounds) {
      fail('input_rounds_exhausted', `The seller asked for input ${request.round} times; the limit is ${maxRounds}.`);
      return;
    }
    const waitMs = Date.parse(request.deadline) - Date.now();
    const arrived = await condition(
      () => pendingInput !== undefined || inbox.length > 0 || cancelRequest !== undefined || pollRequested,
      Math.max(waitMs, 0),
    );
    if (!arrived) {
      fail(
        'input_timed_out',
        `No answer to the seller's question (${request.reason ?? 'input required'}) by ${request.deadline}.`,
      );
      return;
    }
    if (pendingInput && !cancelRequest) {
      const answer = pendingInput;
      state.transitions.push({
        from: state.status,
        to: state.status,
        source: 'orchestrator',
        at: iso(Date.now()),
        note: `input provided by ${answer.providedBy ?? 'caller'} (round ${request.round})`,
      });
      state.transitionCount += 1;
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
      fail(
        'auth_timed_out',
        `The seller asked for authentication and no refreshed credentials arrived by ${state.authRequired!.deadline}.`,
      );
      return;
    }
    if (credentialsRefreshed && !cancelRequest) {
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
  publish();
  const main = new CancellationScope();
  let temporalCancelled = false;
  try {
    await main.run(async () => {
      if (state.status === 'pending') await callSeller('call', input.params);
      let statusSeen = state.status;
      let pollsInStatus = 0;
      let workingSinceMs = Date.now();
      while (!terminal() && cancelRequest === undefined) {
        drainInbox();
        if (pendingAdoption && !state.taskId && !terminal()) {
          await adopt(pendingAdoption.taskId, `signalled by ${pendingAdoption.requestedBy}`);
          continue;
        }
        if (pollRequested) {
          pollRequested = false;
          await poll();
          continue;
        }
        if (terminal() || cancelRequest) break;
        if (state.status !== statusSeen) {
          if (state.status === 'working' && statusSeen !== 'working') workingSinceMs = Date.now();
          statusSeen = state.status;
          pollsInStatus = 0;
        }
        if (Date.now() >= deadlineMs) {
          await poll(); // one last look before giving up
          drainInbox();
          if (!terminal()) {
            fail(
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
    const request = cancelRequest ?? {
      requestedBy: 'temporal',
      reason: 'workflow cancellation requested through Temporal',
    };
    await CancellationScope.nonCancellable(() => cancelAtSeller(request));
  } else if (!terminal() && workflowInfo().continueAsNewSuggested) {
    await condition(allHandlersFinished);
    const carried: CarriedState = {
      state,
      seenEventKeys: [...seenEventKeys],
      inbox,
      ...(pendingInput ? { pendingInput } : {}),
      ...(credentialsRefreshed ? { pendingCredentialsRefresh: true } : {}),
      ...(pendingAdoption ? { pendingAdoption } : {}),
    };
    return await continueAsNew<typeof operationV1>({ ...input, carried });
  }

  async function cancelAtSeller(request: CancelRequest): Promise<void> {
    let sellerNotified = false;
    let sellerNote = 'no seller task existed yet';
    if (state.taskId) {
      try {
        const told = await pollActivities.cancelSellerTask({
          operationId: state.operationId,
          sellerId: state.sellerId,
          taskId: state.taskId,
          ...(state.contextId ? { contextId: state.contextId } : {}),
        });
        sellerNotified = told.notified;
        sellerNote = told.note;
      } catch (failure) {
        sellerNote = `telling the seller failed: ${errorFromFailure(failure).message}`;
      }
    }
    if (terminal()) {
      note('orchestrator', `cancel requested by ${request.requestedBy} after the operation ended ${state.status}`);
      return;
    }
    state.cancellation = { ...request, at: iso(Date.now()), sellerNotified, sellerNote };
    state.message = `Canceled by ${request.requestedBy}: ${request.reason}`;
    setStatus('canceled', 'orchestrator', `requested by ${request.requestedBy}`);
    state.updatedAt = iso(Date.now());
    publish();
  }

  await condition(allHandlersFinished);
  return state;
}
