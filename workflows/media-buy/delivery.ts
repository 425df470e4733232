/**
 * A media buy's delivery ledger, pure and deterministic: reporting webhooks and get_media_buy_delivery pulls folded
 * into periods and running totals. Sequence numbers find duplicates, reorders and gaps; missing periods are pulled
 * after a grace; periods older than the open horizon are sealed so a months-long flight keeps a bounded state; the
 * flight ends with a reconciliation against the seller's lifetime numbers (the seller's numbers win).
 *
 * The media-buy machine (./machine.ts) owns one ledger and hands it what reports and pulls say.
 */
import type {
  DeliveryPeriod,
  DeliveryPull,
  MediaBuyStatus,
  MetricTotals,
  ReportingNotification,
} from '../../protocol/media-buy';
import type {
  MediaBuyEventSource,
  MediaBuyState,
  OpenPeriod,
  ReportingFrequency,
  ReportingSettings,
  ReportingState,
} from '../../contract/media-buy';

export const iso = (ms: number): string => new Date(ms).toISOString();

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const MAX_ADJUSTMENTS = 50;
const MAX_MISSING_SEQUENCES = 200;
const MAX_UNFILLED = 100;
const MAX_UNKNOWN_PACKAGES = 20;
/** A skipped sequence number older than this many reports is given up on (its period is handled by the fill). */
const SEQUENCE_WINDOW = 256;
/** Pulls that could not fill a period before it is given up on (and flagged). */
export const MAX_FILL_ATTEMPTS = 3;

const FREQUENCY_ORDER: readonly ReportingFrequency[] = ['hourly', 'daily', 'monthly'];

/**
 * The reporting frequency to register: the requested one when every product supports it, else the finest one every
 * product supports (the schema: "Must be supported by all products in the media buy"); undefined when none is common.
 */
export function chooseReportingFrequency(settings: Pick<ReportingSettings, 'frequency' | 'productFrequencies'>): {
  frequency?: ReportingFrequency;
  note?: string;
} {
  const requested = settings.frequency ?? 'daily';
  const products = settings.productFrequencies?.filter((list) => Array.isArray(list)) ?? [];
  if (products.length === 0) return { frequency: requested };
  const common = FREQUENCY_ORDER.filter((frequency) => products.every((list) => list.includes(frequency)));
  if (common.includes(requested)) return { frequency: requested };
  if (common.length === 0)
    return {
      note: `no reporting frequency is supported by every product (asked for ${requested}); delivery is pulled instead`,
    };
  return { frequency: common[0], note: `${requested} is not supported by every product; registered ${common[0]}` };
}

export function periodMs(frequency: ReportingFrequency): number {
  return frequency === 'hourly' ? HOUR : frequency === 'daily' ? DAY : 31 * DAY;
}

/** The start of the period that contains `ms` (UTC: top of hour, midnight, first of month). */
export function floorPeriod(ms: number, frequency: ReportingFrequency): number {
  if (frequency === 'hourly') return Math.floor(ms / HOUR) * HOUR;
  if (frequency === 'daily') return Math.floor(ms / DAY) * DAY;
  const date = new Date(ms);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
}

export function nextPeriod(startMs: number, frequency: ReportingFrequency): number {
  if (frequency === 'monthly') {
    const date = new Date(startMs);
    return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  }
  return startMs + periodMs(frequency);
}

/** How long periods stay open for adjustments before they are folded into the sealed totals. */
export function openHorizonMs(frequency: ReportingFrequency): number {
  return frequency === 'hourly' ? 7 * DAY : frequency === 'daily' ? 45 * DAY : 400 * DAY;
}

/** How long a missing period waits for a reordered report before it is pulled. */
export function fillGraceMs(frequency: ReportingFrequency): number {
  return Math.min(Math.max(periodMs(frequency), 15 * 60_000), 6 * HOUR);
}

