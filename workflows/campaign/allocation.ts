/**
 * How a campaign moves budget across its sellers by delivery and pacing: the policy a buyer sets, and one pure,
 * deterministic decision, `planAllocation`, from a structural view of the campaign to a plan of moves. No Temporal, no
 * I/O, no clock of its own: the workflow passes the time and builds the view from its state, and its saga applies the
 * plan (each decrease confirmed before the increase it funds). Amounts are integer cents inside; the plan speaks the
 * campaign's currency in whole cents.
 */
import {
  ALLOCATION_MODES,
  ALLOCATION_SIGNALS,
  type AllocationEndpoint,
  type AllocationReason,
  type AllocationSignal,
  type BudgetAllocationPolicy,
  type BudgetAllocationPolicyInput,
} from '../../contract/campaign';

export {
  ALLOCATION_MODES,
  ALLOCATION_SIGNALS,
  type AllocationEndpoint,
  type AllocationMode,
  type AllocationReason,
  type AllocationReasonCode,
  type AllocationSignal,
  type BudgetAllocationPolicy,
  type BudgetAllocationPolicyInput,
} from '../../contract/campaign';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

// ---- the policy -----------------------------------------------------------------------------------------------------

export const DEFAULT_ALLOCATION_POLICY: BudgetAllocationPolicy = {
  mode: 'off',
  approvalTimeoutMs: DAY_MS,
  minShare: 0,
  maxShare: 1,
  sellers: {},
  minMoveAmount: 1,
  minPeriodsBetweenMoves: 1,
  freezeBeforeEndMs: DAY_MS,
  signals: [...ALLOCATION_SIGNALS],
  underDeliveryThreshold: 0.8,
  deliveringThreshold: 0.95,
  underDeliveryGraceMs: DAY_MS,
};

export interface PolicyFieldError {
  /** The field, as a path: `maxShare`, `sellers.s1.minShare`, `signals[2]`. */
  field: string;
  message: string;
}

export type PolicyVerdict =
  { ok: true; policy: BudgetAllocationPolicy } | { ok: false; errors: PolicyFieldError[]; message: string };

type Check = [(value: number) => boolean, string];

const shareChecks: Check[] = [
  [(value) => value >= 0, 'is a share of the campaign budget: at least 0'],
  [(value) => value <= 1, 'is a share of the campaign budget: at most 1'],
];

function durationChecks(max: number): Check[] {
  return [
    [(value) => Number.isInteger(value), 'must be whole milliseconds'],
    [(value) => value >= 0, 'cannot be negative'],
    [(value) => value <= max, `is at most ${max / DAY_MS} days`],
  ];
}

/** The checks of each number field: its type error, then its rules in order (the first that fails is reported). */
const NUMBER_FIELDS: Record<string, { type: string; checks: Check[] }> = {
  approvalTimeoutMs: {
    type: 'must be a number of milliseconds (how long a proposal waits for approval)',
    checks: [...durationChecks(30 * DAY_MS), [(value) => value >= MINUTE_MS, 'must give a person at least a minute']],
  },
  minShare: { type: 'must be a number (a share of the campaign budget)', checks: shareChecks },
  maxShare: { type: 'must be a number (a share of the campaign budget)', checks: shareChecks },
  minMoveAmount: {
    type: 'must be an amount in the campaign currency',
    checks: [
      [(value) => value >= 0.01, 'must be at least one cent'],
      [(value) => value <= 1e12, 'is at most 1e12'],
      [(value) => Math.abs(value * 100 - Math.round(value * 100)) < 1e-6, 'must be whole cents'],
    ],
  },
  minPeriodsBetweenMoves: {
    type: 'must be a whole number of reporting periods',
    checks: [
      [(value) => Number.isInteger(value), 'must be a whole number of reporting periods'],
      [(value) => value >= 1, 'is at least 1: no seller moves twice within one reporting period'],
      [(value) => value <= 366, 'is at most 366'],
    ],
  },
  freezeBeforeEndMs: {
    type: 'must be a number of milliseconds (the freeze window before the flight ends)',
    checks: durationChecks(366 * DAY_MS),
  },
  underDeliveryThreshold: {
    type: 'must be a ratio (delivered / planned)',
    checks: [
      [(value) => value > 0, 'must be above 0'],
      [(value) => value <= 1, 'is at most 1 (on plan)'],
    ],
  },
  deliveringThreshold: {
    type: 'must be a ratio (delivered / planned)',
    checks: [
      [(value) => value > 0, 'must be above 0'],
      [(value) => value <= 10, 'is at most 10'],
    ],
  },
  underDeliveryGraceMs: {
    type: 'must be a number of milliseconds (the grace after a buy starts)',
    checks: durationChecks(366 * DAY_MS),
  },
  reportingPeriodMs: {
    type: 'must be a number of milliseconds (the reporting period moves are counted in)',
    checks: [
      ...durationChecks(31 * DAY_MS),
      [(value) => value >= 1_000, 'is at least a second: a seller reports no faster than that'],
    ],
  },
};

const POLICY_FIELDS = new Set(['mode', 'sellers', 'signals', ...Object.keys(NUMBER_FIELDS)]);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function numberError(value: unknown, rules: { type: string; checks: Check[] }): string | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value)) return rules.type;
  return rules.checks.find(([holds]) => !holds(value))?.[1];
}

/**
 * Validate a policy (creation input or an Update) and fill its defaults: every error names its field and says why.
 * Plain checks, no schema library: the workflow bundle runs this in every campaign's validator.
 */
