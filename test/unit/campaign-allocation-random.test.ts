/**
 * The allocation decision over thousands of seeded random campaigns: every rule it promises is checked against an
 * oracle written here from the rule, not from the code (money conserved at every step, spend floors, allowed actions,
 * share bounds, one move per seller per period, the freeze window, the smallest move, who may give and take), plus
 * determinism under any buy order and key order. A failure names the seed; `SEED=<n>` reruns that one campaign.
 */
import {
  ALLOCATION_SIGNALS,
  type AllocationBuy,
  type AllocationMove,
  type AllocationPlan,
  type AllocationSignal,
  type AllocationState,
  type BudgetAllocationPolicy,
  planAllocation,
  spendFloor,
  validateAllocationPolicy,
} from '../../workflows/campaign/allocation';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const START = Date.parse('2026-03-01T00:00:00Z');
const RUNS = 4_000;

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Seller ids that order differently by locale and by code unit, and one named like the pool.
const SELLER_IDS = ['alpha', 'Beta', 'beta', 'seller-10', 'seller-9', 'zeta', 'éclair', 'pool', 'b.c:d_e'];
const STATUSES = [
  'active',
  'active',
  'active',
  'active',
  'active',
  'paused',
  'pending_start',
  'pending_creatives',
  'completed',
  'canceled',
  'creating',
];
const ACTIONS = [
  'increase_budget',
  'decrease_budget',
  'update_budget',
  'reallocate_budget',
  'update_packages',
  'pause',
  'cancel',
];

const cents = (amount: number) => Math.round(amount * 100);

interface Campaign {
  state: AllocationState;
  policy: BudgetAllocationPolicy;
  nowMs: number;
}

