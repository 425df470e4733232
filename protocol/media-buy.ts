/**
 * The media buy as a resource (not a task): its lifecycle status, what create/update/get_media_buys answers say about
 * it, and delivery reports (reporting webhooks and get_media_buy_delivery pulls), parsed into one shape. Pure and
 * I/O-free: the media-buy workflow, its activities and the reporting-webhook router all import it.
 */
import { asRecord } from './records';

/** AdCP 3.1 `enums/media-buy-status.json`. */
export const MEDIA_BUY_STATUSES = [
  'pending_creatives',
  'pending_start',
  'active',
  'paused',
  'completed',
  'rejected',
  'canceled',
] as const;
export type MediaBuyStatus = (typeof MEDIA_BUY_STATUSES)[number];

export const TERMINAL_MEDIA_BUY_STATUSES: ReadonlySet<MediaBuyStatus> = new Set(['completed', 'rejected', 'canceled']);

/** Spellings some sellers use for the same states (3.0 drafts, ad servers). */
const MEDIA_BUY_STATUS_ALIASES: Readonly<Record<string, MediaBuyStatus>> = {
  pending_activation: 'pending_start',
  scheduled: 'pending_start',
  cancelled: 'canceled',
  live: 'active',
  running: 'active',
  ended: 'completed',
};

export function normaliseMediaBuyStatus(value: unknown): MediaBuyStatus | undefined {
  if (typeof value !== 'string') return undefined;
  const lowered = value.trim().toLowerCase().replace(/-/g, '_');
  if ((MEDIA_BUY_STATUSES as readonly string[]).includes(lowered)) return lowered as MediaBuyStatus;
  return MEDIA_BUY_STATUS_ALIASES[lowered];
}

export type JsonRecord = Record<string, unknown>;

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** What one package of the buy looks like in a seller answer. */
export interface PackageSnapshot {
  packageId: string;
  productId?: string;
  budget?: number;
  paused?: boolean;
  creativeDeadline?: string;
  /**
   * Creative ids assigned to the package (creative_assignments / creative_ids / creatives / creative_approvals);
   * absent when the row carries none of those lists, empty when it carries them empty.
   */
  creativeIds?: string[];
  /** Per-creative approval as the seller reports it on the package (creative_approvals). */
  creativeApprovals?: { creativeId: string; status: string; reason?: string }[];
}

/** What a seller answer (create / update / get_media_buys row / delivery row) says about the buy. */
export interface MediaBuySnapshot {
  mediaBuyId?: string;
  status?: MediaBuyStatus;
  /** The status as sent when it is not one of the seven (kept for the record). */
  rawStatus?: string;
  revision?: number;
  /** `available_actions[].action` (3.1, authoritative) or the legacy `valid_actions`. */
  availableActions?: string[];
  health?: JsonRecord;
  impairments?: JsonRecord[];
  creativeDeadline?: string;
  startTime?: string;
  endTime?: string;
  packages?: PackageSnapshot[];
  updatedAt?: string;
  /** An update answer's `implementation_date: null`: the change waits for the seller's approval. */
  pendingApproval?: boolean;
}

function packageFrom(value: unknown): PackageSnapshot | undefined {
  const row = asRecord(value);
  const packageId = text(row?.package_id);
  if (!row || !packageId) return undefined;
  const snapshot: PackageSnapshot = { packageId };
  const productId = text(row.product_id);
  if (productId) snapshot.productId = productId;
  const budget = finite(row.budget) ?? finite(asRecord(row.budget)?.amount);
  if (budget !== undefined) snapshot.budget = budget;
  if (typeof row.paused === 'boolean') snapshot.paused = row.paused;
  const deadline = text(row.creative_deadline);
  if (deadline) snapshot.creativeDeadline = deadline;
  const ids = new Set<string>();
  // A list the row carries, even empty, is the seller's word on the package's creatives.
  let listed = false;
  for (const list of [row.creative_assignments, row.creative_ids, row.creatives]) {
    if (!Array.isArray(list)) continue;
    listed = true;
    for (const entry of list) {
      const id = typeof entry === 'string' ? entry : text(asRecord(entry)?.creative_id);
      if (id) ids.add(id);
    }
  }
  if (Array.isArray(row.creative_approvals)) {
    listed = true;
    snapshot.creativeApprovals = [];
    for (const entry of row.creative_approvals) {
      const approval = asRecord(entry);
      const creativeId = text(approval?.creative_id);
      if (!approval || !creativeId) continue;
      ids.add(creativeId);
      const reason = text(approval.rejection_reason);
      snapshot.creativeApprovals.push({
        creativeId,
        status: text(approval.approval_status) ?? 'unknown',
        ...(reason ? { reason } : {}),
      });
    }
  }
  if (listed) snapshot.creativeIds = [...ids];
  return snapshot;
}