function round(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

function addInto(target: MetricTotals, source: MetricTotals, sign = 1): void {
  for (const [metric, value] of Object.entries(source)) target[metric] = round((target[metric] ?? 0) + sign * value);
}

function sumPackages(byPackage: Record<string, MetricTotals>): MetricTotals {
  const totals: MetricTotals = {};
  for (const metrics of Object.values(byPackage)) addInto(totals, metrics);
  return totals;
}

function sameNumbers(a: Record<string, MetricTotals>, b: Record<string, MetricTotals>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    const left = a[key] ?? {};
    const right = b[key] ?? {};
    const metrics = new Set([...Object.keys(left), ...Object.keys(right)]);
    for (const metric of metrics) if (round(left[metric] ?? 0) !== round(right[metric] ?? 0)) return false;
  }
  return true;
}

/** A report's per-package numbers; a report without packages counts under "*" (the buy as a whole). */
function numbersOf(period: {
  byPackage: Record<string, MetricTotals>;
  totals: MetricTotals;
}): Record<string, MetricTotals> {
  return Object.keys(period.byPackage).length > 0 ? period.byPackage : { '*': period.totals };
}

export function newReportingState(expectedDelayMinutes = 60): ReportingState {
  return {
    expectedDelayMinutes,
    contiguousThrough: 0,
    receivedAbove: [],
    highestSequence: 0,
    missingSequences: [],
    reportsReceived: 0,
    reportsApplied: 0,
    duplicates: 0,
    reordered: 0,
    sequenceGaps: 0,
    periodGapsDetected: 0,
    periodGapsFilled: 0,
    unfilledPeriods: [],
    periods: {},
    sealed: { byPackage: {}, periods: 0 },
    byPackage: {},
    totals: {},
    periodsCounted: 0,
    finalPeriods: 0,
    missingPeriods: {},
    delayedNotices: 0,
    adjustments: [],
    adjustmentCount: 0,
    sealedAdjustments: 0,
    pulls: 0,
    latePulls: 0,
  };
}

export type ReportEffect = 'applied' | 'duplicate' | 'restated' | 'adjusted' | 'notice' | 'ignored';

/** What the ledger needs from the machine that owns it. */
export interface LedgerHooks {
  now(): number;
  anomaly(source: MediaBuyEventSource, note: string): void;
  /** A status a report or a pull states (the machine decides whether it moves the buy). */
  observeStatus(status: MediaBuyStatus, source: MediaBuyEventSource): void;
  touch(): void;
  /**
   * Whether a buy no report has reached yet expects its first at the end of the flight's first period (true when
   * absent). The workflow asks its patch: a run from before it expected nothing until a report said when.
   */
  expectFirstReport?(): boolean;
  /**
   * Whether a buy still pending (creatives, or its start) expects no first report (true when absent). The workflow
   * asks its patch: a run from before it expected the first report while pending too, and pulled.
   */
  quietWhilePending?(): boolean;
}

/** Statuses in which a buy cannot deliver yet. */
const PENDING: ReadonlySet<string> = new Set(['pending_creatives', 'pending_start']);

function pushBounded<T>(list: T[], item: T, max: number): void {
  list.push(item);
  if (list.length > max) list.splice(0, list.length - max);
}

export class DeliveryLedger {
  constructor(
    private readonly state: MediaBuyState,
    private readonly hooks: LedgerHooks,
  ) {}

  private get reporting(): ReportingState {
    return this.state.reporting;
  }

  private anomaly(source: MediaBuyEventSource, note: string): void {
    this.hooks.anomaly(source, note);
  }

  private touch(): void {
    this.hooks.touch();
  }

  private recomputeTotals(): void {
    const byPackage: Record<string, MetricTotals> = {};
    for (const [packageId, metrics] of Object.entries(this.reporting.sealed.byPackage))
      byPackage[packageId] = { ...metrics };
    for (const key of Object.keys(this.reporting.periods).sort()) {
      for (const [packageId, metrics] of Object.entries(this.reporting.periods[key].byPackage)) {
        byPackage[packageId] ??= {};
        addInto(byPackage[packageId], metrics);
      }
    }
    this.reporting.byPackage = byPackage;
    this.reporting.totals = sumPackages(byPackage);
    this.reporting.periodsCounted = this.reporting.sealed.periods + Object.keys(this.reporting.periods).length;
  }

