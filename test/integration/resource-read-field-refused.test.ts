/**
 * A read field the seller refuses (issue 24, item 5): media-buy reads carry the create's `account`, and this seller
 * answers every read that carries it UNSUPPORTED_FEATURE ("Omit account", field `account`). The orchestrator drops
 * the field the error names for that seller, records that it did, reads again, and from then on reads without it:
 * a refresh converges on what the seller says about the buy.
 */
import { type ResourceGateway, type View, startResourceGateway } from '../harness/resource-gateway';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const SELLER = 'no-account-reads';
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    mediaBuySellers: { [SELLER]: { profile: 'refuses-request-fields' } },
    webhooks: false,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

function buyParams(): Record<string, unknown> {
  const now = Date.now();
  return {
    account: { account_id: 'acct_refuses' },
    brand: { domain: 'acme.example' },
    start_time: new Date(now - HOUR).toISOString(),
    end_time: new Date(now + 30 * DAY).toISOString(),
    packages: [{ product_id: 'display_a', pricing_option_id: 'cpm', budget: 10_000 }],
  };
}

test('a refresh reads without the refused field, records why, and the buy follows the seller', async () => {
  const seller = gateway.mediaBuySellers[SELLER];
  const id = await gateway.mediaBuys.create(SELLER, buyParams());
  const created = await gateway.mediaBuys.waitFor(id, (view) => view.status === 'pending_creatives');
  const mediaBuyId = String(created.media_buy_id);

  // The seller cancels the buy on its side (its trafficker): only a read can tell.
  seller.buy(mediaBuyId)!.canceledAtMs = Date.now();
  expect(seller.statusOf(mediaBuyId)).toBe('canceled');
  expect((await gateway.mediaBuys.refresh(id)).status).toBe(202);
  // The refresh's read reached the seller (today: refused for its account, and nothing retries).
  await gateway.mediaBuys.waitFor(id, (view) => view.reads >= 1, 20_000);
  const reads = () => seller.scripted.callsTo('get_media_buys');
  await gateway.mediaBuys.waitFor(id, () => reads().length >= 1, 20_000);
  expect(reads()[0].args.account).toEqual({ account_id: 'acct_refuses' });
  expect(reads()[0].outcome).toBe('framework'); // refused before processing: UNSUPPORTED_FEATURE, "Omit account"
  const read = await gateway.mediaBuys
    .waitFor(id, (view) => view.status !== 'pending_creatives', 20_000)
    .catch(() => gateway.mediaBuys.view(id));

  expect(read.status).toBe('canceled');
  expect(reads().some((call) => call.args.account === undefined && call.outcome === 'scripted')).toBe(true);
  expect(read.request_shaping as View[]).toEqual(
    expect.arrayContaining([expect.objectContaining({ tool: 'get_media_buys', omitted: 'account' })]),
  );
}, 90_000);