/**
 * The buy as an answer describes it. 3.1 create/update answers carry the lifecycle in `media_buy_status` (preferred);
 * 3.0 answers and get_media_buys rows in `status`. `statusField` says which field may hold a media-buy status: in a
 * task answer's root, `status` is the task's own status unless it is one of the seven.
 */
export function mediaBuySnapshotFrom(value: unknown): MediaBuySnapshot {
  const row = asRecord(value) ?? {};
  const snapshot: MediaBuySnapshot = {};
  const mediaBuyId = text(row.media_buy_id);
  if (mediaBuyId) snapshot.mediaBuyId = mediaBuyId;
  const rawStatus = text(row.media_buy_status) ?? text(row.status);
  const status = normaliseMediaBuyStatus(row.media_buy_status) ?? normaliseMediaBuyStatus(row.status);
  if (status) snapshot.status = status;
  else if (rawStatus && text(row.media_buy_status)) snapshot.rawStatus = rawStatus;
  const revision = finite(row.revision);
  if (revision !== undefined) snapshot.revision = revision;
  if (Array.isArray(row.available_actions)) {
    snapshot.availableActions = row.available_actions
      .map((entry) => (typeof entry === 'string' ? entry : text(asRecord(entry)?.action)))
      .filter((entry): entry is string => !!entry);
  } else if (Array.isArray(row.valid_actions)) {
    snapshot.availableActions = row.valid_actions.filter((entry): entry is string => typeof entry === 'string');
  }
  const health = asRecord(row.health);
  if (health) snapshot.health = health;
  const impairments = Array.isArray(row.impairments)
    ? row.impairments
    : Array.isArray(health?.impairments)
      ? health.impairments
      : undefined;
  if (impairments) snapshot.impairments = impairments.map(asRecord).filter((entry): entry is JsonRecord => !!entry);
  const deadline = text(row.creative_deadline);
  if (deadline) snapshot.creativeDeadline = deadline;
  const start = text(row.start_time);
  if (start) snapshot.startTime = start;
  const end = text(row.end_time);
  if (end) snapshot.endTime = end;
  const updatedAt = text(row.updated_at);
  if (updatedAt) snapshot.updatedAt = updatedAt;
  // An update answer names the packages it changed in affected_packages (full packages in 3.1, ids only in 3.0).
  const packages = Array.isArray(row.packages)
    ? row.packages
    : Array.isArray(row.affected_packages)
      ? row.affected_packages
      : undefined;
  if (packages) snapshot.packages = packages.map(packageFrom).filter((entry): entry is PackageSnapshot => !!entry);
  if (row.implementation_date === null) snapshot.pendingApproval = true;
  return snapshot;
}

/** get_media_buys: the row of one buy, or undefined when the answer does not list it. */
export function mediaBuyFromList(result: unknown, mediaBuyId: string): MediaBuySnapshot | undefined {
  const buys = asRecord(result)?.media_buys;
  if (!Array.isArray(buys)) return undefined;
  const row = buys.map(asRecord).find((entry) => entry?.media_buy_id === mediaBuyId);
  return row ? mediaBuySnapshotFrom(row) : undefined;
}

// ---- actions -------------------------------------------------------------------------------------------------------

/** One value of AdCP's media-buy action vocabulary: the update_media_buy fields it covers. */
export interface MediaBuyAction {
  /** Dotted request paths (`packages[]` covers every field of a package). */
  updateFields: readonly string[];
  /** A coarse value kept from 3.0 (deprecated in 3.1, removed in 4.0): the finer actions it stands for. */
  rollup?: readonly string[];
}

