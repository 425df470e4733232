/**
 * Polls that stay cheap per webhook: a webhook that only repeats the status the polls wait on is applied by the
 * signal handler, without waking the wait (workflows/operation/machine.ts receiveWebhook). What must hold:
 * every such webhook is applied; the polls go on (no cancel, no new activity, no patch marker); a new status still
 * ends the polls; the history replays. Real dev server, the scripted seller over MCP.
 */
import { randomUUID } from 'node:crypto';
import type { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { getProductsParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack, workflowBundle } from '../harness/temporal';
import { type OperationState, type WebhookDelivery, webhookReceivedSignal } from '../../contract/operation';

let seller: ScriptedSeller;
let stack: TestStack;

beforeAll(async () => {
  seller = await startScriptedSeller();
  stack = await startTestStack({
    sellers: registry([{ id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
});

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

async function historyOf(workflowId: string): Promise<HistoryEvent[]> {
  return (await stack.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
}

/** The patch IDs of the run's patch markers, in order. */
const patchIds = (events: HistoryEvent[]) =>
  events.flatMap((event) => {
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_patch') return [];
    const data = marker.details?.['patch-data']?.payloads?.[0]?.data;
    return [data ? (JSON.parse(Buffer.from(data).toString('utf8')) as { id: string }).id : '?'];
  });
const awaitActivities = (events: HistoryEvent[]) =>
  events.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'awaitTaskMoveOnCadence');
const cancelRequests = (events: HistoryEvent[]) =>
  events.filter((event) => event.activityTaskCancelRequestedEventAttributes);

async function push(workflowId: string, key: string, snapshot: WebhookDelivery['snapshot']): Promise<OperationState> {
  await stack.client.workflow
    .getHandle(workflowId)
    .signal(webhookReceivedSignal, { eventKey: key, snapshot, receivedAt: new Date().toISOString() });
  return eventually(async () => {
    const state = (await stack.orchestrator.status(workflowId)).state;
    return state && state.webhooksApplied >= Number(key) ? state : undefined;
  });
}

test('repeats of the status waited on are applied without ending the polls; the history replays', async () => {
  seller.script('get_products', [
    { status: 'submitted' },
    { status: 'completed', afterMs: 600_000, payload: { products: [] } },
  ]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'get_products',
    params: getProductsParams,
    idempotencyKey: randomUUID(),
  });
  const taskId = await eventually(async () => (await stack.orchestrator.status(operationId)).state?.taskId);
  await eventually(async () => (awaitActivities(await historyOf(operationId)).length === 1 ? true : undefined));

  await push(operationId, '1', { status: 'submitted', taskId, message: 'queued behind other requests' });
  await push(operationId, '2', { status: 'submitted', progress: { percentage: 10 } });
  const third = await push(operationId, '3', { status: 'submitted', taskId, message: 'still queued' });
  expect(third).toMatchObject({ status: 'submitted', message: 'still queued', webhooksApplied: 3 });
  expect(third.progress?.percentage).toBe(10);
  let events = await historyOf(operationId);
  expect(patchIds(events)).toEqual([]);
  expect(awaitActivities(events)).toHaveLength(1);
  expect(cancelRequests(events)).toHaveLength(0);

  // A new status ends the polls; repeats of it are then applied the same way.
  await push(operationId, '4', { status: 'working', taskId, progress: { percentage: 40 } });
  await eventually(async () => (awaitActivities(await historyOf(operationId)).length === 2 ? true : undefined));
  const working = await push(operationId, '5', { status: 'working', taskId, progress: { percentage: 70 } });
  expect(working.progress?.percentage).toBe(70);
  // A webhook that names another task is not quiet: it takes the loop's path and is refused there.
  await stack.client.workflow.getHandle(operationId).signal(webhookReceivedSignal, {
    eventKey: 'other-task',
    snapshot: { status: 'working', taskId: 'someone-elses-task' },
    receivedAt: new Date().toISOString(),
  });
  await eventually(async () =>
    (await stack.orchestrator.status(operationId)).state?.webhooksRefused === 1 ? true : undefined,
  );
  const done = await push(operationId, '6', { status: 'completed', taskId, result: { products: [] } });
  expect(done.status).toBe('completed');
  expect(done.webhooksApplied).toBe(6);

  events = await historyOf(operationId);
  expect(patchIds(events)).toEqual([]);
  // One cancel when the status moved to working, one when it completed: none for the quiet ones.
  expect(cancelRequests(events)).toHaveLength(2);
  expect(awaitActivities(events)).toHaveLength(2);

  const history = await stack.client.workflow.getHandle(operationId).fetchHistory();
  await expect(
    Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, operationId),
  ).resolves.toBeUndefined();
});