  /** Records the sequence number; false when that notification was already seen. */
  private trackSequence(sequence: number): { duplicate: boolean; reordered: boolean } {
    const reporting = this.reporting;
    if (sequence <= reporting.contiguousThrough || reporting.receivedAbove.includes(sequence))
      return { duplicate: true, reordered: false };
    const reordered = sequence < reporting.highestSequence;
    if (reordered) {
      reporting.reordered += 1;
      reporting.missingSequences = reporting.missingSequences.filter((missing) => missing !== sequence);
    }
    if (sequence > reporting.highestSequence + 1) {
      const skipped = sequence - reporting.highestSequence - 1;
      reporting.sequenceGaps += skipped;
      for (let missing = reporting.highestSequence + 1; missing < sequence; missing++)
        pushBounded(reporting.missingSequences, missing, MAX_MISSING_SEQUENCES);
    }
    reporting.highestSequence = Math.max(reporting.highestSequence, sequence);
    reporting.receivedAbove.push(sequence);
    reporting.receivedAbove.sort((a, b) => a - b);
    // Advance the contiguous mark; numbers skipped long ago are given up on so the list stays bounded.
    while (reporting.receivedAbove.length > 0) {
      const next = reporting.contiguousThrough + 1;
      if (reporting.receivedAbove[0] === next) {
        reporting.receivedAbove.shift();
        reporting.contiguousThrough = next;
      } else if (next < reporting.highestSequence - SEQUENCE_WINDOW) {
        reporting.contiguousThrough = next;
      } else break;
    }
    return { duplicate: false, reordered };
  }

  private recordAdjustment(
    periodStart: string,
    notificationType: string,
    before: MetricTotals | undefined,
    after: MetricTotals,
    note?: string,
  ): void {
    pushBounded(
      this.reporting.adjustments,
      {
        at: iso(this.hooks.now()),
        periodStart,
        notificationType,
        ...(before ? { before } : {}),
        after,
        ...(note ? { note } : {}),
      },
      MAX_ADJUSTMENTS,
    );
    this.reporting.adjustmentCount += 1;
  }

  /** Puts a period's numbers in place (replacing earlier ones); returns what it did. */
  private setPeriod(key: string, entry: OpenPeriod, notificationType: string): ReportEffect {
    const reporting = this.reporting;
    const existing = reporting.periods[key];
    if (reporting.missingPeriods[key]) {
      delete reporting.missingPeriods[key];
      reporting.periodGapsFilled += 1;
    }
    if (!existing) {
      reporting.periods[key] = entry;
      if (entry.isFinal) reporting.finalPeriods += 1;
      return 'applied';
    }
    if (sameNumbers(existing.byPackage, entry.byPackage) && notificationType === 'scheduled') {
      return 'duplicate';
    }
    const replacing =
      notificationType === 'adjusted' || notificationType === 'window_update' || entry.source === 'pull';
    reporting.periods[key] = { ...entry, revisions: (existing.revisions ?? 0) + 1 };
    if (entry.isFinal && !existing.isFinal) reporting.finalPeriods += 1;
    this.recordAdjustment(
      key,
      notificationType,
      sumPackages(existing.byPackage),
      sumPackages(entry.byPackage),
      replacing
        ? entry.measurementWindow
          ? `window ${entry.measurementWindow}`
          : undefined
        : 'a scheduled report restated a period already reported',
    );
    return replacing ? 'adjusted' : 'restated';
  }

