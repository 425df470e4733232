/**
 * The media-buy workflow's public surface: its input, state and message definitions. Imported by the workflow, the
 * API routers, the typed client and tests. Message names are stable: renaming one breaks running buys.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { AdcpError, ShapingRecord } from '../protocol';
import type {
  DeliveryPeriod,
  JsonRecord,
  MediaBuyStatus,
  MetricTotals,
  ReportingNotification,
} from '../protocol/media-buy';
import type { GovernanceSettings, GovernanceState } from './governance';

export const MEDIA_BUY_WORKFLOW_TYPE = 'adcpMediaBuy';

/** The buy's workflow ID, from the buyer's key: a retried create finds the same buy, a reporting URL can name it. */
export function mediaBuyWorkflowId(buyKey: string): string {
  return `adcp-media-buy-${buyKey}`;
}

export const MEDIA_BUY_ID_PATTERN = /^adcp-media-buy-[A-Za-z0-9_.:-]{1,200}$/;

/** Where the gateway takes a buy's delivery reports: `<base>/webhooks/adcp-reporting/<seller>/<buy workflow id>`. */
export const REPORTING_WEBHOOK_PATH = '/webhooks/adcp-reporting/';

/**
 * The reporting URL of ours that names the buy's seller, from the form without it (`<base>/webhooks/adcp-reporting/
 * <buy workflow id>`, which the clients build): the gateway then knows whose verification to apply without asking
 * Temporal. Any other URL (a caller's own receiver, or one that already names the seller) is returned unchanged.
 */
export function reportingUrlNamingSeller(url: string, sellerId: string, workflowId: string): string {
  const bare = `${REPORTING_WEBHOOK_PATH}${encodeURIComponent(workflowId)}`;
  if (!url.endsWith(bare)) return url;
  return `${url.slice(0, url.length - bare.length)}${REPORTING_WEBHOOK_PATH}${encodeURIComponent(sellerId)}/${encodeURIComponent(workflowId)}`;
}

/** Before the seller's answer the buy is `creating`; a create that did not make a buy ends `create_failed`. */
export type MediaBuyLifecycle = MediaBuyStatus | 'creating' | 'create_failed';

export type MediaBuyEventSource = 'create' | 'change' | 'creatives' | 'read' | 'report' | 'pull' | 'orchestrator';

export interface MediaBuyTransition {
  from: MediaBuyLifecycle;
  to: MediaBuyLifecycle;
  source: MediaBuyEventSource;
  at: string;
  note?: string;
}

export type ReportingFrequency = 'hourly' | 'daily' | 'monthly';

export interface ReportingSettings {
  /** Where the seller posts reports (the gateway's /webhooks/adcp-reporting/<buy workflow id>). Absent: pulls only. */
  url?: string;
  /** What the buyer wants; the workflow picks one every product supports (see chooseReportingFrequency). */
  frequency?: ReportingFrequency;
  /** `available_reporting_frequencies` of each product in the buy, when the caller knows them (from get_products). */
  productFrequencies?: ReportingFrequency[][];
  requestedMetrics?: string[];
  /** The products' `expected_delay_minutes`: how long after `next_expected_at` a report may still come. */
  expectedDelayMinutes?: number;
  /**
   * @deprecated Credentials here would be stored in history in clear; MediaBuyClient refuses them. For sellers on
   * HMAC or Bearer webhooks the worker adds a per-buy credential at the call (activities/media-buy.ts).
   */
  authentication?: { schemes: string[]; credentials: string };
}

