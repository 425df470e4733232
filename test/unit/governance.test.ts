/**
 * Governance's pure rules: reading a check_governance verdict (3.1 `verdict`, a pre-3.1 `status`), which conditions
 * the orchestrator can apply itself and how, and which media-buy changes are spends that need a check.
 */
import {
  applyConditions,
  conditionPath,
  conditionsMachineApplicable,
  parseGovernanceCheck,
} from '../../protocol/governance';
import { raisesBudget, syncPlansParams } from '../../workflows/governance/machine';

describe('parseGovernanceCheck', () => {
  test('reads a 3.1 answer: verdict, token, conditions and findings', () => {
    const parsed = parseGovernanceCheck({
      check_id: 'chk_1',
      verdict: 'conditions',
      explanation: 'Cap the budget.',
      governance_context: 'a.b.c',
      expires_at: '2026-03-15T01:00:00Z',
      conditions: [
        { field: 'payload.packages[0].budget', required_value: 5000, reason: 'cap' },
        { field: 'payload.brand_safety_ack', reason: 'confirm' },
        { reason: 'no field: ignored' },
      ],
      findings: [{ category_id: 'budget_authority', severity: 'warning', explanation: 'over' }],
    });
    expect(parsed).toEqual({
      ok: true,
      answer: {
        checkId: 'chk_1',
        verdict: 'conditions',
        explanation: 'Cap the budget.',
        governanceContext: 'a.b.c',
        expiresAt: '2026-03-15T01:00:00Z',
        conditions: [
          { field: 'payload.packages[0].budget', requiredValue: 5000, reason: 'cap' },
          { field: 'payload.brand_safety_ack', reason: 'confirm' },
        ],
        findings: [{ categoryId: 'budget_authority', severity: 'warning', explanation: 'over' }],
      },
    });
  });

  test('a pre-3.1 agent answers the verdict as `status`; a denial without explanation uses its findings', () => {
    const parsed = parseGovernanceCheck({ status: 'denied', findings: [{ explanation: 'CA is outside the plan.' }] });
    expect(parsed).toMatchObject({ ok: true, answer: { verdict: 'denied', explanation: 'CA is outside the plan.' } });
  });

  test('no verdict is no approval', () => {
    expect(parseGovernanceCheck(undefined)).toMatchObject({ ok: false });
    expect(parseGovernanceCheck({ status: 'completed' })).toMatchObject({ ok: false });
    expect(parseGovernanceCheck({ verdict: 'maybe' })).toMatchObject({ ok: false });
  });
});

describe('conditions', () => {
  test('paths: payload fields, array indexes; the orchestrator-owned fields are never set', () => {
    expect(conditionPath('payload.packages[1].budget')).toEqual(['packages', 1, 'budget']);
    expect(conditionPath('frequency_cap')).toEqual(['frequency_cap']);
    expect(conditionPath('payload.governance_context')).toBeUndefined();
    expect(conditionPath('payload.idempotency_key')).toBeUndefined();
    expect(conditionPath('payload.packages[x]')).toBeUndefined();
  });

  test('machine-applicable only when every condition has a value at a settable field', () => {
    expect(conditionsMachineApplicable([{ field: 'payload.packages[0].budget', requiredValue: 1 }])).toBe(true);
    expect(
      conditionsMachineApplicable([
        { field: 'payload.packages[0].budget', requiredValue: 1 },
        { field: 'payload.brand_safety_ack' },
      ]),
    ).toBe(false);
    expect(conditionsMachineApplicable([])).toBe(false);
  });

  test('applying sets values on a copy, creates objects on the way, refuses missing array elements', () => {
    const payload = { packages: [{ product_id: 'p', budget: 8000 }] };
    const adjusted = applyConditions(payload, [
      { field: 'payload.packages[0].budget', requiredValue: 5000 },
      { field: 'payload.targeting_overlay.frequency_cap', requiredValue: { max_impressions: 5 } },
    ]);
    expect(adjusted).toEqual({
      packages: [{ product_id: 'p', budget: 5000 }],
      targeting_overlay: { frequency_cap: { max_impressions: 5 } },
    });
    expect(payload.packages[0].budget).toBe(8000);
    expect(() => applyConditions(payload, [{ field: 'payload.packages[3].budget', requiredValue: 1 }])).toThrow(
      /does not have/,
    );
    // A person's value wins over the agent's.
    expect(
      applyConditions(payload, [{ field: 'payload.packages[0].budget', requiredValue: 5000 }], {
        'payload.packages[0].budget': 4000,
      }).packages,
    ).toEqual([{ product_id: 'p', budget: 4000 }]);
  });
});

describe('raisesBudget', () => {
  const packages = { pkg_1: { budget: 4000 }, pkg_2: { budget: 1000 } };
  test('a higher package budget, or one on an unknown package, is a spend', () => {
    expect(raisesBudget(packages, { kind: 'budget', budgets: { pkg_1: 6000 } })).toBe(true);
    expect(raisesBudget(packages, { kind: 'budget', budgets: { pkg_1: 3000, pkg_2: 1500 } })).toBe(true);
    expect(raisesBudget(packages, { kind: 'budget', budgets: { pkg_9: 10 } })).toBe(true);
    expect(raisesBudget(packages, { kind: 'packages', packages: [{ package_id: 'pkg_2', budget: 2000 }] })).toBe(true);
  });
  test('cuts, pauses, dates and cancels are not', () => {
    expect(raisesBudget(packages, { kind: 'budget', budgets: { pkg_1: 3000 } })).toBe(false);
    expect(raisesBudget(packages, { kind: 'budget', budgets: { pkg_1: 4000 } })).toBe(false);
    expect(raisesBudget(packages, { kind: 'packages', packages: [{ package_id: 'pkg_1', paused: true }] })).toBe(false);
    for (const kind of ['pause', 'resume', 'dates', 'cancel']) expect(raisesBudget(packages, { kind })).toBe(false);
  });
});

test('sync_plans carries the campaign plan: budget, flight, objectives, sellers, and the buyer plan fields', () => {
  const params = syncPlansParams({
    planId: 'spring',
    objectives: 'Awareness',
    totalBudget: 50_000,
    flight: { startTime: '2026-03-01T00:00:00Z', endTime: '2026-04-01T00:00:00Z' },
    sellerIds: ['a', 'b'],
    brand: { domain: 'acme.example' },
    extra: { countries: ['US'], budget: { reallocation_threshold: 5_000 } },
  });
  expect(params).toEqual({
    plans: [
      {
        plan_id: 'spring',
        brand: { domain: 'acme.example' },
        objectives: 'Awareness',
        countries: ['US'],
        budget: { total: 50_000, currency: 'USD', reallocation_threshold: 5_000 },
        flight: { start: '2026-03-01T00:00:00Z', end: '2026-04-01T00:00:00Z' },
        ext: { adcp_orchestrator: { sellers: ['a', 'b'] } },
      },
    ],
  });
});
