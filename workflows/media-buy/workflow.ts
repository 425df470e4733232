/**
 * One media buy = one workflow (continued-as-new as its history grows), for the buy's whole life: weeks to months.
 * It creates the buy through a create_media_buy operation (a child `adcpOperation`, so every guarantee of an
 * operation holds), then follows the buy's own status from change answers, reporting webhooks (signals), reads of
 * get_media_buys on durable timers at a cadence that fits the status, and refresh requests. Changes (Updates) and
 * creative attachments run one at a time as child operations. Delivery reports are folded into running totals; gaps
 * are filled by windowed pulls; the flight ends with a lifetime pull and a reconciliation.
 *
 * Handlers hand facts to the machine (./machine.ts), which holds every rule and decides each step of the loop; this
 * file runs the steps: child operations, activities, the one timer, search attributes, continue-as-new.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowFailure,
  ParentClosePolicy,
  allHandlersFinished,
  condition,
  continueAsNew,
  currentUpdateInfo,
  isCancellation,
  log,
  metricMeter,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { MediaBuyActivities } from '../../activities/media-buy';
import {
  SA_SELLER,
  SA_CREATIVES_MISSING,
  SA_CREATIVE_DEADLINE,
  SA_FLIGHT_END,
  SA_MEDIA_BUY_ID,
  SA_MEDIA_BUY_STATUS,
  SA_STATUS,
  SA_TASK,
  SA_TENANT,
} from '../../config/search-attributes';
import { type AdcpError, operationIdFor } from '../../protocol';
import {
  OPERATION_WORKFLOW_TYPE,
  type OperationInput,
  type OperationState,
  operationStateFromFailure,
} from '../../contract/operation';
import {
  type GovernanceCaller,
  governSpend,
  newGovernanceState,
  raisesBudget,
  registerGovernanceDecisions,
  reportPlanOutcome,
} from '../governance/workflow';
import {
  type ChangeVerdict,
  type MediaBuyInput,
  type MediaBuyState,
  attachCreativesUpdate,
  changeMediaBuyUpdate,
  mediaBuyStateQuery,
  refreshMediaBuySignal,
  reportReceivedSignal,
} from '../../contract/media-buy';
import {
  MediaBuyMachine,
  type MediaBuyStep,
  type OperationOutcome,
  type PullOutcome,
  type ReadOutcome,
} from './machine';

/**
 * A timer due within this much of the workflow task's time may fire at the server while the task runs (a task lasts
 * at most its 10 s timeout): it is left to fire instead of being cancelled. See armTimer.
 */
const TIMER_CANCEL_GUARD_MS = 60_000;

const reads = proxyActivities<MediaBuyActivities>({
  startToCloseTimeout: '70s',
  heartbeatTimeout: '15s',
  retry: {
    initialInterval: '2s',
    backoffCoefficient: 2,
    maximumInterval: '60s',
    maximumAttempts: 5,
    nonRetryableErrorTypes: ['ConfigError', 'ProtocolViolation', 'SellerError'],
  },
});

function errorOf(failure: unknown): { code: string; message: string } {
  let cause: unknown = failure;
  while (cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) cause = cause.cause;
  if (cause instanceof ApplicationFailure) {
    const detail = cause.details?.[0] as AdcpError | undefined;
    if (detail && typeof detail.code === 'string') return { code: detail.code, message: detail.message };
    return { code: cause.type ?? 'FAILED', message: cause.message };
  }
  return { code: 'FAILED', message: cause instanceof Error ? cause.message : String(cause) };
}

/** Runs `work`; a failure becomes the fact the machine reads (`{error}`), a cancellation goes on up. */
async function outcomeOf<T>(work: () => Promise<T>): Promise<T | { error: { code: string; message: string } }> {
  try {
    return await work();
  } catch (failure) {
    if (isCancellation(failure)) throw failure;
    return { error: errorOf(failure) };
  }
}

/** The validators' answer to the caller: a refusal is an error whose message starts with its code. */
function refuseUnless(verdict: ChangeVerdict): void {
  if (!verdict.ok) throw new Error(`${verdict.code}: ${verdict.message}`);
}

