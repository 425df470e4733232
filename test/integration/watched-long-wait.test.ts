/**
 * A day-long wait on a seller that lists its tasks, on the time-skipping test server: the operation joins the seller's
 * task watcher after its quick polls and then reads its task itself only on its safety poll, which backs off (30 min,
 * 1 h, then every 2 h by default) while the task stays where the watcher holds it. The watcher's listings carry the
 * rest; what a watched operation costs per parked hour is mostly these reads (bench/parked.ts, B6).
 */
import { randomUUID } from 'node:crypto';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { registry } from '../harness/temporal';
import { type TimeSkippingStack, startTimeSkippingStack } from '../harness/time-skipping';
import { pollOffsets } from '../../workflows/operation/cadence';
import { safetyPollPlan } from '../../workflows/operation/watching';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** The quick polls of a `submitted` wait (2, 6, 14, 30, 62 s), made before the operation joins the watcher. */
const QUICK_POLLS = 5;
const QUICK_WINDOW_MS = 92_000;

let seller: ScriptedSeller;
let stack: TimeSkippingStack;

beforeAll(async () => {
  seller = await startScriptedSeller();
  stack = await startTimeSkippingStack({
    sellers: registry([{ id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    // A 30-minute round keeps the watcher's own listings few over the skipped day; the safety poll keeps its default.
    activities: { env: { FIXTURE_TOKEN: seller.authToken, ADCP_TASK_WATCHER_INTERVAL: '30m' } },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
});

test("a watched approval that never comes: the operation's own reads back off over the day, then it times out", async () => {
  seller.script('create_media_buy', [
    { status: 'submitted', message: 'Pending manual approval' },
    { status: 'completed', afterPolls: 1_000_000 },
  ]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  const tookMs = Date.parse(state.updatedAt) - Date.parse(state.startedAt);

  expect(state.status).toBe('failed');
  expect(state.failure?.reason).toBe('timed_out');
  expect(tookMs).toBeGreaterThanOrEqual(DAY);
  // The seller listed the task (the operation was watched) ...
  expect(seller.callsTo('tasks/list').length).toBeGreaterThan(0);
  // ... and saw the operation's own reads: the quick polls, the safety polls (30 min, 1 h 30, 3 h 30, then every
  // 2 h after joining: 13 in the day, not the 47 of a fixed 30 minutes) and the last read at the deadline.
  const safetyPolls = pollOffsets(safetyPollPlan(), DAY - QUICK_WINDOW_MS).length;
  expect(safetyPolls).toBe(13);
  const task = seller.tasks().find((t) => t.taskId === state.taskId)!;
  expect(task.polls).toBe(state.pollCount);
  expect(state.pollCount).toBeGreaterThanOrEqual(QUICK_POLLS + safetyPolls);
  expect(state.pollCount).toBeLessThanOrEqual(QUICK_POLLS + safetyPolls + 1);
  expect(seller.mediaBuys()).toHaveLength(0);
}, 120_000);
