/**
 * What an operation writes to history with the real activities: no `patched()` marker, a read planned inside its one
 * local activity, the polls of a wait made by one activity that keeps the cadence itself (no durable timer before the
 * first poll). Real dev server, the scripted seller over MCP. (Webhooks during the polls: test/workflow.)
 */
import { randomUUID } from 'node:crypto';
import type { temporal } from '@temporalio/proto';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams, getProductsParams } from '../harness/demo-requests';
import { type TestStack, registry, startTestStack } from '../harness/temporal';

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
