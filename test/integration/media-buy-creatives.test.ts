/**
 * Creative deadlines on the time-skipping server: a buy whose second package never gets a creative raises an alert
 * a configurable lead time before `creative_deadline` and again when it passes, naming the package; a failed
 * creative is tracked with its errors and assigned nowhere. Two changes sent at once run one after the other, each as
 * its own operation. The buy is then canceled and the workflow ends.
 */
import { randomUUID } from 'node:crypto';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { registry } from '../harness/temporal';
import { type TimeSkippingStack, followServerClock, startTimeSkippingStack } from '../harness/time-skipping';
import { MediaBuyClient } from '../../client/media-buy-client';
import { mediaBuyStateQuery } from '../../contract/media-buy';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let seller: MediaBuySeller;
let stack: TimeSkippingStack;
let buys: MediaBuyClient;
let stopClock: (() => Promise<void>) | undefined;

beforeAll(async () => {
  seller = await startMediaBuySeller();
  stack = await startTimeSkippingStack({
    sellers: registry([{ id: 'life', url: seller.url, protocol: 'mcp', token_env: 'LIFE_TOKEN' }]),
    activities: { env: { LIFE_TOKEN: seller.authToken } },
  });
  buys = new MediaBuyClient({ client: stack.env.client, taskQueue: stack.taskQueue, searchAttributes: false });
  stopClock = await followServerClock(stack, [seller]);
});

afterAll(async () => {
  await stopClock?.();
  await stack?.close();
  await seller?.close();
});

test('creative deadline alerts for a package without creatives; two concurrent changes run in turn; then a cancel', async () => {
  const t0 = await stack.now();
  const startMs = Math.ceil((t0 + 10 * DAY) / HOUR) * HOUR;
  const { mediaBuyWorkflowId } = await buys.create({
    buyKey: `creatives-${randomUUID()}`,
    sellerId: 'life',
    params: {
      account: { account_id: 'acct_life' },
      start_time: new Date(startMs).toISOString(),
      end_time: new Date(startMs + 30 * DAY).toISOString(),
      packages: [
        { product_id: 'display_a', budget: 1_000 },
        { product_id: 'display_b', budget: 1_000 },
      ],
    },
    creativeAlertLeadMs: 36 * HOUR,
  });
  const handle = stack.env.client.workflow.getHandle(mediaBuyWorkflowId);
  let state = await buys.state(mediaBuyWorkflowId);
  for (let i = 0; i < 100 && !state.mediaBuyId; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    state = await buys.state(mediaBuyWorkflowId);
  }
  const [first, second] = Object.keys(state.packages).sort();
  const deadlineMs = Date.parse(state.creativeDeadline!);
  expect(deadlineMs).toBe(startMs - 2 * DAY);

  const answer = await buys.attachCreatives(mediaBuyWorkflowId, {
    creatives: [{ creative_id: 'cr_ok' }, { creative_id: 'bad_size' }],
    assignments: { cr_ok: [first], bad_size: [second] },
    requestedBy: 'trafficker@buyer',
  });
  expect(answer.outcome).toBe('applied');
  state = await handle.query(mediaBuyStateQuery);
  expect(state.creatives.cr_ok).toMatchObject({ action: 'created', status: 'approved', packageIds: [first] });
  expect(state.creatives.bad_size).toMatchObject({
    action: 'failed',
    packageIds: [],
    errors: [{ code: 'INVALID_CREATIVE' }],
  });
  expect(state.creativeAlerts).toEqual([]);

  await stack.env.sleep(deadlineMs - 36 * HOUR - (await stack.now()) + 10 * 60_000);
  state = await handle.query(mediaBuyStateQuery);
  expect(state.creativeAlerts).toHaveLength(1);
  expect(state.creativeAlerts[0]).toMatchObject({ kind: 'deadline_approaching', packagesLacking: [second] });
  const approachingAt = Date.parse(state.creativeAlerts[0].at);
  expect(approachingAt).toBeGreaterThanOrEqual(deadlineMs - 36 * HOUR);
  expect(approachingAt).toBeLessThan(deadlineMs - 36 * HOUR + 60_000);

  await stack.env.sleep(deadlineMs - (await stack.now()) + 10 * 60_000);
  state = await handle.query(mediaBuyStateQuery);
  expect(state.creativeAlerts.map((alert) => alert.kind)).toEqual(['deadline_approaching', 'deadline_passed']);
  expect(state.creativeAlerts[1]).toMatchObject({ packagesLacking: [second] });
  const passedAt = Date.parse(state.creativeAlerts[1].at);
  expect(passedAt).toBeGreaterThanOrEqual(deadlineMs);
  expect(passedAt).toBeLessThan(deadlineMs + 60_000);

  // Two changes at once run one after the other, in the order they were accepted, each its own operation.
  const [budget, dates] = await Promise.all([
    buys.change(mediaBuyWorkflowId, { kind: 'budget', requestedBy: 'planner@buyer', budgets: { [first]: 1_500 } }),
    buys.change(mediaBuyWorkflowId, {
      kind: 'dates',
      requestedBy: 'planner@buyer',
      endTime: new Date(startMs + 40 * DAY).toISOString(),
    }),
  ]);
  expect([budget.outcome, dates.outcome]).toEqual(['applied', 'applied']);
  expect(new Set([budget.sequence, dates.sequence]).size).toBe(2);
  expect(budget.operationId).not.toBe(dates.operationId);
  const applied = seller.buy(state.mediaBuyId!)!.updates;
  const bySequence = [budget, dates]
    .sort((a, b) => a.sequence - b.sequence)
    .map((answer) => (answer === budget ? 'packages' : 'end_time'));
  expect(applied.map((update) => ('packages' in update.args ? 'packages' : 'end_time'))).toEqual(bySequence);
  expect(applied[1].at).toBeGreaterThanOrEqual(applied[0].at);
  state = await handle.query(mediaBuyStateQuery);
  expect(state.packages[first].budget).toBe(1_500);
  expect(state.endTime).toBe(new Date(startMs + 40 * DAY).toISOString());

  const canceled = await buys.change(mediaBuyWorkflowId, {
    kind: 'cancel',
    requestedBy: 'ops@buyer',
    reason: 'creatives never arrived',
  });
  expect(canceled).toMatchObject({ outcome: 'applied', status: 'canceled' });
  const final = await buys.result(mediaBuyWorkflowId);
  expect(final.status).toBe('canceled');
  expect(final.done).toBe(true);
  expect(final.changes[2]).toMatchObject({
    kind: 'cancel',
    requestedBy: 'ops@buyer',
    reason: 'creatives never arrived',
    outcome: 'applied',
  });
});
