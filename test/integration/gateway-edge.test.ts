/**
 * The gateway's edge as a new user and an attacker meet it (#25), mounted as api/main.ts mounts it on the default
 * configuration's shape (a seller whose webhook secret variable is unset, as agents.example.json's demo-life-seller is
 * on a fresh clone), over real HTTP against real Temporal, a real worker and the demo seller:
 * - one error model: every refusal is RFC 9457 problem+json with the stable `code`;
 * - no 500 from the webhook receivers when a seller's secret is unset, nor from an update Temporal did not deliver;
 * - GET /.well-known/jwks.json without a notification key is a 404, not a 405 telling the caller to use GET;
 * - the webhook receivers answer an unauthenticated request the same whether or not the operation or buy exists;
 * - the per-principal rate limit counts before any lookup: made-up IDs are limited like real ones;
 * - a table of hostile requests at every route answers no 5xx but a 503 with Retry-After.
 */
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { WorkflowNotFoundError } from '@temporalio/client';
import { createSellerRouter } from '../../api/sellers';
import { MediaBuyClient, MediaBuyParamsError } from '../../client/media-buy-client';
import { OperationParamsError } from '../../client/operation-errors';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { SellerCapabilitiesClient, taskSupportCheck } from '../../client/seller-capabilities-client';
import { payloadCodecs } from '../../client/encryption-codec';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { createMediaBuyParams, getProductsParams } from '../harness/demo-requests';
import { type MountedTestGateway, mountTestGateway } from '../harness/mounted-gateway';
import { type TestStack, demoSellerConfig, eventually, registry, startTestStack } from '../harness/temporal';

/** The secret variable the "life" seller's webhooks are verified with: never set in this test's environment. */
const UNSET_SECRET = `EDGE_WEBHOOK_SECRET_${randomUUID().slice(0, 8).toUpperCase()}`;
/** Nothing listens there: a seller that has never told its capabilities. */
const DOWN_URL = `http://127.0.0.1:1/mcp`;
const sellerRegistry = registry([
  demoSellerConfig(),
  demoSellerConfig({ id: 'demo-life-seller', webhooks: { scheme: 'hmac-sha256', secret_env: UNSET_SECRET } as never }),
  { id: 'down', url: DOWN_URL, protocol: 'mcp' },
]);

let stack: TestStack;
let sellers: SellerCapabilitiesClient;
let gateway: MountedTestGateway;
/** An operation at the demo seller (no webhook verification configured) and one at the life seller. */
let demoOperation: string;
let lifeOperation: string;
/** A media buy's workflow at the life seller. */
let lifeBuy: string;

beforeAll(async () => {
  delete process.env[UNSET_SECRET];
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env: { DEMO_SELLER_TOKEN } } });
  sellers = new SellerCapabilitiesClient({ client: stack.client, taskQueue: stack.taskQueue, sellers: sellerRegistry });
  gateway = await mountTestGateway({
    stack,
    sellers: sellerRegistry,
    tenants: ['acme', 'globex'],
    codecs: payloadCodecs(undefined),
    campaignRouters: [createSellerRouter({ sellers })],
    taskSupport: taskSupportCheck(sellers),
  });
  const start = async (sellerId: string) => {
    const answer = await call('POST', '/v1/operations', gateway.keys['acme/buyer'], {
      agent_id: sellerId,
      task: 'get_products',
      params: getProductsParams,
      idempotency_key: randomUUID(),
    });
    expect(answer.status).toBe(202);
    return String(answer.body.operation_id);
  };
  demoOperation = await start('demo');
  lifeOperation = await start('demo-life-seller');
  const buy = await call('POST', '/v1/media-buys', gateway.keys['acme/buyer'], {
    buy_key: `edge-${randomUUID()}`,
    agent_id: 'demo-life-seller',
    params: createMediaBuyParams(),
  });
  expect(buy.status).toBe(202);
  lifeBuy = String(buy.body.id);
});

afterAll(async () => {
  await gateway?.close();
  // The capabilities workflows run until stopped: end them so the shared dev server does not keep them polling.
  for (const id of ['demo', 'demo-life-seller', 'down'])
    await stack?.client.workflow
      .getHandle(sellers.workflowId(id))
      .terminate('test over')
      .catch(() => undefined);
  await stack?.close();
});

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, any>;
}