  /** One verified report for this buy. */
  receiveReport(notification: ReportingNotification, receivedAtMs: number): ReportEffect {
    const reporting = this.reporting;
    reporting.reportsReceived += 1;
    let reordered = false;
    if (notification.sequenceNumber !== undefined) {
      const sequence = this.trackSequence(notification.sequenceNumber);
      if (sequence.duplicate) {
        reporting.duplicates += 1;
        return 'duplicate';
      }
      reordered = sequence.reordered;
    }
    reporting.lastReportAt = iso(receivedAtMs);
    if (notification.nextExpectedAt && !reordered) reporting.nextExpectedAt = notification.nextExpectedAt;
    if (notification.status) {
      // A report states the status when it was fired: one fired before the last known change is history, not news.
      const firedAtMs = notification.timestamp
        ? Date.parse(notification.timestamp)
        : reordered
          ? Number.NEGATIVE_INFINITY
          : receivedAtMs;
      const last = this.state.statusHistory[this.state.statusHistory.length - 1];
      if (!last || firedAtMs >= Date.parse(last.at)) this.hooks.observeStatus(notification.status, 'report');
    }
    if (notification.health) this.state.health = notification.health;
    const type = notification.notificationType;
    if (type === 'final')
      reporting.finalReport = {
        at: iso(receivedAtMs),
        ...(notification.sequenceNumber !== undefined ? { sequenceNumber: notification.sequenceNumber } : {}),
      };
    if (type === 'delayed') {
      reporting.delayedNotices += 1;
      this.touch();
      return 'notice';
    }
    if (type === 'impairment' || !notification.period) {
      this.touch();
      return 'notice';
    }
    const period = notification.period;
    const startMs = Date.parse(period.start);
    if (Number.isNaN(startMs)) {
      this.anomaly('report', `report with an unreadable period start "${period.start}" ignored`);
      return 'ignored';
    }
    const key = iso(startMs);
    const numbers = numbersOf(period);
    this.checkPackages(numbers, 'report');
    const effect = this.placePeriod(key, period.end, numbers, 'report', type, period.isFinal, period.measurementWindow);
    if (effect !== 'duplicate' && effect !== 'ignored') reporting.reportsApplied += 1;
    if (type === 'final') this.noteMissingThrough(Date.parse(period.end), receivedAtMs);
    else this.noteMissingThrough(startMs, receivedAtMs);
    this.recomputeTotals();
    this.touch();
    return effect;
  }

  private placePeriod(
    key: string,
    end: string,
    numbers: Record<string, MetricTotals>,
    source: OpenPeriod['source'],
    type: string,
    isFinal: boolean | undefined,
    measurementWindow: string | undefined,
  ): ReportEffect {
    const reporting = this.reporting;
    if (reporting.sealedBefore && key < reporting.sealedBefore) {
      const unfilled = reporting.unfilledPeriods.indexOf(key);
      if (unfilled >= 0) {
        // A period given up on arrives after all: count it now.
        reporting.unfilledPeriods.splice(unfilled, 1);
        for (const [packageId, metrics] of Object.entries(numbers)) {
          reporting.sealed.byPackage[packageId] ??= {};
          addInto(reporting.sealed.byPackage[packageId], metrics);
        }
        reporting.sealed.periods += 1;
        reporting.periodGapsFilled += 1;
        return 'applied';
      }
      if (type === 'adjusted' || type === 'window_update') {
        reporting.sealedAdjustments += 1;
        this.recordAdjustment(
          key,
          type,
          undefined,
          sumPackages(numbers),
          'period already sealed: settled by the end-of-flight pull',
        );
        this.anomaly('report', `${type} report for sealed period ${key}: the end-of-flight reconciliation settles it`);
        return 'adjusted';
      }
      return 'duplicate';
    }
    return this.setPeriod(
      key,
      {
        end,
        byPackage: numbers,
        source,
        ...(isFinal !== undefined ? { isFinal } : {}),
        ...(measurementWindow ? { measurementWindow } : {}),
      },
      type,
    );
  }

  private flightStartMs(): number | undefined {
    const start = this.state.startTime ? Date.parse(this.state.startTime) : NaN;
    return Number.isNaN(start) ? undefined : start;
  }

