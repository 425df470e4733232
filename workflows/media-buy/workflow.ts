/**
 * One media buy = one workflow (continued-as-new as its history grows), for the buy's whole life: weeks to months.
 * It creates the buy through a create_media_buy operation (a child `adcpOperation`, so every guarantee of an
 * operation holds), then follows the buy's own status from change answers, reporting webhooks (signals), reads of
 * get_media_buys on durable timers at a cadence that fits the status, and refresh requests. Changes (Updates) and
 * creative attachments run one at a time as child operations. Delivery reports are folded into running totals; gaps
 * are filled by windowed pulls; the flight ends with a lifetime pull and a reconciliation.
 *
 * Handlers only record facts; this loop acts. The rules live in ./media-buy-state.ts.
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
import { TERMINAL_MEDIA_BUY_STATUSES, mediaBuySnapshotFrom } from '../../protocol/media-buy';
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
  type ChangeAnswer,
  type ChangeRecord,
  type ChangeRequest,
  type CreativeAttachment,
  type MediaBuyCarried,
  type MediaBuyInput,
  type MediaBuyState,
  type ReportDelivery,
  attachCreativesUpdate,
  changeMediaBuyUpdate,
  mediaBuyStateQuery,
  refreshMediaBuySignal,
  reportReceivedSignal,
} from '../../contract/media-buy';
import {
  MAX_CHANGES,
  MediaBuyMachine,
  chooseReportingFrequency,
  fillGraceMs,
  floorPeriod,
  iso,
  nextPeriod,
  newMediaBuyState,
  periodMs,
  statusAfterChange,
  updateParamsFor,
  validateChange,
} from './machine';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** Continue-as-new well before Temporal's 4,096-event suggestion threshold, wherever the server suggests it or not. */
const HISTORY_EVENT_LIMIT = 3_000;
const MAX_SEEN_EVENT_KEYS = 500;
const MAX_ANSWERED_UPDATES = 200;
const DEFAULT_CREATIVE_ALERT_LEAD_MS = 48 * HOUR;
/** A windowed pull covers at most this many days (a gap older than that is pulled in several requests). */
const MAX_PULL_DAYS = 7;
/**
 * A timer due within this much of the workflow task's time may fire at the server while the task runs (a task lasts
 * at most its 10 s timeout): it is left to fire instead of being cancelled. See armTimer.
 */
const TIMER_CANCEL_GUARD_MS = MINUTE;

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

function dateOf(ms: number): string {
  return iso(ms).slice(0, 10);
}

