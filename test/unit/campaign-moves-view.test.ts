/** What the CLI and the campaign view show of a campaign's budget moves: from, to, amount, why, status. */
import { moveLines } from '../../cli/commands/campaigns';
import { budgetAllocationView } from '../../api/budget-allocation-view';
import type { BudgetAllocationState } from '../../contract/campaign';
import { DEFAULT_ALLOCATION_POLICY } from '../../workflows/campaign/allocation';

const book: BudgetAllocationState = {
  policy: { ...DEFAULT_ALLOCATION_POLICY, mode: 'propose' },
  policyChanges: [{ at: '2026-03-01T00:00:00.000Z', by: 'planner@buyer', mode: 'propose' }],
  pool: 500,
  plans: 2,
  proposal: { plan: 2, moves: ['2.1'], since: '2026-03-03T00:00:00.000Z', deadline: '2026-03-04T00:00:00.000Z' },
  moves: [
    {
      id: '1.1',
      plan: 1,
      from: { kind: 'seller', sellerId: 'slow' },
      to: { kind: 'seller', sellerId: 'fast' },
      amount: 1_200,
      moved: 1_000,
      why: 'slow pacing 0.4, below 0.8',
      reasons: [],
      status: 'applied',
      mode: 'propose',
      decidedBy: 'trader@buyer',
      createdAt: '2026-03-02T00:00:00.000Z',
      updatedAt: '2026-03-02T00:00:00.000Z',
      steps: [
        {
          step: 'confirm',
          sellerId: 'slow',
          budgetBefore: 4_000,
          budgetAfter: 3_000,
          outcome: 'confirmed',
          at: '2026-03-02T00:00:00.000Z',
        },
      ],
    },
    {
      id: '2.1',
      plan: 2,
      from: { kind: 'pool' },
      to: { kind: 'seller', sellerId: 'fast' },
      amount: 500,
      why: '500.00 in the pool',
      reasons: [],
      status: 'proposed',
      mode: 'propose',
      createdAt: '2026-03-03T00:00:00.000Z',
      updatedAt: '2026-03-03T00:00:00.000Z',
      steps: [],
    },
  ],
  totals: { moves: 2, applied: 1, returned: 0, failed: 0, moved: 1_000 },
  lastMoveAt: {},
};

test('each move shows from, to, what moved, its status and why; a waiting plan shows its deadline', () => {
  const lines = moveLines(book);
  expect(lines[0]).toContain('propose · pool 500 · 1 applied');
  expect(lines).toContain('  plan 2 waits for a decision until 2026-03-04T00:00:00.000Z (moves 2.1)');
  expect(lines).toContain('  1.1  slow → fast  1000  applied  slow pacing 0.4, below 0.8');
  expect(lines).toContain('  2.1  pool → fast  500  proposed  500.00 in the pool');
});

test('the campaign view speaks the wire: snake_case, hours, seller ids as agent ids', () => {
  const view = budgetAllocationView(book);
  expect(view.policy).toMatchObject({ mode: 'propose', approval_timeout_hours: 24, freeze_before_end_hours: 24 });
  expect(view.moves[0]).toMatchObject({
    from: 'slow',
    to: 'fast',
    amount: 1_200,
    moved: 1_000,
    decided_by: 'trader@buyer',
  });
  expect(view.moves[0].steps[0]).toMatchObject({ step: 'confirm', agent_id: 'slow', budget_after: 3_000 });
  expect(view.proposal).toMatchObject({ plan: 2, moves: ['2.1'] });
});