function randomCampaign(random: () => number): Campaign {
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  const chance = (p: number) => random() < p;
  const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));

  // Messy campaigns mix every status, restriction and fault; tidy ones are live buys that deliver or do not.
  const messy = chance(0.6);
  const count = int(1, 6);
  const sellers = [...SELLER_IDS].sort(() => random() - 0.5).slice(0, count);
  const totalCents = int(10_000, 1_000_000_000);
  const poolCents = chance(0.4) ? int(0, Math.floor(totalCents * 0.3)) : 0;
  // Random split of what is on buys, in whole cents, summing exactly.
  const weights = sellers.map(() => random() + 0.01);
  const weightSum = weights.reduce((a, b) => a + b, 0);
  const onBuys = totalCents - poolCents;
  const budgets = weights.map((w) => Math.floor((onBuys * w) / weightSum));
  budgets[0]! += onBuys - budgets.reduce((a, b) => a + b, 0);

  const flightDays = int(1, 60);
  const flight = { startMs: START, endMs: START + flightDays * DAY };
  const reportingPeriodMs = pick([HOUR, DAY, DAY]);
  const nowMs = START + Math.floor((random() * (flightDays + 3) - 2) * DAY);

  const buys: AllocationBuy[] = sellers.map((sellerId, index) => {
    const budget = budgets[index]!;
    const endMs = chance(0.2)
      ? flight.startMs + Math.max(HOUR, Math.floor(random() * (flight.endMs - flight.startMs)))
      : flight.endMs;
    const elapsed = Math.min(1, Math.max(0, (nowMs - flight.startMs) / (endMs - flight.startMs)));
    const planned = budget * elapsed;
    const spend = Math.min(chance(0.05) ? budget * 1.1 : budget, Math.floor(planned * random() * 1.4));
    const rejected = chance(messy ? 0.08 : 0.02);
    const status = rejected ? pick(['rejected', 'create_failed']) : messy ? pick(STATUSES) : 'active';
    const pacing = chance(0.1) ? null : planned > 0 ? Math.round((spend / planned) * 1000) / 1000 : null;
    const buy: AllocationBuy = {
      sellerId,
      status,
      budget: budget / 100,
      spend: (rejected ? 0 : spend) / 100,
      pacing: chance(0.1) ? random() * 2 : pacing,
      startMs: flight.startMs,
      endMs,
    };
    if (chance(0.4)) buy.deliveryVsPlan = chance(0.1) ? null : Math.round(random() * 1800) / 1000;
    if (chance(0.7)) buy.allowedActions = messy ? ACTIONS.filter(() => chance(0.5)) : ACTIONS;
    if (chance(messy ? 0.2 : 0.05)) buy.downSinceMs = nowMs - Math.floor(random() * 3 * reportingPeriodMs);
    if (rejected) buy.rejected = true;
    if (chance(0.02)) buy.changeInFlight = true;
    if (chance(messy ? 0.25 : 0.05)) buy.lastMoveAtMs = nowMs - Math.floor(random() * 3 * reportingPeriodMs);
    return buy;
  });

  const minShare = chance(0.5) ? 0 : Math.round(random() * 0.3 * 100) / 100;
  const maxShare = chance(0.4) ? 1 : Math.round((minShare + random() * (1 - minShare)) * 100) / 100;
  const sellerBounds: Record<string, { minShare?: number; maxShare?: number }> = {};
  if (chance(0.3)) {
    const sellerId = pick(sellers);
    const max = Math.round((0.2 + random() * 0.8) * 100) / 100;
    sellerBounds[sellerId] = chance(0.5) ? { maxShare: Math.max(max, minShare) } : { minShare: 0, maxShare: max };
  }
  const signals: AllocationSignal[] = chance(0.5)
    ? [...ALLOCATION_SIGNALS]
    : ALLOCATION_SIGNALS.filter(() => chance(0.6));
  const under = pick([0.5, 0.8, 0.9]);
  const verdict = validateAllocationPolicy({
    mode: pick(['off', 'propose', 'auto', 'auto', 'auto', 'propose']),
    minShare,
    maxShare,
    sellers: sellerBounds,
    minMoveAmount: pick([0.01, 1, 50, 500, 5_000]),
    minPeriodsBetweenMoves: int(1, 3),
    freezeBeforeEndMs: pick([0, HOUR, DAY, 3 * DAY]),
    signals,
    underDeliveryThreshold: under,
    deliveringThreshold: pick([0.95, 1, 1.1]),
    underDeliveryGraceMs: pick([0, HOUR, DAY]),
  });
  if (!verdict.ok) throw new Error(`the generator made an invalid policy: ${verdict.message}`);
  return {
    state: { totalBudget: totalCents / 100, pool: poolCents / 100, flight, reportingPeriodMs, buys },
    policy: verdict.policy,
    nowMs,
  };
}

/** The same campaign with the buys in another order and every object's keys inserted in reverse. */
function reordered(campaign: Campaign, random: () => number): Campaign {
  const reverseKeys = <T extends object>(value: T): T => Object.fromEntries(Object.entries(value).reverse()) as T;
  const buys = campaign.state.buys.map((buy) => reverseKeys({ ...buy }));
  for (let i = buys.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [buys[i], buys[j]] = [buys[j]!, buys[i]!];
  }
  const policy = reverseKeys({
    ...campaign.policy,
    signals: [...campaign.policy.signals].reverse(),
    sellers: reverseKeys({ ...campaign.policy.sellers }),
  });
  return {
    state: reverseKeys({ ...campaign.state, flight: reverseKeys({ ...campaign.state.flight }), buys }),
    policy,
    nowMs: campaign.nowMs,
  };
}

const endpointKey = (endpoint: AllocationMove['from']) => (endpoint.kind === 'pool' ? '#pool' : endpoint.sellerId);

