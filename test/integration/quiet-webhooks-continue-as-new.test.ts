/**
 * Polls that webhooks keep busy still hand over to a new run: repeats of the status waited on are applied by the
 * signal handler without waking the wait (workflows/operation/machine.ts receiveWebhook), and the polls may last until
 * the deadline, so once Temporal suggests continue-as-new the next such webhook wakes the loop, which ends the polls
 * and continues as new. On a dev server that suggests it after 40 history events.
 */
import { randomUUID } from 'node:crypto';
import { freePort, startDevServer, type DevServer } from '../../scripts/lib/dev-server';
import { webhookReceivedSignal } from '../../contract/operation';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { getProductsParams } from '../harness/demo-requests';
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

test('repeats of the waited-on status applied during the polls still lead to continue-as-new, nothing lost', async () => {
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
  const handle = stack.client.workflow.getHandle(operationId);
  const taskId = await eventually(async () => (await stack.orchestrator.status(operationId)).state?.taskId);
  const firstRunId = (await handle.describe()).runId;

  // Each webhook is its own workflow task (about four events): 20 of them pass the limit of 40 events.
  const count = 20;
  for (let index = 1; index <= count; index++) {
    await handle.signal(webhookReceivedSignal, {
      eventKey: `repeat-${index}`,
      snapshot: { status: 'submitted', taskId, message: `still queued (${index})` },
      receivedAt: new Date().toISOString(),
    });
    await eventually(async () =>
      ((await stack.orchestrator.status(operationId)).state?.webhooksApplied ?? 0) >= index ? true : undefined,
    );
  }
  const latest = await handle.describe();
  expect(latest.runId).not.toBe(firstRunId);
  const state = (await stack.orchestrator.status(operationId)).state!;
  expect(state).toMatchObject({ status: 'submitted', webhooksApplied: count, message: `still queued (${count})` });

  // The dedupe set crossed over: a repeat of an early event is not applied again.
  await handle.signal(webhookReceivedSignal, {
    eventKey: 'repeat-1',
    snapshot: { status: 'submitted', taskId, message: 'duplicate' },
    receivedAt: new Date().toISOString(),
  });
  await handle.signal(webhookReceivedSignal, {
    eventKey: 'final',
    snapshot: { status: 'completed', taskId, result: { products: [] } },
    receivedAt: new Date().toISOString(),
  });
  const done = await stack.orchestrator.result(operationId);
  expect(done.status).toBe('completed');
  expect(done.webhooksApplied).toBe(count + 1);
  expect(done.message).not.toBe('duplicate');
});
