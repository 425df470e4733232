/**
 * The allocation policy and decision, by example: one campaign per rule, small enough to check by hand. The
 * randomized suite (campaign-allocation-random.test.ts) proves the same rules over thousands of campaigns.
 */
import {
  type AllocationBuy,
  type AllocationPlan,
  type AllocationState,
  type BudgetAllocationPolicyInput,
  DEFAULT_ALLOCATION_POLICY,
  budgetActions,
  planAllocation,
  spendFloor,
  validateAllocationPolicy,
} from '../../workflows/campaign/allocation';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const START = Date.parse('2026-03-01T00:00:00Z');
const END = START + 30 * DAY;
/** Day 10 of a 30-day flight: a third of it has run. */
const NOW = START + 10 * DAY;

function buy(sellerId: string, fields: Partial<AllocationBuy> = {}): AllocationBuy {
  const budget = fields.budget ?? 10_000;
  const pacing = fields.pacing === undefined ? 1 : fields.pacing;
  return {
    sellerId,
    status: 'active',
    budget,
    // Spend consistent with the pacing: a third of the budget is planned by day 10.
    spend: Math.round(((budget * (pacing ?? 0)) / 3) * 100) / 100,
    pacing,
    startMs: START,
    endMs: END,
    ...fields,
  };
}

function campaign(buys: AllocationBuy[], pool = 0): AllocationState {
  const onBuys = buys.reduce((sum, entry) => sum + Math.round(entry.budget * 100), 0);
  return {
    totalBudget: (onBuys + Math.round(pool * 100)) / 100,
    pool,
    flight: { startMs: START, endMs: END },
    reportingPeriodMs: DAY,
    buys,
  };
}

function policy(fields: BudgetAllocationPolicyInput = {}) {
  const verdict = validateAllocationPolicy({ mode: 'auto', ...fields });
  if (!verdict.ok) throw new Error(verdict.message);
  return verdict.policy;
}

/** The moves as `from → to amount [reason codes]`, the way a reviewer reads them. */
function movesOf(plan: AllocationPlan): string[] {
  if (plan.outcome !== 'moves') return [`none: ${plan.why}`];
  const name = (endpoint: { kind: string; sellerId?: string }) => endpoint.sellerId ?? 'pool';
  return plan.moves.map(
    (move) =>
      `${name(move.from)} → ${name(move.to)} ${move.amount} [${move.reasons.map((reason) => reason.code).join(',')}]`,
  );
}

function budgetsAfter(plan: AllocationPlan): Record<string, number> {
  return Object.fromEntries(plan.shares.map((share) => [share.sellerId, share.budgetAfter]));
}