/** The oracle: each rule, restated from the policy and the state alone. */
function check(campaign: Campaign, plan: AllocationPlan): void {
  const { state, policy, nowMs } = campaign;
  const fail = (rule: string, detail = '') => {
    throw new Error(`${rule}${detail ? `: ${detail}` : ''}`);
  };
  const total = cents(state.totalBudget);
  const buyOf = new Map(state.buys.map((buy) => [buy.sellerId, buy]));
  const counts = (signal: AllocationSignal) => policy.signals.includes(signal);
  // The bounds in whole cents: a share within them is within the policy's (to the cent where min equals max).
  const maxCents = (sellerId: string) =>
    Math.floor((policy.sellers[sellerId]?.maxShare ?? policy.maxShare) * total + 1e-6);
  const minCents = (sellerId: string) =>
    Math.min(Math.ceil((policy.sellers[sellerId]?.minShare ?? policy.minShare) * total - 1e-6), maxCents(sellerId));
  const periodsOk = (buy: AllocationBuy) =>
    buy.lastMoveAtMs === undefined ||
    nowMs - buy.lastMoveAtMs >= policy.minPeriodsBetweenMoves * state.reportingPeriodMs;
  const declared = (buy: AllocationBuy, action: 'decrease_budget' | 'increase_budget') =>
    buy.allowedActions === undefined ||
    buy.allowedActions.includes(action) ||
    buy.allowedActions.includes('update_budget');
  const pastGrace = (buy: AllocationBuy) =>
    buy.status === 'active' && nowMs >= buy.startMs + policy.underDeliveryGraceMs;
  const counted = (buy: AllocationBuy) => {
    const ratios: number[] = [];
    if (!pastGrace(buy)) return ratios;
    if (counts('pacing') && typeof buy.pacing === 'number') ratios.push(buy.pacing);
    if (counts('delivery_vs_plan') && typeof buy.deliveryVsPlan === 'number') ratios.push(buy.deliveryVsPlan);
    return ratios;
  };
  const downLong = (buy: AllocationBuy) =>
    buy.downSinceMs !== undefined && nowMs - buy.downSinceMs > state.reportingPeriodMs && counts('seller_down');

  // Preconditions come first, in this order.
  if (policy.mode === 'off') {
    if (plan.outcome !== 'none' || plan.why !== 'policy_off') fail('a policy that is off plans nothing');
    return;
  }
  if (state.buys.some((buy) => buy.changeInFlight)) {
    if (plan.outcome !== 'none' || plan.why !== 'change_in_flight') fail('a change in flight blocks planning');
    return;
  }
  if (nowMs >= state.flight.endMs - policy.freezeBeforeEndMs) {
    if (plan.outcome !== 'none' || plan.why !== 'freeze_window') fail('nothing moves in the freeze window');
    return;
  }
  if (plan.outcome === 'none' && plan.why !== 'nothing_to_move') fail('unexpected refusal', plan.why);

  // Every amount is whole cents.
  const amounts =
    plan.outcome === 'moves'
      ? [
          ...plan.moves.map((move) => move.amount),
          ...plan.changes.flatMap((change) => [change.budgetBefore, change.budgetAfter]),
          plan.poolBefore,
          plan.poolAfter,
          plan.moved,
        ]
      : [];
  amounts.push(...plan.shares.flatMap((share) => [share.budgetBefore, share.budgetAfter]));
  for (const amount of amounts)
    if (Math.abs(amount * 100 - Math.round(amount * 100)) > 1e-6) fail('whole cents', String(amount));

  // Apply the moves in order, each decrease before its increase: the money never exceeds the budget, nothing goes
  // negative, no decreased buy goes below its spend floor.
  const ledger = new Map(state.buys.map((buy) => [buy.sellerId, cents(buy.budget)]));
  let pool = cents(state.pool);
  const moves = plan.outcome === 'moves' ? plan.moves : [];
  const onBuys = () => [...ledger.values()].reduce((a, b) => a + b, 0);
  let seenPoolSource = false;
  for (const move of moves) {
    const amount = cents(move.amount);
    if (!(amount > 0)) fail('a move moves money', JSON.stringify(move));
    if (endpointKey(move.from) === endpointKey(move.to)) fail('a move goes somewhere else');
    if (move.from.kind === 'pool') {
      seenPoolSource = true;
      pool -= amount;
      if (pool < 0) fail('the pool gives only what it holds');
    } else {
      if (seenPoolSource) fail('decreases come before the pool gives');
      const id = move.from.sellerId;
      const buy = buyOf.get(id)!;
      ledger.set(id, ledger.get(id)! - amount);
      if (ledger.get(id)! < 0) fail('no budget below zero', id);
      if (move.release) {
        if (!buy.rejected || !counts('buy_rejected')) fail('only a rejected buy is released', id);
        if (move.to.kind !== 'pool') fail('a release returns to the pool');
        if (amount !== cents(buy.budget)) fail('a rejected buy returns its whole budget', id);
      } else {
        if (ledger.get(id)! < cents(spendFloor(buy, state.reportingPeriodMs, nowMs)))
          fail('no buy below its spend floor', id);
        if (ledger.get(id)! < cents(buy.spend)) fail('no buy below its spend', id);
        if (!declared(buy, 'decrease_budget')) fail('a seller that cannot decrease is never a source', id);
        if (!['active', 'paused', 'pending_start', 'pending_creatives'].includes(buy.status) || buy.rejected)
          fail('only a live buy gives', `${id} ${buy.status}`);
        if (buy.downSinceMs !== undefined && !downLong(buy))
          fail('a seller down briefly (or signal off) keeps its budget', id);
        // A source has a reason the rules name.
        const under = counted(buy).some((ratio) => ratio < policy.underDeliveryThreshold);
        const aboveMax = cents(buy.budget) > maxCents(id);
        if (!downLong(buy) && !aboveMax && !under) fail('a source is down, over its share, or under-delivering', id);
        // Under-delivery alone never sends money to the pool: it leaves only for a seller that delivers.
        if (move.to.kind === 'pool' && !downLong(buy) && !aboveMax) fail('under-delivered money goes to a taker', id);
      }
      if (move.amount < policy.minMoveAmount && !move.release)
        fail('no move below the smallest amount', String(move.amount));
    }
    if (onBuys() + pool > total) fail('never more than the campaign budget, at any step');
    if (move.to.kind === 'pool') pool += amount;
    else {
      const id = move.to.sellerId;
      const buy = buyOf.get(id)!;
      ledger.set(id, ledger.get(id)! + amount);
      if (buy.status !== 'active' || buy.rejected || buy.downSinceMs !== undefined)
        fail('only an active, reachable buy takes money', id);
      if (!declared(buy, 'increase_budget')) fail('a seller that cannot increase is never a target', id);
      if (ledger.get(id)! > maxCents(id)) fail('a target never passes its maximum share', id);
      const ratios = counted(buy);
      const judged = counts('pacing') || counts('delivery_vs_plan');
      const delivering = !judged || (ratios.length > 0 && ratios.every((ratio) => ratio >= policy.deliveringThreshold));
      if (!delivering && ledger.get(id)! > Math.max(minCents(id), cents(buy.budget)))
        fail('a seller that does not deliver is raised only to its minimum share', id);
      if (move.amount < policy.minMoveAmount) fail('no move below the smallest amount', String(move.amount));
    }
    if (onBuys() + pool !== total) fail('the buys and the pool equal the campaign budget after each move');
  }

  // Per seller: one direction, one change, rate limits and the buy's own freeze.
  const sources = new Set(moves.filter((m) => m.from.kind === 'seller').map((m) => endpointKey(m.from)));
  const targets = new Set(moves.filter((m) => m.to.kind === 'seller').map((m) => endpointKey(m.to)));
  for (const id of sources) if (targets.has(id)) fail('a seller moves one way in a plan', id);
  for (const move of moves) {
    if (move.release) continue;
    for (const endpoint of [move.from, move.to]) {
      if (endpoint.kind !== 'seller') continue;
      const buy = buyOf.get(endpoint.sellerId)!;
      if (!periodsOk(buy)) fail('no seller moved twice within the reporting periods', endpoint.sellerId);
      if (nowMs >= buy.endMs - policy.freezeBeforeEndMs)
        fail('nothing moves at a buy whose flight is ending', endpoint.sellerId);
    }
  }
  if (plan.outcome === 'moves') {
    const changed = plan.changes.map((change) => change.sellerId);
    if (new Set(changed).size !== changed.length) fail('one change per seller');
    let phase = 0;
    for (const change of plan.changes) {
      const order = { release: 0, decrease_budget: 1, increase_budget: 2 }[change.action];
      if (order < phase) fail('changes list decreases before increases');
      phase = order;
      if (cents(change.budgetAfter) !== ledger.get(change.sellerId))
        fail('a change ends where the moves leave the buy', change.sellerId);
      if (cents(change.budgetBefore) !== cents(buyOf.get(change.sellerId)!.budget))
        fail('a change starts from the buy');
      if ((change.action === 'increase_budget') !== change.budgetAfter > change.budgetBefore)
        fail('a change says its direction');
    }
    for (const [id, budget] of ledger)
      if (budget !== cents(buyOf.get(id)!.budget) && !changed.includes(id)) fail('every moved seller has a change', id);
    if (cents(plan.poolAfter) !== pool) fail('the plan says where the pool ends');
    if (cents(plan.moved) !== moves.reduce((a, m) => a + cents(m.amount), 0)) fail('moved sums the moves');
  }

  // Shares: the plan never pushes a seller out of its bounds, says why where one stays out, and the rules that must
  // free money did (within a move's worth).
  for (const share of plan.shares) {
    const id = share.sellerId;
    const buy = buyOf.get(id)!;
    const before = cents(buy.budget);
    const after = ledger.get(id)!;
    if (cents(share.budgetAfter) !== after) fail('a share reports the budget after the moves', id);
    const inBounds = after >= minCents(id) && after <= maxCents(id);
    if (share.inBounds !== inBounds) fail('inBounds tells the truth', id);
    if (!inBounds && !(share.outOfBounds && share.outOfBounds.because.length > 0))
      fail('an out-of-bounds share says why', id);
    // And what it says is true of the buy.
    const truth: Record<string, boolean> = {
      cannot_decrease: !declared(buy, 'decrease_budget'),
      cannot_increase: !declared(buy, 'increase_budget'),
      moved_this_period: !periodsOk(buy),
      flight_ending: nowMs >= buy.endMs - policy.freezeBeforeEndMs,
      seller_down: buy.downSinceMs !== undefined,
      buy_rejected: buy.rejected === true,
      buy_ended: ['completed', 'canceled', 'rejected', 'create_failed', 'failed'].includes(buy.status),
    };
    for (const blocker of share.outOfBounds?.because ?? [])
      if (truth[blocker] === false) fail(`an out-of-bounds reason is true (${blocker})`, id);
    if (after < before && after < minCents(id) && !buy.rejected && !downLong(buy))
      fail('a decrease never goes below the minimum share', id);
    // A buy that gives only because it under-delivers keeps what it would spend at the pace it has shown.
    if (after < before && !buy.rejected && !downLong(buy) && before <= maxCents(id)) {
      const lowest = Math.min(...counted(buy));
      if (!(lowest < policy.underDeliveryThreshold)) fail('a buy gives only for a reason', id);
      if (after < Math.ceil(lowest * before)) fail('an under-delivering buy keeps what it would spend at its pace', id);
    }
    const eligible =
      !buy.rejected &&
      ['active', 'paused', 'pending_start', 'pending_creatives'].includes(buy.status) &&
      declared(buy, 'decrease_budget') &&
      periodsOk(buy) &&
      nowMs < buy.endMs - policy.freezeBeforeEndMs;
    const floor = cents(spendFloor(buy, state.reportingPeriodMs, nowMs));
    const minMove = cents(policy.minMoveAmount);
    if (eligible && downLong(buy) && after - floor >= minMove)
      fail('a seller down too long gives everything above its floor', `${id} after ${after} floor ${floor}`);
    if (eligible && buy.downSinceMs === undefined && after - Math.max(maxCents(id), floor) >= minMove)
      fail('a share above its maximum comes down to it', `${id} after ${after} max ${maxCents(id)} floor ${floor}`);
    if (buy.rejected && counts('buy_rejected') && after !== 0) fail('a rejected buy keeps nothing', id);
  }
}

