/**
 * Reconciliation reaches media buys: a buy whose status changed at the seller with no webhook and no change of ours
 * (the seller's trafficker paused it) is next read a day later on its own cadence; a reconciliation run of that
 * seller finds the buy's workflow through visibility (AdcpAgent and the workflow type), signals refreshMediaBuy, and
 * the buy converges to the seller's status from a get_media_buys read. A buy at another seller is not touched.
 */
import { randomUUID } from 'node:crypto';
import { MediaBuyClient } from '../../client/media-buy-client';
import type { CallerIdentity } from '../../protocol/tenancy';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let seller: MediaBuySeller;
let stack: TestStack;
let buys: MediaBuyClient;
const sellerId = `recon-buys-${randomUUID().slice(0, 8)}`;
const otherSellerId = `${sellerId}-other`;

beforeAll(async () => {
  seller = await startMediaBuySeller();
  const sellerRegistry = registry([
    { id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'LIFE_TOKEN' },
    { id: otherSellerId, url: seller.url, protocol: 'mcp', token_env: 'LIFE_TOKEN' },
  ]);
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env: { LIFE_TOKEN: seller.authToken } } });
  buys = new MediaBuyClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    knownSeller: (id) => sellerRegistry.has(id),
  });
});

afterAll(async () => {
  await stack?.close();
  await seller?.close();
});

async function activeBuy(agent: string, caller?: CallerIdentity): Promise<{ id: string; mediaBuyId: string }> {
  const now = Date.now();
  const { mediaBuyWorkflowId: id } = await buys.create(
    {
      buyKey: `recon-${randomUUID()}`,
      sellerId: agent,
      params: {
        account: { account_id: 'acct_recon' },
        brand: { domain: 'acme.example' },
        start_time: new Date(now - HOUR).toISOString(),
        end_time: new Date(now + 30 * DAY).toISOString(),
        packages: [{ product_id: 'display_a', pricing_option_id: 'cpm', budget: 10_000 }],
      },
      requestedBy: 'planner@buyer',
    },
    caller,
  );
  const pending = await eventually(async () => {
    const state = await buys.state(id, caller);
    return state.status === 'pending_creatives' ? state : undefined;
  }, 30_000);
  const packageId = Object.keys(pending.packages)[0];
  await buys.attachCreatives(
    id,
    {
      creatives: [{ creative_id: 'cr_recon' }],
      assignments: { cr_recon: [packageId] },
      requestedBy: 'trafficker@buyer',
    },
    {},
    caller,
  );
  await eventually(async () => ((await buys.state(id, caller)).status === 'active' ? true : undefined), 20_000);
  return { id, mediaBuyId: pending.mediaBuyId! };
}

test('a buy paused at the seller without a webhook converges after a reconciliation run', async () => {
  const mine = await activeBuy(sellerId);
  const other = await activeBuy(otherSellerId);
  // Visibility is eventually consistent: wait until both buys are indexed as active at their sellers.
  await eventually(async () => {
    const query = `WorkflowType = 'adcpMediaBuy' AND ExecutionStatus = 'Running' AND AdcpMediaBuyStatus = 'active' AND AdcpAgent IN ('${sellerId}', '${otherSellerId}')`;
    let found = 0;
    for await (const execution of stack.client.workflow.list({ query }))
      if ([mine.id, other.id].includes(execution.workflowId)) found += 1;
    return found === 2 ? true : undefined;
  }, 20_000);

  // The seller pauses both buys on its side: no webhook, no update_media_buy of ours.
  const at = Date.now();
  seller.buy(mine.mediaBuyId)!.pauses.push({ from: at });
  seller.buy(other.mediaBuyId)!.pauses.push({ from: at });
  expect(seller.statusOf(mine.mediaBuyId)).toBe('paused');
  const readsBefore = (await buys.state(mine.id)).reads;
  // Without reconciliation the workflow would not read again for a day.
  expect((await buys.state(mine.id)).status).toBe('active');

  const report = await stack.orchestrator.reconcile(sellerId, 'test');
  expect(report.openMediaBuys).toBe(1);
  expect(report.mediaBuyRefreshRequested).toBe(1);

  const converged = await eventually(async () => {
    const state = await buys.state(mine.id);
    return state.status === 'paused' ? state : undefined;
  }, 20_000);
  expect(converged.reads).toBeGreaterThan(readsBefore);
  expect(converged.statusHistory.at(-1)).toMatchObject({ from: 'active', to: 'paused', source: 'read' });
  expect(seller.buy(mine.mediaBuyId)!.updates).toEqual([]);
  // The other seller's buy was not asked: it still believes active until its own seller is reconciled.
  expect((await buys.state(other.id)).status).toBe('active');
});

test("an operator's reconcile counts and refreshes only its own tenant's buys; the Schedule's run reaches every tenant's", async () => {
  const ACME: CallerIdentity = { tenant: 'acme', principal: 'acme/ops' };
  const GLOBEX: CallerIdentity = { tenant: 'globex', principal: 'globex/ops' };
  const acme = await activeBuy(sellerId, ACME);
  const globex = await activeBuy(sellerId, GLOBEX);
  await eventually(async () => {
    const query = `WorkflowType = 'adcpMediaBuy' AND ExecutionStatus = 'Running' AND AdcpMediaBuyStatus = 'active' AND AdcpAgent = '${sellerId}' AND AdcpTenant IN ('acme', 'globex')`;
    let found = 0;
    for await (const execution of stack.client.workflow.list({ query }))
      if ([acme.id, globex.id].includes(execution.workflowId)) found += 1;
    return found === 2 ? true : undefined;
  }, 20_000);
  // The seller pauses both; globex's operator reconciles.
  const at = Date.now();
  seller.buy(acme.mediaBuyId)!.pauses.push({ from: at });
  seller.buy(globex.mediaBuyId)!.pauses.push({ from: at });

  const report = await stack.orchestrator.reconcile(sellerId, 'globex/ops', GLOBEX);
  expect(report.openMediaBuys).toBe(1);
  expect(report.mediaBuyRefreshRequested).toBe(1);
  await eventually(async () => ((await buys.state(globex.id, GLOBEX)).status === 'paused' ? true : undefined), 20_000);
  // Acme's buy was neither counted nor asked: it still believes active.
  expect((await buys.state(acme.id, ACME)).status).toBe('active');

  // Without a caller (the Schedule, an operator of the whole installation) every tenant's buys are reconciled.
  const all = await stack.orchestrator.reconcile(sellerId, 'schedule');
  expect(all.openMediaBuys).toBeGreaterThanOrEqual(2);
  await eventually(async () => ((await buys.state(acme.id, ACME)).status === 'paused' ? true : undefined), 20_000);
});
