/**
 * A view that never contradicts itself (issue 24, item 10): between the moment an operation settles (its first
 * authoritative final result is recorded) and the moment its workflow closes, a read must still show the result it
 * settled on. Here the seller's signed final webhook (3.1, bound by operation_id) settles the operation while its
 * call is in flight and unanswered; the workflow then gives the call up and waits for the activity to acknowledge,
 * which is when a read can see the settled status of a still-running workflow. That window is short (tens of ms), so
 * several operations are read every few ms while they end, and every read is checked. (The rule itself is also
 * checked without timing in test/unit/operation-view-settled.test.ts.)
 */
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, TERMINAL, type View, startResourceGateway } from '../harness/resource-gateway';

const SELLER = 'settles-early';
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    sellers: {
      [SELLER]: {
        profile: {
          'adcp-3.1': true,
          'answer-after-webhook': { answer: 'completed', loseAnswers: 1_000, lostAs: 'hang' },
        },
      },
    },
    callTimeoutMs: 20_000,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

const OPERATIONS = 4;

/** Every view of one operation from its start until its workflow has closed, read back to back. */
async function readUntilClosed(operationId: string): Promise<View[]> {
  const views: View[] = [];
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const view = await gateway.operations.view(operationId);
    views.push(view);
    if (view.running === false) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return views;
}

test('every read of a settled operation shows its result and outcome, also while its workflow is still ending', async () => {
  const operationIds = await Promise.all(
    Array.from({ length: OPERATIONS }, () =>
      gateway.operations.start(SELLER, 'create_media_buy', createMediaBuyParams()),
    ),
  );
  const histories = await Promise.all(operationIds.map(readUntilClosed));

  const contradictions: Record<string, unknown>[] = [];
  for (const [index, views] of histories.entries()) {
    const last = views.at(-1)!;
    expect(last.running).toBe(false);
    expect(last.status).toBe('completed');
    for (const view of views) {
      if (!TERMINAL.has(String(view.status))) continue;
      if (view.result === undefined || view.outcome === undefined)
        contradictions.push({
          operation: index,
          status: view.status,
          execution: view.execution,
          running: view.running,
          result: view.result,
          outcome: view.outcome,
        });
      else expect(view.result?.media_buy_id).toBe(last.result?.media_buy_id);
    }
  }
  expect(contradictions).toEqual([]);
}, 90_000);
