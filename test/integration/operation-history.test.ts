/**
 * What an operation writes to history: no `patched()` marker, a read planned inside its one local activity, the polls
 * of a wait made by one activity that keeps the cadence itself (no durable timer before the first poll), and a webhook
 * that leaves the status as it is (a progress report, a repeat) applied while the polls go on. Real dev server, the
 * scripted seller over MCP.
 */
import { randomUUID } from 'node:crypto';
import type { temporal } from '@temporalio/proto';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams, getProductsParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';
import {
  type OperationInput,
  type OperationState,
  type WebhookDelivery,
  webhookReceivedSignal,
} from '../../contract/operation';

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

const markers = (events: HistoryEvent[]) =>
  events.flatMap((event) => (event.markerRecordedEventAttributes ? [event.markerRecordedEventAttributes] : []));
const patchMarkers = (events: HistoryEvent[]) => markers(events).filter((marker) => marker.markerName === 'core_patch');
const localActivityMarkers = (events: HistoryEvent[]) =>
  markers(events).filter((marker) => marker.markerName === 'core_local_activity');
const activityTypes = (events: HistoryEvent[]) =>
  events.flatMap((event) =>
    event.activityTaskScheduledEventAttributes?.activityType?.name
      ? [event.activityTaskScheduledEventAttributes.activityType.name]
      : [],
  );
const timers = (events: HistoryEvent[]) => events.filter((event) => event.timerStartedEventAttributes);

test('a read started by the typed client is one local activity: no patch marker, no separate plan', async () => {
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'get_products',
    params: getProductsParams,
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(state.timeouts).toBeDefined(); // recorded from the answer of the call that planned itself
  const events = await historyOf(operationId);
  expect(patchMarkers(events)).toHaveLength(0);
  expect(localActivityMarkers(events)).toHaveLength(1);
  expect(activityTypes(events)).toEqual([]);
});

test('a wait has no timer before its first poll: one activity keeps the cadence', async () => {
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 2 }]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(state.pollCount).toBe(2); // the polls the seller needed, counted without the attempt that only waited
  const task = seller.tasks().find((candidate) => candidate.taskId === state.taskId);
  expect(task?.polls).toBe(2);
  const events = await historyOf(operationId);
  expect(timers(events)).toHaveLength(0);
  expect(activityTypes(events)).toEqual(['sendCall', 'awaitTaskMoveOnCadence']);
});

const cancelRequests = (events: HistoryEvent[]) =>
  events.filter((event) => event.activityTaskCancelRequestedEventAttributes);

/** A read that goes async and waits ten minutes at the seller; returns its id and task. */
async function parkedRead(): Promise<{ workflowId: string; taskId: string }> {
  seller.script('get_products', [
    { status: 'submitted' },
    { status: 'completed', afterMs: 600_000, payload: { products: [] } },
  ]);
  const workflowId = `adcp-get_products-parked:${randomUUID()}`;
  const input: OperationInput = { sellerId: 'fixture', task: 'get_products', params: getProductsParams };
  await stack.client.workflow.start('adcpOperation', { workflowId, taskQueue: stack.taskQueue, args: [input] });
  const taskId = await eventually(async () => (await stack.orchestrator.status(workflowId)).state?.taskId);
  return { workflowId, taskId };
}

/** Signals a verified webhook as the gateway does, and waits until the operation has applied it. */
async function push(workflowId: string, key: string, snapshot: WebhookDelivery['snapshot']): Promise<OperationState> {
  await stack.client.workflow
    .getHandle(workflowId)
    .signal(webhookReceivedSignal, { eventKey: key, snapshot, receivedAt: new Date().toISOString() });
  return eventually(async () => {
    const state = (await stack.orchestrator.status(workflowId)).state;
    return state && state.webhooksApplied >= Number(key) ? state : undefined;
  });
}

test('progress reports and repeats are applied while the polls go on; a new status ends them', async () => {
  const { workflowId, taskId } = await parkedRead();
  await push(workflowId, '1', { status: 'submitted', taskId, message: 'queued' });
  const progressed = await push(workflowId, '2', { status: 'submitted', taskId, progress: { percentage: 20 } });
  expect(progressed.progress?.percentage).toBe(20);
  expect(progressed.status).toBe('submitted');
  let events = await historyOf(workflowId);
  expect(cancelRequests(events)).toHaveLength(0);
  expect(activityTypes(events)).toEqual(['awaitTaskMoveOnCadence']);

  await push(workflowId, '3', { status: 'working', taskId, progress: { percentage: 40 } });
  await eventually(async () => (activityTypes(await historyOf(workflowId)).length === 2 ? true : undefined));
  await push(workflowId, '4', { status: 'working', taskId, progress: { percentage: 70 } });
  const done = await push(workflowId, '5', { status: 'completed', taskId, result: { products: [] } });
  expect(done.status).toBe('completed');
  events = await historyOf(workflowId);
  // One cancel when the status moved to working, one when it completed: none for the three webhooks between.
  expect(cancelRequests(events)).toHaveLength(2);
  expect(activityTypes(events)).toEqual(['awaitTaskMoveOnCadence', 'awaitTaskMoveOnCadence']);
});