export function validateAllocationPolicy(input: unknown): PolicyVerdict {
  const source = input ?? {};
  const errors: PolicyFieldError[] = [];
  const fail = (field: string, message: string) => errors.push({ field, message });
  if (!isRecord(source)) {
    fail('(policy)', 'must be an object (the allocation policy)');
    return refused(errors);
  }
  // An unknown field is named itself, so a typo (`maxshare`) points at the typo.
  for (const key of Object.keys(source))
    if (!POLICY_FIELDS.has(key)) fail(key, 'is not a field of the allocation policy');
  const policy: BudgetAllocationPolicy = {
    ...DEFAULT_ALLOCATION_POLICY,
    sellers: {},
    signals: [...ALLOCATION_SIGNALS],
  };
  if (source.mode !== undefined) {
    if (!ALLOCATION_MODES.includes(source.mode as never)) fail('mode', `must be one of ${ALLOCATION_MODES.join(', ')}`);
    else policy.mode = source.mode as BudgetAllocationPolicy['mode'];
  }
  for (const [field, rules] of Object.entries(NUMBER_FIELDS)) {
    const value = source[field];
    if (value === undefined) continue;
    const error = numberError(value, rules);
    if (error) fail(field, error);
    else (policy as unknown as Record<string, number>)[field] = value as number;
  }
  if (source.sellers !== undefined) {
    if (!isRecord(source.sellers)) fail('sellers', 'must map seller ids to their bounds');
    else
      for (const [sellerId, bounds] of Object.entries(source.sellers)) {
        if (sellerId === '') {
          fail('sellers', 'a seller id is not empty');
          continue;
        }
        if (!isRecord(bounds)) {
          fail(`sellers.${sellerId}`, 'must be {minShare?, maxShare?}');
          continue;
        }
        const entry: { minShare?: number; maxShare?: number } = {};
        for (const key of Object.keys(bounds)) {
          if (key !== 'minShare' && key !== 'maxShare') {
            fail(`sellers.${sellerId}.${key}`, 'is not a field of the allocation policy');
            continue;
          }
          const error = numberError(bounds[key], NUMBER_FIELDS[key]);
          if (error) fail(`sellers.${sellerId}.${key}`, error);
          else entry[key] = bounds[key] as number;
        }
        policy.sellers[sellerId] = entry;
      }
  }
  if (source.signals !== undefined) {
    if (!Array.isArray(source.signals)) fail('signals', 'must list the signals that count');
    else {
      const bad = source.signals.findIndex((signal) => !ALLOCATION_SIGNALS.includes(signal as AllocationSignal));
      if (bad >= 0) fail(`signals[${bad}]`, `each signal is one of ${ALLOCATION_SIGNALS.join(', ')}`);
      else if (new Set(source.signals).size !== source.signals.length) fail('signals', 'lists each signal once');
      else policy.signals = [...(source.signals as AllocationSignal[])];
    }
  }
  if (errors.length > 0) return refused(errors);
  // Rules across fields, once every field is well-formed.
  if (policy.minShare > policy.maxShare)
    fail('minShare', `must not exceed maxShare (${policy.minShare} > ${policy.maxShare})`);
  let explicitMinimums = 0;
  for (const sellerId of Object.keys(policy.sellers).sort(compareText)) {
    const bounds = policy.sellers[sellerId]!;
    const min = bounds.minShare ?? policy.minShare;
    const max = bounds.maxShare ?? policy.maxShare;
    explicitMinimums += bounds.minShare ?? 0;
    if (min > max)
      fail(
        `sellers.${sellerId}.${bounds.minShare !== undefined ? 'minShare' : 'maxShare'}`,
        `gives seller ${sellerId} a minimum share above its maximum (${min} > ${max})`,
      );
  }
  if (explicitMinimums > 1 + 1e-9)
    fail(
      'sellers',
      `promises the sellers minimum shares that add up to ${round(explicitMinimums, 6)}, over the whole budget`,
    );
  if (policy.underDeliveryThreshold >= policy.deliveringThreshold)
    fail(
      'deliveringThreshold',
      `must be above underDeliveryThreshold (${policy.deliveringThreshold} <= ${policy.underDeliveryThreshold}), or a buy could be both under-delivering and delivering`,
    );
  return errors.length > 0 ? refused(errors) : { ok: true, policy };
}

function refused(errors: PolicyFieldError[]): PolicyVerdict {
  return {
    ok: false,
    errors,
    message: `The allocation policy is invalid: ${errors.map((error) => `${error.field} ${error.message}`).join('; ')}.`,
  };
}

/** The policy a buyer writes, as the campaign holds it (its defaults filled in); throws on an invalid one. */
export function policyOf(input: BudgetAllocationPolicyInput | undefined): BudgetAllocationPolicy {
  const verdict = validateAllocationPolicy(input);
  if (!verdict.ok) throw new Error(verdict.message);
  return verdict.policy;
}

// ---- the campaign as the decision sees it ---------------------------------------------------------------------------

/** One seller's buy (the campaign holds one buy per seller). Money in the campaign currency. */
export interface AllocationBuy {
  sellerId: string;
  /** The buy's lifecycle status as last read (AdCP media-buy status, or the campaign's `creating`, `create_failed`). */
  status: string;
  /** The budget in effect at the seller. */
  budget: number;
  /** Spend so far, as the buy's reports and pulls total it. */
  spend: number;
  /** Spend against the linear plan by now (spend / planned spend); null before the flight or without a plan. */
  pacing: number | null;
  /** Delivered units against the units planned by now (impressions against the plan), where the campaign knows them. */
  deliveryVsPlan?: number | null;
  /** The buy's flight in epoch ms (the seller's confirmed flight, else the campaign's). */
  startMs: number;
  endMs: number;
  /** `available_actions[].action` (3.1) or `valid_actions` (3.0) as the seller last sent them; absent: never sent. */
  allowedActions?: readonly string[];
  /** Since when the seller has been unreachable (its capabilities refresh failing or its circuit open). */
  downSinceMs?: number;
  /** The seller rejected the buy or its creation failed: nothing was bought, nothing can be spent on it. */
  rejected?: boolean;
  /** A budget change (a person's or a move's) has not settled at the seller yet. */
  changeInFlight?: boolean;
  /** When a move last changed this seller's budget. */
  lastMoveAtMs?: number;
}