describe('allocation policy', () => {
  it('is off by default, with the defaults a buyer expects', () => {
    expect(DEFAULT_ALLOCATION_POLICY).toEqual({
      mode: 'off',
      approvalTimeoutMs: DAY,
      minShare: 0,
      maxShare: 1,
      sellers: {},
      minMoveAmount: 1,
      minPeriodsBetweenMoves: 1,
      freezeBeforeEndMs: DAY,
      signals: ['pacing', 'delivery_vs_plan', 'seller_down', 'buy_rejected'],
      underDeliveryThreshold: 0.8,
      deliveringThreshold: 0.95,
      underDeliveryGraceMs: DAY,
    });
    expect(
      planAllocation(campaign([buy('a', { pacing: 0.1 }), buy('b')]), DEFAULT_ALLOCATION_POLICY, NOW),
    ).toMatchObject({ outcome: 'none', why: 'policy_off' });
  });

  it.each([
    [{ minShare: 0.6, maxShare: 0.4 }, 'minShare', 'must not exceed maxShare (0.6 > 0.4)'],
    [{ maxShare: 1.5 }, 'maxShare', 'at most 1'],
    [{ minShare: -0.1 }, 'minShare', 'at least 0'],
    [{ sellers: { s1: { minShare: 0.5 } }, maxShare: 0.3 }, 'sellers.s1.minShare', 'above its maximum'],
    [{ sellers: { s1: { minShare: 0.6 }, s2: { minShare: 0.6 } } }, 'sellers', 'add up to 1.2'],
    [{ minMoveAmount: 0 }, 'minMoveAmount', 'at least one cent'],
    [{ minMoveAmount: 10.005 }, 'minMoveAmount', 'whole cents'],
    [{ minPeriodsBetweenMoves: 0 }, 'minPeriodsBetweenMoves', 'no seller moves twice within one reporting period'],
    [{ freezeBeforeEndMs: -1 }, 'freezeBeforeEndMs', 'cannot be negative'],
    [{ signals: ['pacing', 'pacing'] }, 'signals', 'lists each signal once'],
    [
      { signals: ['weather'] },
      'signals[0]',
      'each signal is one of pacing, delivery_vs_plan, seller_down, buy_rejected',
    ],
    [{ mode: 'sometimes' }, 'mode', 'must be one of off, propose, auto'],
    [{ approvalTimeoutMs: 1000 }, 'approvalTimeoutMs', 'at least a minute'],
    [
      { underDeliveryThreshold: 0.9, deliveringThreshold: 0.9 },
      'deliveringThreshold',
      'must be above underDeliveryThreshold',
    ],
    [{ maxshare: 0.5 }, 'maxshare', 'is not a field of the allocation policy'],
    [{ reportingPeriodMs: 500 }, 'reportingPeriodMs', 'at least a second'],
    [{ reportingPeriodMs: 1500.5 }, 'reportingPeriodMs', 'whole milliseconds'],
    [{ reportingPeriodMs: 32 * DAY }, 'reportingPeriodMs', 'at most 31 days'],
  ])('refuses %j, naming %s and why', (input, field, why) => {
    const verdict = validateAllocationPolicy(input);
    expect(verdict.ok).toBe(false);
    if (verdict.ok) return;
    expect(verdict.errors).toEqual([{ field, message: expect.stringContaining(why) as string }]);
    expect(verdict.message).toContain(`${field} `);
  });

  it('accepts propose with its approval deadline and per-seller bounds', () => {
    const verdict = validateAllocationPolicy({
      mode: 'propose',
      approvalTimeoutMs: 4 * HOUR,
      minShare: 0.1,
      maxShare: 0.6,
      sellers: { s1: { maxShare: 0.2 } },
      signals: ['seller_down'],
    });
    expect(verdict).toMatchObject({ ok: true, policy: { mode: 'propose', approvalTimeoutMs: 4 * HOUR } });
  });
});

describe('allocation: delivery and pacing', () => {
  it('an under-delivering seller loses what it would not spend at its pace to the sellers that deliver', () => {
    const plan = planAllocation(
      campaign([buy('a', { pacing: 0.5 }), buy('b', { pacing: 1 }), buy('c', { pacing: 1.2 })]),
      policy(),
      NOW,
    );
    // a keeps half (pacing 0.5 of 10,000); b and c share the other half by their budgets. a's floor: its spend
    // (1,666.67) plus a day at its planned rate (333.34), above its observed one.
    expect(movesOf(plan)).toEqual(['a → b 2500 [pacing,delivering]', 'a → c 2500 [pacing,delivering]']);
    expect(plan.outcome === 'moves' && plan.changes).toEqual([
      { sellerId: 'a', action: 'decrease_budget', budgetBefore: 10_000, budgetAfter: 5000, floor: 2000.01 },
      { sellerId: 'b', action: 'increase_budget', budgetBefore: 10_000, budgetAfter: 12_500 },
      { sellerId: 'c', action: 'increase_budget', budgetBefore: 10_000, budgetAfter: 12_500 },
    ]);
  });

  it('counts delivery against plan too, and only the signals the policy names', () => {
    const buys = [buy('a', { pacing: 1, deliveryVsPlan: 0.6 }), buy('b', { deliveryVsPlan: 1.1 })];
    expect(movesOf(planAllocation(campaign(buys), policy(), NOW))).toEqual([
      'a → b 4000 [delivery_vs_plan,delivering]',
    ]);
    expect(movesOf(planAllocation(campaign(buys), policy({ signals: ['pacing', 'seller_down'] }), NOW))).toEqual([
      'none: nothing_to_move',
    ]);
  });

  it('leaves an under-delivering seller its money when no seller delivers, and judges nobody before the grace', () => {
    expect(
      movesOf(planAllocation(campaign([buy('a', { pacing: 0.5 }), buy('b', { pacing: 0.9 })]), policy(), NOW)),
    ).toEqual(['none: nothing_to_move']);
    const early = START + 12 * HOUR;
    expect(
      movesOf(planAllocation(campaign([buy('a', { pacing: 0.1 }), buy('b', { pacing: 2 })]), policy(), early)),
    ).toEqual(['none: nothing_to_move']);
  });

  it('gives the pool to the delivering sellers in proportion to their budgets, each up to its maximum share', () => {
    const plan = planAllocation(
      campaign([buy('a', { budget: 2000 }), buy('b', { budget: 6000 }), buy('c', { budget: 1000, pacing: 0.9 })], 1000),
      policy({ maxShare: 0.65 }),
      NOW,
    );
    // b may hold 6,500 (0.65 of 10,000): it takes 500 and a the rest; c (0.9) neither delivers nor under-delivers.
    expect(movesOf(plan)).toEqual(['pool → a 500 [pool,delivering]', 'pool → b 500 [pool,delivering]']);
  });

  it('leaves out a taker offered less than a move worth making, and gives the rest to the others', () => {
    const buys = [buy('a', { pacing: 0.5 }), buy('b', { budget: 18_000 }), buy('c', { budget: 2000 })];
    // By budgets c would get 500 of the 5,000; under the smallest move of 1,000 it is left out.
    expect(movesOf(planAllocation(campaign(buys), policy({ minMoveAmount: 1000 }), NOW))).toEqual([
      'a → b 5000 [pacing,delivering]',
    ]);
    // With the smallest move above every piece, nothing moves.
    const two = [buy('a', { pacing: 0.5 }), buy('b'), buy('c')];
    expect(movesOf(planAllocation(campaign(two), policy({ minMoveAmount: 3000 }), NOW))).toEqual([
      'none: nothing_to_move',
    ]);
  });
});

