/** The pure parts of accepting a proposal: catalogue parsing, the selection's rules, the create and finalize arguments. */
import { finalizedProposalOf, normaliseProducts } from '../../protocol/catalogue';
import {
  finalizeParams,
  indexProposals,
  proposalBuyParams,
  requoteCodeOf,
  selectionTotal,
  validateSelectionWithProposals,
} from '../../workflows/campaign/proposal-rules';
import { indexCatalogue, validateSelection } from '../../workflows/campaign/rules';

const NOW = Date.parse('2026-03-01T00:00:00Z');
const HOUR = 3_600_000;

const answer = (sellerId: string, status: string, expiresAt: string) =>
  normaliseProducts(sellerId, {
    products: [{ product_id: `${sellerId}_display`, pricing_options: [{ pricing_option_id: 'cpm', fixed_price: 10 }] }],
    proposals: [
      {
        proposal_id: `${sellerId}_plan`,
        name: 'plan',
        proposal_status: status,
        allocations: [{ product_id: `${sellerId}_display`, allocation_percentage: 100 }],
        expires_at: expiresAt,
        total_budget_guidance: { min: 1000, max: 9000, currency: 'EUR' },
      },
      { name: 'no id: left out' },
    ],
  });

const a = answer('a', 'committed', new Date(NOW + HOUR).toISOString());
const b = answer('b', 'draft', new Date(NOW - HOUR).toISOString());
const products = indexCatalogue([...a.entries, ...b.entries]);
const proposals = indexProposals([...a.proposals, ...b.proposals]);
const check = (request: unknown, phase: 'selecting' | 'live' = 'selecting') =>
  validateSelectionWithProposals(phase, 10_000, products, proposals, request as never, NOW);

test('the catalogue keeps a proposal with its status, expiry and budget guidance', () => {
  expect(a.proposals).toEqual([
    expect.objectContaining({
      sellerId: 'a',
      proposalId: 'a_plan',
      status: 'committed',
      expiresAt: new Date(NOW + HOUR).toISOString(),
      budgetGuidance: { min: 1000, max: 9000, currency: 'EUR' },
    }),
  ]);
});

test('a selection accepts a proposal of that seller, not expired, within the budget; mixing with lines is allowed', () => {
  expect(
    check({ lines: [], proposals: [{ sellerId: 'a', proposalId: 'a_plan', budget: 5000 }], selectedBy: 'p' }),
  ).toEqual({ ok: true });
  const mixed = {
    lines: [{ sellerId: 'b', productId: 'b_display', budget: 4000 }],
    proposals: [{ sellerId: 'a', proposalId: 'a_plan', budget: 6000 }],
    selectedBy: 'p',
  };
  expect(check(mixed)).toEqual({ ok: true });
  expect(selectionTotal(mixed)).toBe(10_000);
  expect(check({ ...mixed, proposals: [{ sellerId: 'a', proposalId: 'a_plan', budget: 6000.01 }] })).toMatchObject({
    ok: false,
    code: 'BUDGET_EXCEEDED',
  });
});

