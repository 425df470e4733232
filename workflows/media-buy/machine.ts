/**
 * The media buy's state machine, pure and deterministic: every rule of a buy's life, from the create to the settle
 * after its flight. It records what handlers hand it (reports, refresh requests, changes, creative attachments),
 * decides the next step of the workflow's loop (`next`: create, run a change, read the buy, pull delivery, settle,
 * continue-as-new, wait until a time), and applies what each step came back with. The workflow (./workflow.ts) only
 * wires handlers, timers, activities and child operations to it; unit tests drive it directly, with seeded random
 * interleavings.
 *
 * Rules by topic: ./lifecycle.ts (the moves), ./changes.ts (which change a status accepts, what it sends),
 * ./delivery.ts (reports, pulls, gaps, sealing, reconciliation).
 */
import { type AdcpError, type RequestShaping, type ShapingRecord, operationIdFor, withShaping } from '../../protocol';
import {
  type DeliveryPull,
  type MediaBuySnapshot,
  type ReportingNotification,
  mediaBuySnapshotFrom,
} from '../../protocol/media-buy';
import type { OperationState } from '../../contract/operation';
import type { GovernanceState } from '../../contract/governance';
import type {
  ChangeAnswer,
  ChangeRecord,
  ChangeRequest,
  ChangeVerdict,
  CreativeAlert,
  CreativeAttachment,
  MediaBuyCarried,
  MediaBuyEventSource,
  MediaBuyInput,
  MediaBuyLifecycle,
  MediaBuyState,
  ReportDelivery,
  ReportRefusal,
  ReportingFrequency,
} from '../../contract/media-buy';
import { CONTINUING_REFUSAL, reportingUrlNamingSeller } from '../../contract/media-buy';
import {
  type ChangeEvidence,
  changeEvidence,
  notAppliedCode,
  statusAfterChange,
  updateParamsFor,
  validateChange,
} from './changes';
import {
  DeliveryLedger,
  type ReportEffect,
  chooseReportingFrequency,
  fillGraceMs,
  floorPeriod,
  iso,
  newReportingState,
  nextPeriod,
  periodMs,
} from './delivery';
import { isTerminal, reachable } from './lifecycle';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const MAX_HISTORY = 50;
export const MAX_CHANGES = 50;
const MAX_ANOMALIES = 50;
const MAX_CREATIVE_ALERTS = 20;
const MAX_SEEN_EVENT_KEYS = 500;
const MAX_REFUSED_REPORTS = 20;
const MAX_ANSWERED_UPDATES = 200;
/** Continue-as-new well before Temporal's 4,096-event suggestion threshold, whether the server suggests it or not. */
export const HISTORY_EVENT_LIMIT = 3_000;
export const DEFAULT_CREATIVE_ALERT_LEAD_MS = 48 * HOUR;
/** A windowed pull covers at most this many days (a gap older than that is pulled in several requests). */
const MAX_PULL_DAYS = 7;
/** At the settle, every period still missing gets this many more pulls, without the grace. */
const SETTLE_FILL_ROUNDS = 3;

// ---- what the workflow hands the machine, and what the machine asks of it ------------------------------------------

type Failure = { error: { code: string; message: string } };
/** A child operation's end: its final state, or why it could not run at all. */
export type OperationOutcome = { operation: OperationState } | Failure;
/** A get_media_buys read of the buy. */
export type ReadOutcome = { snapshot?: MediaBuySnapshot; note?: string; shaping?: ShapingRecord[] } | Failure;
/** A get_media_buy_delivery pull. */
export type PullOutcome =
  { pull?: DeliveryPull; unsupportedGranularity?: boolean; note?: string; shaping?: ShapingRecord[] } | Failure;

/** The arguments of the buy's reads and pulls (the media-buy activities' inputs). */
export interface ReadRequest {
  sellerId: string;
  mediaBuyId: string;
  account?: unknown;
  /** Fields this seller refused on reads, left out from then on (request shaping). */
  requestShaping?: RequestShaping;
}
export interface PullRequest extends ReadRequest {
  startDate?: string;
  endDate?: string;
  timeGranularity?: ReportingFrequency;
}

/** The next thing the workflow's loop does. */
export type MediaBuyStep =
  | { kind: 'create' }
  | { kind: 'change'; sequence: number }
  | { kind: 'attach'; sequence: number }
  | { kind: 'read'; request: ReadRequest }
  | { kind: 'pull'; request: PullRequest; periods: string[] }
  | { kind: 'lifetime-pull'; request: PullRequest }
  | { kind: 'continue-as-new' }
  | { kind: 'wait'; untilMs?: number }
  | { kind: 'done' };

export interface HistoryInfo {
  length: number;
  continueAsNewSuggested: boolean;
  /**
   * Whether a full history continues as new ahead of reads and other due work (true when absent). The workflow asks
   * its patch: a run from before the patch read first, and its history replays that.
   */
  continueAsNewFirst?: () => boolean;
}

/** A spend the governance agent approved: the payload to send, and what correlates its outcome report. */
export interface GovernedSpend {
  payload: Record<string, unknown>;
  governanceContext?: string;
  checkId?: string;
}

/** report_plan_outcome's arguments for a governed spend (see workflows/governance). */
export interface PlanOutcomeReport {
  action: string;
  outcome: 'completed' | 'failed';
  checkId?: string;
  governanceContext?: string;
  sellerResponse?: Record<string, unknown>;
  error?: { code: string; message: string };
}

export interface MachineHooks {
  now(): number;
  onStatusChange?(from: MediaBuyLifecycle, to: MediaBuyLifecycle, source: MediaBuyEventSource): void;
  onAnomaly?(source: MediaBuyEventSource, note: string): void;
  onCreativeAlert?(alert: CreativeAlert): void;
  /** See LedgerHooks.expectFirstReport (./delivery.ts): the workflow's patch. */
  expectFirstReport?(): boolean;
  /** See LedgerHooks.quietWhilePending (./delivery.ts): the workflow's patch. */
  quietWhilePending?(): boolean;
  /**
   * Whether a windowed pull answered without windows turns the buy's fills into date-range pulls
   * (`reporting.rangeFill`): the workflow's patch (absent: yes). Asked only when such an answer comes back.
   */
  rangeFill?(): boolean;
}

interface QueuedChange {
  record: ChangeRecord;
  request: ChangeRequest;
}
interface QueuedAttachment {
  sequence: number;
  attachment: CreativeAttachment;
  updateId?: string;
}

function pushBounded<T>(list: T[], item: T, max: number): void {
  list.push(item);
  if (list.length > max) list.splice(0, list.length - max);
}

function failed(outcome: OperationOutcome | ReadOutcome | PullOutcome): outcome is Failure {
  return 'error' in outcome && outcome.error !== undefined;
}

function dateOf(ms: number): string {
  return iso(ms).slice(0, 10);
}

function withGovernance(spend: GovernedSpend): Record<string, unknown> {
  return { ...spend.payload, ...(spend.governanceContext ? { governance_context: spend.governanceContext } : {}) };
}

function checkOf(spend: GovernedSpend): { checkId?: string; governanceContext?: string } {
  return {
    ...(spend.checkId ? { checkId: spend.checkId } : {}),
    ...(spend.governanceContext ? { governanceContext: spend.governanceContext } : {}),
  };
}

export function newMediaBuyState(input: {
  buyKey: string;
  workflowId: string;
  sellerId: string;
  createOperationId: string;
  requestedBy?: string;
  nowMs: number;
  expectedDelayMinutes?: number;
  params: Record<string, unknown>;
  tenant?: string;
  principal?: string;
  governance?: GovernanceState;
}): MediaBuyState {
  const at = iso(input.nowMs);
  const start =
    typeof input.params.start_time === 'string' && input.params.start_time !== 'asap'
      ? input.params.start_time
      : undefined;
  const end = typeof input.params.end_time === 'string' ? input.params.end_time : undefined;
  return {
    buyKey: input.buyKey,
    workflowId: input.workflowId,
    sellerId: input.sellerId,
    // Tenancy: only buys created with a tenant carry these fields.
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
    ...(input.principal !== undefined ? { principal: input.principal } : {}),
    status: 'creating',
    createOperationId: input.createOperationId,
    ...(start ? { startTime: start } : {}),
    ...(end ? { endTime: end } : {}),
    packages: {},
    statusHistory: [],
    statusChangeCount: 0,
    changes: [],
    changeCount: 0,
    creatives: {},
    creativeSyncs: 0,
    creativeAlerts: [],
    reporting: newReportingState(input.expectedDelayMinutes),
    anomalies: [],
    anomalyCount: 0,
    reads: 0,
    ...(input.requestedBy ? { createdBy: input.requestedBy } : {}),
    startedAt: at,
    updatedAt: at,
    run: 1,
    done: false,
    ...(input.governance ? { governance: input.governance } : {}),
  };
}

