/**
 * The gateway's HTTP contract, over real HTTP, against real Temporal and the demo seller.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { parse } from 'yaml';
import type { Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { createGateway } from '../../api/app';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { getProductsParams } from '../harness/demo-requests';
import { type TestStack, demoAgent, eventually, registry, startTestStack } from '../harness/temporal';

let stack: TestStack;
let server: Server;
let base: string;

beforeAll(async () => {
  stack = await startTestStack({ agents: registry([demoAgent()]), activities: { env: { DEMO_SELLER_TOKEN } } });
  const app = createGateway({ orchestrator: stack.orchestrator, webUiUrl: 'http://127.0.0.1:8233' });
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
});

async function post(path: string, body: unknown, contentType = 'application/json') {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': contentType },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

test('healthz answers 200 while Temporal is reachable', async () => {
  const response = await fetch(`${base}/healthz`);
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject({ status: 'ok' });
});

test('healthz answers 503 when Temporal is not reachable', async () => {
  const connection = await Connection.connect({ address: process.env.TEMPORAL_TEST_ADDRESS! });
  const unreachable = new OrchestratorClient({ client: new Client({ connection }), taskQueue: 'none' });
  await connection.close();
  const app = createGateway({ orchestrator: unreachable });
  const closedServer = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  try {
    const response = await fetch(`http://127.0.0.1:${(closedServer.address() as AddressInfo).port}/healthz`);
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ status: 'unavailable' });
  } finally {
    await new Promise((resolve) => closedServer.close(resolve));
  }
});

test('POST /v1/operations starts an operation (202) and GET returns its state and, once ended, its result', async () => {
  const key = randomUUID();
  const started = await post('/v1/operations', { agent_id: 'demo', task: 'get_products', params: getProductsParams, idempotency_key: key });
  expect(started.status).toBe(202);
  expect(started.body).toMatchObject({ operation_id: `adcp-get_products-${key}`, created: true, status: 'pending' });
  const final = await eventually(async () => {
    const response = await fetch(`${base}/v1/operations/${started.body.operation_id}`);
    const body = (await response.json()) as Record<string, any>;
    return body.running === false ? body : undefined;
  });
  expect(final.status).toBe('completed');
  expect(final.result.products.length).toBeGreaterThan(0);
  expect(final.web_ui).toContain(`/workflows/${started.body.operation_id}`);

  const again = await post('/v1/operations', { agent_id: 'demo', task: 'get_products', params: getProductsParams, idempotency_key: key });
  expect(again.status).toBe(200);
  expect(again.body).toMatchObject({ operation_id: started.body.operation_id, created: false, status: 'completed' });
});

test.each([
  [{ task: 'get_products', params: {} }, 'agent_id'],
  [{ agent_id: 'demo', task: 'Get Products!', params: {} }, 'task'],
  [{ agent_id: 'demo', task: 'get_products', params: [] }, 'params'],
  [{ agent_id: 'demo', task: 'get_products', params: {}, idempotency_key: 'has spaces' }, 'idempotency_key'],
  [{ agent_id: 'demo', task: 'get_products', params: {}, surprise: 1 }, 'surprise'],
  [{ agent_id: 'nobody', task: 'get_products', params: {} }, 'agent_id'],
  [{ agent_id: 'demo', task: 'create_media_buy', params: { idempotency_key: 'mine-1234567890abcdef' } }, 'params.idempotency_key'],
])('a bad start request %j is a 400 naming %s', async (body, field) => {
  const answer = await post('/v1/operations', body);
  expect(answer.status).toBe(400);
  expect(answer.body.error.code).toBe('INVALID_REQUEST');
  expect(answer.body.error.field).toBe(field);
  expect(answer.body.error.message.length).toBeGreaterThan(10);
});

test('malformed JSON is 400, a wrong content type 415, an oversized body 413', async () => {
  expect((await post('/v1/operations', '{"agent_id":')).status).toBe(400);
  expect((await post('/v1/operations', 'agent_id=demo', 'application/x-www-form-urlencoded')).status).toBe(415);
  const huge = { agent_id: 'demo', task: 'get_products', params: { brief: 'x'.repeat(1_100_000) } };
  expect((await post('/v1/operations', huge)).status).toBe(413);
});

test('an unknown operation is 404; input for an operation that has ended is 409', async () => {
  const missing = await fetch(`${base}/v1/operations/adcp-get_products-${randomUUID()}`);
  expect(missing.status).toBe(404);
  expect((await fetch(`${base}/v1/operations/not-an-operation`)).status).toBe(404);

  const started = await post('/v1/operations', { agent_id: 'demo', task: 'get_products', params: getProductsParams });
  await stack.orchestrator.result(started.body.operation_id);
  const input = await post(`/v1/operations/${started.body.operation_id}/input`, { input: { approved: true }, idempotency_key: 'answer-1' });
  expect(input.status).toBe(409);
  expect(input.body.error.message).toMatch(/has ended/);
});

test('POST /v1/sellers/:id/reconcile runs a reconciliation and answers its report; bad requests are 400', async () => {
  // The demo seller has no tasks/list: the report says so and the poll-now part still runs.
  const answer = await post('/v1/sellers/demo/reconcile', { requested_by: 'ops@buyer' });
  expect(answer.status).toBe(200);
  expect(answer.body).toMatchObject({ agentId: 'demo', requestedBy: 'ops@buyer', sellerListsTasks: false, adopted: [] });
  expect(typeof answer.body.openOperations).toBe('number');

  const unknown = await post('/v1/sellers/nobody/reconcile', { requested_by: 'ops@buyer' });
  expect(unknown.status).toBe(400);
  expect(unknown.body.error).toMatchObject({ code: 'INVALID_REQUEST', field: 'agent_id' });
  const missing = await post('/v1/sellers/demo/reconcile', {});
  expect(missing.status).toBe(400);
  expect(missing.body.error.field).toBe('requested_by');
});

test('a retry policy in the start request is validated', async () => {
  const bad = await post('/v1/operations', { agent_id: 'demo', task: 'get_products', params: getProductsParams, retry: { max_attempts: 0 } });
  expect(bad.status).toBe(400);
  expect(bad.body.error.field).toBe('retry.max_attempts');
  const good = await post('/v1/operations', { agent_id: 'demo', task: 'get_products', params: getProductsParams, idempotency_key: randomUUID(), retry: { max_attempts: 2, initial_interval_seconds: 0.5 } });
  expect(good.status).toBe(202);
  const state = await stack.orchestrator.result(good.body.operation_id);
  expect(state.status).toBe('completed');
});

test('every path and method in api/openapi.yaml is served by the gateway', async () => {
  const document = parse(readFileSync(path.resolve(__dirname, '..', '..', 'api', 'openapi.yaml'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
  const sample: Record<string, string> = { operationId: `adcp-get_products-${randomUUID()}`, agentId: 'demo' };
  const checked: string[] = [];
  // The full gateway, as api/main.ts mounts it: operations API and webhook receiver.
  const webhookRouter = createWebhookRouter({ client: stack.client, agents: registry([demoAgent()]), authenticator: createWebhookAuthenticator(), log: () => undefined });
  const full = await new Promise<Server>((resolve) => {
    const listening = createGateway({ orchestrator: stack.orchestrator, webhookRouter }).listen(0, '127.0.0.1', () => resolve(listening));
  });
  const fullBase = `http://127.0.0.1:${(full.address() as AddressInfo).port}`;
  for (const [template, item] of Object.entries(document.paths)) {
    const url = template.replace(/\{(\w+)\}/g, (_match, name: string) => sample[name] ?? 'x');
    for (const method of Object.keys(item).filter((key) => ['get', 'post', 'put', 'patch', 'delete'].includes(key))) {
      const response = await fetch(`${fullBase}${url}`, { method: method.toUpperCase(), headers: { 'content-type': 'application/json' }, ...(method === 'get' ? {} : { body: '{}' }) });
      const body = (await response.json()) as { error?: { code?: string } };
      // Any answer but the router's own "No such route" shows the route exists (400s, 404 OPERATION_NOT_FOUND...).
      expect({ route: `${method} ${template}`, code: body.error?.code }).not.toEqual({ route: `${method} ${template}`, code: 'NOT_FOUND' });
      checked.push(`${method} ${template}`);
    }
  }
  await new Promise((resolve) => full.close(resolve));
  expect(checked.length).toBeGreaterThanOrEqual(8);
});