export interface MediaBuyInput {
  buyKey: string;
  sellerId: string;
  /** The create_media_buy arguments (packages, start_time, end_time, account, brand, ...). */
  params: Record<string, unknown>;
  reporting?: ReportingSettings;
  /** Creative deadline alerts: how long before `creative_deadline` the first alert fires (default 48 h). */
  creativeAlertLeadMs?: number;
  requestedBy?: string;
  /** The tenant that owns the buy: recorded in state, passed to its operations (their credentials). */
  tenant?: string;
  /** The authenticated principal that created it (`tenant/id`). */
  principal?: string;
  /** Index the buy and its operations (false on servers without the AdCP search attributes). */
  indexed?: boolean;
  /**
   * A governance agent for the buy's plan: an intent check_governance before create_media_buy and before
   * every change that raises budget, report_plan_outcome once the seller answered. Absent: no governance calls.
   */
  governance?: GovernanceSettings;
  /**
   * Continue-as-new once the run's history has this many events (default 3,000, well before Temporal's 4,096-event
   * suggestion; the server's suggestion is followed too). Tests lower it to cross a run boundary in seconds.
   */
  historyEventLimit?: number;
  /** Set only by continue-as-new. */
  carried?: MediaBuyCarried;
}

export type ChangeKind = 'pause' | 'resume' | 'budget' | 'dates' | 'packages' | 'cancel';

export interface ChangeRequest {
  kind: ChangeKind;
  requestedBy: string;
  /** The authenticated principal that asked (`tenant/id`), set by the client from the credentials. */
  principal?: string;
  reason?: string;
  /** budget: new budget per package id. */
  budgets?: Record<string, number>;
  /** dates: new flight dates (ISO 8601). */
  startTime?: string;
  endTime?: string;
  /** packages: update_media_buy `packages[]` entries (PATCH semantics), as sent to the seller. */
  packages?: Record<string, unknown>[];
}

/**
 * `applied`: a description of the buy after the change (a get_media_buys read, or where no read shows the buy the
 * seller's answer) shows it. `sent`: the seller answered success and nothing could show the change yet (no read, or
 * the change waits for the seller's approval). `failed`: the seller refused it, or answered success and its buy shows
 * otherwise (`<KIND>_NOT_APPLIED`). `refused`: not sent (the buy's status, the seller's actions, governance).
 */
export type ChangeOutcome = 'queued' | 'running' | 'applied' | 'sent' | 'failed' | 'refused';

export type ChangeRefusal = {
  ok: false;
  /** SERVICE_UNAVAILABLE: not now (the buy is continuing as new); the same request sent again is taken. */
  code: 'INVALID_STATE' | 'NOT_CANCELLABLE' | 'ACTION_NOT_ALLOWED' | 'INVALID_REQUEST' | 'SERVICE_UNAVAILABLE';
  message: string;
};
export type ChangeVerdict = { ok: true } | ChangeRefusal;

/** The refusal of a change or attachment that arrived while the buy continues as new: send the same one again. */
export const CONTINUING_REFUSAL = 'SERVICE_UNAVAILABLE';
/** How long the clients send a change or attachment again while the buy refuses it for its continue-as-new. */
export const SEND_AGAIN_WHILE_CONTINUING_MS = 20_000;

/**
 * Sends again (the same update ID: nothing was accepted) while the buy answers CONTINUING_REFUSAL: it finishes the
 * changes it accepted, continues as new and takes new ones in the next run (workflows/media-buy/machine.ts,
 * notWhileContinuing). Past `limitMs` the refusal reaches the caller, who may send it again later.
 */