export class MediaBuyMachine {
  readonly delivery: DeliveryLedger;
  private readonly input: Omit<MediaBuyInput, 'carried'>;
  private readonly seenEventKeys: Set<string>;
  private readonly inbox: ReportDelivery[];
  private readonly changeQueue: QueuedChange[];
  private readonly attachmentQueue: QueuedAttachment[];
  private changeSequence: number;
  private readonly answeredUpdates: Map<string, number>;
  private readonly alertsFired: Set<string>;
  /** Answers of the changes and attachments finished in this run, for the update handlers waiting on them. */
  private readonly finished = new Map<number, ChangeAnswer>();
  private refreshRequested = false;
  /** A refresh the run continues as new without reading: the next run reads first (`carried.refreshRequested`). */
  private refreshCarried = false;
  private terminalAtMs: number | undefined;
  private createAttempted = false;
  private createCheck: { checkId?: string; governanceContext?: string } | undefined;
  private createError: { code: string; message: string } | undefined;
  /** Pulls decided and not yet made (a fill of several windows is several requests). */
  private readonly pullQueue: Extract<MediaBuyStep, { kind: 'pull' }>[] = [];
  private settling: { rounds: number; lifetimePulled: boolean } | undefined;
  /** Changes answered `sent` that a later read may still confirm (bounded by the changes kept on record). */
  private readonly unconfirmed: Map<number, ChangeRequest>;
  /** What the seller's answer said about a change whose verifying read is in flight. */
  private readonly verifying = new Map<
    number,
    { answer: ChangeEvidence; answeredStatus?: string; pendingApproval: boolean }
  >();

  /** A buy's first run, or a run continued from `input.carried`. */
  static start(
    input: MediaBuyInput,
    context: { workflowId: string; nowMs: number; governance?: GovernanceState },
    hooks: MachineHooks,
  ): MediaBuyMachine {
    const carried = input.carried;
    const state =
      carried?.state ??
      newMediaBuyState({
        buyKey: input.buyKey,
        workflowId: context.workflowId,
        sellerId: input.sellerId,
        createOperationId: operationIdFor('create_media_buy', input.buyKey),
        ...(input.requestedBy ? { requestedBy: input.requestedBy } : {}),
        nowMs: context.nowMs,
        ...(input.reporting?.expectedDelayMinutes !== undefined
          ? { expectedDelayMinutes: input.reporting.expectedDelayMinutes }
          : {}),
        params: input.params,
        ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
        ...(input.principal !== undefined ? { principal: input.principal } : {}),
        ...(context.governance ? { governance: context.governance } : {}),
      });
    if (carried) state.run += 1;
    return new MediaBuyMachine(state, hooks, input);
  }

  constructor(
    readonly state: MediaBuyState,
    private readonly hooks: MachineHooks,
    input?: MediaBuyInput,
  ) {
    const { carried, ...rest } = input ?? { buyKey: state.buyKey, sellerId: state.sellerId, params: {} };
    this.input = rest;
    this.seenEventKeys = new Set(carried?.seenEventKeys ?? []);
    this.inbox = [...(carried?.inbox ?? [])];
    this.changeQueue = [...(carried?.queuedChanges ?? [])];
    this.attachmentQueue = [...(carried?.queuedAttachments ?? [])];
    this.changeSequence = carried?.changeSequence ?? 0;
    this.answeredUpdates = new Map(carried?.answeredUpdates ?? []);
    this.alertsFired = new Set(carried?.alertsFired ?? []);
    this.unconfirmed = new Map(carried?.unconfirmedChanges ?? []);
    this.refreshRequested = carried?.refreshRequested ?? false;
    this.delivery = new DeliveryLedger(state, {
      now: () => hooks.now(),
      anomaly: (source, note) => this.anomaly(source, note),
      observeStatus: (status, source) => this.observeStatus(status, source),
      touch: () => this.touch(),
      ...(hooks.expectFirstReport ? { expectFirstReport: () => hooks.expectFirstReport!() } : {}),
      ...(hooks.quietWhilePending ? { quietWhilePending: () => hooks.quietWhilePending!() } : {}),
    });
  }

  get terminal(): boolean {
    return isTerminal(this.state.status);
  }

  private get account(): unknown {
    return this.input.params.account;
  }

  private get alertLeadMs(): number {
    return this.input.creativeAlertLeadMs ?? DEFAULT_CREATIVE_ALERT_LEAD_MS;
  }

  private touch(): void {
    this.state.updatedAt = iso(this.hooks.now());
  }

  anomaly(source: MediaBuyEventSource, note: string): void {
    pushBounded(this.state.anomalies, { at: iso(this.hooks.now()), source, note }, MAX_ANOMALIES);
    this.state.anomalyCount += 1;
    this.hooks.onAnomaly?.(source, note);
    this.touch();
  }

  // ---- lifecycle -----------------------------------------------------------------------------------------------

  /** A status the seller (or a report, or the orchestrator) states. Terminal statuses are never left. */
  observeStatus(to: MediaBuyLifecycle, source: MediaBuyEventSource, note?: string): boolean {
    const from = this.state.status;
    if (from === to) return false;
    if (this.terminal) {
      this.anomaly(source, `the buy is ${from} and stays so; ${source} said ${to}`);
      return false;
    }
    if (!reachable(from, to))
      this.anomaly(source, `unexpected move ${from} → ${to} (applied: the seller is the source of truth for its buy)`);
    pushBounded(
      this.state.statusHistory,
      { from, to, source, at: iso(this.hooks.now()), ...(note ? { note } : {}) },
      MAX_HISTORY,
    );
    this.state.statusChangeCount += 1;
    this.state.status = to;
    this.touch();
    this.hooks.onStatusChange?.(from, to, source);
    return true;
  }

  /** What a seller answer or read says about the buy. Older revisions never overwrite newer ones (false then). */
  applySnapshot(snapshot: MediaBuySnapshot, source: MediaBuyEventSource): boolean {
    const state = this.state;
    if (snapshot.revision !== undefined && state.revision !== undefined && snapshot.revision < state.revision) {
      this.anomaly(source, `stale answer ignored (revision ${snapshot.revision} < ${state.revision})`);
      return false;
    }
    if (snapshot.mediaBuyId && !state.mediaBuyId) state.mediaBuyId = snapshot.mediaBuyId;
    if (snapshot.revision !== undefined) state.revision = snapshot.revision;
    if (snapshot.availableActions) state.availableActions = snapshot.availableActions;
    if (snapshot.health) state.health = snapshot.health;
    if (snapshot.impairments) state.impairments = snapshot.impairments;
    if (snapshot.creativeDeadline) state.creativeDeadline = snapshot.creativeDeadline;
    if (snapshot.startTime) state.startTime = snapshot.startTime;
    if (snapshot.endTime) state.endTime = snapshot.endTime;
    for (const pkg of snapshot.packages ?? []) {
      const known = state.packages[pkg.packageId] ?? { packageId: pkg.packageId, creativeIds: [] };
      if (pkg.productId) known.productId = pkg.productId;
      if (pkg.budget !== undefined) known.budget = pkg.budget;
      if (pkg.paused !== undefined) known.paused = pkg.paused;
      if (pkg.creativeDeadline) known.creativeDeadline = pkg.creativeDeadline;
      if (pkg.creativeIds) this.replaceCreatives(known, pkg.creativeIds);
      for (const approval of pkg.creativeApprovals ?? []) {
        const creative = state.creatives[approval.creativeId];
        if (creative) creative.status = approval.status;
      }
      state.packages[pkg.packageId] = known;
    }
    if (snapshot.status) this.observeStatus(snapshot.status, source);
    else if (snapshot.rawStatus) this.anomaly(source, `unknown media-buy status "${snapshot.rawStatus}" ignored`);
    this.touch();
    return true;
  }

