/**
 * The gateway's HTTP contract, over real HTTP, against real Temporal and the demo seller.
 */
import { createMediaBuyRouter } from '../../api/media-buys';
import { createReportingWebhookRouter } from '../../api/reporting-webhooks';
import { MediaBuyClient } from '../../client/media-buy-client';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { createGateway } from '../../api/app';
import { createAuthentication } from '../../api/auth';
import { createCampaignRouter } from '../../api/campaigns';
import { createCodecServer } from '../../api/codec-server';
import { createDiscoveryRouter } from '../../api/discoveries';
import { openApiPath } from '../../api/openapi';
import { ROUTES } from '../../api/routes';
import { createSellerRouter } from '../../api/sellers';
import { CampaignClient } from '../../client/campaign-client';
import { payloadCodecs } from '../../client/encryption-codec';
import { SellerCapabilitiesClient } from '../../client/seller-capabilities-client';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { freePort } from '../../scripts/lib/dev-server';
import { getProductsParams } from '../harness/demo-requests';
import { type TestStack, demoSellerConfig, eventually, registry, startTestStack } from '../harness/temporal';
import { connectGrpc, lazyGrpc } from '../../config/grpc-connection';

let stack: TestStack;
let server: Server;
let base: string;

beforeAll(async () => {
  stack = await startTestStack({ sellers: registry([demoSellerConfig()]), activities: { env: { DEMO_SELLER_TOKEN } } });
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

async function listen(app: ReturnType<typeof createGateway>): Promise<{ url: string; close: () => Promise<void> }> {
  const listening = await new Promise<Server>((resolve) => {
    const started = app.listen(0, '127.0.0.1', () => resolve(started));
  });
  return {
    url: `http://127.0.0.1:${(listening.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => listening.close(() => resolve())),
  };
}

test('healthz answers 200 while Temporal is reachable, and says that a worker polls the task queue', async () => {
  const response = await fetch(`${base}/healthz`);
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject({
    status: 'ok',
    temporal: 'reachable',
    workers: 'polling',
    task_queue: stack.taskQueue,
  });
});

test('healthz says when no worker polls the task queue (Temporal up, operations cannot move)', async () => {
  const orchestrator = new OrchestratorClient({ client: stack.client, taskQueue: `nobody-polls-${randomUUID()}` });
  const gateway = await listen(createGateway({ orchestrator }));
  try {
    const response = await fetch(`${gateway.url}/healthz`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, any>;
    expect(body).toMatchObject({ status: 'degraded', temporal: 'reachable', workers: 'none', pollers: 0 });
    expect(body.message).toMatch(/No worker polls task queue/);
  } finally {
    await gateway.close();
  }
});

test('with Temporal down, /v1 calls answer 503 with Retry-After within seconds, not after the client gives up', async () => {
  // Nothing listens there: every call is UNAVAILABLE, which the Temporal client would otherwise retry for ~20 s.
  const connection = lazyGrpc({ address: `127.0.0.1:${await freePort()}` });
  const orchestrator = new OrchestratorClient({ client: new Client({ connection }), taskQueue: 'none' });
  const gateway = await listen(createGateway({ orchestrator }));
  try {
    for (const request of [
      () => fetch(`${gateway.url}/v1/operations/adcp-get_products-${randomUUID()}`),
      () =>
        fetch(`${gateway.url}/v1/operations`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ agent_id: 'demo', task: 'get_products', params: getProductsParams }),
        }),
    ]) {
      const started = Date.now();
      const response = await request();
      const elapsedMs = Date.now() - started;
      expect(response.status).toBe(503);
      expect(response.headers.get('retry-after')).toBe('5');
      expect(((await response.json()) as Record<string, any>).error.code).toBe('TEMPORAL_UNAVAILABLE');
      // Generous for a loaded CI machine; the deadline is 4 s, and without it this took 18-21 s.
      expect(elapsedMs).toBeLessThan(12_000);
    }
  } finally {
    await gateway.close();
    await connection.close().catch(() => undefined);
  }
});

test('healthz answers 503 when Temporal is not reachable', async () => {
  const connection = await connectGrpc({ address: process.env.TEMPORAL_TEST_ADDRESS! });
  const unreachable = new OrchestratorClient({ client: new Client({ connection }), taskQueue: 'none' });
  await connection.close();
  const app = createGateway({ orchestrator: unreachable });
  const closedServer = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  try {
    const response = await fetch(`http://127.0.0.1:${(closedServer.address() as AddressInfo).port}/healthz`);
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('5');
    expect(await response.json()).toMatchObject({
      status: 503,
      code: 'TEMPORAL_UNAVAILABLE',
      temporal: 'unreachable',
      error: { status: 'unavailable' },
    });
  } finally {
    await new Promise((resolve) => closedServer.close(resolve));
  }
});

test('POST /v1/operations starts an operation (202) and GET returns its state and, once ended, its result', async () => {
  const key = randomUUID();
  const started = await post('/v1/operations', {
    agent_id: 'demo',
    task: 'get_products',
    params: getProductsParams,
    idempotency_key: key,
  });
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
  expect(final).toMatchObject({ live: true, state_source: 'result' });

  const again = await post('/v1/operations', {
    agent_id: 'demo',
    task: 'get_products',
    params: getProductsParams,
    idempotency_key: key,
  });
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
  [
    { agent_id: 'demo', task: 'create_media_buy', params: { idempotency_key: 'mine-1234567890abcdef' } },
    'params.idempotency_key',
  ],
])('a bad start request %j is a 400 naming %s', async (body, field) => {
  const answer = await post('/v1/operations', body);
  expect(answer.status).toBe(400);
  expect(answer.body.error.code).toBe('INVALID_REQUEST');
  expect(answer.body.error.field).toBe(field);
  expect(answer.body.error.message.length).toBeGreaterThan(10);
});

test('malformed JSON is 400, a wrong content type 415, an oversized body 413', async () => {
  const malformed = await post('/v1/operations', '{"agent_id":');
  expect(malformed.status).toBe(400);
  expect(malformed.body.error.code).toBe('MALFORMED_JSON');
  expect((await post('/v1/operations', 'agent_id=demo', 'application/x-www-form-urlencoded')).status).toBe(415);
  const huge = { agent_id: 'demo', task: 'get_products', params: { brief: 'x'.repeat(1_100_000) } };
  expect((await post('/v1/operations', huge)).status).toBe(413);
});

test('JSON that is not an object is named as such, and a missing body is 400, not 415', async () => {
  const nullBody = await post('/v1/operations', 'null');
  expect(nullBody.status).toBe(400);
  expect(nullBody.body.error).toMatchObject({ code: 'INVALID_REQUEST' });
  expect(nullBody.body.error.message).toMatch(/valid JSON but null; send a JSON object/);
  expect((await post('/v1/operations', '[1]')).body.error.message).toMatch(/valid JSON but an array/);

  const empty = await fetch(`${base}/v1/operations`, { method: 'POST' });
  expect(empty.status).toBe(400);
  expect(((await empty.json()) as Record<string, any>).error.message).toMatch(/no body/);
});

test('an unsupported method on a known path is 405 with Allow; an unknown path is 404', async () => {
  const deleted = await fetch(`${base}/v1/operations/adcp-get_products-x`, { method: 'DELETE' });
  expect(deleted.status).toBe(405);
  expect(deleted.headers.get('allow')).toBe('GET');
  expect(((await deleted.json()) as Record<string, any>).error.code).toBe('METHOD_NOT_ALLOWED');
  const put = await fetch(`${base}/v1/operations`, { method: 'PUT' });
  expect(put.status).toBe(405);
  expect(put.headers.get('allow')).toBe('GET, POST');
  // GET lists operations (client/operation-list.ts; filters and paging are tested in operation-list.test.ts).
  const listed = await fetch(`${base}/v1/operations?limit=5`);
  expect(listed.status).toBe(200);
  expect(Array.isArray(((await listed.json()) as { operations?: unknown }).operations)).toBe(true);
  expect((await fetch(`${base}/v1/nothing-here`)).status).toBe(404);
});

test('params.push_notification_config and params.context_id are refused with a hint that fits each', async () => {
  const push = await post('/v1/operations', {
    agent_id: 'demo',
    task: 'create_media_buy',
    params: { push_notification_config: { url: 'https://x' } },
  });
  expect(push.status).toBe(400);
  expect(push.body.error.field).toBe('params.push_notification_config');
  expect(push.body.error.message).toMatch(/ADCP_PUBLIC_BASE_URL/);
  expect(push.body.error.message).not.toMatch(/idempotency_key/);
  const context = await post('/v1/operations', {
    agent_id: 'demo',
    task: 'create_media_buy',
    params: { context_id: 'ctx' },
  });
  expect(context.body.error.field).toBe('params.context_id');
  expect(context.body.error.message).toMatch(/\/input/);
});

test('the same idempotency key with another budget_seconds or retry is 409 IDEMPOTENCY_CONFLICT', async () => {
  const key = randomUUID();
  const request = {
    agent_id: 'demo',
    task: 'get_products',
    params: getProductsParams,
    idempotency_key: key,
    budget_seconds: 600,
  };
  expect((await post('/v1/operations', request)).status).toBe(202);
  expect((await post('/v1/operations', request)).status).toBe(200);
  const otherBudget = await post('/v1/operations', { ...request, budget_seconds: 900 });
  expect(otherBudget.status).toBe(409);
  expect(otherBudget.body.error.code).toBe('IDEMPOTENCY_CONFLICT');
  expect((await post('/v1/operations', { ...request, retry: { max_attempts: 2 } })).status).toBe(409);
});

test('a cancel that races the operation’s own end answers 202 or 409 with the final status, never 503', async () => {
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) {
    const started = await post('/v1/operations', { agent_id: 'demo', task: 'get_products', params: getProductsParams });
    // get_products ends within a second or so: cancels sent now land before, during and after its end.
    const answers = await Promise.all(
      [0, 150, 300, 600, 1_000].map(
        (delayMs) =>
          new Promise<Awaited<ReturnType<typeof post>>>((resolve) =>
            setTimeout(
              () =>
                resolve(
                  post(`/v1/operations/${started.body.operation_id}/cancel`, {
                    requested_by: 'test',
                    reason: `race ${delayMs}`,
                  }),
                ),
              delayMs,
            ),
          ),
      ),
    );
    for (const answer of answers) {
      statuses.push(answer.status);
      expect([202, 409]).toContain(answer.status);
      if (answer.status === 409) expect(answer.body.error.code).toMatch(/^(OPERATION_ENDED|REJECTED_BY_OPERATION)$/);
    }
  }
  // After the end, always 409 with the final status.
  const ended = await post('/v1/operations', { agent_id: 'demo', task: 'get_products', params: getProductsParams });
  const final = await stack.orchestrator.result(ended.body.operation_id);
  const late = await post(`/v1/operations/${ended.body.operation_id}/cancel`, {
    requested_by: 'test',
    reason: 'too late',
  });
  expect(late.status).toBe(409);
  expect(late.body.error).toMatchObject({ code: 'OPERATION_ENDED', status: final.status, execution: 'COMPLETED' });
  expect(statuses).not.toContain(503);
});