test('a selection refuses a proposal of another seller, an unknown or expired one, a seller twice, a bad phase', () => {
  const one = (entry: Record<string, unknown>) => check({ lines: [], proposals: [entry], selectedBy: 'p' });
  expect(one({ sellerId: 'b', proposalId: 'a_plan', budget: 1 })).toMatchObject({
    ok: false,
    code: 'PROPOSAL_NOT_FOUND',
    message: expect.stringContaining('offered by seller a, not b'),
  });
  expect(one({ sellerId: 'a', proposalId: 'nope', budget: 1 })).toMatchObject({ code: 'PROPOSAL_NOT_FOUND' });
  expect(one({ sellerId: 'b', proposalId: 'b_plan', budget: 1 })).toMatchObject({ code: 'PROPOSAL_EXPIRED' });
  expect(one({ sellerId: 'a', proposalId: 'a_plan', budget: 0 })).toMatchObject({ code: 'INVALID_REQUEST' });
  expect(
    check({
      lines: [{ sellerId: 'a', productId: 'a_display', budget: 1 }],
      proposals: [{ sellerId: 'a', proposalId: 'a_plan', budget: 1 }],
      selectedBy: 'p',
    }),
  ).toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringContaining('either by proposal or by products') });
  expect(check({ lines: [], proposals: [], selectedBy: 'p' })).toMatchObject({ code: 'INVALID_REQUEST' });
  expect(
    check({ lines: [], proposals: [{ sellerId: 'a', proposalId: 'a_plan', budget: 1 }], selectedBy: 'p' }, 'live'),
  ).toMatchObject({ code: 'INVALID_STATE' });
  expect(
    check({ lines: [], proposals: [{ sellerId: 'a', proposalId: 'a_plan', budget: 1 }], selectedBy: ' ' }),
  ).toMatchObject({
    code: 'INVALID_REQUEST',
  });
});

test('without proposals the rules are exactly validateSelection', () => {
  const request = { lines: [{ sellerId: 'a', productId: 'missing', budget: 1 }], selectedBy: 'p' };
  expect(check(request)).toEqual(validateSelection('selecting', 10_000, products, request));
  expect(check({ lines: [], selectedBy: 'p' })).toEqual(
    validateSelection('selecting', 10_000, products, { lines: [], selectedBy: 'p' }),
  );
});

test('create_media_buy by proposal: proposal_id and total_budget, never packages; finalize is get_products refine', () => {
  const params = proposalBuyParams(
    {
      buyParams: { brand: { domain: 'x.example' }, packages: [{ product_id: 'p' }] },
      flight: { startTime: 's', endTime: 'e' },
    },
    'a_plan_2',
    1234.567,
    'EUR',
  );
  expect(params).toEqual({
    brand: { domain: 'x.example' },
    start_time: 's',
    end_time: 'e',
    proposal_id: 'a_plan_2',
    total_budget: { amount: 1234.57, currency: 'EUR' },
  });
  expect(finalizeParams({ brand: { domain: 'x.example' }, filters: { x: 1 } }, 'b_plan')).toEqual({
    brand: { domain: 'x.example' },
    buying_mode: 'refine',
    refine: [{ scope: 'proposal', proposal_id: 'b_plan', action: 'finalize' }],
  });
});

test('the committed proposal of a finalize answer, and which create failures mean "quote again"', () => {
  const refined = {
    proposals: [
      { proposal_id: 'other', name: 'o', allocations: [], proposal_status: 'committed', parent_proposal_id: 'x' },
      {
        proposal_id: 'b_plan_2',
        name: 'b',
        allocations: [],
        proposal_status: 'committed',
        parent_proposal_id: 'b_plan',
      },
    ],
  };
  expect(finalizedProposalOf('b', refined, 'b_plan')?.proposalId).toBe('b_plan_2');
  expect(
    finalizedProposalOf(
      'b',
      { proposals: [{ proposal_id: 'b_plan', name: 'b', allocations: [], proposal_status: 'draft' }] },
      'b_plan',
    ),
  ).toBeUndefined();
  const failed = (code: string) => ({
    status: 'create_failed' as const,
    failure: {
      reason: 'failed',
      message: `${code}: no`,
      error: { code, message: 'no', recovery: 'correctable' as const },
    },
  });
  expect(requoteCodeOf(failed('REQUOTE_REQUIRED'))).toBe('REQUOTE_REQUIRED');
  expect(requoteCodeOf(failed('PROPOSAL_EXPIRED'))).toBe('PROPOSAL_EXPIRED');
  expect(requoteCodeOf(failed('POLICY_VIOLATION'))).toBeUndefined();
  expect(requoteCodeOf({ status: 'pending_creatives' } as never)).toBeUndefined();
});
