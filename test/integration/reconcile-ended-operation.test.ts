/**
 * `POST /v1/operations/:id/reconcile` once the operation has ended: a 409 problem with a clear code, not a 5xx or a
 * hang. A create that failed `call_failed` after an earlier attempt had reached the seller (the seller holds a live
 * buy from it) names the route that finds that buy: the seller's reconciliation lists it as an orphan naming the
 * failed operation, the buy its context echoes.
 */
import type { ScriptedSellerOptions } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, type View, startResourceGateway } from '../harness/resource-gateway';

const LISTING_ONLY: ScriptedSellerOptions = {
  profile: { 'no-tasks-get': true, 'buy-listing': { echo: ['context'], defaultStatusFilter: true } },
};

let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({ sellers: { ended: LISTING_ONLY }, webhooks: false, callTimeoutMs: 3_000 });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

test('reconcile on a completed operation answers 409 OPERATION_ENDED as problem+json', async () => {
  gateway.sellers.ended.script('create_media_buy', [{ status: 'completed' }]);
  const operationId = await gateway.operations.start('ended', 'create_media_buy', createMediaBuyParams());
  expect((await gateway.operations.settled(operationId, 60_000)).status).toBe('completed');
  const response = await fetch(`${gateway.base}/v1/operations/${operationId}/reconcile`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ requested_by: 'ops@buyer' }),
  });
  expect(response.status).toBe(409);
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  const problem = (await response.json()) as View;
  expect(problem).toMatchObject({ status: 409, code: 'OPERATION_ENDED' });
}, 120_000);

test('a create that failed call_failed while the seller holds its buy: reconcile answers 409, and the failure names the seller reconciliation, which names the operation for the buy', async () => {
  const seller = gateway.sellers.ended;
  seller.script('create_media_buy', [{ status: 'completed' }]);
  // The first attempt makes the buy and its answer is lost; the retry is refused for good.
  seller.fault('create_media_buy', { kind: 'drop-after-processing' });
  seller.fault('create_media_buy', { kind: 'http-status', status: 400 }, { times: 5 });
  const before = seller.mediaBuys().length;
  const operationId = await gateway.operations.start('ended', 'create_media_buy', createMediaBuyParams());
  const view = await gateway.operations.settled(operationId, 60_000);
  expect(view.status).toBe('failed');
  expect(view.failure?.reason).toBe('call_failed');
  expect(seller.mediaBuys()).toHaveLength(before + 1);
  const buy = seller.mediaBuys().at(-1)!;
  expect(String(view.failure?.message)).toContain('/v1/sellers/ended/reconcile');

  const refused = await gateway.http('POST', `/v1/operations/${operationId}/reconcile`, { requested_by: 'ops@buyer' });
  expect(refused.status).toBe(409);
  expect(refused.body.code).toBe('OPERATION_ENDED');

  const report = await gateway.http('POST', '/v1/sellers/ended/reconcile', { requested_by: 'ops@buyer' });
  expect(report.status).toBe(200);
  expect(report.body.seller_buys.orphans).toContainEqual(
    expect.objectContaining({
      media_buy_id: buy.mediaBuyId,
      named_operation_id: operationId,
      named_operation_status: 'FAILED',
    }),
  );
}, 120_000);