test('an unknown operation is 404; input for an operation that has ended is 409', async () => {
  const missing = await fetch(`${base}/v1/operations/adcp-get_products-${randomUUID()}`);
  expect(missing.status).toBe(404);
  expect((await fetch(`${base}/v1/operations/not-an-operation`)).status).toBe(404);

  const started = await post('/v1/operations', { agent_id: 'demo', task: 'get_products', params: getProductsParams });
  await stack.orchestrator.result(started.body.operation_id);
  const input = await post(`/v1/operations/${started.body.operation_id}/input`, {
    input: { approved: true },
    idempotency_key: 'answer-1',
  });
  expect(input.status).toBe(409);
  expect(input.body.error.message).toMatch(/has ended/);
});

test('POST /v1/sellers/:id/reconcile runs a reconciliation and answers its report; bad requests are 400', async () => {
  // The demo seller has no tasks/list: the report says so and the poll-now part still runs.
  const answer = await post('/v1/sellers/demo/reconcile', { requested_by: 'ops@buyer' });
  expect(answer.status).toBe(200);
  expect(answer.body).toMatchObject({
    agent_id: 'demo',
    requested_by: 'ops@buyer',
    seller_lists_tasks: false,
    adopted: [],
  });
  expect(typeof answer.body.open_operations).toBe('number');
  expect(Object.keys(answer.body).filter((key) => /[A-Z]/.test(key))).toEqual([]);

  // The seller is named in the path, not the body: an unknown one is a 404 without a body field.
  const unknown = await post('/v1/sellers/nobody/reconcile', { requested_by: 'ops@buyer' });
  expect(unknown.status).toBe(404);
  expect(unknown.body.error).toMatchObject({ code: 'SELLER_NOT_FOUND' });
  expect(unknown.body.error.field).toBeUndefined();
  const missing = await post('/v1/sellers/demo/reconcile', {});
  expect(missing.status).toBe(400);
  expect(missing.body.error.field).toBe('requested_by');
});