/**
 * AdCP 3.1.19 `enums/media-buy-valid-action.json` `enumMetadata` (3.0.6's eight values are all in it). Sellers list
 * these in `available_actions[].action` (3.1) or `valid_actions` (3.0, coarse names such as update_budget).
 */
export const MEDIA_BUY_ACTIONS: Readonly<Record<string, MediaBuyAction>> = {
  pause: { updateFields: ['paused'] },
  resume: { updateFields: ['paused'] },
  cancel: { updateFields: ['canceled', 'cancellation_reason'] },
  extend_flight: { updateFields: ['end_time', 'packages[].end_time'] },
  shorten_flight: { updateFields: ['end_time', 'packages[].end_time'] },
  update_flight_dates: {
    updateFields: ['start_time', 'end_time', 'packages[].start_time', 'packages[].end_time'],
  },
  increase_budget: { updateFields: ['packages[].budget'] },
  decrease_budget: { updateFields: ['packages[].budget'] },
  reallocate_budget: { updateFields: ['packages[].budget'] },
  update_targeting: {
    updateFields: [
      'packages[].targeting_overlay',
      'packages[].keyword_targets_add',
      'packages[].keyword_targets_remove',
      'packages[].negative_keywords_add',
      'packages[].negative_keywords_remove',
    ],
  },
  update_pacing: { updateFields: ['packages[].pacing'] },
  update_frequency_caps: { updateFields: ['packages[].targeting_overlay.frequency_cap'] },
  replace_creative: { updateFields: ['packages[].creatives'] },
  update_creative_assignments: { updateFields: ['packages[].creative_assignments'] },
  remove_creative: { updateFields: ['packages[].creatives', 'packages[].creative_assignments'] },
  add_packages: { updateFields: ['new_packages'] },
  remove_packages: { updateFields: ['packages[].canceled'] },
  update_budget: {
    updateFields: ['packages[].budget'],
    rollup: ['increase_budget', 'decrease_budget', 'reallocate_budget'],
  },
  update_dates: {
    updateFields: ['start_time', 'end_time', 'packages[].start_time', 'packages[].end_time'],
    rollup: ['extend_flight', 'shorten_flight', 'update_flight_dates'],
  },
  update_packages: {
    updateFields: ['packages[]'],
    rollup: ['update_targeting', 'update_pacing', 'update_frequency_caps', 'reallocate_budget', 'remove_packages'],
  },
  sync_creatives: {
    updateFields: ['packages[].creatives', 'packages[].creative_assignments'],
    rollup: ['replace_creative', 'update_creative_assignments', 'remove_creative'],
  },
};

/** What the buy is now, as far as the orchestrator knows: what a change's direction is measured against. */
export interface BuyTerms {
  budgets: Record<string, number | undefined>;
  startTime?: string;
  endTime?: string;
}

/** The actions that each cover the whole of one part of a change (one of them listed lets that part through). */
export interface ActionNeed {
  part: string;
  /** Any one of these permits the part... */
  anyOf: readonly string[];
  /** ...or all of these together. */
  allOf?: readonly string[];
}

/** What a seller's list of actions says about one update_media_buy request. */
export type ActionVerdict = { permitted: true } | { permitted: false; need: ActionNeed };

/** The budget part of a change: which way it moves the budgets it names, from what the buy has now. */
function budgetNeed(changes: { packageId: string; budget: number }[], terms: BuyTerms): ActionNeed | undefined {
  const moves = changes.map(({ packageId, budget }) => {
    const current = terms.budgets[packageId];
    return current === undefined ? undefined : budget - current;
  });
  if (moves.length === 0) return undefined;
  const any = ['update_budget', 'increase_budget', 'decrease_budget', 'reallocate_budget'];
  if (moves.some((move) => move === undefined)) return { part: 'packages[].budget', anyOf: any };
  const deltas = moves as number[];
  const up = deltas.some((delta) => delta > 0);
  const down = deltas.some((delta) => delta < 0);
  if (!up && !down) return undefined;
  const total = deltas.reduce((sum, delta) => sum + delta, 0);
  // reallocate_budget moves budget between packages "without changing the sum"; update_packages rolls up to it.
  if (Math.abs(total) < 1e-9)
    return {
      part: 'packages[].budget (reallocated)',
      anyOf: ['update_budget', 'reallocate_budget', 'update_packages'],
      allOf: ['increase_budget', 'decrease_budget'],
    };
  if (up && down)
    return {
      part: 'packages[].budget (raised and lowered)',
      anyOf: ['update_budget'],
      allOf: ['increase_budget', 'decrease_budget'],
    };
  return up
    ? { part: 'packages[].budget (raised)', anyOf: ['update_budget', 'increase_budget'] }
    : { part: 'packages[].budget (lowered)', anyOf: ['update_budget', 'decrease_budget'] };
}