  /** A package's creatives as the seller lists them; the creatives' records follow (which packages they run on). */
  private replaceCreatives(pkg: MediaBuyState['packages'][string], creativeIds: string[]): void {
    for (const creativeId of pkg.creativeIds) {
      const creative = this.state.creatives[creativeId];
      if (creative && !creativeIds.includes(creativeId))
        creative.packageIds = creative.packageIds.filter((id) => id !== pkg.packageId);
    }
    for (const creativeId of creativeIds) {
      const creative = this.state.creatives[creativeId];
      if (creative && !creative.packageIds.includes(pkg.packageId)) creative.packageIds.push(pkg.packageId);
    }
    pkg.creativeIds = [...creativeIds];
  }

  fail(reason: string, message: string, error?: AdcpError): void {
    this.state.failure = { reason, message, ...(error ? { error } : {}) };
    this.observeStatus('create_failed', 'create', message);
  }

  // ---- what handlers hand the machine ------------------------------------------------------------------------------

  /** A verified reporting webhook (signal): recorded once per event key, acted on by the loop. */
  /**
   * A verified fire from the gateway, whatever buy its URL named: a report another seller's verification passed is
   * refused before its event key is remembered (so no other seller can shadow this seller's key), and each row of a
   * fire of several buys is its own delivery (`<key>:<media_buy_id>`); rows about another buy are refused when the
   * inbox is drained (receiveReport), once the buy's media_buy_id is known.
   */
  recordReport(delivery: ReportDelivery): void {
    if (!delivery || typeof delivery.eventKey !== 'string' || !delivery.notification) return;
    const rows = delivery.notifications?.length ? delivery.notifications : [delivery.notification];
    if (delivery.sellerId !== undefined && delivery.sellerId !== this.state.sellerId) {
      for (const row of rows)
        this.refuseReport(
          'seller_mismatch',
          row.mediaBuyId,
          `report verified as seller ${delivery.sellerId} posted to a buy of seller ${this.state.sellerId}`,
          delivery.sellerId,
        );
      return;
    }
    for (const notification of rows) {
      const eventKey = rows.length > 1 ? `${delivery.eventKey}:${notification.mediaBuyId}` : delivery.eventKey;
      if (this.seenEventKeys.has(eventKey)) {
        this.state.reporting.duplicates += 1;
        continue;
      }
      this.seenEventKeys.add(eventKey);
      if (this.seenEventKeys.size > MAX_SEEN_EVENT_KEYS)
        this.seenEventKeys.delete(this.seenEventKeys.values().next().value!);
      const { notifications: _rows, ...one } = delivery;
      this.inbox.push({ ...one, eventKey, notification });
    }
  }

  private refuseReport(reason: ReportRefusal, mediaBuyId: string, note: string, sellerId?: string): void {
    const reporting = this.state.reporting;
    reporting.refusedReports ??= [];
    pushBounded(
      reporting.refusedReports,
      { at: iso(this.hooks.now()), reason, mediaBuyId, ...(sellerId !== undefined ? { sellerId } : {}), note },
      MAX_REFUSED_REPORTS,
    );
    reporting.reportsRefused = (reporting.reportsRefused ?? 0) + 1;
  }

  /** Read the seller now (signal: reconciliation, an operator, a task webhook about the buy). */
  requestRefresh(): void {
    this.refreshRequested = true;
  }

  /** Whether the loop has something to do before its next due time. */
  hasWork(): boolean {
    return (
      this.inbox.length > 0 || this.changeQueue.length > 0 || this.attachmentQueue.length > 0 || this.refreshRequested
    );
  }

  /** The change update's validator: against the status the buy will have once the changes already accepted ran. */
  checkChange(request: ChangeRequest, updateId?: string, history?: HistoryInfo): ChangeVerdict {
    if (updateId !== undefined && this.answeredUpdates.has(updateId)) return { ok: true }; // answers the first one
    const projected = this.changeQueue.reduce(
      (status, queued) => statusAfterChange(queued.request.kind, status),
      this.state.status,
    );
    // The seller's action list describes the buy now, not after the changes queued ahead: the change is checked
    // against it again when it runs.
    const { availableActions: _now, ...rest } = this.state;
    const verdict = validateChange(
      projected === this.state.status ? this.state : { ...rest, status: projected },
      request,
    );
    return verdict.ok ? this.notWhileContinuing(history) : verdict;
  }

  /**
   * Once history is full, a new change or attachment is refused for now (SERVICE_UNAVAILABLE: send it again): each
   * one accepted is answered in this run, so a steady stream of them would keep the run from ever continuing as new.
   * The run finishes what it accepted and continues; the same request sent again lands on the next run. The clients
   * send it again themselves (client/media-buy-client.ts; the campaign's activities retry).
   */
  private notWhileContinuing(history: HistoryInfo | undefined): ChangeVerdict {
    if (!history || !this.historyFull(history)) return { ok: true };
    return {
      ok: false,
      code: CONTINUING_REFUSAL,
      message:
        'The media buy is starting its next run (continue-as-new) and accepts no new change until then; send the same request again in a moment.',
    };
  }

  private historyFull(history: HistoryInfo): boolean {
    return history.length >= (this.input.historyEventLimit ?? HISTORY_EVENT_LIMIT) || history.continueAsNewSuggested;
  }

  /** A change accepted by the validator: queued (a repeated update ID names the change it made). */
  acceptChange(request: ChangeRequest, updateId?: string): number {
    const earlier = updateId !== undefined ? this.answeredUpdates.get(updateId) : undefined;
    if (earlier !== undefined) return earlier;
    const sequence = ++this.changeSequence;
    const record: ChangeRecord = {
      sequence,
      kind: request.kind,
      requestedBy: request.requestedBy,
      ...(request.principal !== undefined ? { principal: request.principal } : {}),
      ...(request.reason ? { reason: request.reason } : {}),
      requestedAt: iso(this.hooks.now()),
      outcome: 'queued',
      ...(updateId ? { updateId } : {}),
    };
    pushBounded(this.state.changes, record, MAX_CHANGES);
    this.state.changeCount += 1;
    this.changeQueue.push({ record, request });
    this.rememberUpdate(updateId, sequence);
    return sequence;
  }

  /** The answer of a change once it has one (in this run, or on record from an earlier run). */
  changeAnswer(sequence: number): ChangeAnswer | undefined {
    const done = this.finished.get(sequence);
    if (done) return done;
    const record = this.state.changes.find((change) => change.sequence === sequence);
    if (record && record.outcome !== 'queued' && record.outcome !== 'running') {
      return {
        sequence,
        outcome: record.outcome,
        status: this.state.status,
        ...(record.error ? { error: record.error } : {}),
        ...(record.operationId ? { operationId: record.operationId } : {}),
      };
    }
    return undefined;
  }

  /** The attach-creatives update's validator. */
  checkAttachment(attachment: CreativeAttachment, updateId?: string, history?: HistoryInfo): ChangeVerdict {
    if (updateId !== undefined && this.answeredUpdates.has(updateId)) return { ok: true };
    const refuse = (code: 'INVALID_STATE' | 'INVALID_REQUEST', message: string): ChangeVerdict => ({
      ok: false,
      code,
      message,
    });
    if (this.terminal)
      return refuse('INVALID_STATE', `The media buy is ${this.state.status}; creatives can no longer be attached.`);
    if (!this.state.mediaBuyId)
      return refuse(
        'INVALID_STATE',
        'The media buy is still being created; attach creatives once it has a media_buy_id.',
      );
    if (!attachment || typeof attachment.requestedBy !== 'string' || attachment.requestedBy.trim() === '')
      return refuse('INVALID_REQUEST', 'requestedBy must say who attaches the creatives.');
    if (!Array.isArray(attachment.creatives) || attachment.creatives.length === 0)
      return refuse('INVALID_REQUEST', 'creatives must list at least one creative.');
    for (const creative of attachment.creatives) {
      if (!creative || typeof creative.creative_id !== 'string' || creative.creative_id === '')
        return refuse('INVALID_REQUEST', 'every creative needs a creative_id.');
    }
    const known = Object.keys(this.state.packages);
    for (const [creativeId, packageIds] of Object.entries(attachment.assignments ?? {})) {
      if (!Array.isArray(packageIds))
        return refuse('INVALID_REQUEST', `assignments.${creativeId} must list package ids.`);
      const unknown = packageIds.filter((id) => known.length > 0 && !known.includes(id));
      if (unknown.length > 0)
        return refuse('INVALID_REQUEST', `assignments.${creativeId} names unknown package ${unknown.join(', ')}.`);
    }
    return this.notWhileContinuing(history);
  }