test('a retry policy in the start request is validated', async () => {
  const bad = await post('/v1/operations', {
    agent_id: 'demo',
    task: 'get_products',
    params: getProductsParams,
    retry: { max_attempts: 0 },
  });
  expect(bad.status).toBe(400);
  expect(bad.body.error.field).toBe('retry.max_attempts');
  const good = await post('/v1/operations', {
    agent_id: 'demo',
    task: 'get_products',
    params: getProductsParams,
    idempotency_key: randomUUID(),
    retry: { max_attempts: 2, initial_interval_seconds: 0.5 },
  });
  expect(good.status).toBe(202);
  const state = await stack.orchestrator.result(good.body.operation_id);
  expect(state.status).toBe('completed');
});

/** Every route express serves in `app` (routers mounted without a path prefix, as the gateway mounts them). */
function servedRoutes(app: { router: { stack: unknown[] } }, prefix = ''): string[] {
  type Layer = { route?: { path: string; methods: Record<string, boolean> }; handle?: { stack?: Layer[] } };
  const routes: string[] = [];
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route)
        for (const method of Object.keys(layer.route.methods).filter((name) => name !== '_all'))
          routes.push(`${method.toUpperCase()} ${prefix}${layer.route.path}`);
      else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk(app.router.stack as Layer[]);
  return routes;
}

