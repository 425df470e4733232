/**
 * The orphan pass reads a seller's whole listing, a chunk of pages at a time, and offers every chunk's orphans: a
 * buy its operation could not know is adopted even when the seller lists 120 buys nobody here made before it (past
 * the 50 orphans a report names, and past the first chunk of pages). Every orphan is counted; 50 are named.
 */
import { idempotencyKeyFor } from '../../activities/idempotency';
import type { ScriptedSellerOptions } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, type View, startResourceGateway } from '../harness/resource-gateway';

/** No task read or listing; its media-buy listing echoes the create's context, 20 buys a page. */
const LISTING_ONLY: ScriptedSellerOptions = {
  profile: { 'no-tasks-get': true, 'buy-listing': { echo: ['context'], defaultStatusFilter: true, pageSize: 20 } },
};
const OTHERS = 120;

let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({ sellers: { paged: LISTING_ONLY }, webhooks: false, callTimeoutMs: 3_000 });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

test('a lost buy listed after 120 buys no operation made is adopted by its operation; all 120 are counted, 50 named', async () => {
  const seller = gateway.sellers.paged;
  // Buys another client of the seller made: no operation of ours knows them. Every create completes at once.
  seller.setDefaultScript('create_media_buy', [{ status: 'completed' }]);
  for (let index = 0; index < OTHERS; index += 1)
    await gateway.callSellerTool('paged', 'create_media_buy', {
      ...createMediaBuyParams(),
      idempotency_key: `someone-else-${index}-${Date.now()}`,
    });

  // A create whose every answer is lost while the listing is down: its operation cannot know its buy.
  seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 50 });
  seller.chaos('get_media_buys', { rate: 1, faults: [{ kind: 'http-status', status: 503 }] });
  const lost = await gateway.operations.start('paged', 'create_media_buy', createMediaBuyParams());
  await gateway.operations.waitFor(lost, (view) => view.status === 'unknown' && !view.call_in_flight, 60_000);
  seller.chaos('get_media_buys', undefined);

  const buys = seller.mediaBuys();
  expect(buys).toHaveLength(OTHERS + 1);
  const lostBuy = buys.find((buy) => buy.idempotencyKey === idempotencyKeyFor(lost, 'call'));
  expect(lostBuy).toBeDefined();
  // The lost buy is the last the seller lists: on its seventh page of 20.
  expect(buys.at(-1)?.mediaBuyId).toBe(lostBuy?.mediaBuyId);

  const answer = await gateway.http('POST', '/v1/sellers/paged/reconcile', { requested_by: 'ops@buyer' });
  expect(answer.status).toBe(200);
  const pass = answer.body.seller_buys as View;
  expect(pass).toMatchObject({
    listed: true,
    count: OTHERS + 1,
    truncated: false,
    known: 1,
    orphan_count: OTHERS,
    claimed_twice: [],
    claimed_twice_count: 0,
  });
  // Seven pages of 20: more than one chunk of the listing was read.
  expect(pass.chunks).toBeGreaterThan(1);
  expect(pass.adopted).toEqual([{ operation_id: lost, media_buy_id: lostBuy?.mediaBuyId, matched_by: 'context' }]);
  expect(pass.orphans).toHaveLength(50);
  expect(pass.orphans.map((orphan: View) => orphan.media_buy_id)).not.toContain(lostBuy?.mediaBuyId);

  const lostView = await gateway.operations.settled(lost, 30_000);
  expect(lostView.status).toBe('completed');
  expect(lostView.resource).toMatchObject({ media_buy_id: lostBuy?.mediaBuyId, matched_by: 'context' });
}, 300_000);
