/**
 * A seller's buy listing longer than one reconciliation run reads is read to its end over the runs of the seller's
 * Schedule: each run takes the listing up where the one before stopped (it hands the seller's cursor to the next run
 * in the Schedule's action input), and a run that reaches the end leaves the next to start from the first page. Before, every run read
 * from the first page, so an orphan past the per-run bound was never found. Here the bound is one chunk (five pages
 * of one buy each) and the seller holds eight buys nobody here made.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolClient } from '@adcp/sdk/advanced';
import type { ReconciliationReport } from '../../contract/reconciliation';
import { ensureReconciliationSchedules, reconciliationScheduleId } from '../../workers/schedules';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const BUYS = 8;
let seller: ScriptedSeller;
let stack: TestStack;
const sellerId = `resume-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  seller = await startScriptedSeller({
    profile: { 'no-tasks-get': true, 'buy-listing': { echo: ['context'], defaultStatusFilter: true, pageSize: 1 } },
  });
  stack = await startTestStack({
    sellers: registry([{ id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
});

test("the Schedule's runs read a listing longer than one run's bound to its end, each from where the last stopped", async () => {
  seller.setDefaultScript('create_media_buy', [{ status: 'completed' }]);
  for (let index = 0; index < BUYS; index += 1)
    await ProtocolClient.callTool(seller.agent('mcp') as never, 'create_media_buy', {
      ...createMediaBuyParams(),
      idempotency_key: `someone-else-${index}-${randomUUID()}`,
    });
  expect(seller.mediaBuys()).toHaveLength(BUYS);

  const sellers = registry([{ id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]);
  const scheduled = {
    client: stack.client,
    sellers,
    taskQueue: stack.taskQueue,
    intervalMs: 24 * 3_600_000,
    orphanChunksPerRun: 1,
  };
  await ensureReconciliationSchedules(scheduled);
  const schedule = stack.client.schedule.getHandle(reconciliationScheduleId(stack.taskQueue, sellerId));
  const seen = new Set<string>();
  /** Triggers the Schedule and waits for the run it starts to end: its report. */
  async function run(): Promise<NonNullable<ReconciliationReport['buys']>> {
    await schedule.trigger();
    const workflowId = await eventually(async () => {
      const newest = (await schedule.describe()).info.recentActions
        .map((action) => action.action.workflow.workflowId)
        .find((id) => !seen.has(id));
      return newest;
    });
    seen.add(workflowId);
    const report: ReconciliationReport = await stack.client.workflow.getHandle(workflowId).result();
    // Trigger times name the runs to the second: the next trigger comes in a later one.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    return report.buys!;
  }
  try {
    // One chunk of five pages: buys 1 to 5, and the cursor to the sixth.
    const first = await run();
    expect(first).toMatchObject({ listed: true, count: 5, orphanCount: 5, truncated: true, chunks: 1 });
    expect(first.resumed).toBeUndefined();
    expect(first.resumeCursor).toEqual(expect.any(String));
    // A worker starting meanwhile updates the Schedule: the cursor handed over stays.
    await ensureReconciliationSchedules(scheduled);
    // The next run takes it up there: buys 6 to 8, the listing's end.
    const second = await run();
    expect(second).toMatchObject({ listed: true, resumed: true, count: BUYS - 5, truncated: false });
    expect(second.resumeCursor).toBeUndefined();
    const named = [...first.orphans, ...second.orphans].map((orphan) => orphan.mediaBuyId).sort();
    expect(named).toEqual(
      seller
        .mediaBuys()
        .map((buy) => buy.mediaBuyId)
        .sort(),
    );
    // Having read to the end, the run after starts from the first page again.
    const third = await run();
    expect(third).toMatchObject({ count: 5, truncated: true });
    expect(third.resumed).toBeUndefined();
    expect(third.orphans.map((orphan) => orphan.mediaBuyId)).toEqual(first.orphans.map((orphan) => orphan.mediaBuyId));
  } finally {
    await schedule.delete();
  }
}, 180_000);