describe('allocation: sellers down and buys rejected', () => {
  it('a seller down for less than a reporting period keeps its budget and gets none', () => {
    const buys = [buy('a', { downSinceMs: NOW - 12 * HOUR, pacing: 0.2 }), buy('b'), buy('c', { pacing: 0.5 })];
    const plan = planAllocation(campaign(buys, 500), policy(), NOW);
    // c gives to b; a, though it under-delivers, is not touched, and the pool goes to b only.
    expect(movesOf(plan)).toEqual(['c → b 5000 [pacing,delivering]', 'pool → b 500 [pool,delivering]']);
  });

  it('a seller down for longer than a reporting period gives everything above its spend and margin', () => {
    const down = buy('a', { budget: 9000, spend: 1000, pacing: 0.33, downSinceMs: NOW - 2 * DAY });
    // Spend 1,000 over 10 days (100 a day) against a plan of 300 a day: one day of margin at 300 → floor 1,300.
    expect(spendFloor(down, DAY, NOW)).toBe(1300);
    const plan = planAllocation(campaign([down, buy('b', { budget: 1000 })]), policy(), NOW);
    expect(movesOf(plan)).toEqual(['a → b 7700 [seller_down,delivering]']);
    // With nobody to take it, it waits in the pool.
    const alone = planAllocation(campaign([down, buy('b', { budget: 1000, pacing: 0.9 })]), policy(), NOW);
    expect(movesOf(alone)).toEqual(['a → pool 7700 [seller_down,no_taker]']);
    expect(alone.outcome === 'moves' && alone.poolAfter).toBe(7700);
    // Not when the policy does not count sellers down.
    expect(movesOf(planAllocation(campaign([down, buy('b')]), policy({ signals: ['pacing'] }), NOW))).toEqual([
      'none: nothing_to_move',
    ]);
  });

  it("a rejected buy's whole budget returns to the pool, without a seller call, then goes to the deliverers", () => {
    const rejected = buy('a', { status: 'rejected', rejected: true, spend: 0, pacing: null, allowedActions: [] });
    const plan = planAllocation(campaign([rejected, buy('b', { budget: 5000 })]), policy(), NOW);
    expect(movesOf(plan)).toEqual(['a → pool 10000 [buy_rejected]', 'pool → b 10000 [pool,delivering]']);
    expect(plan.outcome === 'moves' && plan.moves[0]!.release).toBe(true);
    expect(plan.outcome === 'moves' && plan.changes.map((change) => [change.sellerId, change.action])).toEqual([
      ['a', 'release'],
      ['b', 'increase_budget'],
    ]);
    expect(movesOf(planAllocation(campaign([rejected, buy('b')]), policy({ signals: ['pacing'] }), NOW))).toEqual([
      'none: nothing_to_move',
    ]);
  });
});