  /** An attachment accepted by the validator: queued, unless its update ID was answered before. */
  acceptAttachment(attachment: CreativeAttachment, updateId?: string): { sequence: number; repeated: boolean } {
    const earlier = updateId !== undefined ? this.answeredUpdates.get(updateId) : undefined;
    if (earlier !== undefined) return { sequence: earlier, repeated: true };
    const sequence = ++this.changeSequence;
    this.attachmentQueue.push({ sequence, attachment, ...(updateId ? { updateId } : {}) });
    this.rememberUpdate(updateId, sequence);
    return { sequence, repeated: false };
  }

  /** An attachment's answer; a repeated one that finished in an earlier run answers applied. */
  attachmentAnswer(sequence: number, repeated: boolean): ChangeAnswer | undefined {
    const done = this.finished.get(sequence);
    if (done) return done;
    if (repeated && !this.attachmentQueue.some((queued) => queued.sequence === sequence))
      return { sequence, outcome: 'applied', status: this.state.status };
    return undefined;
  }

  private rememberUpdate(updateId: string | undefined, sequence: number): void {
    if (!updateId) return;
    this.answeredUpdates.set(updateId, sequence);
    if (this.answeredUpdates.size > MAX_ANSWERED_UPDATES)
      this.answeredUpdates.delete(this.answeredUpdates.keys().next().value!);
  }

  // ---- the loop ------------------------------------------------------------------------------------------------

  /**
   * The next step, in this order: the create; reports received are applied; pulls already decided run; changes and
   * attachments one at a time in the order they were accepted (their Updates wait for them in this run);
   * continue-as-new when history is long; a read when asked for or due by the buy's calendar; missing periods past
   * their grace; late reports; creative alerts and sealing; the settle once the buy has ended; otherwise wait for the
   * next due time. Continue-as-new goes ahead of the reads and due work because the next run derives all of it from
   * the state it carries (a refresh asked for included), and a refresh that arrived during every read would otherwise
   * keep the run from ever reaching it.
   */
  next(nowMs: number, history: HistoryInfo): MediaBuyStep {
    // Reports wait for the create: only its answer says which buy they must name.
    if (this.state.status === 'creating' && !this.createAttempted) {
      this.createAttempted = true;
      return { kind: 'create' };
    }
    this.drainInbox();
    if (this.terminal && this.terminalAtMs === undefined) {
      const last = this.state.statusHistory[this.state.statusHistory.length - 1];
      this.terminalAtMs = last ? Date.parse(last.at) : nowMs;
    }
    if (this.state.done) return { kind: 'done' };
    const queuedPull = this.pullQueue.shift();
    if (queuedPull) return queuedPull;
    if (this.settling) return this.nextSettleStep();
    const nextChange = this.changeQueue[0];
    const nextAttachment = this.attachmentQueue[0];
    if (nextChange && (!nextAttachment || nextChange.record.sequence < nextAttachment.sequence))
      return { kind: 'change', sequence: nextChange.record.sequence };
    if (nextAttachment) return { kind: 'attach', sequence: nextAttachment.sequence };
    const historyFull = this.historyFull(history);
    if (historyFull && (history.continueAsNewFirst?.() ?? true)) return this.continueAsNew();
    if (this.refreshRequested || this.refreshCarried || (this.nextReadAtMs() ?? Infinity) <= nowMs) {
      this.refreshRequested = false;
      this.refreshCarried = false;
      const request = this.readRequest();
      if (request) {
        this.state.reads += 1;
        this.state.lastReadAt = iso(nowMs);
        return { kind: 'read', request };
      }
    }
    const due = this.delivery.periodsDueForFill(nowMs);
    if (due.length > 0 && this.queueFill(due, false)) return this.pullQueue.shift()!;
    if ((this.lateCheckAtMs() ?? Infinity) <= nowMs && (this.delivery.lateAtMs() ?? Infinity) <= nowMs) {
      this.delivery.noteLate(nowMs);
      const late = this.delivery.periodsDueForFill(nowMs + fillGraceMs(this.state.reporting.frequency!));
      if (this.queueFill(late, true)) return this.pullQueue.shift()!;
      return this.next(nowMs, history);
    }
    this.fireCreativeAlerts(nowMs);
    this.delivery.seal(nowMs);
    if ((this.settleAtMs() ?? Infinity) <= nowMs) {
      this.beginSettle(nowMs);
      return this.nextSettleStep();
    }
    if (historyFull) return this.continueAsNew();
    return { kind: 'wait', untilMs: this.nextDueMs() };
  }

  /** Continue-as-new, with a refresh still asked for carried to the next run (it is no work for this one). */
  private continueAsNew(): MediaBuyStep {
    if (this.refreshRequested) {
      this.refreshRequested = false;
      this.refreshCarried = true;
    }
    return { kind: 'continue-as-new' };
  }

  /** What the next run starts from (continue-as-new). Only taken when nothing is queued (see `hasWork`). */
  carry(): MediaBuyCarried {
    return {
      state: this.state,
      seenEventKeys: [...this.seenEventKeys],
      inbox: this.inbox,
      queuedChanges: this.changeQueue,
      queuedAttachments: this.attachmentQueue,
      changeSequence: this.changeSequence,
      answeredUpdates: [...this.answeredUpdates],
      alertsFired: [...this.alertsFired],
      unconfirmedChanges: [...this.unconfirmed],
      ...(this.refreshRequested || this.refreshCarried ? { refreshRequested: true } : {}),
    };
  }

  /** The earliest time something is due: a read, a fill, a late check, a creative alert, the settle. */
  nextDueMs(): number | undefined {
    const candidates = [
      this.nextReadAtMs(),
      this.delivery.nextFillAtMs(),
      this.lateCheckAtMs(),
      this.nextCreativeAlertAt(this.alertLeadMs, this.alertsFired),
      this.settleAtMs(),
    ].filter((value): value is number => value !== undefined);
    return candidates.length > 0 ? Math.min(...candidates) : undefined;
  }

  private drainInbox(): void {
    while (this.inbox.length > 0) {
      const delivery = this.inbox.shift()!;
      const receivedAtMs = Date.parse(delivery.receivedAt) || this.hooks.now();
      this.receiveReport(delivery.notification, receivedAtMs);
    }
  }

  /** One verified report: refused when it names another buy than the one this workflow follows. */
  receiveReport(notification: ReportingNotification, receivedAtMs: number): ReportEffect {
    if (this.state.mediaBuyId && notification.mediaBuyId !== this.state.mediaBuyId) {
      const note = `report for media buy ${notification.mediaBuyId} refused: this workflow follows ${this.state.mediaBuyId}`;
      this.anomaly('report', note);
      this.refuseReport('media_buy_mismatch', notification.mediaBuyId, note);
      return 'ignored';
    }
    return this.delivery.receiveReport(notification, receivedAtMs);
  }