export async function adcpMediaBuy(input: MediaBuyInput): Promise<MediaBuyState> {
  const info = workflowInfo();
  const indexed = input.indexed ?? info.typedSearchAttributes.get(SA_MEDIA_BUY_STATUS) !== undefined;
  const machine = MediaBuyMachine.start(
    input,
    {
      workflowId: info.workflowId,
      nowMs: Date.now(),
      ...(input.governance && !input.carried ? { governance: newGovernanceState(input.governance) } : {}),
    },
    {
      now: () => Date.now(),
      onStatusChange: (from, to, source) => {
        metricMeter
          .createCounter('adcp_media_buy_transitions', 'transitions', 'Media buy lifecycle changes')
          .add(1, { agent: state.sellerId, to, source });
        log.info('Media buy status changed', { buyKey: state.buyKey, mediaBuyId: state.mediaBuyId, from, to, source });
      },
      onAnomaly: (source, note) =>
        log.warn('Media buy anomaly', { buyKey: state.buyKey, mediaBuyId: state.mediaBuyId, source, note }),
      // A buy no report has reached expects its first at the end of the flight's first period, and is pulled when
      // it is late (a seller that never reports, a buy without a reporting webhook). Behind a patch because a run from
      // before expected nothing until a report said when, and its history replays that; asked only once the buy has
      // an id and no report stated a time, so a run that never gets there records no marker. Removal condition: no
      // media buy run started before this build is still open (each such run continues as new or ends).
      expectFirstReport: () => patched('media-buy-expect-first-report'),
      // A windowed pull answered without windows turns the buy's fills into date-range pulls, one a period. Behind a
      // patch because a run from before counted that answer as an attempt and pulled the same window again, and its
      // history replays that; asked only when such an answer comes back. Removal condition: no media buy run started
      // before this build is still open.
      rangeFill: () => patched('media-buy-range-fill'),
      // A buy still pending (creatives, or its start) expects no first report, so it is not pulled each period while
      // it cannot deliver. Behind a patch because a run from before expected one and pulled, and its history replays
      // that; asked only for a pending buy no report has told when to expect the next. Removal condition: no media
      // buy run started before this build is still open.
      quietWhilePending: () => patched('media-buy-quiet-while-pending'),
      onCreativeAlert: (alert) => {
        metricMeter
          .createCounter('adcp_media_buy_creative_alerts', 'alerts', 'Creative deadline alerts raised')
          .add(1, { agent: state.sellerId, kind: alert.kind });
        log.warn(`Creative deadline alert (${alert.kind})`, {
          buyKey: state.buyKey,
          mediaBuyId: state.mediaBuyId,
          deadline: alert.deadline,
          packagesLacking: alert.packagesLacking,
        });
      },
    },
  );
  const state = machine.state;
  const governance: GovernanceCaller | undefined = input.governance
    ? {
        settings: input.governance,
        ownerKey: input.buyKey,
        ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
        ...(input.principal !== undefined ? { principal: input.principal } : {}),
        indexed,
      }
    : undefined;

  // ---- handlers: hand facts to the machine -------------------------------------------------------------------------
  // Validators read history as it is now: once it is full, new changes wait for the next run (machine.checkChange).
  // They do not run on replay, so what they read never changes a replayed history.
  const historyNow = () => {
    const { historyLength, continueAsNewSuggested } = workflowInfo();
    return { length: historyLength, continueAsNewSuggested };
  };
  setHandler(mediaBuyStateQuery, () => state);
  setHandler(reportReceivedSignal, (delivery) => machine.recordReport(delivery));
  setHandler(refreshMediaBuySignal, () => machine.requestRefresh());
  if (state.governance) registerGovernanceDecisions(state.governance);
  setHandler(
    changeMediaBuyUpdate,
    async (request) => {
      const sequence = machine.acceptChange(request, currentUpdateInfo()?.id);
      await condition(() => machine.changeAnswer(sequence) !== undefined);
      return machine.changeAnswer(sequence)!;
    },
    { validator: (request) => refuseUnless(machine.checkChange(request, currentUpdateInfo()?.id, historyNow())) },
  );
  setHandler(
    attachCreativesUpdate,
    async (attachment) => {
      const { sequence, repeated } = machine.acceptAttachment(attachment, currentUpdateInfo()?.id);
      await condition(() => machine.attachmentAnswer(sequence, repeated) !== undefined);
      return machine.attachmentAnswer(sequence, repeated)!;
    },
    {
      validator: (attachment) =>
        refuseUnless(machine.checkAttachment(attachment, currentUpdateInfo()?.id, historyNow())),
    },
  );

  // ---- what operators see ----------------------------------------------------------------------------------------
  // The client set the first search attributes at start; a continued run sets them again.
  let lastIndexed = input.carried
    ? ''
    : JSON.stringify({ status: 'creating', id: null, end: null, deadline: null, missing: null });
  function publish(): void {
    const values = machine.indexValues();
    const fingerprint = JSON.stringify(values);
    if (indexed && fingerprint !== lastIndexed) {
      lastIndexed = fingerprint;
      upsertSearchAttributes([
        { key: SA_MEDIA_BUY_STATUS, value: values.status },
        { key: SA_MEDIA_BUY_ID, value: values.id },
        { key: SA_FLIGHT_END, value: values.end ? new Date(values.end) : null },
        { key: SA_CREATIVE_DEADLINE, value: values.deadline ? new Date(values.deadline) : null },
        { key: SA_CREATIVES_MISSING, value: values.missing },
      ]);
    }
    setCurrentDetails(machine.details());
  }

  // ---- the steps ---------------------------------------------------------------------------------------------------
  /** One child operation acting for the buy's tenant (its seller credentials, notifications, AdcpTenant). */
  async function operation(
    task: string,
    callerKey: string,
    params: Record<string, unknown>,
  ): Promise<OperationOutcome> {
    return outcomeOf(async () => {
      const operationInput: OperationInput = {
        sellerId: state.sellerId,
        task,
        params,
        ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
        ...(input.principal !== undefined ? { principal: input.principal } : {}),
      };
      const child = await startChild(OPERATION_WORKFLOW_TYPE, {
        workflowId: operationIdFor(task, callerKey),
        args: [operationInput],
        // The operation finishes what it started even if this buy's workflow goes away.
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        staticSummary: `${task} for media buy ${state.buyKey}`,
        ...(indexed
          ? {
              typedSearchAttributes: [
                { key: SA_TASK, value: task },
                { key: SA_SELLER, value: state.sellerId },
                { key: SA_STATUS, value: 'pending' },
                ...(input.tenant !== undefined ? [{ key: SA_TENANT, value: input.tenant }] : []),
              ],
            }
          : {}),
      });
      try {
        return { operation: (await child.result()) as OperationState };
      } catch (failure) {
        // An operation that failed or was rejected ends its workflow Failed with its state in the details.
        const ended = operationStateFromFailure(failure);
        if (ended) return { operation: ended };
        throw failure;
      }
    });
  }

  async function create(): Promise<void> {
    const check =
      governance && state.governance
        ? await governSpend(governance, state.governance, {
            action: 'create',
            tool: 'create_media_buy',
            payload: machine.createPayload(),
            onChange: publish,
          })
        : undefined;
    if (check && !check.ok) {
      machine.refuseCreate(check);
      return;
    }
    // The reporting URL registered with the seller names the seller, so the gateway's reporting route verifies a
    // report without a lookup. Behind a patch because a buy created before registered the form without the seller
    // and its history replays that. Removal condition: no media buy started before this build is still open (each
    // such buy ends or continues as new: the new run never creates again).
    const reportingUrlNamesSeller = patched('reporting-url-names-seller');
    const params = machine.createParams(
      check,
      reportingUrlNamesSeller ? { sellerInReportingUrl: workflowInfo().workflowId } : {},
    );
    machine.applyCreate(await operation('create_media_buy', state.buyKey, params));
    if (governance && state.governance && check) {
      await reportPlanOutcome(governance, state.governance, machine.createOutcomeReport());
    }
  }

  async function change(sequence: number): Promise<void> {
    const begun = machine.beginChange(sequence);
    if (!begun) return;
    publish();
    // Governance: a change that raises budget is a spend, checked before the seller hears of it.
    const check =
      governance && state.governance && raisesBudget(state.packages, begun.request)
        ? await governSpend(governance, state.governance, {
            action: `change-${sequence}`,
            tool: 'update_media_buy',
            payload: begun.params,
            onChange: publish,
          })
        : undefined;
    if (check && !check.ok) {
      machine.refuseChange(sequence, check);
      return;
    }
    const params = check ? machine.governedChangeParams(check) : begun.params;
    const outcome = await operation('update_media_buy', begun.callerKey, params);
    const report = governance && state.governance && check && machine.changeOutcomeReport(sequence, check, outcome);
    if (report) await reportPlanOutcome(governance, state.governance!, report);
    const verify = machine.applyChangeOutcome(sequence, outcome);
    if (verify) machine.verifyChange(sequence, await outcomeOf<ReadOutcome>(() => reads.readMediaBuy(verify)));
  }

  async function attach(sequence: number): Promise<void> {
    const begun = machine.beginAttachment(sequence);
    if (!begun) return;
    machine.applyAttachment(sequence, await operation('sync_creatives', begun.callerKey, begun.params));
  }

  async function run(step: MediaBuyStep): Promise<void> {
    switch (step.kind) {
      case 'create':
        return create();
      case 'change':
        return change(step.sequence);
      case 'attach':
        return attach(step.sequence);
      case 'read':
        return machine.applyRead(await outcomeOf<ReadOutcome>(() => reads.readMediaBuy(step.request)));
      case 'pull':
        return machine.applyWindowPull(step, await outcomeOf<PullOutcome>(() => reads.pullDelivery(step.request)));
      case 'lifetime-pull':
        return machine.applyLifetimePull(await outcomeOf<PullOutcome>(() => reads.pullDelivery(step.request)));
    }
  }

  // ---- one timer for every due thing -----------------------------------------------------------------------------
  // Re-armed only when the earliest due time changes, so signals that change nothing due cost no timer events.
  let timer: { dueMs: number; fired: boolean; scope: CancellationScope } | undefined;
  function armTimer(dueMs: number | undefined): void {
    if (timer && !timer.fired && timer.dueMs === dueMs) return;
    if (timer && !timer.fired) {
      // A timer that fires at the server while this task runs has no TimerFired event in the task yet. A real
      // server accepts a CancelTimer for it; the time-skipping test server refuses the whole completion ("invalid
      // history builder state for action", temporalio/sdk-java#2606, #3088) and never times the task out, so the
      // run stalls for good. A timer this close to firing is left to fire: it wakes the loop, which polls again.
      const mayFireDuringTask = timer.dueMs <= Date.now() + TIMER_CANCEL_GUARD_MS;
      if (mayFireDuringTask) {
        if (dueMs === undefined || dueMs >= timer.dueMs) return; // it fires first; the loop re-arms then
      } else {
        timer.scope.cancel();
      }
    }
    timer = undefined;
    if (dueMs === undefined) return;
    const scope = new CancellationScope();
    const armed = { dueMs, fired: false, scope };
    scope
      .run(() => sleep(Math.max(dueMs - Date.now(), 1)))
      .then(
        () => (armed.fired = true),
        () => undefined,
      );
    timer = armed;
  }

  // ---- the loop ----------------------------------------------------------------------------------------------------
  // Once history is full, continue-as-new goes ahead of reads and due work (a refresh that arrived during every read
  // kept a run from ever continuing). Behind a patch because a run from before read first and its history replays
  // that; asked only when history is full, so a run that never gets there records no marker. Removal condition: no
  // media buy run started before this build is still open (each such run continues as new or ends).
  const continueAsNewFirst = () => patched('media-buy-continue-as-new-before-reads');
  publish();
  for (;;) {
    const { historyLength, continueAsNewSuggested } = workflowInfo();
    const step = machine.next(Date.now(), { length: historyLength, continueAsNewSuggested, continueAsNewFirst });
    if (step.kind === 'done') break;
    if (step.kind === 'wait') {
      armTimer(step.untilMs);
      publish();
      await condition(() => machine.hasWork() || (timer?.fired ?? false));
      continue;
    }
    if (step.kind === 'continue-as-new') {
      armTimer(undefined);
      // Handlers finish first; one that queued work meanwhile is answered by this run.
      await condition(() => allHandlersFinished() || machine.hasWork());
      if (machine.hasWork()) continue;
      return await continueAsNew<typeof adcpMediaBuy>({ ...input, indexed, carried: machine.carry() });
    }
    await run(step);
    publish();
  }
  armTimer(undefined);
  publish();
  await condition(allHandlersFinished);
  return state;
}