export interface AllocationState {
  totalBudget: number;
  /** The campaign budget on no buy (returned or never allocated): totalBudget minus the buys' budgets. */
  pool: number;
  /** The campaign's flight, epoch ms. */
  flight: { startMs: number; endMs: number };
  /** The buys' reporting period (daily reports: one day): spend is known one period late. */
  reportingPeriodMs: number;
  buys: readonly AllocationBuy[];
}

// ---- the plan ---------------------------------------------------------------------------------------------------------

/** Money from one place to another. Applied in order: the decrease at `from`, confirmed, then the increase at `to`. */
export interface AllocationMove {
  from: AllocationEndpoint;
  to: AllocationEndpoint;
  /** Campaign currency, whole cents, never below the policy's minMoveAmount (except a rejected buy's release). */
  amount: number;
  /** Why the money leaves `from`, then why it goes to `to`. */
  reasons: AllocationReason[];
  /** A rejected buy's budget returns to the pool without a call to the seller: nothing was bought there. */
  release?: true;
}

/** One seller's budget before and after the plan: at most one change per seller, decreases before increases. */
export interface BudgetChange {
  sellerId: string;
  /** The update_media_buy action the seller must allow (a release calls no seller). */
  action: 'release' | 'decrease_budget' | 'increase_budget';
  budgetBefore: number;
  budgetAfter: number;
  /** Decreases: the lowest budget the buy may have now (spend plus the safety margin; see spendFloor). */
  floor?: number;
}

/** Why a seller's share is outside its bounds after the plan. */
export type ShareBlocker =
  | 'buy_rejected'
  | 'buy_ended'
  | 'not_active'
  | 'seller_down'
  | 'signal_off'
  | 'cannot_decrease'
  | 'cannot_increase'
  | 'moved_this_period'
  | 'flight_ending'
  | 'spend_floor'
  | 'below_min_move'
  | 'not_enough_money';

export interface SellerShare {
  sellerId: string;
  budgetBefore: number;
  budgetAfter: number;
  shareBefore: number;
  shareAfter: number;
  minShare: number;
  maxShare: number;
  inBounds: boolean;
  /** Set when the share after the plan is outside [minShare, maxShare]: which side, and what kept it there. */
  outOfBounds?: { side: 'below_min' | 'above_max'; because: ShareBlocker[] };
}

export type NoPlanReason = 'policy_off' | 'invalid_state' | 'change_in_flight' | 'freeze_window' | 'nothing_to_move';

export type AllocationPlan =
  | {
      outcome: 'moves';
      moves: AllocationMove[];
      changes: BudgetChange[];
      shares: SellerShare[];
      poolBefore: number;
      poolAfter: number;
      /** The sum of the moves' amounts. */
      moved: number;
      notes: string[];
    }
  | { outcome: 'none'; why: NoPlanReason; message: string; shares: SellerShare[]; notes: string[] };

// ---- rules shared with the saga ----------------------------------------------------------------------------------

/**
 * Which budget changes a seller's declared actions permit. 3.1 names the direction (`decrease_budget`,
 * `increase_budget`); a 3.0 seller's coarse `update_budget` covers both. `reallocate_budget` (and 3.0
 * `update_packages`) only redistribute across the buy's packages with the total unchanged, so they permit neither.
 * A seller that never sent its actions is not refused here, as the media buy's own change guard does not refuse it:
 * the seller answers ACTION_NOT_ALLOWED if it objects, and the saga's decrease-first order makes that refusal cost
 * nothing.
 */
export function budgetActions(allowedActions: readonly string[] | undefined): { decrease: boolean; increase: boolean } {
  if (allowedActions === undefined) return { decrease: true, increase: true };
  return {
    decrease: allowedActions.includes('decrease_budget') || allowedActions.includes('update_budget'),
    increase: allowedActions.includes('increase_budget') || allowedActions.includes('update_budget'),
  };
}

/**
 * The lowest budget a buy may be given now, in cents: its spend so far plus one reporting period of spend at the
 * higher of its observed rate and its planned (linear) rate. Spend is reported up to a period late and a decrease
 * takes effect only when the seller applies it, so the buy may spend that much more than it has reported; sellers
 * refuse (or clamp) a budget below what is spent, and the margin keeps the plan from asking for that.
 */
function floorCents(buy: AllocationBuy, reportingPeriodMs: number, nowMs: number): number {
  const budget = toCents(buy.budget);
  const spend = toCents(buy.spend);
  const duration = Math.max(1, buy.endMs - buy.startMs);
  const elapsed = Math.min(duration, Math.max(0, nowMs - buy.startMs));
  const observedRate = elapsed > 0 ? spend / elapsed : 0;
  const plannedRate = budget / duration;
  const margin = Math.ceil(Math.max(observedRate, plannedRate) * reportingPeriodMs);
  return spend + margin;
}

/** The spend floor of a buy in campaign currency (see floorCents): what the saga checks again after its read. */
export function spendFloor(buy: AllocationBuy, reportingPeriodMs: number, nowMs: number): number {
  return fromCents(floorCents(buy, reportingPeriodMs, nowMs));
}

// ---- the decision -----------------------------------------------------------------------------------------------------

/** Buys that exist at the seller and accept update_media_buy; the others are not touched. */
const UPDATABLE_STATUSES: ReadonlySet<string> = new Set(['active', 'paused', 'pending_start', 'pending_creatives']);
const ENDED_STATUSES: ReadonlySet<string> = new Set(['completed', 'canceled', 'rejected', 'create_failed', 'failed']);

