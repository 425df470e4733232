/**
 * Valid change names are not refused locally (issue 24, item 6): a 3.0 seller lists the coarse actions of its
 * version (`valid_actions: [pause, cancel, update_budget, update_dates, update_packages]`), which 3.1 keeps in its
 * enum (deprecated, each rolling up to the finer actions). A budget or dates change is one of them: it goes to the
 * seller, and is not answered 409 ACTION_NOT_ALLOWED by the orchestrator without asking.
 */
import { type ResourceGateway, startResourceGateway } from '../harness/resource-gateway';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const SELLER = 'coarse-actions';
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    mediaBuySellers: { [SELLER]: { actions: 'coarse-3.0' } },
    webhooks: false,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

async function pendingBuy(): Promise<{ id: string; mediaBuyId: string; packageId: string }> {
  const now = Date.now();
  const id = await gateway.mediaBuys.create(SELLER, {
    account: { account_id: 'acct_coarse' },
    brand: { domain: 'acme.example' },
    start_time: new Date(now - HOUR).toISOString(),
    end_time: new Date(now + 30 * DAY).toISOString(),
    packages: [{ product_id: 'display_a', pricing_option_id: 'cpm', budget: 10_000 }],
  });
  const view = await gateway.mediaBuys.waitFor(id, (candidate) => candidate.status === 'pending_creatives');
  expect(view.available_actions).toEqual(expect.arrayContaining(['update_budget', 'update_dates']));
  return { id, mediaBuyId: String(view.media_buy_id), packageId: String(view.packages[0].package_id) };
}

test('kind budget is sent to a seller listing update_budget, and applied', async () => {
  const { id, mediaBuyId, packageId } = await pendingBuy();
  const answer = await gateway.mediaBuys.change(id, { kind: 'budget', budgets: { [packageId]: 15_000 } });

  expect(answer.body.error?.code).not.toBe('ACTION_NOT_ALLOWED');
  expect(answer.status).toBe(200);
  expect(gateway.mediaBuySellers[SELLER].buy(mediaBuyId)!.updates.map((update) => update.outcome)).toEqual(['applied']);
}, 60_000);

test('kind dates is sent to a seller listing update_dates, and applied', async () => {
  const { id, mediaBuyId } = await pendingBuy();
  const endTime = new Date(Date.now() + 40 * DAY).toISOString();
  const answer = await gateway.mediaBuys.change(id, { kind: 'dates', end_time: endTime });

  expect(answer.body.error?.code).not.toBe('ACTION_NOT_ALLOWED');
  expect(answer.status).toBe(200);
  expect(gateway.mediaBuySellers[SELLER].buy(mediaBuyId)!.endMs).toBe(Date.parse(endTime));
}, 60_000);
