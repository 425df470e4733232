/**
 * One AdCP operation = one workflow run (continued-as-new when history grows): the call, then the seller's task
 * through every status until a terminal one. Everything it decides is the operation machine's (./machine.ts); this
 * file only hands it facts from the handlers, runs the steps it asks for with activities, timers and child
 * workflows, hands their results back, and publishes what an operator sees.
 */
import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  ParentClosePolicy,
  allHandlersFinished,
  condition,
  continueAsNew,
  currentUpdateInfo,
  isCancellation,
  log,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  SA_INPUT_REASON,
  SA_MEDIA_BUY_ID,
  SA_PRINCIPAL,
  SA_STATUS,
  SA_TASK_ID,
  SA_TENANT,
} from '../../config/search-attributes';
import { taskSpec } from '../../protocol';
import {
  type OperationInput,
  type OperationState,
  OPERATION_FAILED,
  OPERATION_REJECTED,
  OPERATION_STATE_MEMO,
  adoptTaskSignal,
  cancelOperationUpdate,
  credentialsRefreshedUpdate,
  pollNowSignal,
  provideInputUpdate,
  reconcileOperationUpdate,
  statusQuery,
  webhookReceivedSignal,
} from '../../contract/operation';
import { NOTIFICATION_WORKFLOW_TYPE } from '../../contract/notification';
import { taskMovedSignal } from '../../contract/task-watcher';
import {
  budgetRanOut,
  cadencedPollingActivities,
  callActivities,
  errorFromFailure,
  planning,
  pollsBeforeBudgetRanOut,
  readActivities,
  watcherActivities,
} from './activity-options';
import { OperationMachine, type Step, type StepResult } from './machine';
import { recordTransition } from './metrics';
import {
  INDEXED_AT_START,
  describeForHumans,
  indexedMediaBuyId,
  indexedValues,
  memoFingerprint,
  memoState,
} from './publication';

type StepOf<Kind extends Step['kind']> = Extract<Step, { kind: Kind }>;