const sameShape = (route: string) => route.replace(/:[A-Za-z]+/g, ':param');

test('the OpenAPI document is the one committed, and documents exactly the routes the gateway serves', async () => {
  const sellerRegistry = registry([demoSellerConfig()]);
  const mediaBuys = new MediaBuyClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    knownSeller: (id) => sellerRegistry.has(id),
  });
  const sellers = new SellerCapabilitiesClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    sellers: sellerRegistry,
  });
  const campaigns = new CampaignClient({ client: stack.client, taskQueue: stack.taskQueue, sellers });
  // The full gateway, as api/mount.ts mounts it: every router, the codec server at /codec.
  const gateway = createGateway({
    orchestrator: stack.orchestrator,
    webhookRouter: createWebhookRouter({
      client: stack.client,
      sellers: sellerRegistry,
      authenticator: createWebhookAuthenticator(),
      log: () => undefined,
    }),
    reportingWebhookRouter: createReportingWebhookRouter({
      client: stack.client,
      sellers: sellerRegistry,
      authenticator: createWebhookAuthenticator(),
      log: () => undefined,
    }),
    mediaBuyRouter: createMediaBuyRouter({ mediaBuys }),
    campaignRouters: [
      createSellerRouter({ sellers }),
      createDiscoveryRouter({ campaigns }),
      createCampaignRouter({ campaigns }),
    ],
  });
  const codec = createCodecServer({ codecs: payloadCodecs(undefined), authentication: createAuthentication({}) });
  const served = [...servedRoutes(gateway as never), ...servedRoutes({ router: codec } as never, '/codec')]
    .filter((route) => !route.startsWith('ALL '))
    .map(sameShape);
  const documented = ROUTES.map((route) => sameShape(`${route.method.toUpperCase()} ${route.path}`));
  expect([...new Set(served)].sort()).toEqual([...documented].sort());

  // What the gateway serves is what is committed (npm run openapi writes it).
  const listening = await listen(gateway);
  try {
    const response = await fetch(`${listening.url}/openapi.json`);
    expect(response.status).toBe(200);
    const committed = JSON.parse(readFileSync(path.resolve(__dirname, '..', '..', 'api', 'openapi.json'), 'utf8'));
    expect(await response.json()).toEqual(committed);
    expect(Object.keys(committed.paths).sort()).toEqual(
      [...new Set(ROUTES.map((route) => openApiPath(route.path)))].sort(),
    );
  } finally {
    await listening.close();
  }
});