async function send(
  method: string,
  path: string,
  options: { key?: string; body?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const response = await fetch(`${gateway.apiUrl}${path}`, {
    method,
    headers: {
      ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
      ...options.headers,
    },
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  const text = await response.text();
  let body: Record<string, any>;
  try {
    body = JSON.parse(text) as Record<string, any>;
  } catch {
    body = { text };
  }
  return { status: response.status, headers: response.headers, body };
}

function call(method: string, path: string, key: string | undefined, body?: unknown): Promise<Answer> {
  return send(method, path, {
    ...(key ? { key } : {}),
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
}

/** A problem as RFC 9457 shapes it, with the stable code and the older `error` object beside it. */
function expectProblem(answer: Answer, status: number, code: string): void {
  expect({ status: answer.status, code: answer.body.code }).toEqual({ status, code });
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.body).toMatchObject({
    type: expect.stringContaining(code),
    title: expect.any(String),
    status,
    detail: expect.any(String),
    instance: expect.stringMatching(/^\//),
    error: { code, message: answer.body.detail },
  });
}

test('every refusal is problem+json with its stable code, from the API, the codec server and the receivers', async () => {
  expectProblem(await call('GET', '/v1/operations/adcp-x-1', undefined), 401, 'UNAUTHENTICATED');
  expectProblem(
    await call('GET', `/v1/operations/adcp-get_products-${randomUUID()}`, gateway.keys['acme/reader']),
    404,
    'OPERATION_NOT_FOUND',
  );
  const invalid = await call('POST', '/v1/operations', gateway.keys['acme/buyer'], {
    agent_id: 'demo',
    task: 'get_products',
  });
  expectProblem(invalid, 400, 'INVALID_REQUEST');
  expect(invalid.body).toMatchObject({ field: 'params', error: { field: 'params' } });
  expectProblem(await call('POST', '/v1/operations', gateway.keys['acme/reader'], {}), 403, 'FORBIDDEN');
  expectProblem(
    await send('POST', '/v1/operations', {
      key: gateway.keys['acme/buyer'],
      body: '{',
      headers: { 'content-type': 'application/json' },
    }),
    400,
    'MALFORMED_JSON',
  );
  expectProblem(await call('PUT', '/v1/operations', gateway.keys['acme/all'], {}), 405, 'METHOD_NOT_ALLOWED');
  expectProblem(await call('GET', '/v1/nothing-here', gateway.keys['acme/reader']), 404, 'NOT_FOUND');
  expectProblem(await call('POST', '/codec/decode', gateway.keys['acme/reader'], { payloads: [] }), 403, 'FORBIDDEN');
  expectProblem(
    await send('POST', `/webhooks/adcp/demo/${demoOperation}`, {
      body: '{}',
      headers: { 'content-type': 'text/plain' },
    }),
    415,
    'UNSUPPORTED_MEDIA_TYPE',
  );
  expectProblem(await send('GET', '/v1/operations/%ZZ', { key: gateway.keys['acme/reader'] }), 400, 'MALFORMED_PATH');
});

test('unauthenticated webhooks at a seller whose secret variable is unset answer 401, never 500; /healthz says why', async () => {
  const body = JSON.stringify({ task_id: 't', task_type: 'get_products', status: 'completed' });
  const headers = { 'content-type': 'application/json' };
  const withSeller = await send('POST', `/webhooks/adcp/demo-life-seller/${lifeOperation}`, { body, headers });
  const withoutSeller = await send('POST', `/webhooks/adcp/${lifeOperation}`, { body, headers });
  const reporting = await send('POST', `/webhooks/adcp-reporting/${lifeBuy}`, { body, headers });
  for (const answer of [withSeller, withoutSeller, reporting]) expectProblem(answer, 401, 'WEBHOOK_REJECTED');

  const health = await send('GET', '/healthz');
  expect(health.status).toBe(200);
  expect(health.body.warnings).toEqual([expect.stringContaining(UNSET_SECRET)]);
  expect(health.body.warnings[0]).toContain('demo-life-seller');
});

test('a cancel whose update no worker takes answers 503 with Retry-After, not 500', async () => {
  // A task queue nobody polls: the operation exists, and its update waits for a worker past the gateway's deadline.
  const orphaned = new OrchestratorClient({ client: stack.client, taskQueue: `nobody-${randomUUID()}` });
  const stranded = await mountTestGateway({
    stack,
    sellers: sellerRegistry,
    tenants: ['acme'],
    codecs: payloadCodecs(undefined),
    orchestrator: orphaned,
  });
  try {
    const started = (await fetch(`${stranded.apiUrl}/v1/operations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stranded.keys['acme/buyer']}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: 'demo', task: 'get_products', params: getProductsParams }),
    }).then((response) => response.json())) as Record<string, any>;
    expect(started.operation_id).toEqual(expect.any(String));
    const response = await fetch(`${stranded.apiUrl}/v1/operations/${started.operation_id}/cancel`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stranded.keys['acme/operator']}`, 'content-type': 'application/json' },
      body: JSON.stringify({ requested_by: 'ops', reason: 'no worker' }),
    });
    const answer = {
      status: response.status,
      headers: response.headers,
      body: (await response.json()) as Record<string, any>,
    };
    expectProblem(answer, 503, 'TEMPORAL_UNAVAILABLE');
    expect(answer.headers.get('retry-after')).toBe('5');
    await stack.client.workflow.getHandle(String(started.operation_id)).terminate('test cleanup');
  } finally {
    await stranded.close();
  }
});

test('GET /.well-known/jwks.json without a notification key is 404 saying so, not 405 "use GET"', async () => {
  const answer = await send('GET', '/.well-known/jwks.json');
  expectProblem(answer, 404, 'NOT_FOUND');
  expect(answer.body.detail).toContain('ADCP_NOTIFICATION_KEY_FILE');
  expect(answer.headers.get('allow')).toBeNull();
});

test('an unauthenticated webhook is answered the same whether or not its operation or buy exists', async () => {
  const body = JSON.stringify({ task_id: 't', task_type: 'get_products', status: 'completed' });
  const headers = { 'content-type': 'application/json' };
  const same = (answer: Answer) => ({ status: answer.status, code: answer.body.code, error: answer.body.error });
  const pairs: [string, string][] = [
    [`/webhooks/adcp/${demoOperation}`, `/webhooks/adcp/adcp-get_products-${randomUUID()}`],
    [`/webhooks/adcp/${lifeOperation}`, `/webhooks/adcp/adcp-get_products-${randomUUID()}`],
    [
      `/webhooks/adcp/demo-life-seller/${lifeOperation}`,
      `/webhooks/adcp/demo-life-seller/adcp-get_products-${randomUUID()}`,
    ],
    [`/webhooks/adcp-reporting/${lifeBuy}`, `/webhooks/adcp-reporting/adcp-media-buy-${randomUUID()}`],
  ];
  for (const [real, madeUp] of pairs) {
    const existing = await send('POST', real, { body, headers });
    const missing = await send('POST', madeUp, { body, headers });
    expect(existing.status).toBe(401);
    expect({ path: madeUp, ...same(missing) }).toEqual({ path: madeUp, ...same(existing) });
    expect(missing.headers.get('www-authenticate')).toBe(existing.headers.get('www-authenticate'));
  }
});

test('the per-principal rate limit counts before any lookup: 150 cancels of made-up IDs see 429', async () => {
  const limited = await mountTestGateway({
    stack,
    sellers: sellerRegistry,
    tenants: ['acme'],
    codecs: payloadCodecs(undefined),
    principalRateLimit: { burst: 60, perSecond: 20 },
  });
  try {
    const statuses: number[] = [];
    for (let i = 0; i < 150; i++) {
      const response = await fetch(`${limited.apiUrl}/v1/operations/adcp-get_products-${randomUUID()}/cancel`, {
        method: 'POST',
        headers: { authorization: `Bearer ${limited.keys['acme/operator']}`, 'content-type': 'application/json' },
        body: JSON.stringify({ requested_by: 'ops', reason: 'probe' }),
      });
      await response.arrayBuffer();
      statuses.push(response.status);
      if (response.status === 429) expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    expect(statuses.filter((status) => status === 429).length).toBeGreaterThan(0);
    expect(statuses.filter((status) => status !== 429 && status !== 404)).toEqual([]);
  } finally {
    await limited.close();
  }
});

test('params no seller should get are refused with 422 before any workflow starts, over HTTP and by the typed clients', async () => {
  const now = Date.now();
  const day = 24 * 3_600_000;
  const flight = { start_time: new Date(now + 2 * day).toISOString(), end_time: new Date(now + day).toISOString() };
  const backwards = { ...createMediaBuyParams(), ...flight };
  const negative = {
    ...createMediaBuyParams(),
    packages: [{ product_id: 'display', pricing_option_id: 'cpm', budget: -500 }],
  };
  const absent = async (workflowId: string) =>
    expect(stack.client.workflow.getHandle(workflowId).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);

  for (const [params, field] of [
    [backwards, 'params.end_time'],
    [negative, 'params.packages.0.budget'],
  ] as const) {
    const key = randomUUID();
    const operation = await call('POST', '/v1/operations', gateway.keys['acme/buyer'], {
      agent_id: 'demo',
      task: 'create_media_buy',
      params,
      idempotency_key: key,
    });
    expectProblem(operation, 422, 'INVALID_PARAMS');
    expect(operation.body.field).toBe(field);
    await absent(`adcp-create_media_buy-acme:${key}`);

    const buyKey = `edge-${randomUUID()}`;
    const buy = await call('POST', '/v1/media-buys', gateway.keys['acme/buyer'], {
      buy_key: buyKey,
      agent_id: 'demo',
      params,
    });
    expectProblem(buy, 422, 'INVALID_PARAMS');
    expect(buy.body.field).toBe(field);
    await absent(`adcp-media-buy-acme:${buyKey}`);
    await absent(`adcp-media-buy-${buyKey}`);

    await expect(
      stack.orchestrator.start({ sellerId: 'demo', task: 'create_media_buy', params, idempotencyKey: randomUUID() }),
    ).rejects.toMatchObject({ constructor: OperationParamsError, field });
    const buys = new MediaBuyClient({ client: stack.client, taskQueue: stack.taskQueue });
    await expect(buys.create({ buyKey: `edge-${randomUUID()}`, sellerId: 'demo', params })).rejects.toMatchObject({
      constructor: MediaBuyParamsError,
      field,
    });
  }
});

test('a made-up task: 422 at a seller whose capabilities are known, 503 with Retry-After where they cannot be yet', async () => {
  const start = (sellerId: string, task: string) =>
    call('POST', '/v1/operations', gateway.keys['acme/buyer'], {
      agent_id: sellerId,
      task,
      params: getProductsParams,
      idempotency_key: randomUUID(),
    });
  await sellers.refreshed('demo');
  expectProblem(await start('demo', 'make_it_up'), 422, 'UNSUPPORTED_TASK');

  await sellers.refreshed('down');
  const unknown = await start('down', 'make_it_up');
  expectProblem(unknown, 503, 'SELLER_CAPABILITIES_UNKNOWN');
  expect(Number(unknown.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(unknown.body.detail).toContain('make_it_up is not an AdCP task');
  // An AdCP task waits for the seller durably, as any operation does.
  const durable = await start('down', 'get_products');
  expect(durable.status).toBe(202);
  await stack.client.workflow.getHandle(String(durable.body.operation_id)).terminate('test over');
});

/** Hostile requests: bodies, paths, queries and headers that used to answer 500 somewhere, or might. */
function hostileTable(): {
  name: string;
  method: string;
  path: string;
  body?: string | Buffer;
  headers?: Record<string, string>;
  key?: string;
}[] {
  const op = `adcp-get_products-${randomUUID()}`;
  const buy = `adcp-media-buy-${randomUUID()}`;
  const json = { 'content-type': 'application/json' };
  const deep = '['.repeat(100_000) + ']'.repeat(100_000);
  const posts = [
    '/v1/operations',
    `/v1/operations/${op}/input`,
    `/v1/operations/${op}/cancel`,
    `/v1/operations/${op}/credentials-refreshed`,
    '/v1/sellers/demo/reconcile',
    '/v1/sellers/demo/capabilities-changed',
    '/v1/media-buys',
    `/v1/media-buys/${buy}/changes`,
    `/v1/media-buys/${buy}/creatives`,
    `/v1/media-buys/${buy}/refresh`,
    `/v1/media-buys/${buy}/governance/decision`,
    '/v1/discoveries',
    '/v1/campaigns',
    '/v1/campaigns/adcp-campaign-x/selection',
    '/v1/campaigns/adcp-campaign-x/approval',
    '/v1/campaigns/adcp-campaign-x/changes',
    '/v1/campaigns/adcp-campaign-x/creatives',
    '/codec/decode',
    '/codec/encode',
    `/webhooks/adcp/demo-life-seller/${lifeOperation}`,
    `/webhooks/adcp/${op}`,
    `/webhooks/adcp-reporting/${buy}`,
  ];
  const bodies: { name: string; body: string | Buffer; headers: Record<string, string> }[] = [
    { name: 'truncated JSON', body: '{"agent_id": ', headers: json },
    { name: 'nesting 100,000 deep', body: deep, headers: json },
    { name: 'a number JSON cannot carry', body: '{"budget_seconds": 1e309, "total_budget": -1e309}', headers: json },
    { name: 'JSON null', body: 'null', headers: json },
    {
      name: 'prototype pollution',
      body: '{"__proto__": {"roles": ["operator"]}, "constructor": {"prototype": {}}}',
      headers: json,
    },
    { name: 'garbage gzip', body: Buffer.from('not gzip at all'), headers: { ...json, 'content-encoding': 'gzip' } },
    {
      name: 'a gzip bomb past the limit',
      body: gzipSync(Buffer.alloc(4 * 1024 * 1024, 0x20)),
      headers: { ...json, 'content-encoding': 'gzip' },
    },
  ];
  const table: ReturnType<typeof hostileTable> = [];
  for (const path of posts) {
    for (const { name, body, headers } of bodies)
      table.push({ name: `${name} at POST ${path}`, method: 'POST', path, body, headers });
  }
  const ids = [
    '%ZZ',
    '%00',
    '..%2F..%2Fetc%2Fpasswd',
    'a'.repeat(4000),
    "x' OR AdcpTenant != 'acme",
    '%F0%9F%92%A9',
    '%C0%AF',
  ];
  for (const id of ids) {
    for (const template of [
      '/v1/operations/:id',
      '/v1/media-buys/:id',
      '/v1/media-buys/:id/delivery',
      '/v1/sellers/:id',
      '/v1/discoveries/:id',
      '/v1/campaigns/:id',
    ]) {
      table.push({
        name: `id ${id.slice(0, 20)} at GET ${template}`,
        method: 'GET',
        path: template.replace(':id', id),
      });
    }
  }
  for (const query of [
    "seller=x'%20OR%20'1'='1",
    'status=<script>',
    'limit=-1',
    'limit=1e309',
    'cursor=not-a-cursor',
    'created_after=yesterday',
    'status[]=a&status[]=b',
    'waiting=maybe',
    'task=' + 'x'.repeat(3000),
    'created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z',
  ]) {
    table.push({ name: `list ?${query.slice(0, 30)}`, method: 'GET', path: `/v1/operations?${query}` });
  }
  for (const [name, headers] of [
    ['Content-Type text/plain', { 'content-type': 'text/plain' }],
    ['Content-Type application/json; charset=utf-16', { 'content-type': 'application/json; charset=utf-16' }],
    ['Content-Type application/json; charset=latin1', { 'content-type': 'application/json; charset=latin1' }],
    ['Content-Encoding zstd', { ...json, 'content-encoding': 'zstd' }],
    ['no Content-Type', {}],
  ] as const) {
    table.push({ name: `${name} at POST /v1/operations`, method: 'POST', path: '/v1/operations', body: '{}', headers });
    table.push({
      name: `${name} at POST /webhooks/adcp/${op}`,
      method: 'POST',
      path: `/webhooks/adcp/${op}`,
      body: '{}',
      headers,
    });
  }
  for (const [method, path] of [
    ['DELETE', '/v1/operations'],
    ['PATCH', `/v1/operations/${op}`],
    ['GET', `/webhooks/adcp/${op}`],
    ['GET', '/codec/decode'],
    ['POST', '/healthz'],
    ['POST', '/.well-known/jwks.json'],
    ['OPTIONS', '/v1/operations'],
  ] as const) {
    table.push({
      name: `${method} ${path}`,
      method,
      path,
      body: method === 'GET' || method === 'OPTIONS' ? undefined : '{}',
      headers: json,
    });
  }
  return table;
}

test('hostile requests at every route answer no 5xx but a 503 with Retry-After, always as problem+json', async () => {
  const table = hostileTable();
  expect(table.length).toBeGreaterThanOrEqual(150);
  const failures: string[] = [];
  for (const entry of table) {
    const answer = await send(entry.method, entry.path, {
      key: entry.key ?? gateway.keys['acme/all'],
      ...(entry.body !== undefined ? { body: entry.body } : {}),
      ...(entry.headers ? { headers: entry.headers } : {}),
    });
    const documented503 = answer.status === 503 && answer.headers.get('retry-after') !== null;
    if (answer.status >= 500 && !documented503)
      failures.push(`${entry.name}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
    if (answer.status >= 400 && !/^application\/problem\+json/.test(answer.headers.get('content-type') ?? ''))
      failures.push(`${entry.name}: ${answer.status} answered ${answer.headers.get('content-type')}`);
  }
  expect(failures).toEqual([]);
  // The gateway still works after all that.
  await eventually(async () => ((await send('GET', '/healthz')).status === 200 ? true : undefined));
});