export async function adcpOperation(input: OperationInput): Promise<OperationState> {
  const info = workflowInfo();
  const machine: OperationMachine = new OperationMachine(input, {
    operationId: info.workflowId,
    now: () => Date.now(),
    historyIsLong: () => workflowInfo().continueAsNewSuggested,
    onStatusChange: (from, to, source) => recordTransition(machine.state, from, to, source),
    onAnomaly: (source, note) => log.warn('Operation anomaly', { operationId: info.workflowId, source, note }),
  });
  const state = machine.state;

  // ---- handlers: hand facts to the machine ---------------------------------------------------------------------
  setHandler(statusQuery, () => state);
  setHandler(webhookReceivedSignal, (delivery) => {
    if (machine.receiveWebhook(delivery) === 'applied') publish();
  });
  setHandler(adoptTaskSignal, (adoption) => machine.requestAdoption(adoption));
  setHandler(pollNowSignal, () => machine.requestPoll());
  setHandler(taskMovedSignal, (notice) => machine.receiveTaskNotice(notice));
  // Temporal answers a repeated update ID with the first result, so a retried answer is sent once.
  setHandler(provideInputUpdate, (provided) => machine.provideInput(provided, currentUpdateInfo()?.id), {
    validator: (provided) => machine.validateInput(provided),
  });
  setHandler(credentialsRefreshedUpdate, (request) => machine.refreshCredentials(request), {
    validator: (request) => machine.validateCredentialsRefresh(request),
  });
  // Answered once a read of the seller's media buys (or the operation's end) tells.
  setHandler(
    reconcileOperationUpdate,
    async (request) => {
      const ticket = machine.requestReconcile(request);
      await condition(() => machine.hasReconcileAnswer(ticket));
      return machine.reconcileAnswer(ticket)!;
    },
    { validator: (request) => machine.validateReconcile(request) },
  );
  setHandler(cancelOperationUpdate, (request) => machine.requestCancel(request), {
    validator: (request) => machine.validateCancel(request),
  });
  CancellationScope.current().cancelRequested.catch(() => machine.cancelledThroughTemporal());

  // ---- publishing: search attributes, memo, current details ----------------------------------------------------
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
  let lastIndexed = input.carried ? '' : INDEXED_AT_START;
  let lastMemo = '';
  // The buy this operation knows, as indexed (reconciliation counts who knows each buy the seller holds by it).
  let lastMediaBuyId = info.typedSearchAttributes.get(SA_MEDIA_BUY_ID);
  /** Each upsert is a history event: written only when a value changed. */
  function publish(): void {
    if (indexed) {
      const values = indexedValues(state);
      const fingerprint = JSON.stringify(values);
      if (fingerprint !== lastIndexed) {
        lastIndexed = fingerprint;
        upsertSearchAttributes([
          { key: SA_STATUS, value: values.status },
          { key: SA_TASK_ID, value: values.taskId },
          { key: SA_INPUT_REASON, value: values.inputReason },
        ]);
      }
      const mediaBuyId = indexedMediaBuyId(state);
      if (mediaBuyId !== undefined && mediaBuyId !== lastMediaBuyId) {
        lastMediaBuyId = mediaBuyId;
        upsertSearchAttributes([{ key: SA_MEDIA_BUY_ID, value: mediaBuyId }]);
      }
      const memo = memoFingerprint(state);
      if (memo !== lastMemo) {
        lastMemo = memo;
        upsertMemo({ [OPERATION_STATE_MEMO]: memoState(state) });
      }
    }
    setCurrentDetails(describeForHumans(state));
  }

  // ---- the loop: ask the machine, run the step, hand the result back -------------------------------------------
  // A fresh read publishes with its answer (its call is local: one workflow task), not before it.
  if (taskSpec(input.task).mutating || input.carried) publish();
  for (;;) {
    const step = machine.next();
    // A local call answers within this workflow task: a memo of the state before it would be overwritten unseen.
    if (step.kind === 'call' && step.local) setCurrentDetails(describeForHumans(state));
    else publish();
    if (step.kind === 'end') {
      // Nothing is awaited when there is nothing to wait for: every promise costs the worker a captured stack.
      if (allHandlersFinished()) return end(step);
      await condition(allHandlersFinished);
      continue;
    }
    machine.resolve(await perform(step));
    publish();
  }

  /** Runs a step; one the machine shields runs to its end even while the workflow is being canceled. */
  async function perform(step: Exclude<Step, { kind: 'end' }>): Promise<StepResult> {
    try {
      return step.shielded ? await CancellationScope.nonCancellable(() => execute(step)) : await execute(step);
    } catch (failure) {
      if (isCancellation(failure)) return { kind: 'interrupted' };
      throw failure;
    }
  }

  async function execute(step: Exclude<Step, { kind: 'end' }>): Promise<StepResult> {
    switch (step.kind) {
      case 'planCall':
        // Not settled: a refusal to plan is the worker's, not the seller's answer, and fails the workflow.
        return { kind: 'planned', plan: await planning.planCall(step.input) };
      case 'call':
        return call(step);
      case 'poll':
        return settle(readActivities(step.input.timeouts).readTask(step.input), (outcome) => ({
          kind: 'read',
          outcome,
        }));
      case 'pollOnCadence':
        return pollOnCadence(step);
      case 'wait': {
        const woke = await condition(() => machine.wakes(), Math.max(step.untilMs - Date.now(), 0));
        return { kind: woke ? 'woke' : 'timedOut' };
      }
      case 'reconcile':
        return settle(readActivities(step.input.timeouts).findLostTask(step.input), (outcome) => ({
          kind: 'found',
          outcome,
        }));
      case 'readResource':
        return settle(readActivities(step.input.timeouts).readResource(step.input), (outcome) => ({
          kind: 'resource',
          outcome,
        }));
      case 'cancelAtSeller':
        return settle(readActivities(step.input.timeouts).cancelAtSeller(step.input), (outcome) => ({
          kind: 'toldSeller',
          outcome,
        }));
      case 'registerWithWatcher':
        return settle(watcherActivities.registerWithTaskWatcher(step.input), (outcome) => ({
          kind: 'watchAnswered',
          outcome,
        }));
      case 'unregisterFromWatcher':
        return settle(watcherActivities.unregisterFromTaskWatcher(step.input), () => ({ kind: 'watchLeft' }));
      case 'notify':
        await notify(step);
        return { kind: 'notified' };
      case 'continueAsNew':
        await condition(allHandlersFinished);
        return continueAsNew<typeof adcpOperation>({ ...input, carried: machine.carried() });
    }
  }

  /** An activity's answer, or its failure in the one error model; a cancellation goes up to `perform`. */
  async function settle<T>(activity: Promise<T>, answered: (value: T) => StepResult): Promise<StepResult> {
    try {
      return answered(await activity);
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      return { kind: 'failed', error: errorFromFailure(failure) };
    }
  }

  /**
   * One call (with its retries) while what arrives keeps being applied. Shielded from the workflow's own
   * cancellation: a cancel waits for the answer, so what the seller made is known before the operation ends; only
   * the machine stops a call (`woken()`), when its answer can add nothing.
   */
  async function call(step: StepOf<'call'>): Promise<StepResult> {
    const calls = callActivities(input, step.timeouts, step.local);
    let scope: CancellationScope | undefined;
    let settled = false;
    const answer = CancellationScope.nonCancellable(() => {
      scope = new CancellationScope();
      return scope.run(() => calls.sendCall(step.send));
    });
    answer.then(
      () => (settled = true),
      () => (settled = true),
    );
    // Reads the machine asks for beside the call (to confirm a final webhook that came before the answer).
    const besides: { scope: CancellationScope; done: Promise<void> }[] = [];
    try {
      while (!settled) {
        await condition(() => settled || machine.wakes());
        if (!machine.wakes()) continue;
        const stop = machine.woken();
        publish();
        if (stop && !settled) {
          scope?.cancel();
          break;
        }
        const read = machine.besideCall();
        if (read) besides.push(readBeside(read));
      }
    } catch (failure) {
      if (!isCancellation(failure)) throw failure;
      machine.cancelledThroughTemporal();
    }
    for (const beside of besides) {
      beside.scope.cancel();
      await beside.done;
    }
    try {
      return { kind: 'answered', answer: await answer };
    } catch (failure) {
      if (isCancellation(failure)) return { kind: 'stopped' };
      return { kind: 'failed', error: errorFromFailure(failure) };
    }
  }

  function readBeside(step: StepOf<'poll'>): { scope: CancellationScope; done: Promise<void> } {
    const scope = new CancellationScope();
    const done = scope
      .run(() =>
        settle(readActivities(step.input.timeouts).readTask(step.input), (outcome) => ({ kind: 'read', outcome })),
      )
      .then(
        (result) => machine.resolveBesideCall(result),
        () => machine.resolveBesideCall({ kind: 'stopped' }),
      );
    return { scope, done };
  }

  /**
   * The parked wait: one activity makes every poll of the wait and keeps the cadence itself (its first attempt only
   * asks to be retried at the first poll), so a wait costs an activity scheduled and its end, with no durable timer,
   * and a poll lost with a killed worker is made again seconds after its heartbeat times out. Raced against what
   * the machine says wakes it; reads never fail the operation.
   */
  async function pollOnCadence(step: StepOf<'pollOnCadence'>): Promise<StepResult> {
    const scope = new CancellationScope();
    const activities = cadencedPollingActivities(step.budgetMs, step.input.timeouts);
    const polling = scope.run(() => activities.awaitTaskMoveOnCadence(step.input));
    const polled = polling.then(
      () => 'polled' as const,
      () => 'polled' as const,
    );
    let stopped = false;
    while (!stopped) {
      const winner = await Promise.race([polled, condition(() => machine.wakes()).then(() => 'woken' as const)]);
      if (winner === 'polled') break;
      stopped = machine.woken();
      if (!stopped) publish();
    }
    if (stopped) scope.cancel();
    try {
      return { kind: 'moved', outcome: await polling };
    } catch (failure) {
      if (isCancellation(failure) && stopped) return { kind: 'stopped' };
      if (isCancellation(failure)) throw failure;
      if (budgetRanOut(failure)) return { kind: 'budgetRanOut', polls: pollsBeforeBudgetRanOut(failure) };
      return { kind: 'failed', error: errorFromFailure(failure) };
    }
  }

  /**
   * A notification is an abandoned child workflow: starting one costs this operation a start, never the delivery
   * (retries, a slow receiver). Its workflow ID is the idempotency key, so an event is started once even across runs.
   */
  async function notify(step: StepOf<'notify'>): Promise<void> {
    const { notification } = step;
    try {
      await startChild(NOTIFICATION_WORKFLOW_TYPE, {
        workflowId: `notify:${notification.idempotency_key}`,
        args: [notification],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        staticSummary: step.summary,
      });
    } catch (failure) {
      // Already started (an earlier run sent it) or refused: a notification never fails the operation.
      log.warn('Notification not started', {
        operationId: state.operationId,
        event: notification.event,
        error: String(failure),
      });
    }
  }

  /** Failed and rejected operations end the workflow Failed, with the whole state in the failure's details. */
  function end(step: StepOf<'end'>): OperationState {
    if (step.how === 'fail') {
      throw ApplicationFailure.create({
        type: state.status === 'failed' ? OPERATION_FAILED : OPERATION_REJECTED,
        message: step.message,
        nonRetryable: true,
        details: [state],
      });
    }
    if (step.how === 'cancel') throw new CancelledFailure(step.message, [state]);
    return state;
  }
}
