/**
 * Seller capabilities on the real dev server: one long-lived workflow per seller keeps its get_adcp_capabilities
 * answer (versions, tasks, read methods, idempotency window, account model) from a real @adcp/sdk seller, refreshes it
 * on the capabilitiesChanged signal, reports a seller that is down as unreachable without failing, and the gateway
 * refuses a task the seller does not offer before any call reaches it. GET /v1/sellers shows it all.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway } from '../../api/app';
import { createSellerRouter } from '../../api/sellers';
import { SellerCapabilitiesClient, taskSupportCheck } from '../../client/seller-capabilities-client';
import { freePort } from '../../scripts/lib/dev-server';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let seller: ScriptedSeller;
let stack: TestStack;
let sellers: SellerCapabilitiesClient;
let server: Server;
let base: string;

beforeAll(async () => {
  seller = await startScriptedSeller({ idempotencyTtlSeconds: 3600 });
  const downPort = await freePort();
  const sellerRegistry = registry([
    { id: 'full', url: seller.url, protocol: 'mcp', token_env: 'FULL_TOKEN' },
    { id: 'down', url: `http://127.0.0.1:${downPort}/mcp`, protocol: 'mcp' },
  ]);
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env: { FULL_TOKEN: seller.authToken } } });
  sellers = new SellerCapabilitiesClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    sellers: sellerRegistry,
    retryEveryMs: 60_000,
  });
  const app = createGateway({
    orchestrator: stack.orchestrator,
    campaignRouters: [createSellerRouter({ sellers })],
    taskSupport: taskSupportCheck(sellers),
  });
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  // The capabilities workflows run until stopped: end them so the shared dev server does not keep them polling.
  for (const id of ['full', 'down'])
    await stack?.client.workflow
      .getHandle(sellers.workflowId(id))
      .terminate('test over')
      .catch(() => undefined);
  await stack?.close();
  await seller?.close();
});

test("a seller's capabilities are kept from its own answer, and refreshed when they change", async () => {
  const state = await sellers.refreshed('full');
  expect(state.reachable).toBe(true);
  expect(state.capabilities).toMatchObject({
    supportedProtocols: expect.arrayContaining(['media_buy']),
    wireVersion: '3.0',
    tasksSource: 'tools',
    idempotency: { supported: true, replayTtlSeconds: 3600 },
  });
  expect(state.capabilities!.tasks).toEqual(expect.arrayContaining(['get_products', 'create_media_buy']));
  expect(state.capabilities!.tasks).not.toContain('get_signals');
  expect(state.capabilities!.readMethods).toContain('tasks/get');
  expect(seller.callsTo('get_adcp_capabilities')).toHaveLength(1);

  await sellers.capabilitiesChanged('full', 'seller-notification', 'new tools');
  const again = await sellers.refreshed('full', 2);
  expect(again.notices).toEqual([expect.objectContaining({ requestedBy: 'seller-notification', reason: 'new tools' })]);
  expect(seller.callsTo('get_adcp_capabilities')).toHaveLength(2);
});

test('a seller that is down is reported unreachable, and the workflow keeps running', async () => {
  const state = await sellers.refreshed('down');
  expect(state.reachable).toBe(false);
  expect(state.capabilities).toBeUndefined();
  expect(state.lastError?.code).toBeDefined();
  expect(state.consecutiveFailures).toBeGreaterThanOrEqual(1);
  const description = await stack.client.workflow.getHandle(sellers.workflowId('down')).describe();
  expect(description.status.name).toBe('RUNNING');
});

test('GET /v1/sellers shows every seller with reachability, circuit and capabilities', async () => {
  await sellers.refreshed('full');
  await sellers.refreshed('down');
  const list = (await (await fetch(`${base}/v1/sellers`)).json()) as { sellers: Record<string, any>[] };
  const byId = Object.fromEntries(list.sellers.map((entry) => [entry.id, entry]));
  expect(byId.full).toMatchObject({
    reachable: true,
    circuit: { state: 'closed' },
    capabilities: { idempotency: { supported: true, replay_ttl_seconds: 3600 }, wire_version: '3.0' },
  });
  expect(byId.down).toMatchObject({ reachable: false, capabilities: null });
  expect(byId.down.last_error.code).toEqual(expect.any(String));
  const one = await fetch(`${base}/v1/sellers/full`);
  expect(one.status).toBe(200);
  expect(((await one.json()) as Record<string, any>).capabilities.tasks).toContain('get_products');
  const missing = await fetch(`${base}/v1/sellers/nobody`);
  expect(missing.status).toBe(404);
  const bad = await fetch(`${base}/v1/sellers/full/capabilities-changed`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ reason: 'no requester' }),
  });
  expect(bad.status).toBe(400);
});

test('a task the seller does not offer is refused before any call; one it offers starts', async () => {
  await sellers.refreshed('full');
  const refused = await fetch(`${base}/v1/operations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: 'full', task: 'get_signals', params: { signal_spec: 'auto intenders' } }),
  });
  expect(refused.status).toBe(422);
  expect(((await refused.json()) as Record<string, any>).error).toMatchObject({
    code: 'UNSUPPORTED_TASK',
    field: 'task',
  });
  expect(seller.callsTo('get_signals')).toHaveLength(0);

  const accepted = await fetch(`${base}/v1/operations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      agent_id: 'full',
      task: 'get_products',
      params: { buying_mode: 'brief', brief: 'display' },
    }),
  });
  expect(accepted.status).toBe(202);
  const operationId = ((await accepted.json()) as Record<string, any>).operation_id as string;
  const done = await eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return view.state?.status === 'completed' ? view : undefined;
  });
  expect(done.state?.status).toBe('completed');
});

test("capabilities-changed reaches the seller's current run even when the run it knew has closed", async () => {
  await sellers.refreshed('down');
  const closed = stack.client.workflow.getHandle(sellers.workflowId('down'));
  const closedRunId = (await closed.describe()).runId;
  // The client has seen this run; it closes (as at a continue-as-new, or an operator's terminate) before the signal.
  await closed.terminate('closed under the client');
  const answer = await fetch(`${base}/v1/sellers/down/capabilities-changed`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ requested_by: 'operator', reason: 'after close' }),
  });
  expect(answer.status).toBe(202);
  const current = await stack.client.workflow.getHandle(sellers.workflowId('down')).describe();
  expect(current.runId).not.toBe(closedRunId);
  expect(current.status.name).toBe('RUNNING');
  const state = await eventually(async () => {
    const view = await sellers.view('down');
    return view.state?.notices.some((notice) => notice.reason === 'after close') ? view.state : undefined;
  });
  expect(state.notices).toEqual([expect.objectContaining({ requestedBy: 'operator', reason: 'after close' })]);
});