export async function adcpMediaBuy(input: MediaBuyInput): Promise<MediaBuyState> {
  const info = workflowInfo();
  const indexed = input.indexed ?? info.typedSearchAttributes.get(SA_MEDIA_BUY_STATUS) !== undefined;
  const carried = input.carried;
  const state: MediaBuyState =
    carried?.state ??
    newMediaBuyState({
      buyKey: input.buyKey,
      workflowId: info.workflowId,
      sellerId: input.sellerId,
      createOperationId: operationIdFor('create_media_buy', input.buyKey),
      ...(input.requestedBy ? { requestedBy: input.requestedBy } : {}),
      nowMs: Date.now(),
      ...(input.reporting?.expectedDelayMinutes !== undefined
        ? { expectedDelayMinutes: input.reporting.expectedDelayMinutes }
        : {}),
      params: input.params,
    });
  if (carried) state.run += 1;
  // Tenancy: only buys created with a tenant carry these fields.
  if (!carried && input.tenant !== undefined) state.tenant = input.tenant;
  if (!carried && input.principal !== undefined) state.principal = input.principal;
  // Governance: only buys that name a governance agent check, wait for decisions and report outcomes.
  if (!carried && input.governance) state.governance = newGovernanceState(input.governance);
  const governance: GovernanceCaller | undefined = input.governance
    ? {
        settings: input.governance,
        ownerKey: input.buyKey,
        ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
        ...(input.principal !== undefined ? { principal: input.principal } : {}),
        indexed,
      }
    : undefined;
  const alertLeadMs = input.creativeAlertLeadMs ?? DEFAULT_CREATIVE_ALERT_LEAD_MS;
  const account = input.params.account;

  const machine = new MediaBuyMachine(state, {
    now: () => Date.now(),
    onStatusChange: (from, to, source) => {
      metricMeter
        .createCounter('adcp_media_buy_transitions', 'transitions', 'Media buy lifecycle changes')
        .add(1, { agent: state.sellerId, to, source });
      log.info('Media buy status changed', { buyKey: state.buyKey, mediaBuyId: state.mediaBuyId, from, to, source });
    },
    onAnomaly: (source, note) =>
      log.warn('Media buy anomaly', { buyKey: state.buyKey, mediaBuyId: state.mediaBuyId, source, note }),
  });

  const seenEventKeys = new Set<string>(carried?.seenEventKeys ?? []);
  const inbox: ReportDelivery[] = [...(carried?.inbox ?? [])];
  const changeQueue: { record: ChangeRecord; request: ChangeRequest }[] = [...(carried?.queuedChanges ?? [])];
  const attachmentQueue: { sequence: number; attachment: CreativeAttachment; updateId?: string }[] = [
    ...(carried?.queuedAttachments ?? []),
  ];
  let changeSequence = carried?.changeSequence ?? 0;
  const answeredUpdates = new Map<string, number>(carried?.answeredUpdates ?? []);
  const alertsFired = new Set<string>(carried?.alertsFired ?? []);
  /** Outcomes of changes in this run, by sequence, for the update handlers waiting on them. */
  const finished = new Map<number, ChangeAnswer>();
  let refreshRequested = false;
  let terminalAtMs: number | undefined;

  function answerOf(sequence: number): ChangeAnswer | undefined {
    const done = finished.get(sequence);
    if (done) return done;
    const record = state.changes.find((change) => change.sequence === sequence);
    if (record && record.outcome !== 'queued' && record.outcome !== 'running') {
      return {
        sequence,
        outcome: record.outcome,
        status: state.status,
        ...(record.error ? { error: record.error } : {}),
        ...(record.operationId ? { operationId: record.operationId } : {}),
      };
    }
    return undefined;
  }

  function rememberUpdate(sequence: number): void {
    const updateId = currentUpdateInfo()?.id;
    if (!updateId) return;
    answeredUpdates.set(updateId, sequence);
    if (answeredUpdates.size > MAX_ANSWERED_UPDATES) answeredUpdates.delete(answeredUpdates.keys().next().value!);
  }

  function recordChange(record: ChangeRecord): void {
    state.changes.push(record);
    state.changeCount += 1;
    if (state.changes.length > MAX_CHANGES) state.changes.splice(0, state.changes.length - MAX_CHANGES);
  }

  // ---- handlers: record facts only -------------------------------------------------------------------------------
  setHandler(mediaBuyStateQuery, () => state);

  setHandler(reportReceivedSignal, (delivery) => {
    if (!delivery || typeof delivery.eventKey !== 'string' || !delivery.notification) return;
    if (seenEventKeys.has(delivery.eventKey)) {
      state.reporting.duplicates += 1;
      return;
    }
    seenEventKeys.add(delivery.eventKey);
    if (seenEventKeys.size > MAX_SEEN_EVENT_KEYS) seenEventKeys.delete(seenEventKeys.values().next().value!);
    inbox.push(delivery);
  });

  setHandler(refreshMediaBuySignal, () => {
    refreshRequested = true;
  });

  if (state.governance) registerGovernanceDecisions(state.governance);

  setHandler(
    changeMediaBuyUpdate,
    async (request) => {
      const updateId = currentUpdateInfo()?.id;
      const earlier = updateId !== undefined ? answeredUpdates.get(updateId) : undefined;
      let sequence: number;
      if (earlier !== undefined) {
        sequence = earlier;
      } else {
        sequence = ++changeSequence;
        const record: ChangeRecord = {
          sequence,
          kind: request.kind,
          requestedBy: request.requestedBy,
          ...(request.principal !== undefined ? { principal: request.principal } : {}),
          ...(request.reason ? { reason: request.reason } : {}),
          requestedAt: iso(Date.now()),
          outcome: 'queued',
          ...(updateId ? { updateId } : {}),
        };
        recordChange(record);
        changeQueue.push({ record, request });
        rememberUpdate(sequence);
      }
      await condition(() => answerOf(sequence) !== undefined);
      return answerOf(sequence)!;
    },
    {
      validator: (request) => {
        const updateId = currentUpdateInfo()?.id;
        if (updateId !== undefined && answeredUpdates.has(updateId)) return; // a retried update answers the first one
        // Against the status the buy will have once the changes already accepted have run.
        const projected = changeQueue.reduce(
          (status, queued) => statusAfterChange(queued.request.kind, status),
          state.status,
        );
        const verdict = validateChange({ ...state, status: projected }, request);
        if (!verdict.ok) throw new Error(`${verdict.code}: ${verdict.message}`);
        // A package change names packages of this buy (refused here, before history; runChange does not re-check).
        if (request.kind === 'packages' && Object.keys(state.packages).length > 0) {
          const entries: Record<string, unknown>[] = request.packages ?? [];
          const unknown = entries
            .map((entry) => entry.package_id)
            .filter((id): id is string => typeof id === 'string' && !state.packages[id]);
          if (unknown.length > 0)
            throw new Error(`INVALID_REQUEST: No package ${unknown.join(', ')} in this media buy.`);
        }
      },
    },
  );

  setHandler(
    attachCreativesUpdate,
    async (attachment) => {
      const updateId = currentUpdateInfo()?.id;
      const earlier = updateId !== undefined ? answeredUpdates.get(updateId) : undefined;
      let sequence: number;
      if (earlier !== undefined) {
        sequence = earlier;
      } else {
        sequence = ++changeSequence;
        attachmentQueue.push({ sequence, attachment, ...(updateId ? { updateId } : {}) });
        rememberUpdate(sequence);
      }
      await condition(
        () =>
          finished.has(sequence) ||
          (earlier !== undefined && !attachmentQueue.some((queued) => queued.sequence === sequence)),
      );
      return finished.get(sequence) ?? { sequence, outcome: 'applied', status: state.status };
    },
    {
      validator: (attachment) => {
        const updateId = currentUpdateInfo()?.id;
        if (updateId !== undefined && answeredUpdates.has(updateId)) return;
        if (machine.terminal)
          throw new Error(`INVALID_STATE: The media buy is ${state.status}; creatives can no longer be attached.`);
        if (!state.mediaBuyId)
          throw new Error(
            'INVALID_STATE: The media buy is still being created; attach creatives once it has a media_buy_id.',
          );
        if (!attachment || typeof attachment.requestedBy !== 'string' || attachment.requestedBy.trim() === '') {
          throw new Error('INVALID_REQUEST: requestedBy must say who attaches the creatives.');
        }
        if (!Array.isArray(attachment.creatives) || attachment.creatives.length === 0)
          throw new Error('INVALID_REQUEST: creatives must list at least one creative.');
        for (const creative of attachment.creatives) {
          if (!creative || typeof creative.creative_id !== 'string' || creative.creative_id === '') {
            throw new Error('INVALID_REQUEST: every creative needs a creative_id.');
          }
        }
        const known = Object.keys(state.packages);
        for (const [creativeId, packageIds] of Object.entries(attachment.assignments ?? {})) {
          if (!Array.isArray(packageIds))
            throw new Error(`INVALID_REQUEST: assignments.${creativeId} must list package ids.`);
          const unknown = packageIds.filter((id) => known.length > 0 && !known.includes(id));
          if (unknown.length > 0)
            throw new Error(`INVALID_REQUEST: assignments.${creativeId} names unknown package ${unknown.join(', ')}.`);
        }
      },
    },
  );

  // ---- publishing ------------------------------------------------------------------------------------------------
  let lastIndexed = carried
    ? ''
    : JSON.stringify({ status: 'creating', id: null, end: null, deadline: null, missing: null });
  function publish(): void {
    const lacking = state.mediaBuyId ? machine.packagesLackingCreatives().length > 0 : null;
    const values = {
      status: state.status,
      id: state.mediaBuyId ?? null,
      end: state.endTime ?? null,
      deadline: state.creativeDeadline ?? null,
      missing: lacking,
    };
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
    const totals = state.reporting.totals;
    const parts = [`media buy ${state.mediaBuyId ?? '(creating)'} at ${state.sellerId}: ${state.status}`];
    if (totals.impressions !== undefined) parts.push(`${totals.impressions} impressions`);
    if (totals.spend !== undefined) parts.push(`spend ${totals.spend}`);
    if (Object.keys(state.reporting.missingPeriods).length > 0)
      parts.push(`${Object.keys(state.reporting.missingPeriods).length} periods missing`);
    if (state.creativeAlerts.length > 0)
      parts.push(`creative alert: ${state.creativeAlerts[state.creativeAlerts.length - 1].kind}`);
    if (state.governance) parts.push(`governance: ${state.governance.status}`);
    setCurrentDetails(parts.join(' · '));
  }

  // ---- child operations ------------------------------------------------------------------------------------------
  async function runOperation(
    task: string,
    callerKey: string,
    params: Record<string, unknown>,
  ): Promise<OperationState> {
    const operationId = operationIdFor(task, callerKey);
    const operationInput: OperationInput = {
      sellerId: state.sellerId,
      task,
      params,
      // The buy's operations act for its tenant: its seller credentials, its notifications, its AdcpTenant.
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
    };
    const child = await startChild(OPERATION_WORKFLOW_TYPE, {
      workflowId: operationId,
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
      return (await child.result()) as OperationState;
    } catch (failure) {
      // An operation that failed or was rejected ends its workflow Failed with its state in the details.
      const state = operationStateFromFailure(failure);
      if (state) return state;
      throw failure;
    }
  }

  /** The approved intent check of the create, and the seller's error if it made no buy, for report_plan_outcome. */
  let createCheck: { checkId?: string; governanceContext?: string } | undefined;
  let createError: { code: string; message: string } | undefined;

  async function createBuy(): Promise<void> {
    let params: Record<string, unknown> = { ...input.params };
    if (governance && state.governance) {
      const verdict = await governSpend(governance, state.governance, {
        action: 'create',
        tool: 'create_media_buy',
        payload: params,
        onChange: publish,
      });
      if (!verdict.ok) {
        // Nothing was sent to the seller: the buy ends here with the agent's (or the person's) explanation.
        machine.fail(verdict.code.toLowerCase(), verdict.message, {
          code: verdict.code,
          message: verdict.message,
          recovery: 'terminal',
        });
        return;
      }
      params = {
        ...verdict.payload,
        ...(verdict.governanceContext ? { governance_context: verdict.governanceContext } : {}),
      };
      createCheck = {
        ...(verdict.checkId ? { checkId: verdict.checkId } : {}),
        ...(verdict.governanceContext ? { governanceContext: verdict.governanceContext } : {}),
      };
    }
    const reporting = input.reporting;
    if (reporting) {
      const chosen = chooseReportingFrequency(reporting);
      if (chosen.frequency) state.reporting.frequency = chosen.frequency;
      if (reporting.url && chosen.frequency) {
        params.reporting_webhook = {
          url: reporting.url,
          reporting_frequency: chosen.frequency,
          ...(reporting.requestedMetrics?.length ? { requested_metrics: reporting.requestedMetrics } : {}),
          ...(reporting.authentication ? { authentication: reporting.authentication } : {}),
        };
        state.reporting.registered = {
          url: reporting.url,
          frequency: chosen.frequency,
          ...(reporting.requestedMetrics ? { requestedMetrics: reporting.requestedMetrics } : {}),
          ...(chosen.note ? { note: chosen.note } : {}),
        };
      } else if (chosen.note) {
        machine.anomaly('create', chosen.note);
      }
    }
    let operation: OperationState;
    try {
      operation = await runOperation('create_media_buy', state.buyKey, params);
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      const error = errorOf(failure);
      machine.fail(
        'create_failed',
        `The create_media_buy operation ${state.createOperationId} failed: ${error.message}`,
      );
      return;
    }
    if (operation.status !== 'completed') {
      const error = operation.errors?.[0];
      if (error) createError = { code: error.code, message: error.message };
      if (operation.status === 'rejected') {
        machine.observeStatus(
          'rejected',
          'create',
          operation.message ?? error?.message ?? 'the seller rejected the buy',
        );
        return;
      }
      machine.fail(
        operation.failure?.reason ?? operation.status,
        operation.failure?.message ?? operation.message ?? `create_media_buy ended ${operation.status}`,
        error,
      );
      return;
    }
    const snapshot = mediaBuySnapshotFrom(operation.result);
    if (!snapshot.mediaBuyId) {
      machine.fail(
        'no_media_buy_id',
        `create_media_buy completed without a media_buy_id (operation ${state.createOperationId}).`,
      );
      return;
    }
    machine.applySnapshot(snapshot, 'create');
    // A 3.0 seller's answer may lose the buy's status under the envelope's: a buy without creatives waits for them.
    if (state.status === 'creating')
      machine.observeStatus('pending_creatives', 'create', 'the answer named no media-buy status');
  }

  /** report_plan_outcome for the governed create: the seller's buy, or why there is none. */
  async function reportCreateOutcome(caller: GovernanceCaller, governanceState: MediaBuyState['governance'] & object) {
    const packages = Object.values(state.packages);
    const committed = packages.reduce((sum, pkg) => sum + (pkg.budget ?? 0), 0);
    await reportPlanOutcome(caller, governanceState, {
      action: 'create',
      ...createCheck,
      ...(state.mediaBuyId
        ? {
            outcome: 'completed' as const,
            sellerResponse: {
              seller_reference: state.mediaBuyId,
              ...(packages.length > 0 ? { committed_budget: committed } : {}),
              packages: packages.map((pkg) => ({
                package_id: pkg.packageId,
                ...(pkg.productId ? { product_id: pkg.productId } : {}),
                ...(pkg.budget !== undefined ? { budget: pkg.budget } : {}),
              })),
              ...(state.creativeDeadline ? { creative_deadline: state.creativeDeadline } : {}),
            },
          }
        : {
            outcome: 'failed' as const,
            error: createError ?? {
              code: state.failure?.reason ?? (state.status === 'rejected' ? 'REJECTED' : 'FAILED'),
              message: state.failure?.message ?? `The seller did not make the buy (${state.status}).`,
            },
          }),
    });
  }

  // ---- changes ---------------------------------------------------------------------------------------------------
  async function runChange(queued: { record: ChangeRecord; request: ChangeRequest }): Promise<void> {
    const { record, request } = queued;
    const finish = (outcome: ChangeRecord['outcome'], error?: ChangeRecord['error']) => {
      record.outcome = outcome;
      record.finishedAt = iso(Date.now());
      record.statusAfter = state.status;
      if (error) record.error = error;
      finished.set(record.sequence, {
        sequence: record.sequence,
        outcome,
        status: state.status,
        ...(error ? { error } : {}),
        ...(record.operationId ? { operationId: record.operationId } : {}),
      });
      publish();
    };
    // The buy may have moved since the change was accepted (an earlier change, a report): check again.
    const verdict = validateChange(state, request);
    if (!verdict.ok) {
      finish('refused', { code: verdict.code, message: verdict.message });
      return;
    }
    const callerKey = `${state.buyKey}.change-${record.sequence}`;
    record.operationId = operationIdFor('update_media_buy', callerKey);
    record.outcome = 'running';
    publish();
    let updateParams = updateParamsFor(state.mediaBuyId!, request, {
      account,
      ...(state.revision !== undefined ? { revision: state.revision } : {}),
    });
    // Governance: a change that raises budget is a spend, checked before the seller hears of it.
    let changeCheck: { checkId?: string; governanceContext?: string } | undefined;
    if (governance && state.governance && raisesBudget(state.packages, request)) {
      const verdict = await governSpend(governance, state.governance, {
        action: `change-${record.sequence}`,
        tool: 'update_media_buy',
        payload: updateParams,
        onChange: publish,
      });
      if (!verdict.ok) {
        finish('refused', { code: verdict.code, message: verdict.message });
        return;
      }
      updateParams = {
        ...verdict.payload,
        ...(verdict.governanceContext ? { governance_context: verdict.governanceContext } : {}),
      };
      changeCheck = {
        ...(verdict.checkId ? { checkId: verdict.checkId } : {}),
        ...(verdict.governanceContext ? { governanceContext: verdict.governanceContext } : {}),
      };
    }
    let operation: OperationState;
    try {
      operation = await runOperation('update_media_buy', callerKey, updateParams);
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      finish('failed', errorOf(failure));
      return;
    }
    record.taskStatus = operation.status;
    if (governance && state.governance && changeCheck) {
      const error = operation.errors?.[0];
      await reportPlanOutcome(governance, state.governance, {
        action: `change-${record.sequence}`,
        ...changeCheck,
        ...(operation.status === 'completed'
          ? {
              outcome: 'completed' as const,
              sellerResponse: { seller_reference: state.mediaBuyId!, ...(operation.result ?? {}) },
            }
          : {
              outcome: 'failed' as const,
              error: {
                code: error?.code ?? operation.status,
                message: error?.message ?? operation.message ?? `update_media_buy ended ${operation.status}`,
              },
            }),
      });
    }
    // A 3.0 seller answers a cancel with the buy's `status: "canceled"` at the root, where the task status lives
    // (3.1 moved it to media_buy_status): the operation reads it as its task canceled. Not canceled by anyone here
    // and without errors, it is the buy that was canceled; a read confirms it.
    const canceledBuy =
      request.kind === 'cancel' &&
      operation.status === 'canceled' &&
      !operation.cancellation &&
      !operation.errors?.length;
    if (canceledBuy) {
      machine.anomaly(
        'change',
        `${record.operationId} ended "canceled": read as the 3.0 root status of the canceled buy`,
      );
      refreshRequested = true;
    }
    if (operation.status !== 'completed' && !canceledBuy) {
      const error = operation.errors?.[0];
      // The seller's error whole (recovery, field, suggestion, details): the buyer needs them to correct the change.
      finish(
        'failed',
        error ?? {
          code: operation.failure?.reason ?? operation.status,
          message: operation.failure?.message ?? operation.message ?? `update_media_buy ended ${operation.status}`,
        },
      );
      return;
    }
    const answered = mediaBuySnapshotFrom(operation.result);
    machine.applyChangeAnswer(request.kind, answered);
    // A cancel the seller "completed" while answering the buy as still live (e.g. @adcp/sdk's decisioning examples,
    // whose update_media_buy handles only `paused` and echoes the status): the buy was not canceled. Recording it as
    // applied would tell the buyer a live, spending buy is over. ('completed' is left alone: in 3.1 the root status
    // of an answer may be the task's.)
    const liveAfterCancel =
      request.kind === 'cancel' &&
      !canceledBuy &&
      answered.status !== undefined &&
      !TERMINAL_MEDIA_BUY_STATUSES.has(answered.status);
    if (liveAfterCancel) {
      const message = `${record.operationId} completed, but the seller answered the buy as "${answered.status}", not "canceled": the cancel did not take effect. The buy is still ${answered.status} at the seller; ask the seller to cancel it, or cancel again.`;
      machine.anomaly('change', message);
      finish('failed', { code: 'CANCEL_NOT_APPLIED', message });
      return;
    }
    if (request.kind === 'budget') {
      for (const [packageId, budget] of Object.entries(request.budgets ?? {})) {
        const pkg = state.packages[packageId];
        if (
          pkg &&
          mediaBuySnapshotFrom(operation.result).packages?.find((entry) => entry.packageId === packageId)?.budget ===
            undefined
        )
          pkg.budget = budget;
      }
    }
    if (request.kind === 'dates') {
      if (request.startTime) state.startTime = request.startTime;
      if (request.endTime) state.endTime = request.endTime;
    }
    finish('applied');
  }

  async function runAttachment(queued: { sequence: number; attachment: CreativeAttachment }): Promise<void> {
    const { sequence, attachment } = queued;
    const callerKey = `${state.buyKey}.creatives-${sequence}`;
    const operationId = operationIdFor('sync_creatives', callerKey);
    const finish = (outcome: ChangeAnswer['outcome'], error?: ChangeRecord['error']) => {
      finished.set(sequence, { sequence, outcome, status: state.status, operationId, ...(error ? { error } : {}) });
      publish();
    };
    if (machine.terminal) {
      finish('refused', { code: 'INVALID_STATE', message: `The media buy is ${state.status}.` });
      return;
    }
    const assignments = Object.entries(attachment.assignments ?? {}).flatMap(([creative_id, packageIds]) =>
      packageIds.map((package_id) => ({ creative_id, package_id })),
    );
    const params: Record<string, unknown> = {
      creatives: attachment.creatives,
      ...(assignments.length > 0 ? { assignments } : {}),
      ...(account !== undefined ? { account } : {}),
    };
    let operation: OperationState;
    try {
      operation = await runOperation('sync_creatives', callerKey, params);
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      finish('failed', errorOf(failure));
      return;
    }
    if (operation.status !== 'completed') {
      const error = operation.errors?.[0];
      finish(
        'failed',
        error ?? { code: operation.status, message: operation.message ?? `sync_creatives ended ${operation.status}` },
      );
      return;
    }
    machine.applyCreativeSync(attachment, operation.result, operationId);
    // The seller moves the buy on (pending_creatives → pending_start) once creatives are in: poll.
    refreshRequested = true;
    finish('applied');
  }

  // ---- reads -----------------------------------------------------------------------------------------------------
  async function readBuy(): Promise<void> {
    if (!state.mediaBuyId) return;
    state.reads += 1;
    state.lastReadAt = iso(Date.now());
    try {
      const outcome = await reads.readMediaBuy({
        sellerId: state.sellerId,
        mediaBuyId: state.mediaBuyId,
        ...(account !== undefined ? { account } : {}),
      });
      if (outcome.snapshot) machine.applySnapshot(outcome.snapshot, 'read');
      else machine.anomaly('read', outcome.note ?? `get_media_buys did not return ${state.mediaBuyId}`);
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      const error = errorOf(failure);
      machine.anomaly('read', `get_media_buys failed (${error.code}: ${error.message}); reading again later`);
    }
    publish();
  }

  /** When the buy should next be read, by status: the reads follow the buy's calendar, not a fixed poll. */
  function nextReadAtMs(): number | undefined {
    if (!state.mediaBuyId || machine.terminal) return undefined;
    const last = state.lastReadAt ? Date.parse(state.lastReadAt) : Date.parse(state.startedAt);
    const start = state.startTime ? Date.parse(state.startTime) : undefined;
    const end = state.endTime ? Date.parse(state.endTime) : undefined;
    switch (state.status) {
      case 'pending_creatives':
        return last + 6 * HOUR;
      case 'pending_start':
        if (start !== undefined && last < start + MINUTE) return Math.min(start + MINUTE, last + DAY);
        return last + HOUR;
      case 'active':
      case 'paused':
        if (end !== undefined && last < end + MINUTE) return Math.min(end + MINUTE, last + DAY);
        return last + HOUR;
      default:
        return undefined;
    }
  }

  // ---- delivery ------------------------------------------------------------------------------------------------
  function drainInbox(): void {
    while (inbox.length > 0) {
      const delivery = inbox.shift()!;
      if (state.mediaBuyId && delivery.notification.mediaBuyId !== state.mediaBuyId) {
        machine.anomaly(
          'report',
          `report for media buy ${delivery.notification.mediaBuyId} refused: this workflow follows ${state.mediaBuyId}`,
        );
        continue;
      }
      machine.receiveReport(delivery.notification, Date.parse(delivery.receivedAt) || Date.now());
    }
    publish();
  }

  /** Pulls the missing periods (windowed get_media_buy_delivery), at most MAX_PULL_DAYS per request. */
  async function fill(keys: string[], late: boolean): Promise<void> {
    const frequency = state.reporting.frequency;
    if (!frequency || !state.mediaBuyId || keys.length === 0) return;
    if (late) state.reporting.latePulls += 1;
    const sorted = [...keys].sort();
    while (sorted.length > 0) {
      const firstMs = Date.parse(sorted[0]);
      const chunkEnd = floorPeriod(firstMs, 'daily') + MAX_PULL_DAYS * DAY;
      const chunk = sorted.filter((key) => Date.parse(key) < chunkEnd);
      sorted.splice(0, chunk.length);
      const lastMs = Date.parse(chunk[chunk.length - 1]);
      try {
        const outcome = await reads.pullDelivery({
          sellerId: state.sellerId,
          mediaBuyId: state.mediaBuyId,
          ...(account !== undefined ? { account } : {}),
          startDate: dateOf(firstMs),
          endDate: dateOf(floorPeriod(lastMs, 'daily') + DAY),
          timeGranularity: frequency,
        });
        if (outcome.unsupportedGranularity)
          machine.anomaly('pull', `the seller has no ${frequency} windowed pull: ${outcome.note ?? ''}`);
        machine.applyPull(
          outcome.pull ?? { mediaBuyId: state.mediaBuyId, totals: {}, byPackage: {}, windows: [] },
          chunk,
        );
      } catch (failure) {
        if (isCancellation(failure)) throw failure;
        const error = errorOf(failure);
        machine.anomaly('pull', `get_media_buy_delivery failed (${error.code}: ${error.message})`);
        machine.applyPull({ mediaBuyId: state.mediaBuyId, totals: {}, byPackage: {}, windows: [] }, chunk);
      }
    }
    publish();
  }

  /** When a missing report counts as late, on a coarse grid so each report does not move the workflow's timer. */
  function lateCheckAtMs(): number | undefined {
    const lateAt = machine.lateAtMs();
    const frequency = state.reporting.frequency;
    if (lateAt === undefined || !frequency || machine.terminal) return undefined;
    const grid = Math.min(4 * periodMs(frequency), 6 * HOUR);
    return Math.ceil(lateAt / grid) * grid;
  }

  /** After the buy ended: how long to wait for the final report before settling with a lifetime pull. */
  function settleAtMs(): number | undefined {
    if (terminalAtMs === undefined) return undefined;
    if (!state.mediaBuyId || !state.reporting.registered || state.reporting.finalReport) return terminalAtMs;
    const frequency = state.reporting.frequency ?? 'daily';
    return terminalAtMs + state.reporting.expectedDelayMinutes * MINUTE + fillGraceMs(frequency) + HOUR;
  }

  async function settle(): Promise<void> {
    const frequency = state.reporting.frequency;
    if (state.mediaBuyId && frequency && state.startTime) {
      const endMs = Math.min(state.endTime ? Date.parse(state.endTime) : terminalAtMs!, terminalAtMs!);
      machine.noteMissingThrough(nextPeriod(floorPeriod(endMs - 1, frequency), frequency), Date.now());
      // One last try for every period still missing, without the grace.
      for (let attempt = 0; attempt < 3 && Object.keys(state.reporting.missingPeriods).length > 0; attempt++) {
        await fill(Object.keys(state.reporting.missingPeriods), false);
      }
    }
    if (state.mediaBuyId && state.status !== 'rejected' && state.status !== 'create_failed') {
      try {
        const outcome = await reads.pullDelivery({
          sellerId: state.sellerId,
          mediaBuyId: state.mediaBuyId,
          ...(account !== undefined ? { account } : {}),
        });
        if (outcome.pull) machine.reconcile(outcome.pull);
        else machine.anomaly('pull', `no lifetime delivery to reconcile with: ${outcome.note ?? 'not found'}`);
      } catch (failure) {
        if (isCancellation(failure)) throw failure;
        const error = errorOf(failure);
        machine.anomaly('pull', `the lifetime pull failed (${error.code}: ${error.message}); totals are unreconciled`);
      }
    }
    state.done = true;
    publish();
  }

  // ---- creative alerts ---------------------------------------------------------------------------------------------
  function fireCreativeAlerts(): void {
    for (const alert of machine.dueCreativeAlerts(Date.now(), alertLeadMs, alertsFired)) {
      alertsFired.add(`${alert.kind}:${alert.deadline}`);
      state.creativeAlerts.push(alert);
      if (state.creativeAlerts.length > 20) state.creativeAlerts.shift();
      metricMeter
        .createCounter('adcp_media_buy_creative_alerts', 'alerts', 'Creative deadline alerts raised')
        .add(1, { agent: state.sellerId, kind: alert.kind });
      log.warn(`Creative deadline alert (${alert.kind})`, {
        buyKey: state.buyKey,
        mediaBuyId: state.mediaBuyId,
        deadline: alert.deadline,
        packagesLacking: alert.packagesLacking,
      });
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

  function nextDueMs(): number | undefined {
    const candidates = [
      nextReadAtMs(),
      machine.nextFillAtMs(),
      lateCheckAtMs(),
      machine.nextCreativeAlertAt(alertLeadMs, alertsFired),
      settleAtMs(),
    ].filter((value): value is number => value !== undefined);
    return candidates.length > 0 ? Math.min(...candidates) : undefined;
  }

  // ---- the main loop -----------------------------------------------------------------------------------------------
  publish();
  if (state.status === 'creating') {
    await createBuy();
    if (!machine.terminal) refreshRequested = false;
    if (governance && state.governance && createCheck) await reportCreateOutcome(governance, state.governance);
    publish();
  }
  while (!state.done) {
    if (inbox.length > 0) drainInbox();
    if (machine.terminal && terminalAtMs === undefined) {
      const last = state.statusHistory[state.statusHistory.length - 1];
      terminalAtMs = last ? Date.parse(last.at) : Date.now();
    }
    // Changes and attachments, one at a time, in the order they were accepted.
    if (changeQueue.length > 0 || attachmentQueue.length > 0) {
      const nextChange = changeQueue[0];
      const nextAttachment = attachmentQueue[0];
      if (nextChange && (!nextAttachment || nextChange.record.sequence < nextAttachment.sequence)) {
        await runChange(nextChange);
        changeQueue.shift();
      } else {
        await runAttachment(nextAttachment!);
        attachmentQueue.shift();
      }
      continue;
    }
    const now = Date.now();
    if (refreshRequested || (nextReadAtMs() ?? Infinity) <= now) {
      refreshRequested = false;
      await readBuy();
      continue;
    }
    const due = machine.periodsDueForFill(now);
    if (due.length > 0) {
      await fill(due, false);
      continue;
    }
    if ((lateCheckAtMs() ?? Infinity) <= now && (machine.lateAtMs() ?? Infinity) <= now) {
      machine.noteLate(now);
      const late = machine.periodsDueForFill(now + fillGraceMs(state.reporting.frequency!));
      await fill(late, true);
      continue;
    }
    fireCreativeAlerts();
    machine.seal(now);
    if ((settleAtMs() ?? Infinity) <= now) {
      await settle();
      break;
    }
    if (workflowInfo().historyLength >= HISTORY_EVENT_LIMIT || workflowInfo().continueAsNewSuggested) {
      armTimer(undefined);
      await condition(allHandlersFinished);
      if (changeQueue.length === 0 && attachmentQueue.length === 0 && inbox.length === 0) {
        const next: MediaBuyCarried = {
          state,
          seenEventKeys: [...seenEventKeys],
          inbox,
          queuedChanges: changeQueue,
          queuedAttachments: attachmentQueue,
          changeSequence,
          answeredUpdates: [...answeredUpdates],
          alertsFired: [...alertsFired],
        };
        return await continueAsNew<typeof adcpMediaBuy>({ ...input, indexed, carried: next });
      }
      continue;
    }
    armTimer(nextDueMs());
    publish();
    await condition(
      () =>
        inbox.length > 0 ||
        changeQueue.length > 0 ||
        attachmentQueue.length > 0 ||
        refreshRequested ||
        (timer?.fired ?? false),
    );
  }
  armTimer(undefined);
  await condition(allHandlersFinished);
  return state;
}