/** The flight part of a change: moving the start is a shift of dates; moving only the end extends or shortens. */
function datesNeed(args: JsonRecord, terms: BuyTerms): ActionNeed | undefined {
  const start = text(args.start_time);
  const end = text(args.end_time);
  if (!start && !end) return undefined;
  const coarse = ['update_dates', 'update_flight_dates'];
  const startMoves =
    start !== undefined && (terms.startTime === undefined || Date.parse(start) !== Date.parse(terms.startTime));
  if (startMoves) return { part: 'start_time', anyOf: coarse };
  if (!end) return undefined;
  const current = terms.endTime ? Date.parse(terms.endTime) : NaN;
  const next = Date.parse(end);
  if (Number.isNaN(current)) return { part: 'end_time', anyOf: [...coarse, 'extend_flight', 'shorten_flight'] };
  if (next > current) return { part: 'end_time (later)', anyOf: [...coarse, 'extend_flight'] };
  if (next < current) return { part: 'end_time (earlier)', anyOf: [...coarse, 'shorten_flight'] };
  return undefined;
}

/**
 * What an update_media_buy request needs of the seller's action list: one need per part of the change (pause or
 * resume, cancel, the flight by direction, the budgets by direction). Other package fields (targeting, pacing,
 * creative assignments, a package's own pause) are left to the seller: sellers' lists are coarser than the
 * vocabulary there (a 3.1 list without update_creative_assignments still takes assignments in a package update), so
 * a local refusal would refuse what the seller accepts.
 */
export function actionNeeds(args: JsonRecord, terms: BuyTerms): ActionNeed[] {
  const needs: ActionNeed[] = [];
  if (args.paused === true) needs.push({ part: 'paused', anyOf: ['pause'] });
  if (args.paused === false) needs.push({ part: 'paused', anyOf: ['resume'] });
  if (args.canceled === true) needs.push({ part: 'canceled', anyOf: ['cancel'] });
  const dates = datesNeed(args, terms);
  if (dates) needs.push(dates);
  const packages = Array.isArray(args.packages)
    ? args.packages.map(asRecord).filter((row): row is JsonRecord => !!row)
    : [];
  const budgets = packages
    .filter((row) => typeof row.package_id === 'string' && finite(row.budget) !== undefined)
    .map((row) => ({ packageId: row.package_id as string, budget: finite(row.budget)! }));
  const budget = budgetNeed(budgets, terms);
  if (budget) needs.push(budget);
  return needs;
}

/**
 * Whether a seller's action list lets a request through. Refused only when every name in the list is one AdCP
 * knows and none covers a part of the change; a name it does not know means the seller is asked.
 */
export function actionsPermit(actions: readonly string[], args: JsonRecord, terms: BuyTerms): ActionVerdict {
  if (actions.some((action) => !Object.prototype.hasOwnProperty.call(MEDIA_BUY_ACTIONS, action)))
    return { permitted: true };
  for (const need of actionNeeds(args, terms)) {
    const listed = need.anyOf.some((action) => actions.includes(action));
    const together = need.allOf?.every((action) => actions.includes(action)) ?? false;
    if (!listed && !together) return { permitted: false, need };
  }
  return { permitted: true };
}

// ---- delivery ------------------------------------------------------------------------------------------------------

/** Metric name → value, as reported (impressions, spend, clicks, completed_views, ...). Only additive counts are kept. */
export type MetricTotals = Record<string, number>;

/**
 * Metrics that add up across periods. Rates and averages (ctr, pacing_index, frequency, viewable_rate, ...) do not,
 * so running totals never sum them.
 */