describe('allocation: shares, allowed actions, periods, the freeze', () => {
  it('brings a share above its maximum down to it, to a seller with room or else to the pool', () => {
    const plan = planAllocation(
      campaign([buy('a', { budget: 7000 }), buy('b', { budget: 3000 })]),
      policy({ maxShare: 0.5 }),
      NOW,
    );
    expect(movesOf(plan)).toEqual(['a → b 2000 [above_max_share,delivering]']);
    expect(budgetsAfter(plan)).toEqual({ a: 5000, b: 5000 });
    const nowhere = planAllocation(
      campaign([buy('a', { budget: 7000 }), buy('b', { budget: 3000, pacing: 0.9 })]),
      policy({ maxShare: 0.5 }),
      NOW,
    );
    expect(movesOf(nowhere)).toEqual(['a → pool 2000 [above_max_share,no_taker]']);
  });

  it('takes from a seller over its maximum that also under-delivers both parts, in one move', () => {
    // a must come down to 6,000 (0.6) and would spend only 3,500 at pacing 0.5; b has room for 3,000.
    const plan = planAllocation(
      campaign([buy('a', { budget: 7000, pacing: 0.5 }), buy('b', { budget: 3000 })]),
      policy({ maxShare: 0.6 }),
      NOW,
    );
    expect(movesOf(plan)).toEqual(['a → b 3000 [above_max_share,pacing,delivering]']);
    expect(budgetsAfter(plan)).toEqual({ a: 4000, b: 6000 });
  });

  it('raises a share below its minimum first, whatever its delivery, and never takes a source below it', () => {
    const raised = planAllocation(
      campaign([buy('a', { budget: 1000, pacing: 0.5 }), buy('b', { budget: 7000 })], 2000),
      policy({ minShare: 0.2 }),
      NOW,
    );
    expect(movesOf(raised)).toEqual(['pool → a 1000 [pool,below_min_share]', 'pool → b 1000 [pool,delivering]']);
    // a under-delivers badly (0.2) but keeps its 0.3 minimum share: it gives 1,000, not 3,200.
    const kept = planAllocation(
      campaign([buy('a', { budget: 4000, pacing: 0.2 }), buy('b', { budget: 6000 })]),
      policy({ minShare: 0.3 }),
      NOW,
    );
    expect(movesOf(kept)).toEqual(['a → b 1000 [pacing,delivering]']);
  });

  it('says why a share stays out of its bounds', () => {
    const plan = planAllocation(
      campaign([buy('a', { budget: 8000, allowedActions: ['increase_budget'] }), buy('b', { budget: 2000 })]),
      policy({ maxShare: 0.5, sellers: { b: { minShare: 0.3 } } }),
      NOW,
    );
    expect(plan).toMatchObject({ outcome: 'none', why: 'nothing_to_move' });
    expect(plan.shares).toEqual([
      expect.objectContaining({
        sellerId: 'a',
        inBounds: false,
        outOfBounds: { side: 'above_max', because: ['cannot_decrease'] },
      }),
      expect.objectContaining({
        sellerId: 'b',
        inBounds: false,
        outOfBounds: { side: 'below_min', because: ['not_enough_money'] },
      }),
    ]);
  });

  it('says a seller down keeps below its minimum because it is down', () => {
    const plan = planAllocation(
      campaign([buy('a', { budget: 1000, downSinceMs: NOW - HOUR }), buy('b', { budget: 9000 })], 0),
      policy({ minShare: 0.2 }),
      NOW,
    );
    expect(plan.shares[0]).toMatchObject({
      sellerId: 'a',
      inBounds: false,
      outOfBounds: { side: 'below_min', because: ['seller_down'] },
    });
  });

  it('reads allowed actions in 3.1 and 3.0 names: decrease_budget, increase_budget, update_budget', () => {
    expect(budgetActions(['decrease_budget'])).toEqual({ decrease: true, increase: false });
    expect(budgetActions(['increase_budget', 'pause'])).toEqual({ decrease: false, increase: true });
    expect(budgetActions(['update_budget'])).toEqual({ decrease: true, increase: true });
    // reallocate_budget (and 3.0 update_packages) keep the buy's total: they permit neither.
    expect(budgetActions(['reallocate_budget', 'update_packages'])).toEqual({ decrease: false, increase: false });
    expect(budgetActions([])).toEqual({ decrease: false, increase: false });
    // A seller that never said is not refused here; it answers ACTION_NOT_ALLOWED itself.
    expect(budgetActions(undefined)).toEqual({ decrease: true, increase: true });
  });

  it('never takes from a seller that cannot decrease, never gives to one that cannot increase', () => {
    const under = (allowedActions?: string[]) =>
      buy('a', { pacing: 0.5, ...(allowedActions ? { allowedActions } : {}) });
    const taker = (allowedActions?: string[]) => buy('b', { ...(allowedActions ? { allowedActions } : {}) });
    const plan = (a: AllocationBuy, b: AllocationBuy) => movesOf(planAllocation(campaign([a, b]), policy(), NOW));
    expect(plan(under(['increase_budget', 'pause']), taker())).toEqual(['none: nothing_to_move']);
    expect(plan(under(['reallocate_budget']), taker())).toEqual(['none: nothing_to_move']);
    expect(plan(under(['update_budget']), taker(['update_budget']))).toEqual(['a → b 5000 [pacing,delivering]']);
    expect(plan(under(['decrease_budget']), taker(['decrease_budget', 'reallocate_budget']))).toEqual([
      'none: nothing_to_move',
    ]);
    expect(plan(under(['decrease_budget']), taker(['increase_budget']))).toEqual(['a → b 5000 [pacing,delivering]']);
    expect(plan(under(), taker())).toEqual(['a → b 5000 [pacing,delivering]']);
  });

  it('moves a seller at most once per reporting period (or as many as the policy says)', () => {
    const buys = (lastMoveAtMs: number) => [buy('a', { pacing: 0.5 }), buy('b', { lastMoveAtMs }), buy('c')];
    expect(movesOf(planAllocation(campaign(buys(NOW - 12 * HOUR)), policy(), NOW))).toEqual([
      'a → c 5000 [pacing,delivering]',
    ]);
    expect(movesOf(planAllocation(campaign(buys(NOW - 25 * HOUR)), policy(), NOW))).toEqual([
      'a → b 2500 [pacing,delivering]',
      'a → c 2500 [pacing,delivering]',
    ]);
    expect(
      movesOf(planAllocation(campaign(buys(NOW - 36 * HOUR)), policy({ minPeriodsBetweenMoves: 2 }), NOW)),
    ).toEqual(['a → c 5000 [pacing,delivering]']);
  });

  it('moves nothing in the freeze window, nor at a buy whose own flight is ending', () => {
    const buys = [buy('a', { pacing: 0.5 }), buy('b'), buy('c', { endMs: NOW + 12 * HOUR })];
    expect(planAllocation(campaign(buys), policy(), END - 12 * HOUR)).toMatchObject({
      outcome: 'none',
      why: 'freeze_window',
    });
    expect(movesOf(planAllocation(campaign(buys), policy(), NOW))).toEqual(['a → b 5000 [pacing,delivering]']);
    expect(movesOf(planAllocation(campaign(buys), policy({ freezeBeforeEndMs: 0 }), NOW))).toEqual([
      'a → b 2500 [pacing,delivering]',
      'a → c 2500 [pacing,delivering]',
    ]);
  });
});

