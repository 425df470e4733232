/**
 * A cancel while the operation looks for its buy: the create's every answer was lost, the seller has no task read
 * and its listing was down when the operation looked (`resource.state: unknown`). The cancel must not settle blind:
 * the operation reads the seller's media buys first, finds the buy by what it sent, and cancels it at the seller.
 */
import type { ScriptedSellerOptions } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, startResourceGateway } from '../harness/resource-gateway';

const LISTING_ONLY: ScriptedSellerOptions = {
  profile: { 'no-tasks-get': true, 'buy-listing': { echo: ['context'], defaultStatusFilter: true } },
};

let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({ sellers: { looking: LISTING_ONLY }, webhooks: false, callTimeoutMs: 3_000 });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

test('a cancel while the buy is looked for reads the seller’s buys first and cancels the buy it finds there', async () => {
  const seller = gateway.sellers.looking;
  seller.script('create_media_buy', [{ status: 'completed' }]);
  seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 50 });
  seller.chaos('get_media_buys', { rate: 1, faults: [{ kind: 'http-status', status: 503 }] });
  const operationId = await gateway.operations.start('looking', 'create_media_buy', createMediaBuyParams());
  const looking = await gateway.operations.waitFor(
    operationId,
    (view) => view.status === 'unknown' && !view.call_in_flight,
    60_000,
  );
  expect(looking.resource).toMatchObject({ state: 'unknown' });
  const [buy] = seller.mediaBuys();
  expect(buy.status).not.toBe('canceled');

  seller.chaos('get_media_buys', undefined);
  const cancel = await gateway.http('POST', `/v1/operations/${operationId}/cancel`, {
    requested_by: 'ops@buyer',
    reason: 'campaign pulled',
  });
  expect(cancel.status).toBe(202);
  const view = await gateway.operations.settled(operationId, 30_000);

  expect(seller.mediaBuys()).toHaveLength(1);
  expect(seller.mediaBuys()[0].status).toBe('canceled');
  expect(view.status).toBe('canceled');
  expect(view.resource).toMatchObject({ media_buy_id: buy.mediaBuyId, state: 'canceled' });
}, 120_000);