export const ADDITIVE_METRICS: ReadonlySet<string> = new Set([
  'impressions',
  'spend',
  'clicks',
  'views',
  'completed_views',
  'conversions',
  'conversion_value',
  'leads',
  'grps',
  'downloads',
  'plays',
  'engagements',
  'follows',
  'saves',
  'profile_visits',
  'measurable_impressions',
  'viewable_impressions',
]);

export function additiveMetrics(row: JsonRecord | undefined): MetricTotals {
  const totals: MetricTotals = {};
  if (!row) return totals;
  for (const [name, value] of Object.entries(row)) {
    const number = finite(value);
    if (number !== undefined && ADDITIVE_METRICS.has(name)) totals[name] = number;
  }
  return totals;
}

/** One reporting period of one buy: numbers by package (and the buy's totals). */
export interface DeliveryPeriod {
  start: string;
  end: string;
  totals: MetricTotals;
  byPackage: Record<string, MetricTotals>;
  isFinal?: boolean;
  measurementWindow?: string;
}

export const NOTIFICATION_TYPES = ['scheduled', 'final', 'delayed', 'adjusted', 'window_update', 'impairment'] as const;
export type ReportingNotificationType = (typeof NOTIFICATION_TYPES)[number];

/** One reporting webhook, for one buy. */
export interface ReportingNotification {
  notificationType: ReportingNotificationType;
  sequenceNumber?: number;
  nextExpectedAt?: string;
  mediaBuyId: string;
  /** The buy's lifecycle status as the report states it (reporting_delayed / failed are kept as raw). */
  status?: MediaBuyStatus;
  rawStatus?: string;
  period?: DeliveryPeriod;
  isAdjusted?: boolean;
  supersedesWindow?: string;
  message?: string;
  /** Seller's time of the fire (envelope timestamp). */
  timestamp?: string;
  health?: JsonRecord;
}

export class ReportingPayloadError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = 'ReportingPayloadError';
  }
}

function periodOf(reportingPeriod: unknown, delivery: JsonRecord): DeliveryPeriod | undefined {
  const range = asRecord(reportingPeriod);
  const start = text(range?.start);
  const end = text(range?.end);
  if (!start || !end) return undefined;
  const byPackage: Record<string, MetricTotals> = {};
  let isFinal: boolean | undefined = typeof delivery.is_final === 'boolean' ? delivery.is_final : undefined;
  let measurementWindow: string | undefined;
  if (Array.isArray(delivery.by_package)) {
    for (const entry of delivery.by_package) {
      const row = asRecord(entry);
      const packageId = text(row?.package_id);
      if (!row || !packageId) continue;
      byPackage[packageId] = additiveMetrics(row);
      if (typeof row.is_final === 'boolean') isFinal = isFinal === undefined ? row.is_final : isFinal && row.is_final;
      measurementWindow ??= text(row.measurement_window);
    }
  }
  return {
    start,
    end,
    totals: additiveMetrics(asRecord(delivery.totals)),
    byPackage,
    ...(isFinal !== undefined ? { isFinal } : {}),
    ...(measurementWindow ? { measurementWindow } : {}),
  };
}

/**
 * A reporting webhook body (the MCP webhook envelope with the report under `result`, as AdCP requires; a bare report
 * is accepted too) → one notification per media buy it carries (sellers may aggregate several buys in one fire).
 */
