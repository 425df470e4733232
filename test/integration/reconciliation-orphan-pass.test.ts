/**
 * The orphan pass of a seller's reconciliation: every buy the seller lists is compared with the buys the
 * orchestrator's workflows know (each operation indexes the media_buy_id it learns). A buy an operation made but
 * could not know (its create's answer lost, the listing down when it looked) is adopted through that operation's own
 * reconcile, with `matched_by`; a buy no operation made is reported as an orphan; a buy its operation knows is
 * neither.
 */
import { idempotencyKeyFor } from '../../activities/idempotency';
import type { ScriptedSellerOptions } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, type View, startResourceGateway } from '../harness/resource-gateway';

/** No task read or listing; its media-buy listing echoes the create's context. */
const LISTING_ONLY: ScriptedSellerOptions = {
  profile: { 'no-tasks-get': true, 'buy-listing': { echo: ['context'], defaultStatusFilter: true } },
};

let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({ sellers: { listing: LISTING_ONLY }, webhooks: false, callTimeoutMs: 3_000 });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

async function reconcileSeller(): Promise<View> {
  const answer = await gateway.http('POST', '/v1/sellers/listing/reconcile', { requested_by: 'ops@buyer' });
  expect(answer.status).toBe(200);
  return answer.body;
}

test('the orphan pass adopts a buy its operation could not know, names a buy no operation made, and counts a known buy once', async () => {
  const seller = gateway.sellers.listing;
  // A create that completes: its operation knows (and indexes) its buy.
  seller.script('create_media_buy', [{ status: 'completed' }]);
  const known = await gateway.operations.start('listing', 'create_media_buy', createMediaBuyParams());
  const knownView = await gateway.operations.settled(known, 60_000);
  expect(knownView.status).toBe('completed');

  // A buy another client of the seller made: no operation of ours made it.
  seller.script('create_media_buy', [{ status: 'completed' }]);
  await gateway.callSellerTool('listing', 'create_media_buy', {
    ...createMediaBuyParams(),
    idempotency_key: `someone-else-${Date.now()}`,
  });

  // A create whose every answer is lost while the listing is down: its operation cannot know its buy.
  seller.script('create_media_buy', [{ status: 'completed' }]);
  seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 50 });
  seller.chaos('get_media_buys', { rate: 1, faults: [{ kind: 'http-status', status: 503 }] });
  const lost = await gateway.operations.start('listing', 'create_media_buy', createMediaBuyParams());
  await gateway.operations.waitFor(lost, (view) => view.status === 'unknown' && !view.call_in_flight, 60_000);
  seller.chaos('get_media_buys', undefined);

  const buys = seller.mediaBuys();
  expect(buys).toHaveLength(3);
  const lostBuy = buys.find((buy) => buy.idempotencyKey === idempotencyKeyFor(lost, 'call'));
  expect(lostBuy).toBeDefined();

  const report = await reconcileSeller();
  const pass = report.seller_buys;
  expect(pass).toMatchObject({ listed: true, count: 3, known: 2, orphan_count: 1, claimed_twice: [] });
  expect(pass.adopted).toEqual([{ operation_id: lost, media_buy_id: expect.any(String), matched_by: 'context' }]);
  const adoptedId = pass.adopted[0].media_buy_id;
  expect(adoptedId).toBe(lostBuy?.mediaBuyId);
  const orphanIds = pass.orphans.map((orphan: View) => orphan.media_buy_id);
  expect(orphanIds).toHaveLength(1);
  expect([knownView.result?.media_buy_id, adoptedId]).not.toContain(orphanIds[0]);

  const lostView = await gateway.operations.settled(lost, 30_000);
  expect(lostView.status).toBe('completed');
  expect(lostView.resource).toMatchObject({ media_buy_id: adoptedId, matched_by: 'context' });

  // The next pass finds every buy ours but the other client's known to exactly one workflow.
  const again = (await reconcileSeller()).seller_buys;
  expect(again).toMatchObject({ count: 3, known: 2, orphan_count: 1, adopted: [], claimed_twice: [] });
  expect(again.orphans.map((orphan: View) => orphan.media_buy_id)).toEqual(orphanIds);
}, 180_000);
