/**
 * Which listed media buy a create made (issue 24, item 2): matched by what the operation sent, strongest evidence
 * first, naming how; never two, never one another operation knows, and the last resort only when one buy fits.
 */
import { contextWithOperation, matchListedBuy, sentCreateFrom } from '../../protocol';

const operationId = 'adcp-create_media_buy-7d2f';
const args = {
  idempotency_key: 'key-1',
  context: contextWithOperation({ trace: 'abc' }, operationId),
  start_time: '2027-03-01T00:00:00.000Z',
  end_time: '2027-03-31T00:00:00.000Z',
  packages: [{ product_id: 'p1', pricing_option_id: 'cpm', budget: 1234 }],
};
const sent = sentCreateFrom(args, operationId, '2026-12-01T10:00:00.000Z');
const row = (id: string, extra: Record<string, unknown> = {}) => ({
  media_buy_id: id,
  status: 'pending_creatives',
  created_at: '2026-12-01T10:00:05.000Z',
  packages: [{ package_id: `${id}_1`, product_id: 'p1', budget: 1234 }],
  ...extra,
});

test("the orchestrator's context marker is merged into the caller's context", () => {
  expect(contextWithOperation({ trace: 'abc' }, 'op-1')).toEqual({
    trace: 'abc',
    adcp_orchestrator: { operation_id: 'op-1' },
  });
  expect(contextWithOperation(undefined, 'op-1')).toEqual({ adcp_orchestrator: { operation_id: 'op-1' } });
});

test('an echoed idempotency key wins over everything else', () => {
  const match = matchListedBuy([row('mb_other'), row('mb_mine', { ext: { idempotency_key: 'key-1' } })], sent);
  expect(match).toMatchObject({ found: true, mediaBuyId: 'mb_mine', matchedBy: 'idempotency_key' });
});

test('the echoed context names the operation, even among buys of the same shape', () => {
  const match = matchListedBuy(
    [
      row('mb_a', { context: contextWithOperation({ trace: 'abc' }, 'another-operation') }),
      row('mb_b', { context: contextWithOperation({ trace: 'abc' }, operationId) }),
    ],
    sent,
  );
  expect(match).toMatchObject({ found: true, mediaBuyId: 'mb_b', matchedBy: 'context' });
});

test('po_number when the create carried one', () => {
  const withPo = sentCreateFrom({ ...args, context: undefined, po_number: 'PO-9' }, operationId);
  const match = matchListedBuy([row('mb_a', { po_number: 'PO-8' }), row('mb_b', { po_number: 'PO-9' })], withPo);
  expect(match).toMatchObject({ found: true, mediaBuyId: 'mb_b', matchedBy: 'po_number' });
});

test('the last resort: the one buy with the same products, budgets and flight', () => {
  const match = matchListedBuy(
    [
      row('mb_other_budget', { packages: [{ product_id: 'p1', budget: 999 }] }),
      row('mb_other_flight', { start_time: '2027-04-01T00:00:00.000Z' }),
      row('mb_before_we_started', { created_at: '2026-11-01T00:00:00.000Z' }),
      row('mb_mine', { start_time: '2027-03-01T00:00:00Z' }),
    ],
    sent,
  );
  expect(match).toMatchObject({ found: true, mediaBuyId: 'mb_mine', matchedBy: 'packages_budget_flight' });
});

test('two buys that fit the same evidence: none adopted, both named as candidates', () => {
  const match = matchListedBuy([row('mb_a'), row('mb_b')], sent);
  expect(match).toMatchObject({ found: false, candidates: ['mb_a', 'mb_b'] });
});

test('a buy another operation knows is never adopted', () => {
  const match = matchListedBuy([row('mb_a'), row('mb_b')], sent, new Set(['mb_a']));
  expect(match).toMatchObject({ found: true, mediaBuyId: 'mb_b', matchedBy: 'packages_budget_flight' });
});

test('nothing matches: not found, no candidates', () => {
  const match = matchListedBuy([row('mb_a', { packages: [{ product_id: 'p2', budget: 1234 }] })], sent);
  expect(match).toMatchObject({ found: false, candidates: [] });
});

test('a create without packages is never matched by shape', () => {
  const bare = sentCreateFrom({ proposal_id: 'prop_1' }, operationId);
  expect(matchListedBuy([row('mb_a')], bare)).toMatchObject({ found: false });
});