  /** When the buy should next be read, by status: the reads follow the buy's calendar, not a fixed poll. */
  nextReadAtMs(): number | undefined {
    const state = this.state;
    if (!state.mediaBuyId || this.terminal) return undefined;
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

  /** When a missing report counts as late, on a coarse grid so each report does not move the workflow's timer. */
  private lateCheckAtMs(): number | undefined {
    const lateAt = this.delivery.lateAtMs();
    const frequency = this.state.reporting.frequency;
    if (lateAt === undefined || !frequency || this.terminal) return undefined;
    const grid = Math.min(4 * periodMs(frequency), 6 * HOUR);
    return Math.ceil(lateAt / grid) * grid;
  }

  /** After the buy ended: how long to wait for the final report before settling with a lifetime pull. */
  private settleAtMs(): number | undefined {
    if (this.terminalAtMs === undefined) return undefined;
    const reporting = this.state.reporting;
    if (!this.state.mediaBuyId || !reporting.registered || reporting.finalReport) return this.terminalAtMs;
    const frequency = reporting.frequency ?? 'daily';
    return this.terminalAtMs + reporting.expectedDelayMinutes * MINUTE + fillGraceMs(frequency) + HOUR;
  }

  private readRequest(): ReadRequest | undefined {
    if (!this.state.mediaBuyId) return undefined;
    const shaping = this.state.requestShaping;
    return {
      sellerId: this.state.sellerId,
      mediaBuyId: this.state.mediaBuyId,
      ...(this.account !== undefined ? { account: this.account } : {}),
      ...(shaping?.length ? { requestShaping: withShaping(undefined, shaping) } : {}),
    };
  }

  /** A read or pull left out a field the seller refused: kept, so every later read leaves it out too. */
  private learnShaping(outcome: { shaping?: ShapingRecord[] }): void {
    for (const record of outcome.shaping ?? []) {
      const known = (this.state.requestShaping ??= []);
      if (known.some((entry) => entry.tool === record.tool && entry.omitted === record.omitted)) continue;
      known.push(record);
      this.anomaly(
        'read',
        `${record.tool} at ${this.state.sellerId} is sent without ${record.omitted}: ${record.because}`,
      );
    }
  }

  /** Queues the windowed pulls for `keys` (at most MAX_PULL_DAYS each); false when there is nothing to pull. */
  private queueFill(keys: string[], late: boolean): boolean {
    const frequency = this.state.reporting.frequency;
    const read = this.readRequest();
    if (!frequency || !read || keys.length === 0) return false;
    if (this.state.reporting.noFills) {
      this.delivery.giveUp(keys);
      return false;
    }
    if (late) this.state.reporting.latePulls += 1;
    const sorted = [...keys].sort();
    if (this.state.reporting.rangeFill) {
      for (const key of sorted) {
        const startMs = Date.parse(key);
        this.pullQueue.push({
          kind: 'pull',
          periods: [key],
          request: { ...read, startDate: dateOf(startMs), endDate: dateOf(nextPeriod(startMs, frequency)) },
        });
      }
      return true;
    }
    while (sorted.length > 0) {
      const firstMs = Date.parse(sorted[0]);
      const chunkEnd = floorPeriod(firstMs, 'daily') + MAX_PULL_DAYS * DAY;
      const chunk = sorted.filter((key) => Date.parse(key) < chunkEnd);
      sorted.splice(0, chunk.length);
      const lastMs = Date.parse(chunk[chunk.length - 1]);
      this.pullQueue.push({
        kind: 'pull',
        periods: chunk,
        request: {
          ...read,
          startDate: dateOf(firstMs),
          endDate: dateOf(floorPeriod(lastMs, 'daily') + DAY),
          timeGranularity: frequency,
        },
      });
    }
    return true;
  }

  private beginSettle(nowMs: number): void {
    this.settling = { rounds: 0, lifetimePulled: false };
    const frequency = this.state.reporting.frequency;
    if (this.state.mediaBuyId && frequency && this.state.startTime) {
      const terminalAt = this.terminalAtMs!;
      const endMs = Math.min(this.state.endTime ? Date.parse(this.state.endTime) : terminalAt, terminalAt);
      this.delivery.noteMissingThrough(nextPeriod(floorPeriod(endMs - 1, frequency), frequency), nowMs);
    }
  }

  /** The settle: a last try for every period still missing (without the grace), the lifetime pull, then done. */
  private nextSettleStep(): MediaBuyStep {
    const settling = this.settling!;
    const missing = Object.keys(this.state.reporting.missingPeriods);
    if (this.state.startTime && settling.rounds < SETTLE_FILL_ROUNDS && missing.length > 0) {
      settling.rounds += 1;
      if (this.queueFill(missing, false)) return this.pullQueue.shift()!;
    }
    const read = this.readRequest();
    if (!settling.lifetimePulled && read && this.state.status !== 'rejected' && this.state.status !== 'create_failed') {
      settling.lifetimePulled = true;
      return { kind: 'lifetime-pull', request: read };
    }
    this.state.done = true;
    this.touch();
    return { kind: 'done' };
  }

  // ---- the create ----------------------------------------------------------------------------------------------

  /** What the governance agent checks before the create: the caller's create_media_buy arguments. */
  createPayload(): Record<string, unknown> {
    return { ...this.input.params };
  }

  /** The governance agent refused the create: nothing was sent, the buy ends with the agent's explanation. */
  refuseCreate(verdict: { code: string; message: string }): void {
    this.fail(verdict.code.toLowerCase(), verdict.message, {
      code: verdict.code,
      message: verdict.message,
      recovery: 'terminal',
    });
  }

  /** The create_media_buy arguments: the caller's (or the governed payload), with the reporting webhook to register. */
  /**
   * `sellerInReportingUrl`: this run's workflow ID when our reporting URL is to name the seller (the workflow decides,
   * behind a patch); undefined registers the URL as the input has it.
   */
  createParams(governed?: GovernedSpend, options: { sellerInReportingUrl?: string } = {}): Record<string, unknown> {
    const params = governed ? withGovernance(governed) : this.createPayload();
    if (governed) this.createCheck = checkOf(governed);
    const asked = this.input.reporting;
    if (!asked) return params;
    // Our reporting URL names the seller, so the gateway verifies a report without asking Temporal whose buy it is.
    const reporting =
      asked.url && options.sellerInReportingUrl !== undefined
        ? { ...asked, url: reportingUrlNamingSeller(asked.url, this.input.sellerId, options.sellerInReportingUrl) }
        : asked;
    const chosen = chooseReportingFrequency(reporting);
    if (chosen.frequency) this.state.reporting.frequency = chosen.frequency;
    if (reporting.url && chosen.frequency) {
      params.reporting_webhook = {
        url: reporting.url,
        reporting_frequency: chosen.frequency,
        ...(reporting.requestedMetrics?.length ? { requested_metrics: reporting.requestedMetrics } : {}),
        ...(reporting.authentication ? { authentication: reporting.authentication } : {}),
      };
      this.state.reporting.registered = {
        url: reporting.url,
        frequency: chosen.frequency,
        ...(reporting.requestedMetrics ? { requestedMetrics: reporting.requestedMetrics } : {}),
        ...(chosen.note ? { note: chosen.note } : {}),
      };
    } else if (chosen.note) {
      this.anomaly('create', chosen.note);
    }
    return params;
  }

  /** The create operation's end: the buy it made, a rejection, or why there is no buy. */
  applyCreate(outcome: OperationOutcome): void {
    this.applyCreateOutcome(outcome);
    // The create's answer is fresher than any refresh asked for while it ran.
    if (!this.terminal) this.refreshRequested = false;
  }

  private applyCreateOutcome(outcome: OperationOutcome): void {
    if (failed(outcome)) {
      this.fail(
        'create_failed',
        `The create_media_buy operation ${this.state.createOperationId} failed: ${outcome.error.message}`,
      );
      return;
    }
    const operation = outcome.operation;
    if (operation.status !== 'completed') {
      const error = operation.errors?.[0];
      if (error) this.createError = { code: error.code, message: error.message };
      if (operation.status === 'rejected') {
        this.observeStatus('rejected', 'create', operation.message ?? error?.message ?? 'the seller rejected the buy');
        return;
      }
      this.fail(
        operation.failure?.reason ?? operation.status,
        operation.failure?.message ?? operation.message ?? `create_media_buy ended ${operation.status}`,
        error,
      );
      return;
    }
    const snapshot = mediaBuySnapshotFrom(operation.result);
    if (!snapshot.mediaBuyId) {
      this.fail(
        'no_media_buy_id',
        `create_media_buy completed without a media_buy_id (operation ${this.state.createOperationId}).`,
      );
      return;
    }
    this.applySnapshot(snapshot, 'create');
    // A 3.0 seller's answer may lose the buy's status under the envelope's: a buy without creatives waits for them.
    if (this.state.status === 'creating')
      this.observeStatus('pending_creatives', 'create', 'the answer named no media-buy status');
  }

  /** report_plan_outcome for the governed create: the seller's buy, or why there is none. */
  createOutcomeReport(): PlanOutcomeReport {
    const state = this.state;
    const packages = Object.values(state.packages);
    const committed = packages.reduce((sum, pkg) => sum + (pkg.budget ?? 0), 0);
    if (!state.mediaBuyId)
      return {
        action: 'create',
        ...this.createCheck,
        outcome: 'failed',
        error: this.createError ?? {
          code: state.failure?.reason ?? (state.status === 'rejected' ? 'REJECTED' : 'FAILED'),
          message: state.failure?.message ?? `The seller did not make the buy (${state.status}).`,
        },
      };
    return {
      action: 'create',
      ...this.createCheck,
      outcome: 'completed',
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
    };
  }

  // ---- changes -------------------------------------------------------------------------------------------------

  private queuedChange(sequence: number): QueuedChange {
    const queued = this.changeQueue.find((entry) => entry.record.sequence === sequence);
    if (!queued) throw new Error(`No change ${sequence} is queued.`);
    return queued;
  }

  /**
   * Starts the change the loop picked: checked again (the buy may have moved since it was accepted), then the
   * update_media_buy arguments and the operation's caller key. Undefined when it is refused now.
   */
  beginChange(
    sequence: number,
  ): { request: ChangeRequest; callerKey: string; params: Record<string, unknown> } | undefined {
    const { record, request } = this.queuedChange(sequence);
    const verdict = validateChange(this.state, request);
    if (!verdict.ok) {
      this.finishChange(sequence, 'refused', { code: verdict.code, message: verdict.message });
      return undefined;
    }
    const callerKey = `${this.state.buyKey}.change-${sequence}`;
    record.operationId = operationIdFor('update_media_buy', callerKey);
    record.outcome = 'running';
    const params = updateParamsFor(this.state.mediaBuyId!, request, {
      account: this.account,
      ...(this.state.revision !== undefined ? { revision: this.state.revision } : {}),
    });
    return { request, callerKey, params };
  }

  /** The governance agent refused a change that raises spend: the seller never hears of it. */
  refuseChange(sequence: number, verdict: { code: string; message: string }): void {
    this.finishChange(sequence, 'refused', { code: verdict.code, message: verdict.message });
  }

  /** The update_media_buy arguments of a governed change. */
  governedChangeParams(spend: GovernedSpend): Record<string, unknown> {
    return withGovernance(spend);
  }

  /** report_plan_outcome for a governed change, once its operation ended. */
  changeOutcomeReport(
    sequence: number,
    spend: GovernedSpend,
    outcome: OperationOutcome,
  ): PlanOutcomeReport | undefined {
    if (failed(outcome)) return undefined;
    const operation = outcome.operation;
    const action = `change-${sequence}`;
    if (operation.status === 'completed')
      return {
        action,
        ...checkOf(spend),
        outcome: 'completed',
        sellerResponse: { seller_reference: this.state.mediaBuyId!, ...(operation.result ?? {}) },
      };
    const error = operation.errors?.[0];
    return {
      action,
      ...checkOf(spend),
      outcome: 'failed',
      error: {
        code: error?.code ?? operation.status,
        message: error?.message ?? operation.message ?? `update_media_buy ended ${operation.status}`,
      },
    };
  }

  /**
   * The change's update_media_buy operation ended. A refusal ends the change; a success is applied to the view as the
   * seller answered it, and the buy is read to verify it: the returned request (undefined when the change ended).
   */
  applyChangeOutcome(sequence: number, outcome: OperationOutcome): ReadRequest | undefined {
    const { record, request } = this.queuedChange(sequence);
    if (failed(outcome)) {
      this.finishChange(sequence, 'failed', outcome.error);
      return undefined;
    }
    const operation = outcome.operation;
    record.taskStatus = operation.status;
    // A 3.0 seller answers a cancel with the buy's `status: "canceled"` at the root, where the task status lives
    // (3.1 moved it to media_buy_status): the operation reads it as its task canceled. Not canceled by anyone here
    // and without errors, it is the buy that was canceled.
    const canceledBuy =
      request.kind === 'cancel' &&
      operation.status === 'canceled' &&
      !operation.cancellation &&
      !operation.errors?.length;
    if (canceledBuy)
      this.anomaly('change', `${record.operationId} ended "canceled": read as the 3.0 root status of the canceled buy`);
    if (operation.status !== 'completed' && !canceledBuy) {
      // The seller's error whole (recovery, field, suggestion, details): the buyer needs them to correct the change.
      this.finishChange(
        sequence,
        'failed',
        operation.errors?.[0] ?? {
          code: operation.failure?.reason ?? operation.status,
          message: operation.failure?.message ?? operation.message ?? `update_media_buy ended ${operation.status}`,
        },
      );
      return undefined;
    }
    const answered = mediaBuySnapshotFrom(operation.result);
    // The answer's other fields are the view at once; its status waits for the read (a canceled status is terminal,
    // and a read right after must be able to say the buy is still live).
    const { status: answeredStatus, rawStatus: _raw, ...rest } = answered;
    const current = this.applySnapshot(rest, 'change');
    this.verifying.set(sequence, {
      answer: canceledBuy
        ? { evidence: 'shown' }
        : current
          ? changeEvidence(request, answered)
          : { evidence: 'unknown' },
      ...(canceledBuy ? { answeredStatus: 'canceled' } : answeredStatus && current ? { answeredStatus } : {}),
      pendingApproval: answered.pendingApproval === true,
    });
    const read = this.readRequest()!;
    this.state.reads += 1;
    this.state.lastReadAt = iso(this.hooks.now());
    return read;
  }

  /**
   * The read after a change came back. The read is the judge where it shows the buy: `applied` when it shows the
   * change; when it shows otherwise, `<KIND>_NOT_APPLIED` if the seller's answer did not say the change was made, or
   * `sent` (not confirmed) if it did. Where no read shows the buy, the seller's answer decides the same way; `sent`
   * when nothing tells, or when the change waits for the seller's approval.
   */
  verifyChange(sequence: number, outcome: ReadOutcome): void {
    const { record, request } = this.queuedChange(sequence);
    const answered = this.verifying.get(sequence)!;
    this.verifying.delete(sequence);
    let why: string;
    let read: ChangeEvidence = { evidence: 'unknown' };
    if (!failed(outcome)) this.learnShaping(outcome);
    if (failed(outcome)) {
      why = `get_media_buys failed (${outcome.error.code}: ${outcome.error.message})`;
    } else if (!outcome.snapshot) {
      why = outcome.note ?? `get_media_buys did not return ${this.state.mediaBuyId}`;
    } else if (!this.applySnapshot(outcome.snapshot, 'read')) {
      why = `the read of the buy is older than its answer (revision ${outcome.snapshot.revision})`;
    } else {
      read = changeEvidence(request, outcome.snapshot);
      why = 'the read of the buy carries none of the changed fields';
    }
    const byRead = read.evidence !== 'unknown';
    // Without a read that speaks, the answer's own status is the seller's word on the buy.
    if (!byRead && answered.answeredStatus) this.observeStatus(answered.answeredStatus as MediaBuyLifecycle, 'change');
    const evidence = byRead ? read : answered.answer;
    const finish = (outcome: 'applied' | 'sent', note?: string) => {
      if (outcome === 'applied') record.verifiedBy = byRead ? 'read' : 'answer';
      if (note) record.note = note;
      if (outcome === 'sent') this.unconfirmed.set(sequence, request);
      this.finishChange(sequence, outcome);
    };
    if (evidence.evidence === 'shown') return finish('applied');
    if (answered.pendingApproval)
      return finish(
        'sent',
        `the seller accepted the ${request.kind} pending its approval (implementation_date null); later reads confirm it`,
      );
    if (evidence.evidence === 'unknown')
      return finish('sent', `the seller answered success, and nothing shows the ${request.kind} yet: ${why}`);
    if (byRead && answered.answer.evidence === 'shown') {
      const note = `the seller answered the ${request.kind} as made, and a read of the buy right after shows ${evidence.differences.join('; ')}: not confirmed; the view follows the read, later reads confirm it`;
      this.anomaly('change', `${record.operationId}: ${note}`);
      return finish('sent', note);
    }
    const message = this.notAppliedMessage(record, request, evidence.differences, byRead, answered.answeredStatus);
    this.anomaly('change', message);
    record.verifiedBy = byRead ? 'read' : 'answer';
    this.finishChange(sequence, 'failed', { code: notAppliedCode(request.kind), message });
  }

  /** A later read that shows a change still `sent` confirms it (applied, by read). */
  private confirmSentChanges(snapshot: MediaBuySnapshot): void {
    for (const [sequence, request] of this.unconfirmed) {
      const record = this.state.changes.find((change) => change.sequence === sequence);
      if (!record || record.outcome !== 'sent') {
        this.unconfirmed.delete(sequence);
        continue;
      }
      if (changeEvidence(request, snapshot).evidence !== 'shown') continue;
      this.unconfirmed.delete(sequence);
      record.outcome = 'applied';
      record.verifiedBy = 'read';
      record.note = `confirmed by a read at ${iso(this.hooks.now())} (${record.note ?? 'sent'})`;
      const answer = this.finished.get(sequence);
      if (answer) this.finished.set(sequence, { ...answer, outcome: 'applied' });
    }
  }

  private notAppliedMessage(
    record: ChangeRecord,
    request: ChangeRequest,
    differences: string[],
    byRead: boolean,
    answeredStatus: string | undefined,
  ): string {
    const status = this.state.status;
    if (request.kind === 'cancel') {
      const seen = byRead
        ? `the seller's buy reads "${status}"`
        : `the seller answered the buy as "${answeredStatus ?? status}"`;
      return `${record.operationId} completed, but ${seen}, not "canceled": the cancel did not take effect. The buy is still ${status} at the seller; ask the seller to cancel it, or cancel again.`;
    }
    const seen = byRead ? 'a read of the buy (get_media_buys) shows' : "the seller's answer shows";
    return `${record.operationId} completed, but ${seen} ${differences.join('; ')}: the ${request.kind} change did not take effect at the seller. The view shows the buy as the seller has it; send the change again, or ask the seller.`;
  }

  private finishChange(sequence: number, outcome: ChangeRecord['outcome'], error?: ChangeRecord['error']): void {
    const index = this.changeQueue.findIndex((entry) => entry.record.sequence === sequence);
    const [{ record, request }] = this.changeQueue.splice(index, 1);
    // A later change of the same field supersedes an earlier one still unconfirmed: a read cannot tell them apart.
    const family = (kind: ChangeRequest['kind']) => (kind === 'resume' ? 'pause' : kind);
    for (const [earlier, other] of this.unconfirmed)
      if (earlier < sequence && family(other.kind) === family(request.kind)) this.unconfirmed.delete(earlier);
    record.outcome = outcome;
    record.finishedAt = iso(this.hooks.now());
    record.statusAfter = this.state.status;
    if (error) record.error = error;
    this.finished.set(sequence, {
      sequence,
      outcome,
      status: this.state.status,
      ...(error ? { error } : {}),
      ...(record.operationId ? { operationId: record.operationId } : {}),
    });
  }

  // ---- creatives -------------------------------------------------------------------------------------------------

  /** Starts the attachment the loop picked: the sync_creatives arguments, or undefined when the buy has ended. */
  beginAttachment(sequence: number): { callerKey: string; params: Record<string, unknown> } | undefined {
    const queued = this.attachmentQueue.find((entry) => entry.sequence === sequence);
    if (!queued) throw new Error(`No attachment ${sequence} is queued.`);
    const callerKey = `${this.state.buyKey}.creatives-${sequence}`;
    if (this.terminal) {
      this.finishAttachment(sequence, 'refused', {
        code: 'INVALID_STATE',
        message: `The media buy is ${this.state.status}.`,
      });
      return undefined;
    }
    const assignments = Object.entries(queued.attachment.assignments ?? {}).flatMap(([creative_id, packageIds]) =>
      packageIds.map((package_id) => ({ creative_id, package_id })),
    );
    const params: Record<string, unknown> = {
      creatives: queued.attachment.creatives,
      ...(assignments.length > 0 ? { assignments } : {}),
      ...(this.account !== undefined ? { account: this.account } : {}),
    };
    return { callerKey, params };
  }

  /** The attachment's sync_creatives operation ended. */
  applyAttachment(sequence: number, outcome: OperationOutcome): void {
    const queued = this.attachmentQueue.find((entry) => entry.sequence === sequence)!;
    if (failed(outcome)) {
      this.finishAttachment(sequence, 'failed', outcome.error);
      return;
    }
    const operation = outcome.operation;
    if (operation.status !== 'completed') {
      this.finishAttachment(
        sequence,
        'failed',
        operation.errors?.[0] ?? {
          code: operation.status,
          message: operation.message ?? `sync_creatives ended ${operation.status}`,
        },
      );
      return;
    }
    this.applyCreativeSync(
      queued.attachment,
      operation.result,
      operationIdFor('sync_creatives', this.attachmentKey(sequence)),
    );
    // The seller moves the buy on (pending_creatives → pending_start) once creatives are in: read it.
    this.refreshRequested = true;
    this.finishAttachment(sequence, 'applied');
  }

  private attachmentKey(sequence: number): string {
    return `${this.state.buyKey}.creatives-${sequence}`;
  }

  private finishAttachment(sequence: number, outcome: ChangeAnswer['outcome'], error?: ChangeRecord['error']): void {
    const index = this.attachmentQueue.findIndex((entry) => entry.sequence === sequence);
    this.attachmentQueue.splice(index, 1);
    this.finished.set(sequence, {
      sequence,
      outcome,
      status: this.state.status,
      operationId: operationIdFor('sync_creatives', this.attachmentKey(sequence)),
      ...(error ? { error } : {}),
    });
  }

  applyCreativeSync(
    attachment: CreativeAttachment,
    result: Record<string, unknown> | undefined,
    operationId: string,
  ): void {
    const at = iso(this.hooks.now());
    const answered = new Map<string, Record<string, unknown>>();
    const rows = Array.isArray(result?.creatives) ? (result!.creatives as unknown[]) : [];
    for (const row of rows) {
      if (row && typeof row === 'object' && typeof (row as { creative_id?: unknown }).creative_id === 'string') {
        answered.set((row as { creative_id: string }).creative_id, row as Record<string, unknown>);
      }
    }
    for (const creative of attachment.creatives) {
      const creativeId = typeof creative.creative_id === 'string' ? creative.creative_id : undefined;
      if (!creativeId) continue;
      const row = answered.get(creativeId);
      const action = typeof row?.action === 'string' ? row.action : undefined;
      const errors = Array.isArray(row?.errors)
        ? (row!.errors as { code?: unknown; message?: unknown }[]).map((error) => ({
            code: String(error.code ?? 'ERROR'),
            message: String(error.message ?? ''),
          }))
        : undefined;
      const failed = action === 'failed' || (errors?.length ?? 0) > 0;
      const packageIds = failed ? [] : (attachment.assignments?.[creativeId] ?? []);
      const previous = this.state.creatives[creativeId];
      this.state.creatives[creativeId] = {
        creativeId,
        ...(action ? { action } : {}),
        ...(typeof row?.status === 'string'
          ? { status: row.status }
          : previous?.status
            ? { status: previous.status }
            : {}),
        ...(errors?.length ? { errors } : {}),
        packageIds: [...new Set([...(previous?.packageIds ?? []), ...packageIds])],
        syncedAt: at,
        operationId,
      };
      for (const packageId of packageIds) {
        const pkg = this.state.packages[packageId] ?? { packageId, creativeIds: [] };
        if (!pkg.creativeIds.includes(creativeId)) pkg.creativeIds.push(creativeId);
        this.state.packages[packageId] = pkg;
      }
    }
    this.state.creativeSyncs += 1;
    this.touch();
  }

  packagesLackingCreatives(): string[] {
    return Object.values(this.state.packages)
      .filter((pkg) => pkg.creativeIds.length === 0)
      .map((pkg) => pkg.packageId)
      .sort();
  }

  /** The creative-deadline alerts due at `nowMs` (each fires once per deadline), given the lead time. */
  dueCreativeAlerts(nowMs: number, leadMs: number, fired: ReadonlySet<string>): CreativeAlert[] {
    const deadline = this.state.creativeDeadline;
    if (!deadline || this.terminal) return [];
    const lacking = this.packagesLackingCreatives();
    if (lacking.length === 0) return [];
    const deadlineMs = Date.parse(deadline);
    const due: CreativeAlert[] = [];
    if (nowMs >= deadlineMs - leadMs && nowMs < deadlineMs && !fired.has(`deadline_approaching:${deadline}`)) {
      due.push({ kind: 'deadline_approaching', at: iso(nowMs), deadline, packagesLacking: lacking });
    }
    if (nowMs >= deadlineMs && !fired.has(`deadline_passed:${deadline}`)) {
      due.push({ kind: 'deadline_passed', at: iso(nowMs), deadline, packagesLacking: lacking });
    }
    return due;
  }

  /** When the next creative alert could fire (undefined when none can). */
  nextCreativeAlertAt(leadMs: number, fired: ReadonlySet<string>): number | undefined {
    const deadline = this.state.creativeDeadline;
    if (!deadline || this.terminal || this.packagesLackingCreatives().length === 0) return undefined;
    const deadlineMs = Date.parse(deadline);
    if (!fired.has(`deadline_approaching:${deadline}`) && !fired.has(`deadline_passed:${deadline}`))
      return deadlineMs - leadMs;
    if (!fired.has(`deadline_passed:${deadline}`)) return deadlineMs;
    return undefined;
  }

  private fireCreativeAlerts(nowMs: number): void {
    for (const alert of this.dueCreativeAlerts(nowMs, this.alertLeadMs, this.alertsFired)) {
      this.alertsFired.add(`${alert.kind}:${alert.deadline}`);
      pushBounded(this.state.creativeAlerts, alert, MAX_CREATIVE_ALERTS);
      this.hooks.onCreativeAlert?.(alert);
    }
  }

  // ---- reads and pulls -----------------------------------------------------------------------------------------

  /** A read of the buy (get_media_buys) came back. */
  applyRead(outcome: ReadOutcome): void {
    if (!failed(outcome)) this.learnShaping(outcome);
    if (failed(outcome)) {
      this.anomaly(
        'read',
        `get_media_buys failed (${outcome.error.code}: ${outcome.error.message}); reading again later`,
      );
      return;
    }
    if (!outcome.snapshot) {
      this.anomaly('read', outcome.note ?? `get_media_buys did not return ${this.state.mediaBuyId}`);
      return;
    }
    if (this.applySnapshot(outcome.snapshot, 'read')) this.confirmSentChanges(outcome.snapshot);
  }

  /**
   * A pull for missing periods came back: it fills what it can; a failure counts as an empty pull. A windowed pull
   * the seller answered without windows (or whose granularity it refused) turns this buy's fills into date-range
   * pulls, one a period (the fallback get_media_buy_delivery names), where periods are dates (daily, monthly): the
   * wanted periods are pulled again that way, with no attempt counted.
   */
  applyWindowPull(step: Extract<MediaBuyStep, { kind: 'pull' }>, outcome: PullOutcome): void {
    const empty: DeliveryPull = { mediaBuyId: step.request.mediaBuyId, totals: {}, byPackage: {}, windows: [] };
    const rangePull = !step.request.timeGranularity;
    const apply = (pull: DeliveryPull) =>
      rangePull ? this.delivery.applyRangePull(pull, step.periods[0]) : this.delivery.applyPull(pull, step.periods);
    const reporting = this.state.reporting;
    if (!failed(outcome)) this.learnShaping(outcome);
    if (failed(outcome)) {
      this.anomaly('pull', `get_media_buy_delivery failed (${outcome.error.code}: ${outcome.error.message})`);
      if (outcome.error.code === 'DATE_RANGE_NOT_SUPPORTED' && (this.hooks.rangeFill?.() ?? true)) {
        reporting.pulls += 1;
        this.noFills('the seller refuses date ranges (its products report lifetime only)', step.periods);
        return;
      }
      apply(empty);
      return;
    }
    const windowless = outcome.unsupportedGranularity || (outcome.pull !== undefined && !outcome.pull.windowed);
    if (!rangePull && windowless && reporting.frequency === 'hourly' && (this.hooks.rangeFill?.() ?? true)) {
      reporting.pulls += 1;
      if (outcome.pull?.status) this.observeStatus(outcome.pull.status, 'pull');
      this.noFills('the seller has no hourly windowed pull, and an hour is not a date range', step.periods);
      return;
    }
    const datePeriods = reporting.frequency === 'daily' || reporting.frequency === 'monthly';
    if (!rangePull && windowless && datePeriods && (reporting.rangeFill || (this.hooks.rangeFill?.() ?? true))) {
      if (!reporting.rangeFill)
        this.anomaly(
          'pull',
          `the seller answered a ${step.request.timeGranularity} windowed pull without windows${outcome.note ? ` (${outcome.note})` : ''}: missing periods are pulled one date range each`,
        );
      reporting.rangeFill = true;
      reporting.pulls += 1;
      if (outcome.pull?.status) this.observeStatus(outcome.pull.status, 'pull');
      this.queueFill(step.periods, false);
      return;
    }
    if (outcome.unsupportedGranularity)
      this.anomaly('pull', `the seller has no ${step.request.timeGranularity} windowed pull: ${outcome.note ?? ''}`);
    apply(outcome.pull ?? empty);
  }

  /**
   * No pull can fill a period at this seller: the periods missing now are given up, and so is each one later, at
   * once and without a pull (`reporting.noFills`); the lifetime pull at the end settles the numbers.
   */
  private noFills(reason: string, periods: string[]): void {
    const reporting = this.state.reporting;
    if (!reporting.noFills)
      this.anomaly('pull', `${reason}: missing periods are not pulled, the end's lifetime pull settles them`);
    reporting.noFills = reason;
    this.delivery.giveUp([...new Set([...periods, ...Object.keys(reporting.missingPeriods)])]);
  }

  /** The lifetime pull at the settle: the reconciliation with the seller's numbers. */
  applyLifetimePull(outcome: PullOutcome): void {
    this.state.reporting.pulls += 1;
    if (!failed(outcome)) this.learnShaping(outcome);
    if (failed(outcome)) {
      this.anomaly(
        'pull',
        `the lifetime pull failed (${outcome.error.code}: ${outcome.error.message}); totals are unreconciled`,
      );
      return;
    }
    if (outcome.pull) this.delivery.reconcile(outcome.pull);
    else this.anomaly('pull', `no lifetime delivery to reconcile with: ${outcome.note ?? 'not found'}`);
  }

  // ---- what operators see ----------------------------------------------------------------------------------------

  /** The buy's search attribute values (indexed buys). */
  indexValues(): {
    status: string;
    id: string | null;
    end: string | null;
    deadline: string | null;
    missing: boolean | null;
  } {
    const state = this.state;
    return {
      status: state.status,
      id: state.mediaBuyId ?? null,
      end: state.endTime ?? null,
      deadline: state.creativeDeadline ?? null,
      missing: state.mediaBuyId ? this.packagesLackingCreatives().length > 0 : null,
    };
  }

  /** One line for the Web UI's current details. */
  details(): string {
    const state = this.state;
    const totals = state.reporting.totals;
    const parts = [`media buy ${state.mediaBuyId ?? '(creating)'} at ${state.sellerId}: ${state.status}`];
    if (totals.impressions !== undefined) parts.push(`${totals.impressions} impressions`);
    if (totals.spend !== undefined) parts.push(`spend ${totals.spend}`);
    const missing = Object.keys(state.reporting.missingPeriods).length;
    if (missing > 0) parts.push(`${missing} periods missing`);
    if (state.creativeAlerts.length > 0)
      parts.push(`creative alert: ${state.creativeAlerts[state.creativeAlerts.length - 1].kind}`);
    if (state.governance) parts.push(`governance: ${state.governance.status}`);
    return parts.join(' · ');
  }
}