interface Judged {
  buy: AllocationBuy;
  sellerId: string;
  budget: number;
  floor: number;
  minCents: number;
  maxCents: number;
  minShare: number;
  maxShare: number;
  release: number;
  /** Money that leaves whatever happens (a seller down too long, a share above its maximum). */
  mandatory: number;
  mandatoryReasons: AllocationReason[];
  /** Money that leaves only if a delivering seller takes it (under-delivery). */
  optional: number;
  optionalReasons: AllocationReason[];
  /** The lowest counted delivery ratio, for an under-delivering buy (worst gives first). */
  underRatio: number;
  /** Down sellers give first, then shares above their maximum (then by seller id). */
  mandatoryRank: number;
  target: boolean;
  minNeed: number;
  headroom: number;
  targetReasons: AllocationReason[];
  decreaseBlockers: ShareBlocker[];
  increaseBlockers: ShareBlocker[];
  floorLimited: boolean;
}

/** One piece of money matched to a taker, in cents, before pieces between the same two places are merged. */
interface Flow {
  supply: number;
  from: AllocationEndpoint;
  to: AllocationEndpoint;
  amount: number;
  sourceReasons: AllocationReason[];
  takerReasons: AllocationReason[];
}

interface Supply {
  from: AllocationEndpoint;
  left: number;
  reasons: AllocationReason[];
  mandatory: boolean;
}

/**
 * The plan for this state under this policy at `nowMs`. Pure and deterministic: the same state, in any buy order and
 * any key order, gives the same plan. The rules, each where it is applied below:
 * - money is conserved: every move takes from one place what it gives to another, and the pool gives only what it
 *   holds, so the buys plus the pool always equal the campaign budget; applying the moves in order (each decrease
 *   before its increase, the pool's moves last) never puts more on the buys than the campaign budget;
 * - no buy goes below its spend floor (spend plus a margin, see floorCents);
 * - a seller whose actions forbid a decrease is never a source, one that forbids an increase never a target;
 * - shares end within [min, max] where the other rules allow it, and the plan says why where they do not;
 * - a seller is moved at most once per `minPeriodsBetweenMoves` reporting periods, and in one direction per plan;
 * - nothing moves in the freeze window before the flight ends, nor at a buy whose own flight is ending;
 * - a move smaller than minMoveAmount is not made (a rejected buy's release, which calls no seller, excepted).
 */