export function parseReportingWebhook(body: unknown): { eventKey?: string; notifications: ReportingNotification[] } {
  const envelope = asRecord(body);
  if (!envelope) throw new ReportingPayloadError('body', 'a reporting webhook is a JSON object');
  const report = asRecord(envelope.result) ?? envelope;
  const type = text(report.notification_type);
  if (!type || !(NOTIFICATION_TYPES as readonly string[]).includes(type)) {
    throw new ReportingPayloadError(
      'result.notification_type',
      `notification_type must be one of ${NOTIFICATION_TYPES.join(', ')}`,
    );
  }
  const deliveries = Array.isArray(report.media_buy_deliveries)
    ? report.media_buy_deliveries.map(asRecord).filter((entry): entry is JsonRecord => !!entry)
    : text(report.media_buy_id)
      ? [report]
      : [];
  if (deliveries.length === 0 && type !== 'delayed') {
    throw new ReportingPayloadError('result.media_buy_deliveries', 'a delivery report names at least one media buy');
  }
  const sequence = finite(report.sequence_number);
  const common = {
    notificationType: type as ReportingNotificationType,
    ...(sequence !== undefined ? { sequenceNumber: sequence } : {}),
    ...(text(report.next_expected_at) ? { nextExpectedAt: text(report.next_expected_at)! } : {}),
    ...((text(report.message) ?? text(envelope.message))
      ? { message: (text(report.message) ?? text(envelope.message))! }
      : {}),
    ...(text(envelope.timestamp) ? { timestamp: text(envelope.timestamp)! } : {}),
  };
  const notifications = deliveries.map((delivery): ReportingNotification => {
    const mediaBuyId = text(delivery.media_buy_id);
    if (!mediaBuyId)
      throw new ReportingPayloadError(
        'result.media_buy_deliveries[].media_buy_id',
        'each delivery names its media_buy_id',
      );
    const status = normaliseMediaBuyStatus(delivery.status);
    const period = periodOf(report.reporting_period, delivery);
    const supersedes =
      period && Array.isArray(delivery.by_package)
        ? delivery.by_package.map((row) => text(asRecord(row)?.supersedes_window)).find((entry) => !!entry)
        : undefined;
    return {
      ...common,
      mediaBuyId,
      ...(status ? { status } : text(delivery.status) ? { rawStatus: text(delivery.status)! } : {}),
      ...(period ? { period } : {}),
      ...(delivery.is_adjusted === true ? { isAdjusted: true } : {}),
      ...(supersedes ? { supersedesWindow: supersedes } : {}),
      ...(asRecord(delivery.health) ? { health: asRecord(delivery.health)! } : {}),
    };
  });
  const eventKey = text(envelope.idempotency_key);
  return { ...(eventKey ? { eventKey } : {}), notifications };
}

/** What a get_media_buy_delivery answer says about one buy: lifetime (or range) numbers and, when asked, windows. */
export interface DeliveryPull {
  mediaBuyId: string;
  status?: MediaBuyStatus;
  totals: MetricTotals;
  byPackage: Record<string, MetricTotals>;
  windows: DeliveryPeriod[];
  /** The answer carried a `windows` array (a seller without windowed pulls leaves it out). */
  windowed?: boolean;
  /** The buy's numbers over the answer's `reporting_period`: a date-range pull's one period. */
  range?: DeliveryPeriod;
  isFinal?: boolean;
}

export function parseDeliveryPull(result: unknown, mediaBuyId: string): DeliveryPull | undefined {
  const deliveries = asRecord(result)?.media_buy_deliveries;
  if (!Array.isArray(deliveries)) return undefined;
  const delivery = deliveries.map(asRecord).find((entry) => entry?.media_buy_id === mediaBuyId);
  if (!delivery) return undefined;
  const byPackage: Record<string, MetricTotals> = {};
  if (Array.isArray(delivery.by_package)) {
    for (const entry of delivery.by_package) {
      const row = asRecord(entry);
      const packageId = text(row?.package_id);
      if (row && packageId) byPackage[packageId] = additiveMetrics(row);
    }
  }
  const windows: DeliveryPeriod[] = [];
  if (Array.isArray(delivery.windows)) {
    for (const entry of delivery.windows) {
      const window = asRecord(entry);
      if (!window) continue;
      const period = periodOf({ start: window.window_start, end: window.window_end }, window);
      if (period) windows.push(period);
    }
  }
  const status = normaliseMediaBuyStatus(delivery.status);
  const range = periodOf(asRecord(result)?.reporting_period, delivery);
  return {
    mediaBuyId,
    ...(status ? { status } : {}),
    totals: additiveMetrics(asRecord(delivery.totals)),
    byPackage,
    windows,
    ...(Array.isArray(delivery.windows) ? { windowed: true } : {}),
    ...(range ? { range } : {}),
    ...(typeof delivery.is_final === 'boolean' ? { isFinal: delivery.is_final } : {}),
  };
}