describe('allocation: what it refuses to plan on', () => {
  it('waits while a budget change is in flight', () => {
    const plan = planAllocation(campaign([buy('a', { pacing: 0.5, changeInFlight: true }), buy('b')]), policy(), NOW);
    expect(plan).toMatchObject({ outcome: 'none', why: 'change_in_flight', message: expect.stringContaining('a') });
  });

  it('refuses a view that does not reconcile, or holds two buys at one seller', () => {
    const state = campaign([buy('a'), buy('b')], 100);
    expect(planAllocation({ ...state, pool: 99.99 }, policy(), NOW)).toMatchObject({
      outcome: 'none',
      why: 'invalid_state',
      message: 'The buys (20000.00) and the pool (99.99) do not add up to the campaign budget (20100.00).',
    });
    expect(planAllocation(campaign([buy('a'), buy('a')]), policy(), NOW)).toMatchObject({
      outcome: 'none',
      why: 'invalid_state',
    });
  });

  it('lists sellers in code-unit order, the same on every runtime (not the locale order)', () => {
    const buys = ['beta', 'alpha', 'Beta', 'éclair', 'Zeta'].map((id) => buy(id, { budget: 1000 }));
    const plan = planAllocation(campaign(buys, 1000), policy(), NOW);
    expect(plan.shares.map((share) => share.sellerId)).toEqual(['Beta', 'Zeta', 'alpha', 'beta', 'éclair']);
    expect(plan.outcome === 'moves' && plan.changes.map((change) => change.sellerId)).toEqual([
      'Beta',
      'Zeta',
      'alpha',
      'beta',
      'éclair',
    ]);
  });

  it('gives the same plan whatever the order of the buys', () => {
    const buys = [
      buy('b'),
      buy('a', { pacing: 0.5 }),
      buy('C', { pacing: 1.3 }),
      buy('é', { downSinceMs: NOW - 3 * DAY }),
    ];
    const plan = planAllocation(campaign(buys, 10), policy(), NOW);
    expect(planAllocation(campaign([...buys].reverse(), 10), policy(), NOW)).toEqual(plan);
    expect(plan.outcome).toBe('moves');
  });
});