describe('allocation: randomized campaigns', () => {
  const only = process.env.SEED ? Number(process.env.SEED) : undefined;

  it(`keeps every rule over ${RUNS} seeded random campaigns, and gives the same plan for the same state`, () => {
    const outcomes = new Map<string, number>();
    for (let seed = only ?? 1; seed <= (only ?? RUNS); seed += 1) {
      const random = mulberry32(seed);
      const campaign = randomCampaign(random);
      const plan = planAllocation(campaign.state, campaign.policy, campaign.nowMs);
      const label = plan.outcome === 'moves' ? `moves` : plan.why;
      outcomes.set(label, (outcomes.get(label) ?? 0) + 1);
      // What the plans contain: every kind of source and taker.
      const codes = new Set(
        plan.outcome === 'moves' ? plan.moves.flatMap((move) => move.reasons.map((r) => r.code)) : [],
      );
      for (const code of codes) outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
      if (plan.outcome === 'moves' && plan.moves.some((move) => move.from.kind === 'pool'))
        outcomes.set('from_pool', (outcomes.get('from_pool') ?? 0) + 1);
      if (plan.shares.some((share) => !share.inBounds))
        outcomes.set('out_of_bounds', (outcomes.get('out_of_bounds') ?? 0) + 1);
      try {
        check(campaign, plan);
        // Determinism: another buy order and key order, a deep copy, and a second call all give the same plan.
        const again = JSON.stringify(plan);
        if (JSON.stringify(planAllocation(campaign.state, campaign.policy, campaign.nowMs)) !== again)
          throw new Error('a second call gives another plan');
        const copy = structuredClone(campaign);
        if (JSON.stringify(planAllocation(copy.state, copy.policy, copy.nowMs)) !== again)
          throw new Error('a copy of the state gives another plan');
        const shuffled = reordered(campaign, random);
        if (JSON.stringify(planAllocation(shuffled.state, shuffled.policy, shuffled.nowMs)) !== again)
          throw new Error('another buy or key order gives another plan');
      } catch (error) {
        throw new Error(
          `seed ${seed}: ${(error as Error).message}\n${JSON.stringify(campaign)}\n${JSON.stringify(plan)}`,
        );
      }
    }
    // The generator reaches every branch often enough for the checks above to mean something.
    if (process.env.SHOW_OUTCOMES) console.log(JSON.stringify([...outcomes].sort()));
    if (only === undefined) {
      expect(outcomes.get('moves') ?? 0).toBeGreaterThan(RUNS / 5);
      for (const why of ['policy_off', 'freeze_window', 'nothing_to_move', 'change_in_flight'])
        expect(outcomes.get(why) ?? 0).toBeGreaterThan(RUNS / 200);
      const reasons = ['pacing', 'delivery_vs_plan', 'seller_down', 'buy_rejected', 'above_max_share'];
      reasons.push('below_min_share', 'delivering', 'no_taker', 'from_pool', 'out_of_bounds');
      for (const reason of reasons) expect([reason, (outcomes.get(reason) ?? 0) > RUNS / 100]).toEqual([reason, true]);
    }
  });

  it('refuses a view whose buys and pool do not add up to the campaign budget, and moves nothing', () => {
    for (let seed = 1; seed <= 500; seed += 1) {
      const random = mulberry32(10_000 + seed);
      const campaign = randomCampaign(random);
      const policy = { ...campaign.policy, mode: 'auto' as const };
      const off = random() < 0.5 ? 0.01 : -0.01;
      const state = { ...campaign.state, pool: Math.max(0, Math.round((campaign.state.pool + off) * 100) / 100) };
      if (cents(state.pool) === cents(campaign.state.pool)) continue;
      const plan = planAllocation(state, policy, campaign.nowMs);
      expect(plan).toMatchObject({ outcome: 'none', why: 'invalid_state' });
    }
  });
});
