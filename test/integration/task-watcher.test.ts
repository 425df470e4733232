/**
 * Parked operations at a seller that lists its tasks: they make their quick polls on their own (2 to 62 s), then join
 * the seller's task watcher (workflows/task-watcher/) and make no poll of their own; when the seller completes their
 * tasks, the watcher's listing finds the moves and signals each moved task's operation, which reads its task once
 * (its own read) and completes with what it said. Real dev server, the scripted seller over MCP (which offers
 * `tasks/list`). The worker's watcher round is 10 s (ADCP_TASK_WATCHER_INTERVAL), so a change reaches the operations
 * within seconds of a round; the rule is the same as a minute's (test/unit/operation-watching).
 */
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';
import type { OperationState } from '../../contract/operation';
import { type TaskWatcherView, taskWatcherQuery, taskWatcherWorkflowId } from '../../contract/task-watcher';
import { planWait } from '../../workflows/operation/cadence';
import { quickPollCount } from '../../workflows/operation/watching';

const PARKED = 4;
/** The worker's watcher round (ADCP_TASK_WATCHER_INTERVAL). */
const ROUND_MS = 10_000;
/** The watcher's round plus a margin: how late a change may reach the operation. */
const LATEST_MS = ROUND_MS + 5_000;
/** The quick polls of a submitted wait before it joins the watcher (whose round it learns as it joins). */
const QUICK_POLLS = quickPollCount(planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false }));

let seller: ScriptedSeller;
let stack: TestStack;

beforeAll(async () => {
  seller = await startScriptedSeller();
  stack = await startTestStack({
    sellers: registry([{ id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: {
      env: { FIXTURE_TOKEN: seller.authToken, ADCP_TASK_WATCHER_INTERVAL: `${ROUND_MS / 1000}s` },
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
});

async function scheduled(operationId: string, activityType: string): Promise<number> {
  const history = await stack.client.workflow.getHandle(operationId).fetchHistory();
  return (history.events ?? []).filter(
    (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === activityType,
  ).length;
}

test('parked operations are told by the watcher when their tasks complete, and make no polls of their own', async () => {
  seller.setDefaultScript('create_media_buy', [
    { status: 'submitted' },
    { status: 'completed', afterPolls: 1_000_000 },
  ]);
  const operations: string[] = [];
  for (let index = 0; index < PARKED; index++) {
    const { operationId } = await stack.orchestrator.start({
      sellerId: 'fixture',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: `watched-${Date.now()}-${index}`,
    });
    operations.push(operationId);
  }
  const watcher = stack.client.workflow.getHandle(taskWatcherWorkflowId(stack.taskQueue, 'fixture', 0));
  await eventually(async () => {
    const view = await watcher.query(taskWatcherQuery).catch(() => undefined);
    return view && view.watching === PARKED ? view : undefined;
  }, 150_000);

  // Each operation made its quick polls (2, 6, 14, 30, 62 s) in one polling activity before it joined.
  expect(QUICK_POLLS).toBe(5);
  const taskIds = await Promise.all(
    operations.map(async (id) => (await stack.orchestrator.status(id)).state?.taskId as string),
  );
  const readsOf = (taskId: string) =>
    seller.callsTo('tasks/get').filter((call) => JSON.stringify(call.args).includes(taskId)).length;
  await eventually(
    async () => (taskIds.every((taskId) => readsOf(taskId) >= QUICK_POLLS) ? true : undefined),
    60_000,
    500,
  );
  const parked = await Promise.all(
    operations.map(async (operationId) => (await stack.orchestrator.status(operationId)).state as OperationState),
  );
  expect(parked.map((state) => state.status)).toEqual(operations.map(() => 'submitted'));
  const readsBefore = seller.callsTo('tasks/get').length;
  const listingsBefore = seller.callsTo('tasks/list').length;

  const changedAt = new Map<string, number>();
  for (const state of parked) {
    const advanced = seller.advanceTask(state.taskId!);
    changedAt.set(state.operationId, Date.parse(advanced.history[advanced.history.length - 1].at));
  }
  const ended = await Promise.all(operations.map((operationId) => stack.orchestrator.result(operationId)));

  for (const [index, state] of ended.entries()) {
    expect(state).toMatchObject({ status: 'completed', result: { media_buy_id: expect.any(String) } });
    // After it parked, one read of its own: the one the watcher's notice asked for.
    expect(state.pollCount).toBe(parked[index].pollCount + 1);
    const completed = state.transitions.find((transition) => transition.to === 'completed')!;
    expect(completed.source).toBe('poll');
    expect(Date.parse(completed.at) - changedAt.get(state.operationId)!).toBeLessThanOrEqual(LATEST_MS);
  }
  // One read per moved task (its operation's, after the notice) and a few listings, however many operations wait.
  expect(seller.callsTo('tasks/get').length - readsBefore).toBe(PARKED);
  expect(seller.callsTo('tasks/list').length - listingsBefore).toBeLessThanOrEqual(3);
  // Each operation had two polling activities (its quick polls, then the safety interval): no per-operation cadence.
  for (const operationId of operations) expect(await scheduled(operationId, 'awaitTaskMoveOnCadence')).toBe(2);
  const view: TaskWatcherView = await watcher.query(taskWatcherQuery);
  expect(view.watching).toBe(0);
  expect(view.counters.moves).toBeGreaterThanOrEqual(PARKED);
  expect(view.counters.delivered).toBeGreaterThanOrEqual(PARKED);
}, 240_000);