export function planAllocation(state: AllocationState, policy: BudgetAllocationPolicy, nowMs: number): AllocationPlan {
  const none = (
    why: NoPlanReason,
    message: string,
    shares: SellerShare[] = [],
    notes: string[] = [],
  ): AllocationPlan => ({
    outcome: 'none',
    why,
    message,
    shares,
    notes,
  });
  if (policy.mode === 'off') return none('policy_off', 'The allocation policy is off: the campaign moves no money.');
  const invalid = invalidState(state, nowMs);
  if (invalid) return none('invalid_state', invalid);
  // A change not yet settled means the budgets in the view may not be the seller's: plan again once it has.
  const inFlight = sortedBuys(state).filter((buy) => buy.changeInFlight);
  if (inFlight.length > 0)
    return none(
      'change_in_flight',
      `A budget change at ${inFlight.map((buy) => buy.sellerId).join(', ')} has not settled; the campaign plans again once it has.`,
    );
  // The freeze window: money moved this close to the end cannot be spent, and every late change unsettles billing.
  const freezeStartMs = state.flight.endMs - policy.freezeBeforeEndMs;
  if (nowMs >= freezeStartMs)
    return none(
      'freeze_window',
      `The flight ends at ${iso(state.flight.endMs)}; nothing moves after ${iso(freezeStartMs)} (freezeBeforeEndMs ${hours(policy.freezeBeforeEndMs)}).`,
    );

  const total = toCents(state.totalBudget);
  const minMove = toCents(policy.minMoveAmount);
  const judged = sortedBuys(state).map((buy) => judge(buy, state, policy, nowMs, total));
  const notes: string[] = [];
  const moves: AllocationMove[] = [];
  const moved = new Map<string, number>(); // seller id → signed change, cents

  // A rejected buy bought nothing: its whole budget returns to the pool, without a call to the seller.
  let pool = toCents(state.pool);
  for (const entry of judged.filter((item) => item.release > 0)) {
    moves.push({
      from: seller(entry.sellerId),
      to: POOL,
      amount: fromCents(entry.release),
      reasons: [
        {
          code: 'buy_rejected',
          sellerId: entry.sellerId,
          note: `the buy at ${entry.sellerId} was rejected or never created (status ${entry.buy.status}): nothing was bought there, so its whole budget returns to the pool`,
        },
      ],
      release: true,
    });
    moved.set(entry.sellerId, -entry.release);
    pool += entry.release;
  }

  // What can be given, in the order it is used: money that must leave (down sellers first, then shares above their
  // maximum), the pool, then money under-delivering buys would not spend (the worst pacing first).
  const supplies: Supply[] = [
    ...judged
      .filter((entry) => entry.mandatory > 0)
      .sort((a, b) => a.mandatoryRank - b.mandatoryRank || compareText(a.sellerId, b.sellerId))
      .map((entry) => ({
        from: seller(entry.sellerId),
        left: entry.mandatory,
        reasons: entry.mandatoryReasons,
        mandatory: true,
      })),
    ...(pool > 0
      ? [
          {
            from: POOL,
            left: pool,
            reasons: [{ code: 'pool' as const, note: `${money(pool)} in the pool, on no buy` }],
            mandatory: false,
          },
        ]
      : []),
    ...judged
      .filter((entry) => entry.optional > 0)
      .sort((a, b) => a.underRatio - b.underRatio || compareText(a.sellerId, b.sellerId))
      .map((entry) => ({
        from: seller(entry.sellerId),
        left: entry.optional,
        reasons: entry.optionalReasons,
        mandatory: false,
      })),
  ];
  const supplyTotal = supplies.reduce((sum, supply) => sum + supply.left, 0);

  // Who takes it: sellers below their minimum share first (in proportion to what they lack), then delivering sellers
  // in proportion to their budgets, each up to its maximum share. A taker offered less than a move worth making is
  // left out and the rest is shared again among the others.
  let takers = judged.filter((entry) => entry.target && entry.minNeed + entry.headroom > 0);
  let intake = new Map<string, number>();
  for (;;) {
    const needs = takers.filter((entry) => entry.minNeed > 0);
    const needTotal = needs.reduce((sum, entry) => sum + entry.minNeed, 0);
    const fills = apportion(
      Math.min(supplyTotal, needTotal),
      needs.map((entry) => ({ key: entry.sellerId, weight: entry.minNeed, cap: entry.minNeed })),
    );
    const rest = supplyTotal - sum(fills);
    const growers = takers.filter((entry) => entry.headroom > 0);
    const headroomTotal = growers.reduce((total, entry) => total + entry.headroom, 0);
    const grants = apportion(
      Math.min(rest, headroomTotal),
      growers.map((entry) => ({ key: entry.sellerId, weight: Math.max(1, entry.budget), cap: entry.headroom })),
    );
    intake = new Map(
      takers.map((entry) => [entry.sellerId, (fills.get(entry.sellerId) ?? 0) + (grants.get(entry.sellerId) ?? 0)]),
    );
    const tooSmall = takers.filter((entry) => intake.get(entry.sellerId)! > 0 && intake.get(entry.sellerId)! < minMove);
    if (tooSmall.length === 0) break;
    for (const entry of tooSmall) entry.increaseBlockers.push('below_min_move');
    takers = takers.filter((entry) => !tooSmall.includes(entry));
  }

  // Match money to takers in the orders above. A piece smaller than a move worth making is skipped: the taker gets
  // what the next source can give in one worthwhile move, or less.
  const flows: Flow[] = [];
  for (const taker of takers) {
    let need = intake.get(taker.sellerId) ?? 0;
    for (const [index, supply] of supplies.entries()) {
      if (need === 0) break;
      const amount = Math.min(supply.left, need);
      if (amount === 0 || amount < minMove) continue;
      supply.left -= amount;
      need -= amount;
      if (supply.from.kind === 'pool') pool -= amount;
      else moved.set(supply.from.sellerId, (moved.get(supply.from.sellerId) ?? 0) - amount);
      moved.set(taker.sellerId, (moved.get(taker.sellerId) ?? 0) + amount);
      flows.push({
        supply: index,
        from: supply.from,
        to: seller(taker.sellerId),
        amount,
        sourceReasons: supply.reasons,
        takerReasons: taker.targetReasons,
      });
    }
    if (need > 0) taker.increaseBlockers.push(need < minMove ? 'below_min_move' : 'not_enough_money');
  }
  // Money that must leave and that nobody takes waits in the pool (what under-delivery would free stays put).
  for (const [index, supply] of supplies.entries()) {
    if (!supply.mandatory || supply.from.kind !== 'seller' || supply.left === 0) continue;
    const id = supply.from.sellerId;
    if (supply.left < minMove) {
      judged.find((item) => item.sellerId === id)!.decreaseBlockers.push('below_min_move');
      continue;
    }
    pool += supply.left;
    moved.set(id, (moved.get(id) ?? 0) - supply.left);
    flows.push({
      supply: index,
      from: supply.from,
      to: POOL,
      amount: supply.left,
      sourceReasons: supply.reasons,
      takerReasons: [{ code: 'no_taker', note: 'no seller can take it now: it waits in the pool' }],
    });
    supply.left = 0;
  }
  // Decreases first: moves out of a seller in supply order, then the pool's moves (which only give what it holds). A
  // seller giving one taker both what it must and what it would not spend makes one move of the two.
  const poolIndex = supplies.findIndex((supply) => supply.from.kind === 'pool');
  flows.sort((a, b) => {
    const aPool = a.supply === poolIndex ? 1 : 0;
    const bPool = b.supply === poolIndex ? 1 : 0;
    return aPool - bPool || a.supply - b.supply || compareEndpoint(a.to, b.to);
  });
  const merged = new Map<string, Flow>();
  for (const flow of flows) {
    const key = `${endpointKey(flow.from)}\u0000${endpointKey(flow.to)}`;
    const earlier = merged.get(key);
    if (!earlier) merged.set(key, { ...flow, sourceReasons: [...flow.sourceReasons] });
    else {
      earlier.amount += flow.amount;
      for (const reason of flow.sourceReasons)
        if (!earlier.sourceReasons.some((known) => known.code === reason.code)) earlier.sourceReasons.push(reason);
    }
  }
  for (const flow of merged.values())
    moves.push({
      from: flow.from,
      to: flow.to,
      amount: fromCents(flow.amount),
      reasons: [...flow.sourceReasons, ...flow.takerReasons],
    });

  const shares = judged.map((entry) => shareOf(entry, moved.get(entry.sellerId) ?? 0, total));
  const leftInPool = pool;
  if (leftInPool > 0 && moves.length > 0)
    notes.push(`${money(leftInPool)} stays in the pool: no seller can take it now.`);
  const bounds = judged.filter((entry) => UPDATABLE_STATUSES.has(entry.buy.status) && !entry.buy.rejected);
  const minimums = bounds.reduce((total, entry) => total + entry.minCents, 0);
  const maximums = bounds.reduce((total, entry) => total + entry.maxCents, 0);
  if (bounds.length > 0 && minimums > total)
    notes.push(`The sellers' minimum shares add up to more than the campaign budget (${money(minimums)}).`);
  if (bounds.length > 0 && maximums < total - pool)
    notes.push(`The sellers' maximum shares add up to less than the money on buys (${money(maximums)}).`);
  if (moves.length === 0)
    return none('nothing_to_move', 'No move is worth making now.', shares, [
      ...notes,
      ...(supplyTotal === 0
        ? ['No money is free to move: nothing under-delivers, is down, rejected or over its share.']
        : []),
      ...(takers.length === 0 ? ['No seller can take money now.'] : []),
    ]);

  const changes: BudgetChange[] = [];
  for (const entry of judged) {
    const delta = moved.get(entry.sellerId) ?? 0;
    if (delta === 0) continue;
    const budgetAfter = entry.budget + delta;
    if (entry.release > 0)
      changes.push({
        sellerId: entry.sellerId,
        action: 'release',
        budgetBefore: fromCents(entry.budget),
        budgetAfter: 0,
      });
    else if (delta < 0)
      changes.push({
        sellerId: entry.sellerId,
        action: 'decrease_budget',
        budgetBefore: fromCents(entry.budget),
        budgetAfter: fromCents(budgetAfter),
        floor: fromCents(entry.floor),
      });
    else
      changes.push({
        sellerId: entry.sellerId,
        action: 'increase_budget',
        budgetBefore: fromCents(entry.budget),
        budgetAfter: fromCents(budgetAfter),
      });
  }
  const actionOrder = { release: 0, decrease_budget: 1, increase_budget: 2 } as const;
  changes.sort((a, b) => actionOrder[a.action] - actionOrder[b.action] || compareText(a.sellerId, b.sellerId));
  return {
    outcome: 'moves',
    moves,
    changes,
    shares,
    poolBefore: fromCents(toCents(state.pool)),
    poolAfter: fromCents(leftInPool),
    moved: fromCents(moves.reduce((total, move) => total + toCents(move.amount), 0)),
    notes,
  };
}