  private flightEndMs(): number | undefined {
    const end = this.state.endTime ? Date.parse(this.state.endTime) : NaN;
    return Number.isNaN(end) ? undefined : end;
  }

  /** Marks every period before `untilMs` (exclusive) that has no numbers as missing. */
  noteMissingThrough(untilMs: number, nowMs: number): void {
    const frequency = this.reporting.frequency;
    const flightStart = this.flightStartMs();
    if (!frequency || flightStart === undefined) return;
    const reporting = this.reporting;
    const flightEnd = this.flightEndMs() ?? Number.POSITIVE_INFINITY;
    const firstPeriod = floorPeriod(flightStart, frequency);
    let cursor = reporting.sealedBefore ? Math.max(Date.parse(reporting.sealedBefore), firstPeriod) : firstPeriod;
    const limit = Math.min(untilMs, flightEnd);
    for (let guard = 0; cursor < limit && guard < 20_000; guard++) {
      const key = iso(cursor);
      if (!reporting.periods[key] && !reporting.missingPeriods[key] && !reporting.unfilledPeriods.includes(key)) {
        reporting.missingPeriods[key] = { since: iso(nowMs), attempts: 0 };
        reporting.periodGapsDetected += 1;
      }
      cursor = nextPeriod(cursor, frequency);
    }
  }

  /** When reports count as late: the next one's expected time plus the products' expected delay. */
  lateAtMs(): number | undefined {
    const next = this.nextExpectedMs();
    if (Number.isNaN(next) || !this.reporting.frequency) return undefined;
    return next + this.reporting.expectedDelayMinutes * 60_000;
  }

  /**
   * When the next report is expected: the `next_expected_at` the seller's last report stated; before any report
   * stated one, the end of the flight's first period. Without that, a seller that never sends a report (or a buy
   * that registered no webhook: no public URL) was never late, so its delivery was never pulled until the buy ended.
   * A buy still pending (its creatives, or its start) cannot deliver, so it expects nothing yet; once it is seen
   * past that, the flight's first period counts again (a late activation is late at once, and pulled).
   */
  private nextExpectedMs(): number {
    const stated = this.reporting.nextExpectedAt ? Date.parse(this.reporting.nextExpectedAt) : NaN;
    if (!Number.isNaN(stated)) return stated;
    const frequency = this.reporting.frequency;
    const flightStart = this.flightStartMs();
    if (!frequency || flightStart === undefined || !this.state.mediaBuyId) return NaN;
    if (!(this.hooks.expectFirstReport?.() ?? true)) return NaN;
    if (PENDING.has(this.state.status) && (this.hooks.quietWhilePending?.() ?? true)) return NaN;
    return nextPeriod(floorPeriod(flightStart, frequency), frequency);
  }

  /**
   * A report is late: the periods it should have covered (up to `next_expected_at`) are missing, and the next
   * expectation moves one period on so lateness is checked again, not in a loop.
   */
  noteLate(nowMs: number): void {
    const frequency = this.reporting.frequency;
    const next = this.nextExpectedMs();
    if (!frequency || Number.isNaN(next)) return;
    this.noteMissingThrough(next, nowMs);
    this.reporting.nextExpectedAt = iso(Math.max(next, floorPeriod(nowMs, frequency)) + periodMs(frequency));
    this.touch();
  }

  /** Missing periods whose grace for reordered reports has passed, oldest first. */
  periodsDueForFill(nowMs: number): string[] {
    const frequency = this.reporting.frequency;
    if (!frequency) return [];
    const grace = fillGraceMs(frequency);
    return Object.entries(this.reporting.missingPeriods)
      .filter(([, missing]) => Date.parse(missing.since) + grace * (missing.attempts + 1) <= nowMs)
      .map(([key]) => key)
      .sort();
  }

  /** When the next fill is due (undefined when nothing is missing). */
  nextFillAtMs(): number | undefined {
    const frequency = this.reporting.frequency;
    if (!frequency) return undefined;
    const grace = fillGraceMs(frequency);
    let earliest: number | undefined;
    for (const missing of Object.values(this.reporting.missingPeriods)) {
      const due = Date.parse(missing.since) + grace * (missing.attempts + 1);
      earliest = earliest === undefined ? due : Math.min(earliest, due);
    }
    return earliest;
  }

