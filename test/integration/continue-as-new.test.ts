/**
 * Continue-as-new carries the whole operation: on a dev server that suggests continue-as-new after 40 history
 * events, an operation that moves through many progress updates runs as several workflow runs, and the final
 * state still has every transition counted, its poll count, and its webhook dedupe set (a duplicate delivered
 * after the hand-over is not applied twice).
 */
import { randomUUID } from 'node:crypto';
import { freePort, startDevServer, type DevServer } from '../../scripts/lib/dev-server';
import { webhookReceivedSignal } from '../../contract/operation';
import { type ScriptStep, type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let server: DevServer;
let seller: ScriptedSeller;
let stack: TestStack;

beforeAll(async () => {
  server = await startDevServer({
    port: await freePort(),
    headless: true,
    dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': 40 },
  });
  seller = await startScriptedSeller();
  stack = await startTestStack({
    address: server.address,
    sellers: registry([{ id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
  await server?.stop();
});

test('an operation continued as new keeps its transitions, poll count and webhook dedupe set', async () => {
  const steps: ScriptStep[] = [{ status: 'submitted' }];
  for (let percentage = 10; percentage <= 90; percentage += 10)
    steps.push({ status: 'working', progress: { percentage }, afterPolls: 1 });
  steps.push({ status: 'completed', afterMs: 600_000 });
  seller.script('create_media_buy', steps);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const handle = stack.client.workflow.getHandle(operationId);
  const firstRunId = (await handle.describe()).runId;
  const event = {
    eventKey: `idem:evt_${randomUUID()}`,
    snapshot: { status: 'working' as const, progress: { percentage: 5 } },
    receivedAt: new Date().toISOString(),
  };
  await handle.signal(webhookReceivedSignal, event);

  // Wait for the last progress step, by which time the history limit has been passed several times.
  const late = await eventually(async () => {
    const state = (await stack.orchestrator.status(operationId)).state;
    return state?.progress?.percentage === 90 ? state : undefined;
  }, 120_000);
  const currentRunId = (await handle.describe()).runId;
  expect(currentRunId).not.toBe(firstRunId);
  expect((await stack.client.workflow.getHandle(operationId, firstRunId).describe()).status.name).toBe(
    'CONTINUED_AS_NEW',
  );

  // The same event again, to the new run: still applied once.
  await handle.signal(webhookReceivedSignal, event);
  const task = seller.tasks()[0];
  seller.advanceTask(task.taskId);
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(state.webhooksApplied).toBe(1);
  expect(state.transitionCount).toBe(state.transitions.length);
  expect(state.transitions[0]).toMatchObject({ from: 'pending', to: 'submitted', source: 'call' });
  expect(state.pollCount).toBeGreaterThanOrEqual(late.pollCount);
  expect(state.pollCount).toBe(seller.task(task.taskId)!.polls);
  expect(state.startedAt).toBe(late.startedAt);
  expect(seller.mediaBuys()).toHaveLength(1);
});