/** What one buy can give and take under the policy now, and what stops it. */
function judge(
  buy: AllocationBuy,
  state: AllocationState,
  policy: BudgetAllocationPolicy,
  nowMs: number,
  total: number,
): Judged {
  const bounds = policy.sellers[buy.sellerId];
  const minShare = bounds?.minShare ?? policy.minShare;
  const maxShare = bounds?.maxShare ?? policy.maxShare;
  const budget = toCents(buy.budget);
  const floor = floorCents(buy, state.reportingPeriodMs, nowMs);
  const entry: Judged = {
    buy,
    sellerId: buy.sellerId,
    budget,
    floor,
    // Bounds in whole cents, rounded inwards so a share within them is within the policy's (where minShare equals
    // maxShare and the bound falls between two cents, the minimum gives way by that fraction of a cent).
    minCents: Math.min(Math.ceil(minShare * total - 1e-6), Math.floor(maxShare * total + 1e-6)),
    maxCents: Math.floor(maxShare * total + 1e-6),
    minShare,
    maxShare,
    release: 0,
    mandatory: 0,
    mandatoryReasons: [],
    optional: 0,
    optionalReasons: [],
    underRatio: Infinity,
    mandatoryRank: 2,
    target: false,
    minNeed: 0,
    headroom: 0,
    targetReasons: [],
    decreaseBlockers: [],
    increaseBlockers: [],
    floorLimited: false,
  };
  const counts = (signal: AllocationSignal) => policy.signals.includes(signal);
  const block = (blocker: ShareBlocker) => {
    entry.decreaseBlockers.push(blocker);
    entry.increaseBlockers.push(blocker);
  };

  // A rejected buy (or one whose creation failed) holds money nothing can spend: all of it returns, if the policy
  // counts rejections. No seller is called, so neither its actions nor the period limit apply; its seller is never a
  // target: there is no buy to raise.
  if (buy.rejected) {
    if (counts('buy_rejected')) entry.release = budget;
    else block('signal_off');
    entry.increaseBlockers.push('buy_rejected');
    return entry;
  }
  // Only a buy that exists at the seller and accepts updates can change budget.
  if (!UPDATABLE_STATUSES.has(buy.status)) {
    block(ENDED_STATUSES.has(buy.status) ? 'buy_ended' : 'not_active');
    return entry;
  }
  const actions = budgetActions(buy.allowedActions);
  if (!actions.decrease) entry.decreaseBlockers.push('cannot_decrease');
  if (!actions.increase) entry.increaseBlockers.push('cannot_increase');
  // At most one move per seller in minPeriodsBetweenMoves reporting periods: the next decision about a seller waits
  // for a report that shows the effect of the last one.
  if (
    buy.lastMoveAtMs !== undefined &&
    nowMs - buy.lastMoveAtMs < policy.minPeriodsBetweenMoves * state.reportingPeriodMs
  )
    block('moved_this_period');
  // A buy whose own flight is in the freeze window is left alone, like the campaign in its own.
  if (nowMs >= buy.endMs - policy.freezeBeforeEndMs) block('flight_ending');
  const decreasable = entry.decreaseBlockers.length === 0 ? Math.max(0, budget - floor) : 0;

  // A seller down is never given money. Down for longer than a reporting period (not a blip, and a whole report
  // missed), it gives all its budget above the spend floor, its minimum share notwithstanding: a seller that cannot
  // be reached cannot be held to a share.
  if (buy.downSinceMs !== undefined) {
    const downFor = nowMs - buy.downSinceMs;
    entry.increaseBlockers.push('seller_down');
    if (counts('seller_down') && downFor > state.reportingPeriodMs) {
      entry.mandatory = decreasable;
      entry.mandatoryRank = 0;
      entry.floorLimited = budget - decreasable > entry.maxCents;
      entry.mandatoryReasons.push({
        code: 'seller_down',
        sellerId: buy.sellerId,
        note: `${buy.sellerId} unreachable since ${iso(buy.downSinceMs)} (${hours(downFor)}, over one reporting period of ${hours(state.reportingPeriodMs)}): its budget above spend and margin (${money(floor)}) leaves`,
      });
    } else entry.decreaseBlockers.push(counts('seller_down') ? 'seller_down' : 'signal_off');
    return entry;
  }

  // A share above the seller's maximum comes down to it, as far as the spend floor allows.
  const excess = Math.max(0, budget - entry.maxCents);
  if (excess > 0 && decreasable > 0) {
    entry.mandatory = Math.min(excess, decreasable);
    entry.mandatoryRank = 1;
    entry.floorLimited = excess > decreasable;
    entry.mandatoryReasons.push({
      code: 'above_max_share',
      sellerId: buy.sellerId,
      note: `${buy.sellerId} holds ${shareText(budget, total)} of the budget, over its maximum ${maxShare}`,
    });
  } else if (excess > 0 && entry.decreaseBlockers.length === 0) entry.floorLimited = true;

  // Delivery judged on the signals that count, for an active buy past its grace (before it, pacing is noise).
  const ratios: { signal: 'pacing' | 'delivery_vs_plan'; value: number }[] = [];
  const judgesDelivery = counts('pacing') || counts('delivery_vs_plan');
  if (buy.status === 'active' && nowMs >= buy.startMs + policy.underDeliveryGraceMs) {
    if (counts('pacing') && isRatio(buy.pacing)) ratios.push({ signal: 'pacing', value: buy.pacing });
    if (counts('delivery_vs_plan') && isRatio(buy.deliveryVsPlan))
      ratios.push({ signal: 'delivery_vs_plan', value: buy.deliveryVsPlan });
  }
  const lowest = ratios.reduce((low, ratio) => Math.min(low, ratio.value), Infinity);

  // An under-delivering buy keeps what it would spend at the pace it has shown (the lowest counted ratio times its
  // budget), never less than its floor or its minimum share; the rest may go to a seller that delivers.
  if (lowest < policy.underDeliveryThreshold) {
    entry.underRatio = lowest;
    const keep = Math.max(floor, entry.minCents, Math.ceil(lowest * budget));
    const give = entry.decreaseBlockers.length === 0 ? Math.max(0, budget - keep - entry.mandatory) : 0;
    if (give > 0) {
      entry.optional = give;
      for (const ratio of ratios.filter((item) => item.value < policy.underDeliveryThreshold))
        entry.optionalReasons.push({
          code: ratio.signal,
          sellerId: buy.sellerId,
          note: `${buy.sellerId} ${ratio.signal === 'pacing' ? 'pacing' : 'delivery against plan'} ${round(ratio.value, 3)}, below ${policy.underDeliveryThreshold}: it keeps what it would spend at that pace`,
        });
    }
  }

  // A taker: active (it can spend now), reachable, allowed to grow, giving nothing in this plan. A seller below its
  // minimum share is raised to it whatever its delivery (the minimum is the buyer's word); only delivering sellers
  // take more.
  if (buy.status === 'active' && entry.increaseBlockers.length === 0 && entry.mandatory === 0 && entry.optional === 0) {
    entry.minNeed = Math.max(0, entry.minCents - budget);
    if (entry.minNeed > 0)
      entry.targetReasons.push({
        code: 'below_min_share',
        sellerId: buy.sellerId,
        note: `${buy.sellerId} holds ${shareText(budget, total)} of the budget, under its minimum ${minShare}`,
      });
    // Where no delivery signal counts, every active seller that can grow shares the money; where one does, only those
    // at or above the delivering threshold on every counted signal (a buy with no data yet is not judged to deliver).
    const delivering =
      !judgesDelivery || (ratios.length > 0 && ratios.every((r) => r.value >= policy.deliveringThreshold));
    if (delivering) {
      entry.headroom = Math.max(0, entry.maxCents - budget - entry.minNeed);
      if (entry.headroom > 0)
        entry.targetReasons.push({
          code: 'delivering',
          sellerId: buy.sellerId,
          note: judgesDelivery
            ? `${buy.sellerId} delivers: ${ratios.map((r) => `${r.signal} ${round(r.value, 3)}`).join(', ')} (at or above ${policy.deliveringThreshold})`
            : `${buy.sellerId} is active and can take more (no delivery signal counts)`,
        });
    }
    entry.target = entry.minNeed + entry.headroom > 0;
  }
  return entry;
}

