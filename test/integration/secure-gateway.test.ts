/**
 * The gateway as api/main.ts mounts it (api/mount.ts), through real HTTP against real Temporal, a real worker and
 * the scripted fixture seller: the operations API and the webhooks on separate listeners, and the fuzz list of
 * issue #12 (inputs that used to answer 500 or be silently mangled) answered 4xx on the mounted gateway.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { payloadCodecs } from '../../client/encryption-codec';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { type WebhookSigningKey, mintWebhookSigningKey, signWebhookRequest } from '../fixtures/webhook-signing';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type MountedTestGateway, mountTestGateway, reserveServer } from '../harness/mounted-gateway';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let seller: ScriptedSeller;
let stack: TestStack;
let gateway: MountedTestGateway;
let signing: WebhookSigningKey;
let operationId: string;

beforeAll(async () => {
  seller = await startScriptedSeller();
  signing = mintWebhookSigningKey();
  const apiServer = await reserveServer();
  const webhookServer = await reserveServer();
  const sellerRegistry = registry([
    {
      id: 'fixture',
      url: seller.url,
      protocol: 'mcp',
      token_env: 'FIXTURE_TOKEN',
      webhooks: { scheme: 'rfc9421', jwks: { keys: [signing.publicJwk] } } as never,
    },
  ]);
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: { env: { FIXTURE_TOKEN: seller.authToken }, publicBaseUrl: webhookServer.url },
  });
  gateway = await mountTestGateway({
    stack,
    sellers: sellerRegistry,
    tenants: ['acme', 'globex'],
    codecs: payloadCodecs(undefined),
    apiServer,
    webhookServer,
    split: true,
    publicBaseUrl: webhookServer.url,
  });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
  await seller?.close();
});

async function call(
  method: string,
  url: string,
  options: { key?: string; body?: string | Buffer; headers?: Record<string, string> } = {},
) {
  const response = await fetch(url, {
    method,
    headers: {
      ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...options.headers,
    },
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  const text = await response.text();
  let body: Record<string, any> = {};
  try {
    body = JSON.parse(text) as Record<string, any>;
  } catch {
    body = { text };
  }
  return { status: response.status, headers: response.headers, body };
}

const nested = (depth: number, leaf = '1') => `${'{"a":'.repeat(depth)}${leaf}${'}'.repeat(depth)}`;

test('a buyer starts an operation on the API listener; a reader of its tenant reads it, another tenant gets 404', async () => {
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
  const unauthenticated = await call('POST', `${gateway.apiUrl}/v1/operations`, { body: '{}' });
  expect(unauthenticated.status).toBe(401);
  expect(unauthenticated.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);

  const started = await call('POST', `${gateway.apiUrl}/v1/operations`, {
    key: gateway.keys['acme/buyer'],
    body: JSON.stringify({
      agent_id: 'fixture',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotency_key: randomUUID(),
    }),
  });
  expect(started.status).toBe(202);
  operationId = started.body.operation_id;
  const read = await eventually(async () => {
    const answer = await call('GET', `${gateway.apiUrl}/v1/operations/${operationId}`, {
      key: gateway.keys['acme/reader'],
    });
    return answer.body.status === 'submitted' ? answer : undefined;
  });
  expect(read).toMatchObject({ status: 200, body: { operation_id: operationId } });
  const other = await call('GET', `${gateway.apiUrl}/v1/operations/${operationId}`, {
    key: gateway.keys['globex/reader'],
  });
  expect(other).toMatchObject({ status: 404, body: { error: { code: 'OPERATION_NOT_FOUND' } } });
});

test('two listeners: /v1 is 404 on the webhook listener, webhooks are 404 on the API listener, both serve /healthz', async () => {
  const onWebhookListener = await call('GET', `${gateway.webhookUrl}/v1/operations`, {
    key: gateway.keys['acme/reader'],
  });
  expect(onWebhookListener.status).toBe(404);
  const startOnWebhookListener = await call('POST', `${gateway.webhookUrl}/v1/operations`, {
    key: gateway.keys['acme/buyer'],
    body: '{}',
  });
  expect(startOnWebhookListener.status).toBe(404);
  expect((await call('POST', `${gateway.webhookUrl}/codec/decode`, { body: '{"payloads":[]}' })).status).toBe(404);

  // The same signed webhook: refused as no route on the API listener, verified and accepted on the webhook one.
  const event = {
    task_id: 'task-unknown',
    status: 'working',
    timestamp: new Date().toISOString(),
    operation_id: operationId,
  };
  const onApi = signWebhookRequest({
    url: `${gateway.apiUrl}/webhooks/adcp/${operationId}`,
    body: event,
    key: signing.signerKey,
  });
  expect((await call('POST', onApi.url, { body: onApi.body, headers: onApi.headers })).status).toBe(404);

  expect((await call('GET', `${gateway.apiUrl}/healthz`)).status).toBe(200);
  expect((await call('GET', `${gateway.webhookUrl}/healthz`)).status).toBe(200);
  // The API listener still serves /v1.
  expect(
    (await call('GET', `${gateway.apiUrl}/v1/operations/${operationId}`, { key: gateway.keys['acme/reader'] })).status,
  ).toBe(200);
});

test('/metrics counts what the protections refuse (401, 403, 421) by route template, and each request once', async () => {
  const scrape = async () => (await call('GET', `${gateway.apiUrl}/metrics`)).body.text as string;
  const count = (text: string, labels: string) =>
    Number(new RegExp(`adcp_gateway_http_requests_total\\{${labels}\\} (\\d+)`).exec(text)?.[1] ?? 0);
  const before = await scrape();
  const unauthenticated = '(?=[^}]*method="GET")(?=[^}]*route="/v1/operations/:id")(?=[^}]*status="401")[^}]*';
  const forbidden = '(?=[^}]*method="POST")(?=[^}]*route="/v1/operations/:id/cancel")(?=[^}]*status="403")[^}]*';
  const served = '(?=[^}]*method="GET")(?=[^}]*route="/v1/operations/:id")(?=[^}]*status="200")[^}]*';
  const wrongHost = '(?=[^}]*status="421")[^}]*';

  expect((await call('GET', `${gateway.apiUrl}/v1/operations/${operationId}`)).status).toBe(401);
  expect((await call('GET', `${gateway.apiUrl}/v1/operations/${operationId}`, { key: 'not-a-key' })).status).toBe(401);
  // A reader may not cancel: refused by the role check, before any route runs.
  const cancel = await call('POST', `${gateway.apiUrl}/v1/operations/${operationId}/cancel`, {
    key: gateway.keys['acme/reader'],
    body: '{}',
  });
  expect(cancel.status).toBe(403);
  const read = await call('GET', `${gateway.apiUrl}/v1/operations/${operationId}`, {
    key: gateway.keys['acme/reader'],
  });
  expect(read.status).toBe(200);
  const rebinding = await new Promise<number>((resolve, reject) => {
    const url = new URL(`${gateway.apiUrl}/v1/operations/${operationId}`);
    http
      .get({ host: url.hostname, port: url.port, path: url.pathname, headers: { host: 'attacker.example' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });
  expect(rebinding).toBe(421);

  const after = await scrape();
  expect(count(after, unauthenticated) - count(before, unauthenticated)).toBe(2);
  expect(count(after, forbidden) - count(before, forbidden)).toBe(1);
  // Served by the inner gateway, which counts too: still counted once.
  expect(count(after, served) - count(before, served)).toBe(1);
  expect(count(after, wrongHost) - count(before, wrongHost)).toBeGreaterThanOrEqual(1);
});

describe('the fuzz list answers 4xx on the mounted gateway', () => {
  const start = (params: string) =>
    `{"agent_id":"fixture","task":"create_media_buy","params":${params},"idempotency_key":"${randomUUID()}"}`;

  test('GET /v1/operations/%ZZ (malformed percent-encoding)', async () => {
    const answer = await call('GET', `${gateway.apiUrl}/v1/operations/%ZZ`, { key: gateway.keys['acme/reader'] });
    expect(answer).toMatchObject({ status: 400, body: { error: { code: 'MALFORMED_PATH' } } });
  });

  test('an unknown charset', async () => {
    const answer = await call('POST', `${gateway.apiUrl}/v1/operations`, {
      key: gateway.keys['acme/buyer'],
      body: start('{}'),
      headers: { 'content-type': 'application/json; charset=koi8-r' },
    });
    expect(answer).toMatchObject({ status: 415, body: { error: { code: 'UNSUPPORTED_CHARSET' } } });
  });

  test('a garbage gzip body, on /v1 and on a webhook', async () => {
    const garbage = Buffer.from('this is not gzip at all');
    const api = await call('POST', `${gateway.apiUrl}/v1/operations`, {
      key: gateway.keys['acme/buyer'],
      body: garbage,
      headers: { 'content-encoding': 'gzip' },
    });
    expect(api).toMatchObject({ status: 400, body: { error: { code: 'MALFORMED_BODY' } } });
    const webhook = await call('POST', `${gateway.webhookUrl}/webhooks/adcp/${operationId}`, {
      body: garbage,
      headers: { 'content-encoding': 'gzip' },
    });
    expect(webhook.status).toBeGreaterThanOrEqual(400);
    expect(webhook.status).toBeLessThan(500);
    // A valid gzip body still works (it is decoded, then parsed strictly).
    const zipped = await call('POST', `${gateway.apiUrl}/v1/operations`, {
      key: gateway.keys['acme/buyer'],
      body: gzipSync(start('"not an object"')),
      headers: { 'content-encoding': 'gzip' },
    });
    expect(zipped).toMatchObject({ status: 400, body: { error: { code: 'INVALID_REQUEST' } } });
  });

  test('params nested 4,000 levels deep (the request fingerprint used to overflow the stack)', async () => {
    const answer = await call('POST', `${gateway.apiUrl}/v1/operations`, {
      key: gateway.keys['acme/buyer'],
      body: start(nested(4000)),
    });
    expect(answer).toMatchObject({ status: 400, body: { error: { code: 'NESTING_TOO_DEEP' } } });
  });

  test('a signed webhook nested 6,000 levels deep is verified, then refused 400 (sellers retry 5xx for ever)', async () => {
    const body = `{"task_id":"t","status":"working","timestamp":"${new Date().toISOString()}","result":${nested(6000)}}`;
    const signed = signWebhookRequest({
      url: `${gateway.webhookUrl}/webhooks/adcp/${operationId}`,
      body,
      key: signing.signerKey,
    });
    const answer = await call('POST', signed.url, { body: signed.body, headers: signed.headers });
    expect(answer).toMatchObject({ status: 400, body: { error: { code: 'NESTING_TOO_DEEP' } } });
  });

  test('1e309 is refused (JSON numbers are doubles), on /v1 and on a signed webhook', async () => {
    const api = await call('POST', `${gateway.apiUrl}/v1/operations`, {
      key: gateway.keys['acme/buyer'],
      body: start('{"budget":1e309}'),
    });
    expect(api).toMatchObject({ status: 400, body: { error: { code: 'NUMBER_OUT_OF_RANGE' } } });
    const signed = signWebhookRequest({
      url: `${gateway.webhookUrl}/webhooks/adcp/${operationId}`,
      body: `{"task_id":"t","status":"working","timestamp":"${new Date().toISOString()}","result":{"spend":1e309}}`,
      key: signing.signerKey,
    });
    const webhook = await call('POST', signed.url, { body: signed.body, headers: signed.headers });
    expect(webhook).toMatchObject({ status: 400, body: { error: { code: 'NUMBER_OUT_OF_RANGE' } } });
  });

  test('a Host header that is not the gateway (DNS rebinding) answers 421, before authentication', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      http
        .get(
          {
            host: '127.0.0.1',
            port: gateway.apiPort,
            path: `/v1/operations/${operationId}`,
            headers: {
              host: `rebind.attacker.example:${gateway.apiPort}`,
              authorization: `Bearer ${gateway.keys['acme/reader']}`,
            },
          },
          (response) => {
            response.resume();
            resolve(response.statusCode!);
          },
        )
        .on('error', reject);
    });
    expect(status).toBe(421);
  });

  test('none of them disturbed the operation', async () => {
    const read = await call('GET', `${gateway.apiUrl}/v1/operations/${operationId}`, {
      key: gateway.keys['acme/reader'],
    });
    expect(read).toMatchObject({ status: 200, body: { status: 'submitted', webhooks_applied: 0 } });
  });
});