  /** A windowed pull's answer for the wanted periods: fills what it can, counts an attempt for the rest. */
  applyPull(pull: DeliveryPull, wanted: string[]): { filled: number; stillMissing: number } {
    for (const window of pull.windows) this.checkPackages(window.byPackage, 'pull');
    const windows = new Map(pull.windows.map((window) => [iso(Date.parse(window.start)), window]));
    return this.fillFrom(pull, wanted, (key) => windows.get(key));
  }

  /**
   * A date-range pull's answer for one period (`reporting.rangeFill`): its range numbers fill the period when the
   * answer's `reporting_period` is that period (its end exclusive, or the last second or millisecond before it, as
   * sellers write it); any other range (a seller that answered its lifetime) counts an attempt.
   */
  applyRangePull(pull: DeliveryPull, key: string): { filled: number; stillMissing: number } {
    const frequency = this.reporting.frequency;
    const range = pull.range;
    const startMs = Date.parse(key);
    const endMs = frequency ? nextPeriod(startMs, frequency) : NaN;
    const gap = range ? endMs - Date.parse(range.end) : NaN;
    const matches = !!range && Date.parse(range.start) === startMs && (gap === 0 || gap === 1 || gap === 1_000);
    if (range && matches) this.checkPackages(range.byPackage, 'pull');
    return this.fillFrom(pull, [key], () => (matches ? { ...range, end: iso(endMs) } : undefined));
  }

  private fillFrom(
    pull: DeliveryPull,
    wanted: string[],
    periodFor: (key: string) => DeliveryPeriod | undefined,
  ): { filled: number; stillMissing: number } {
    const reporting = this.reporting;
    reporting.pulls += 1;
    let filled = 0;
    for (const key of wanted) {
      const period = periodFor(key);
      if (period && reporting.missingPeriods[key]) {
        this.placePeriod(key, period.end, numbersOf(period), 'pull', 'pull', period.isFinal, period.measurementWindow);
        filled += 1;
        continue;
      }
      this.countFillAttempt(key);
    }
    if (pull.status) this.hooks.observeStatus(pull.status, 'pull');
    this.recomputeTotals();
    this.touch();
    return { filled, stillMissing: Object.keys(reporting.missingPeriods).length };
  }

  /** Periods no pull can fill at this seller: given up at once (unfilled, counted if a report brings them later). */
  giveUp(keys: string[]): void {
    const reporting = this.reporting;
    for (const key of keys) {
      if (!reporting.missingPeriods[key]) continue;
      delete reporting.missingPeriods[key];
      pushBounded(reporting.unfilledPeriods, key, MAX_UNFILLED);
    }
    this.touch();
  }

  private countFillAttempt(key: string): void {
    const reporting = this.reporting;
    const missing = reporting.missingPeriods[key];
    if (!missing) return;
    missing.attempts += 1;
    if (missing.attempts >= MAX_FILL_ATTEMPTS) {
      delete reporting.missingPeriods[key];
      pushBounded(reporting.unfilledPeriods, key, MAX_UNFILLED);
      this.anomaly('pull', `period ${key} could not be filled after ${MAX_FILL_ATTEMPTS} pulls`);
    }
  }