function shareOf(entry: Judged, delta: number, total: number): SellerShare {
  const after = entry.budget + delta;
  const below = after < entry.minCents;
  const above = after > entry.maxCents;
  const share: SellerShare = {
    sellerId: entry.sellerId,
    budgetBefore: fromCents(entry.budget),
    budgetAfter: fromCents(after),
    shareBefore: round(entry.budget / total, 6),
    shareAfter: round(after / total, 6),
    minShare: entry.minShare,
    maxShare: entry.maxShare,
    inBounds: !below && !above,
  };
  if (below) {
    const because = new Set<ShareBlocker>(entry.increaseBlockers);
    if (entry.release > 0) because.add('buy_rejected');
    if (entry.mandatoryRank === 0) because.add('seller_down');
    if (entry.buy.status !== 'active' && UPDATABLE_STATUSES.has(entry.buy.status)) because.add('not_active');
    if (because.size === 0) because.add('not_enough_money');
    share.outOfBounds = { side: 'below_min', because: [...because] };
  }
  if (above) {
    const because = new Set<ShareBlocker>(entry.decreaseBlockers);
    if (entry.floorLimited) because.add('spend_floor');
    if (because.size === 0) because.add('below_min_move');
    share.outOfBounds = { side: 'above_max', because: [...because] };
  }
  return share;
}

