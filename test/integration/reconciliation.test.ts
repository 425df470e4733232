/**
 * Reconciliation through a real Temporal dev server (visibility with the AdCP search attributes) and the scripted
 * seller's tasks/list: a seller task whose operation lost the answer is adopted, a task nobody claims is reported,
 * every open operation is told to poll now, and a Schedule per seller runs it.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolClient } from '@adcp/sdk/advanced';
import { ensureReconciliationSchedules, reconciliationScheduleId } from '../../workers/schedules';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let seller: ScriptedSeller;
let stack: TestStack;
const sellerId = `reconcile-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  seller = await startScriptedSeller();
  stack = await startTestStack({
    sellers: registry([
      { id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' },
      // Nothing listens on port 9 (discard) here: an unreachable seller.
      { id: `${sellerId}-down`, url: 'http://127.0.0.1:9/mcp', protocol: 'mcp', token_env: 'FIXTURE_TOKEN' },
    ]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
});

test('an orphaned seller task is adopted by its operation; an unclaimed one is reported; open operations poll now', async () => {
  // The operation's call creates the task but the answer is lost, and the seller then rate-limits for 10 minutes:
  // without reconciliation the operation would not learn of its task before the next try.
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1 }]);
  // One request per attempt: the first attempt's answer is lost, the second is rate-limited.
  seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 1 });
  seller.fault('create_media_buy', { kind: 'rate-limited', retryAfterSeconds: 600 }, { times: 1 });
  const { operationId } = await stack.orchestrator.start({
    sellerId,
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  await eventually(async () =>
    seller.callsTo('create_media_buy').filter((call) => call.fault?.kind === 'rate-limited').length === 1
      ? true
      : undefined,
  );
  const orphan = seller.tasks()[0];

  // A task at the seller that no operation of ours created (another buyer tool, a crashed script...).
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1_000 }]);
  await ProtocolClient.callTool(seller.agent('mcp') as never, 'create_media_buy', {
    ...createMediaBuyParams(),
    idempotency_key: randomUUID(),
  });
  const stranger = seller.tasks().find((task) => task.taskId !== orphan.taskId)!;

  // A second operation, waiting in submitted with its task known: it is told to poll now.
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1_000 }]);
  const waiting = await stack.orchestrator.start({
    sellerId,
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const waitingTaskId = await eventually(
    async () => (await stack.orchestrator.status(waiting.operationId)).state?.taskId,
  );
  // Visibility is eventually consistent: wait until the task ID is indexed.
  await eventually(async () => {
    const description = await stack.client.workflow.getHandle(waiting.operationId).describe();
    return description.searchAttributes.AdcpTaskId ? true : undefined;
  });
  const pollsBefore = seller.task(waitingTaskId)!.polls;

  const report = await stack.orchestrator.reconcile(sellerId, 'test');
  expect(report.sellerListsTasks).toBe(true);
  expect(report.adopted).toEqual([{ operationId, taskId: orphan.taskId }]);
  expect(report.unattributed.map((task) => task.taskId)).toEqual([stranger.taskId]);
  expect(report.openOperations).toBe(2);
  expect(report.pollRequested).toBe(1);

  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(state.taskId).toBe(orphan.taskId);
  expect(state.reconciliation?.[0]).toMatchObject({ outcome: 'adopted', taskId: orphan.taskId });
  // One buy from this operation: the 10-minute retry never ran.
  expect(seller.mediaBuys().filter((buy) => buy.taskId === orphan.taskId)).toHaveLength(1);
  const orphanKey = seller.callsTo('create_media_buy')[0].args.idempotency_key;
  const orphanCalls = seller.callsTo('create_media_buy').filter((call) => call.args.idempotency_key === orphanKey);
  expect(orphanCalls.map((call) => call.fault?.kind)).toEqual(['drop-after-processing', 'rate-limited']);
  await eventually(async () => (seller.task(waitingTaskId)!.polls > pollsBefore ? true : undefined));

  await stack.orchestrator.cancel(waiting.operationId, { requestedBy: 'test', reason: 'cleanup' });
});

test('a Schedule per seller runs reconciliation', async () => {
  const [scheduleId] = await ensureReconciliationSchedules({
    client: stack.client,
    sellers: registry([{ id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    taskQueue: stack.taskQueue,
    intervalMs: 3_600_000,
  });
  expect(scheduleId).toBe(reconciliationScheduleId(stack.taskQueue, sellerId));
  // Idempotent: a second worker starting up updates instead of failing.
  await ensureReconciliationSchedules({
    client: stack.client,
    sellers: registry([{ id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    taskQueue: stack.taskQueue,
    intervalMs: 1_800_000,
  });
  const handle = stack.client.schedule.getHandle(scheduleId);
  try {
    const description = await handle.describe();
    expect(description.spec.intervals?.[0]?.every).toBe(1_800_000);
    await handle.trigger();
    const run = await eventually(
      async () => (await handle.describe()).info.recentActions[0]?.action.workflow.workflowId,
    );
    const report = await stack.client.workflow.getHandle(run).result();
    expect(report).toMatchObject({ sellerId, requestedBy: 'schedule', sellerListsTasks: true });
  } finally {
    await handle.delete();
  }
});

test('an unreachable seller is reported, not a failed reconciliation', async () => {
  const report = await stack.orchestrator.reconcile(`${sellerId}-down`, 'test');
  expect(report).toMatchObject({
    sellerId: `${sellerId}-down`,
    sellerListsTasks: false,
    adopted: [],
    unattributed: [],
  });
  expect(report.sellerError).toMatch(/TRANSPORT_UNREACHABLE|fetch failed|ECONNREFUSED/);
});