  /** Folds periods older than the open horizon into the sealed totals, never past a period still being filled. */
  seal(nowMs: number): number {
    const frequency = this.reporting.frequency;
    if (!frequency) return 0;
    const reporting = this.reporting;
    let limit = floorPeriod(nowMs - openHorizonMs(frequency), frequency);
    const pending = Object.keys(reporting.missingPeriods).sort()[0];
    if (pending) limit = Math.min(limit, Date.parse(pending));
    const limitKey = iso(limit);
    if (reporting.sealedBefore && limitKey <= reporting.sealedBefore) return 0;
    let folded = 0;
    for (const key of Object.keys(reporting.periods)) {
      if (key >= limitKey) continue;
      for (const [packageId, metrics] of Object.entries(reporting.periods[key].byPackage)) {
        reporting.sealed.byPackage[packageId] ??= {};
        addInto(reporting.sealed.byPackage[packageId], metrics);
      }
      reporting.sealed.periods += 1;
      delete reporting.periods[key];
      folded += 1;
    }
    reporting.sealedBefore = limitKey;
    this.recomputeTotals();
    return folded;
  }

  /**
   * Delivery by a package id the buy does not have is the seller's numbers for something else (another buy's
   * package, a renamed one): counted as the seller sent it, and raised once per id.
   */
  private checkPackages(byPackage: Record<string, MetricTotals>, source: MediaBuyEventSource): void {
    const known = this.state.packages;
    if (Object.keys(known).length === 0) return;
    for (const packageId of Object.keys(byPackage)) {
      if (packageId === '*' || known[packageId] || this.reporting.unknownPackages?.includes(packageId)) continue;
      pushBounded((this.reporting.unknownPackages ??= []), packageId, MAX_UNKNOWN_PACKAGES);
      this.anomaly(
        source,
        `delivery for package ${packageId}, which this buy does not have (its packages: ${Object.keys(known).join(', ')})`,
      );
    }
  }

  /** Compares our totals with the seller's lifetime numbers (thresholds of the reporting page); the seller's win. */
  reconcile(pull: DeliveryPull): void {
    this.checkPackages(pull.byPackage, 'pull');
    const ours = { ...this.reporting.totals };
    const seller = Object.keys(pull.totals).length > 0 ? pull.totals : sumPackages(pull.byPackage);
    if (this.reporting.reportsReceived === 0 && this.reporting.periodsCounted === 0) {
      // Nothing was reported (no reporting webhook): there is nothing to compare, the seller's numbers are the totals.
      this.reporting.reconciliation = {
        at: iso(this.hooks.now()),
        seller: { totals: seller, byPackage: pull.byPackage },
        ours,
        impressionsVariance: 0,
        spendVariance: 0,
        outcome: 'reconciled',
        replaced: true,
        note: 'no delivery reports were received; the lifetime pull is the record',
      };
      this.reporting.byPackage = pull.byPackage;
      this.reporting.totals = seller;
      this.touch();
      return;
    }
    const variance = (metric: string) => {
      const theirs = seller[metric] ?? 0;
      const mine = ours[metric] ?? 0;
      if (theirs === 0) return mine === 0 ? 0 : 1;
      return Math.abs(theirs - mine) / Math.abs(theirs);
    };
    const impressionsVariance = round(variance('impressions'));
    const spendVariance = round(variance('spend'));
    const outcome =
      impressionsVariance > 0.1 || spendVariance > 0.05
        ? 'large_discrepancy'
        : impressionsVariance > 0.02 || spendVariance > 0.01
          ? 'discrepancy'
          : 'reconciled';
    const differs = !sameNumbers({ t: ours }, { t: seller });
    this.reporting.reconciliation = {
      at: iso(this.hooks.now()),
      seller: { totals: seller, byPackage: pull.byPackage },
      ours,
      impressionsVariance,
      spendVariance,
      outcome,
      replaced: differs && Object.keys(pull.byPackage).length > 0,
    };
    if (outcome !== 'reconciled') {
      this.anomaly(
        'pull',
        `delivery ${outcome.replace('_', ' ')}: impressions ${(impressionsVariance * 100).toFixed(2)}%, spend ${(spendVariance * 100).toFixed(2)}% off the seller's lifetime numbers`,
      );
    }
    if (this.reporting.reconciliation.replaced) {
      // The API is the source of truth (for billing too): its lifetime numbers replace ours; the difference stays on record.
      this.reporting.byPackage = pull.byPackage;
      this.reporting.totals = seller;
    }
    this.touch();
  }
}