/** Why a state cannot be planned on, or undefined. The view must reconcile before any money moves. */
function invalidState(state: AllocationState, nowMs: number): string | undefined {
  if (!Number.isFinite(nowMs)) return `The time ${String(nowMs)} is not a time.`;
  if (!isAmount(state.totalBudget) || toCents(state.totalBudget) <= 0)
    return `totalBudget must be a positive amount; got ${String(state.totalBudget)}.`;
  if (!isAmount(state.pool)) return `pool must be an amount of at least 0; got ${String(state.pool)}.`;
  if (!(state.reportingPeriodMs > 0) || !Number.isFinite(state.reportingPeriodMs))
    return `reportingPeriodMs must be a positive duration; got ${String(state.reportingPeriodMs)}.`;
  if (
    !Number.isFinite(state.flight.startMs) ||
    !Number.isFinite(state.flight.endMs) ||
    state.flight.endMs <= state.flight.startMs
  )
    return 'The flight must end after it starts.';
  const seen = new Set<string>();
  for (const buy of sortedBuys(state)) {
    if (typeof buy.sellerId !== 'string' || buy.sellerId === '') return 'Every buy names its seller.';
    if (seen.has(buy.sellerId)) return `Two buys at ${buy.sellerId}: the campaign holds one buy per seller.`;
    seen.add(buy.sellerId);
    if (!isAmount(buy.budget))
      return `The budget of ${buy.sellerId} must be an amount of at least 0; got ${String(buy.budget)}.`;
    if (!isAmount(buy.spend))
      return `The spend of ${buy.sellerId} must be an amount of at least 0; got ${String(buy.spend)}.`;
    if (!Number.isFinite(buy.startMs) || !Number.isFinite(buy.endMs) || buy.endMs <= buy.startMs)
      return `The flight of ${buy.sellerId} must end after it starts.`;
  }
  const onBuys = state.buys.reduce((total, buy) => total + toCents(buy.budget), 0);
  const pool = toCents(state.pool);
  if (onBuys + pool !== toCents(state.totalBudget))
    return `The buys (${money(onBuys)}) and the pool (${money(pool)}) do not add up to the campaign budget (${money(toCents(state.totalBudget))}).`;
  return undefined;
}

/**
 * Split `total` cents in proportion to the weights, none above its cap (the caller keeps total within the caps):
 * capped entries take their cap and the rest is split again; the last cents go by largest remainder, ties by key.
 * BigInt keeps the products exact for any budget.
 */
function apportion(total: number, entries: { key: string; weight: number; cap: number }[]): Map<string, number> {
  const result = new Map(entries.map((entry) => [entry.key, 0]));
  let remaining = total;
  let open = entries.filter((entry) => entry.cap > 0).map((entry) => ({ ...entry }));
  while (remaining > 0 && open.length > 0) {
    const weights = open.reduce((sum, entry) => sum + BigInt(entry.weight), 0n);
    const exact = open.map((entry) => BigInt(remaining) * BigInt(entry.weight));
    const floors = exact.map((value) => Number(value / weights));
    const capped = open.filter((entry, index) => floors[index]! >= entry.cap);
    if (capped.length > 0) {
      for (const entry of capped) {
        result.set(entry.key, result.get(entry.key)! + entry.cap);
        remaining -= entry.cap;
      }
      open = open.filter((entry) => !capped.includes(entry));
      continue;
    }
    open.forEach((entry, index) => result.set(entry.key, result.get(entry.key)! + floors[index]!));
    let leftover = remaining - floors.reduce((sum, value) => sum + value, 0);
    const byRemainder = open
      .map((entry, index) => ({ key: entry.key, remainder: exact[index]! % weights }))
      .sort((a, b) => (a.remainder === b.remainder ? compareText(a.key, b.key) : a.remainder > b.remainder ? -1 : 1));
    for (const { key } of byRemainder) {
      if (leftover === 0) break;
      result.set(key, result.get(key)! + 1);
      leftover -= 1;
    }
    remaining = 0;
  }
  return result;
}

// ---- small helpers --------------------------------------------------------------------------------------------------

const POOL: AllocationEndpoint = { kind: 'pool' };

function seller(sellerId: string): AllocationEndpoint {
  return { kind: 'seller', sellerId };
}

/** Code-unit order: the same everywhere (localeCompare depends on the runtime's locale data). */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A key no seller id can collide with: the pool is not a seller, whatever a seller is called. */
function endpointKey(endpoint: AllocationEndpoint): string {
  return endpoint.kind === 'pool' ? '\u0000pool' : `seller:${endpoint.sellerId}`;
}

function compareEndpoint(a: AllocationEndpoint, b: AllocationEndpoint): number {
  if (a.kind !== b.kind) return a.kind === 'seller' ? -1 : 1;
  return a.kind === 'seller' && b.kind === 'seller' ? compareText(a.sellerId, b.sellerId) : 0;
}

function sortedBuys(state: AllocationState): AllocationBuy[] {
  return [...state.buys].sort((a, b) => compareText(String(a.sellerId), String(b.sellerId)));
}

function sum(values: Map<string, number>): number {
  let total = 0;
  for (const value of values.values()) total += value;
  return total;
}

function toCents(amount: number): number {
  return Math.round(amount * 100);
}

function fromCents(cents: number): number {
  return cents / 100;
}

function isAmount(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

function isRatio(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

function round(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

function money(cents: number): string {
  return (cents / 100).toFixed(2);
}

function shareText(cents: number, total: number): string {
  return String(round(cents / total, 4));
}

function hours(ms: number): string {
  return `${round(ms / HOUR_MS, 2)} h`;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