export async function sendAgainWhileContinuing<T>(
  continuing: (error: unknown) => boolean,
  send: () => Promise<T>,
  limitMs: number = SEND_AGAIN_WHILE_CONTINUING_MS,
): Promise<T> {
  const started = Date.now();
  for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 2_000)) {
    try {
      return await send();
    } catch (error) {
      if (!continuing(error) || Date.now() - started + delayMs > limitMs) throw error;
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}

export const CHANGE_KINDS: readonly ChangeKind[] = ['pause', 'resume', 'budget', 'dates', 'packages', 'cancel'];

function isIsoTime(value: unknown): value is string {
  return typeof value === 'string' && !Number.isNaN(Date.parse(value));
}

/**
 * The shape of a change alone (no state): what the typed client checks before it sends one, and the workflow's
 * validator checks first.
 */
export function checkChangeShape(request: ChangeRequest | undefined): ChangeVerdict {
  const refuse = (message: string): ChangeRefusal => ({ ok: false, code: 'INVALID_REQUEST', message });
  if (!request || typeof request !== 'object') return refuse('A change is an object with kind and requestedBy.');
  if (!CHANGE_KINDS.includes(request.kind)) {
    return refuse(`kind must be one of ${CHANGE_KINDS.join(', ')}; got "${String(request.kind)}".`);
  }
  if (
    typeof request.requestedBy !== 'string' ||
    request.requestedBy.trim() === '' ||
    request.requestedBy.length > 200
  ) {
    return refuse('requestedBy must say who asks for the change (1-200 characters).');
  }
  if (request.kind === 'budget') {
    const budgets = request.budgets;
    if (!budgets || typeof budgets !== 'object' || Object.keys(budgets).length === 0)
      return refuse('budgets must map package ids to new budgets.');
    for (const [packageId, amount] of Object.entries(budgets)) {
      if (typeof amount !== 'number' || !Number.isFinite(amount) || amount <= 0)
        return refuse(`budgets.${packageId} must be a positive number.`);
    }
  }
  if (request.kind === 'dates') {
    if (request.startTime === undefined && request.endTime === undefined)
      return refuse('dates needs startTime, endTime or both.');
    if (request.startTime !== undefined && !isIsoTime(request.startTime))
      return refuse('startTime must be an ISO 8601 time.');
    if (request.endTime !== undefined && !isIsoTime(request.endTime))
      return refuse('endTime must be an ISO 8601 time.');
    if (request.startTime && request.endTime && Date.parse(request.startTime) >= Date.parse(request.endTime)) {
      return refuse('startTime must be before endTime.');
    }
  }
  if (request.kind === 'packages' && (!Array.isArray(request.packages) || request.packages.length === 0)) {
    return refuse('packages must list the package changes (update_media_buy packages[] entries).');
  }
  return { ok: true };
}

export interface ChangeRecord {
  sequence: number;
  kind: ChangeKind;
  requestedBy: string;
  /** The authenticated principal that asked (`tenant/id`), when the change came with credentials. */
  principal?: string;
  reason?: string;
  requestedAt: string;
  /** The update_media_buy operation (child workflow) that carried it. */
  operationId?: string;
  outcome: ChangeOutcome;
  /** The seller's task status at the end, and its errors. */
  taskStatus?: string;
  error?: AdcpError | { code: string; message: string };
  finishedAt?: string;
  /** What showed the change made: a read of the buy after it, or (no read could show the buy) the seller's answer. */
  verifiedBy?: 'read' | 'answer';
  /** Why a change is `sent` rather than `applied`, or what the seller's buy showed instead. */
  note?: string;
  /** The update's ID (idempotency: a repeated ID answers this record). */
  updateId?: string;
  statusAfter?: MediaBuyLifecycle;
}

export interface CreativeAttachment {
  /** sync_creatives `creatives[]` (creative assets as the seller expects them). */
  creatives: Record<string, unknown>[];
  /** creative_id → package ids it should run on. */
  assignments?: Record<string, string[]>;
  requestedBy: string;
  /** The authenticated principal that attached them (`tenant/id`). */
  principal?: string;
}

export interface CreativeRecord {
  creativeId: string;
  /** sync_creatives `action`: created, updated, unchanged, failed, deleted. */
  action?: string;
  /** Review state (processing, pending_review, approved, rejected, suspended, archived). */
  status?: string;
  errors?: { code: string; message: string }[];
  packageIds: string[];
  syncedAt: string;
  operationId?: string;
}

export interface CreativeAlert {
  kind: 'deadline_approaching' | 'deadline_passed';
  at: string;
  deadline: string;
  packagesLacking: string[];
}

export interface PackageState {
  packageId: string;
  productId?: string;
  budget?: number;
  paused?: boolean;
  creativeDeadline?: string;
  creativeIds: string[];
}

/** One period kept open for replacement (adjusted / window_update / a pull), with where its numbers came from. */
export interface OpenPeriod {
  end: string;
  byPackage: Record<string, MetricTotals>;
  source: 'report' | 'pull';
  isFinal?: boolean;
  measurementWindow?: string;
  revisions?: number;
}

export interface DeliveryAdjustment {
  at: string;
  periodStart: string;
  notificationType: string;
  before?: MetricTotals;
  after: MetricTotals;
  note?: string;
}

export interface Reconciliation {
  at: string;
  seller: { totals: MetricTotals; byPackage: Record<string, MetricTotals> };
  ours: MetricTotals;
  impressionsVariance: number;
  spendVariance: number;
  /** >2% impressions or >1% spend is a discrepancy; >10% / >5% a large one (the reporting page's thresholds). */
  outcome: 'reconciled' | 'discrepancy' | 'large_discrepancy';
  /** Whether the seller's numbers replaced ours (the API is the source of truth). */
  replaced: boolean;
  note?: string;
}

export interface ReportingState {
  registered?: { url: string; frequency: ReportingFrequency; requestedMetrics?: string[]; note?: string };
  frequency?: ReportingFrequency;
  expectedDelayMinutes: number;
  /** Sequence numbers: every number up to `contiguousThrough` was seen; `receivedAbove` lists the ones after it. */
  contiguousThrough: number;
  receivedAbove: number[];
  highestSequence: number;
  /** Sequence numbers skipped when a later one arrived and not (yet) seen since. Bounded. */
  missingSequences: number[];
  reportsReceived: number;
  reportsApplied: number;
  duplicates: number;
  reordered: number;
  sequenceGaps: number;
  /** Periods that had no report when a later one arrived (or were late), filled or not. */
  periodGapsDetected: number;
  periodGapsFilled: number;
  /** Periods given up on after repeated pulls could not fill them (start times, bounded). */
  unfilledPeriods: string[];
  /** Periods still open for replacement, by start time. */
  periods: Record<string, OpenPeriod>;
  /** Periods before this start time are folded into `sealed` and no longer kept one by one. */
  sealedBefore?: string;
  sealed: { byPackage: Record<string, MetricTotals>; periods: number };
  /** Running totals by package (sealed + open periods). */
  byPackage: Record<string, MetricTotals>;
  totals: MetricTotals;
  periodsCounted: number;
  finalPeriods: number;
  lastReportAt?: string;
  nextExpectedAt?: string;
  /** Periods missing and when they were first noticed; the fill pulls them after a grace for reordered reports. */
  missingPeriods: Record<string, { since: string; attempts: number }>;
  delayedNotices: number;
  adjustments: DeliveryAdjustment[];
  adjustmentCount: number;
  /** An adjustment arrived for a period already folded away: the end-of-flight pull settles it. */
  sealedAdjustments: number;
  finalReport?: { at: string; sequenceNumber?: number };
  /**
   * The seller answered a windowed pull without windows (or refused its granularity): missing periods are pulled one
   * date range each (start-inclusive, end-exclusive dates) and filled from that range's numbers. Daily and monthly
   * periods only; an hourly period is not a date range.
   */
  rangeFill?: boolean;
  /**
   * Why no pull can fill a period at this seller (it refuses date ranges, or has no hourly windowed pull): missing
   * periods are given up at once, without a pull, and the lifetime pull at the end settles the numbers.
   */
  noFills?: string;
  /** get_media_buy_delivery requests made: windowed fills and the lifetime pull at the settle. */
  pulls: number;
  latePulls: number;
  /** Package ids delivery named that the buy does not have (each raised as an anomaly once; bounded). */
  unknownPackages?: string[];
  reconciliation?: Reconciliation;
  /** Verified report rows refused because they are another seller's or another buy's (newest last, bounded). */
  refusedReports?: {
    at: string;
    reason: ReportRefusal;
    /** The buy the row names. */
    mediaBuyId: string;
    /** The seller whose verification it passed, when that is not the buy's. */
    sellerId?: string;
    note: string;
  }[];
  reportsRefused?: number;
}

export interface MediaBuyState {
  buyKey: string;
  workflowId: string;
  sellerId: string;
  /** The tenant that owns the buy (absent in single-tenant/dev mode). */
  tenant?: string;
  /** The principal that created it (`tenant/id`). */
  principal?: string;
  mediaBuyId?: string;
  status: MediaBuyLifecycle;
  createOperationId: string;
  /** Fields this seller refused on the buy's reads, left out of every later read and pull (request shaping). */
  requestShaping?: ShapingRecord[];
  revision?: number;
  availableActions?: string[];
  health?: JsonRecord;
  impairments?: JsonRecord[];
  creativeDeadline?: string;
  startTime?: string;
  endTime?: string;
  packages: Record<string, PackageState>;
  /** The most recent status changes, oldest first (bounded; statusChangeCount counts them all). */
  statusHistory: MediaBuyTransition[];
  statusChangeCount: number;
  changes: ChangeRecord[];
  changeCount: number;
  creatives: Record<string, CreativeRecord>;
  creativeSyncs: number;
  creativeAlerts: CreativeAlert[];
  reporting: ReportingState;
  anomalies: { at: string; source: MediaBuyEventSource; note: string }[];
  anomalyCount: number;
  reads: number;
  lastReadAt?: string;
  failure?: { reason: string; message: string; error?: AdcpError };
  createdBy?: string;
  startedAt: string;
  updatedAt: string;
  /** Which run of the workflow this is (continue-as-new increments it). */
  run: number;
  /** Whether the workflow has finished following the buy. */
  done: boolean;
  /** Checks, decisions and outcome reports at the buy's governance agent (only for buys that name one). */
  governance?: GovernanceState;
}

/** A verified reporting webhook for this buy, as the gateway (or a test acting as it) signals it. */
export interface ReportDelivery {
  /** The envelope's idempotency_key (dedupe across retries of one fire). */
  eventKey: string;
  /** The fire's first (usually only) row. */
  notification: ReportingNotification;
  /**
   * Every row of a fire that carries several (a seller may aggregate buys in one fire), `notification` first: the
   * gateway signals the whole fire once and the buy takes its own rows, refusing the others. Absent: one row.
   */
  notifications?: ReportingNotification[];
  receivedAt: string;
  verifiedBy?: string;
  /** The seller whose verification the report passed (the gateway's); a report of another seller is refused. */
  sellerId?: string;
}

/** Why a verified report was not taken: another seller's, or a row about another buy. */
export type ReportRefusal = 'seller_mismatch' | 'media_buy_mismatch';

export interface MediaBuyCarried {
  state: MediaBuyState;
  seenEventKeys: string[];
  inbox: ReportDelivery[];
  queuedChanges: { record: ChangeRecord; request: ChangeRequest }[];
  queuedAttachments: { sequence: number; attachment: CreativeAttachment; updateId?: string }[];
  changeSequence: number;
  /** Update IDs already answered, with the change sequence they made (bounded). */
  answeredUpdates: [string, number][];
  alertsFired: string[];
  /** Changes answered `sent` that a later read may still confirm, with what they asked for. */
  unconfirmedChanges?: [number, ChangeRequest][];
  /** A refresh asked for that the run continued as new without reading: the next run reads first. */
  refreshRequested?: boolean;
}

export interface ChangeAnswer {
  sequence: number;
  outcome: ChangeOutcome;
  status: MediaBuyLifecycle;
  error?: ChangeRecord['error'];
  operationId?: string;
}

export const mediaBuyStateQuery = defineQuery<MediaBuyState>('mediaBuyState');
/** A verified reporting webhook for this buy (the gateway's reporting route, or a test). */
export const reportReceivedSignal = defineSignal<[ReportDelivery]>('reportReceived');
/** Ask the buy to read the seller now (get_media_buys): reconciliation, operators, a task webhook about the buy. */
export const refreshMediaBuySignal = defineSignal<[{ requestedBy: string }]>('refreshMediaBuy');
/** Pause, resume, budget, dates, packages, cancel: validated against the state machine before it enters history. */
export const changeMediaBuyUpdate = defineUpdate<ChangeAnswer, [ChangeRequest]>('changeMediaBuy');
/** sync_creatives and package assignment. */
export const attachCreativesUpdate = defineUpdate<ChangeAnswer, [CreativeAttachment]>('attachCreatives');

export type { DeliveryPeriod };
