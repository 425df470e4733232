/**
 * Payload encryption end to end (#12 item 4): an encrypting worker and client (dataConverter with ADCP_PAYLOAD_KEYS)
 * behind the mounted gateway, a full operation against the scripted fixture seller (start, input-required answered,
 * the completion by signed webhook), then its whole history: no payload holds the brand, the budget or a secret in
 * clear, and the codec server at /codec decrypts them for an operator (only).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Payload } from '@temporalio/common';
import { METADATA_ENCRYPTION_KEY_ID, loadPayloadKeys, payloadCodecs } from '../../client/encryption-codec';
import { dataConverter } from '../../client/payload-codec';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type MountedTestGateway, mountTestGateway, reserveServer } from '../harness/mounted-gateway';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@temporalio/client';
import { closeIdleMcpConnections } from '../../activities/mcp-connection';
import { msToTs } from '@temporalio/common/lib/time';
import { NativeConnection } from '@temporalio/worker';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { listOperations } from '../../client/operation-list';
import { createOperationWorker } from '../../workers/worker';
import { ensureSearchAttributes } from '../../scripts/lib/dev-server';
import { type TestStack, eventually, quietRuntime, registry, testAddress, workflowBundle } from '../harness/temporal';
import { connectGrpc } from '../../config/grpc-connection';

const BRAND_DOMAIN = `zyxquorp-${randomUUID().slice(0, 8)}.example`;
const BUDGET = 731_942 + Math.floor(Math.random() * 1000);
const oldKey = randomBytes(32).toString('base64');
const newKey = randomBytes(32).toString('base64');
const env = { ADCP_PAYLOAD_KEYS: `k2025:${oldKey},k2026:${newKey}` };
const WEB_UI = 'http://127.0.0.1:8233';

let seller: ScriptedSeller;
let stack: TestStack;
let gateway: MountedTestGateway;

beforeAll(async () => {
  seller = await startScriptedSeller({ webhookMode: 'rfc9421' });
  const apiServer = await reserveServer();
  const sellers = registry([
    {
      id: 'fixture',
      url: seller.url,
      protocol: 'mcp',
      token_env: 'FIXTURE_TOKEN',
      webhooks: { scheme: 'rfc9421', jwks: seller.webhookJwks } as never,
    },
  ]);
  stack = await startEncryptedStack(sellers, {
    env: { FIXTURE_TOKEN: seller.authToken },
    publicBaseUrl: apiServer.url,
  });
  gateway = await mountTestGateway({
    stack,
    sellers,
    tenants: ['acme'],
    codecs: payloadCodecs(loadPayloadKeys(env)),
    apiServer,
    publicBaseUrl: apiServer.url,
  });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
  await seller?.close();
});

/**
 * The harness's stack, in a namespace of its own: other test files list the default namespace with clients that hold
 * no payload keys, and must not meet these encrypted operations (their memos would not decode).
 */
async function startEncryptedStack(
  sellers: ReturnType<typeof registry>,
  activities: { env: Record<string, string>; publicBaseUrl: string },
): Promise<TestStack> {
  quietRuntime();
  const address = testAddress();
  const namespace = `encryption-${randomUUID().slice(0, 8)}`;
  const connection = await connectGrpc({ address });
  await connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  await eventually(() => connection.workflowService.describeNamespace({ namespace }).then(() => true));
  await ensureSearchAttributes(connection, namespace);
  const converter = dataConverter(env);
  const client = new Client({ connection, namespace, dataConverter: converter });
  const taskQueue = `test-${randomUUID()}`;
  const workerConnection = await NativeConnection.connect({ address });
  const worker = await createOperationWorker({
    connection: workerConnection,
    namespace,
    taskQueue,
    dataConverter: converter,
    workflowBundle: await workflowBundle(),
    activities: { sellers, ...activities },
    client,
    shutdownGraceTime: '2s',
  });
  const running = worker.run();
  return {
    client,
    orchestrator: new OrchestratorClient({ client, taskQueue, knownSeller: (id) => sellers.has(id) }),
    taskQueue,
    worker,
    async close() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await workerConnection.close();
      await connection.close();
      await closeMCPConnections().catch(() => undefined);
      closeIdleMcpConnections();
    },
  };
}

async function call(method: string, path: string, key: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${gateway.apiUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, any> };
}

/** Every Payload in a history (anything with `data` bytes and a `metadata` map), with where it was found. */
function payloadsIn(value: unknown, path = '', found: { path: string; payload: Payload }[] = []) {
  if (!value || typeof value !== 'object' || ArrayBuffer.isView(value)) return found;
  const candidate = value as { data?: unknown; metadata?: unknown };
  if (candidate.data instanceof Uint8Array && candidate.metadata && typeof candidate.metadata === 'object') {
    found.push({ path, payload: candidate as Payload });
    return found;
  }
  for (const [key, child] of Object.entries(value)) payloadsIn(child, `${path}.${key}`, found);
  return found;
}

const text = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString('latin1');
const encodingOf = (payload: Payload) => text(payload.metadata?.encoding);

let operationId: string;
let encrypted: Payload[] = [];

test('a full operation (start, input-required answered, webhook completion) runs encrypted through the gateway', async () => {
  seller.script('create_media_buy', [
    { status: 'input-required', reason: 'APPROVAL_REQUIRED', message: 'Budget above 50k needs sign-off' },
    { status: 'submitted' },
    { status: 'completed', afterMs: 1_500, webhook: true },
  ]);
  const params = {
    ...createMediaBuyParams(BUDGET),
    brand: { domain: BRAND_DOMAIN },
    account: { brand: { domain: BRAND_DOMAIN }, operator: BRAND_DOMAIN },
  };
  const started = await call('POST', '/v1/operations', gateway.keys['acme/buyer'], {
    agent_id: 'fixture',
    task: 'create_media_buy',
    params,
    idempotency_key: randomUUID(),
  });
  expect(started.status).toBe(202);
  operationId = started.body.operation_id;
  await eventually(async () => {
    const read = await call('GET', `/v1/operations/${operationId}`, gateway.keys['acme/reader']);
    return read.body.status === 'input-required' ? read : undefined;
  });
  const answered = await call('POST', `/v1/operations/${operationId}/input`, gateway.keys['acme/approver'], {
    input: { approved: true },
    idempotency_key: 'approval-1',
  });
  expect(answered).toMatchObject({ status: 200, body: { accepted: true } });
  const final = await eventually(async () => {
    const read = await call('GET', `/v1/operations/${operationId}`, gateway.keys['acme/reader']);
    return read.body.running === false ? read : undefined;
  }, 30_000);
  expect(final.body.status).toBe('completed');
  expect(final.body.webhooks_applied).toBeGreaterThanOrEqual(1);
  expect(final.body.transitions.some((step: { source?: string }) => step.source === 'webhook')).toBe(true);
  // The gateway (an encrypting client) reads the state back in clear.
  expect(JSON.stringify(final.body)).toContain(String(BUDGET));
});

test('no payload of its history holds the params or a secret in clear; every data payload is encrypted with the newest key', async () => {
  const history = await stack.client.workflow.getHandle(operationId).fetchHistory();
  const found = payloadsIn(history);
  // Search attributes are indexed in clear by design (and carry no params), and so is the SDK's own bookkeeping in
  // markers (a patch id; a local activity's seq, type and times, whose `result` is encrypted): the rest is our data.
  const sdkBookkeeping = /markerRecordedEventAttributes\.details\.(?!result\.)/;
  // Nor is the server's own note when a cancel reaches an activity between two attempts (a wait between polls):
  // Temporal writes that event itself, so no codec sees it, and it says only that.
  const serverNote = (path: string, payload: Payload) =>
    /activityTaskCanceledEventAttributes\.details\./.test(path) && text(payload.data) === '"ACTIVITY_ID_NOT_STARTED"';
  const data = found.filter(
    ({ path, payload }) =>
      !/searchAttributes|indexedFields/i.test(path) && !sdkBookkeeping.test(path) && !serverNote(path, payload),
  );
  expect(data.length).toBeGreaterThan(5);
  const secrets = [seller.authToken, ...Object.values(gateway.keys), oldKey, newKey];
  for (const { path, payload } of found) {
    const raw =
      text(payload.data) +
      Object.values(payload.metadata ?? {})
        .map(text)
        .join('');
    for (const needle of [BRAND_DOMAIN, String(BUDGET), ...secrets]) {
      if (raw.includes(needle))
        throw new Error(
          `${path} holds ${needle === BRAND_DOMAIN ? 'the brand' : needle === String(BUDGET) ? 'the budget' : 'a secret'} in clear`,
        );
    }
  }
  for (const { path, payload } of data) {
    expect([path, encodingOf(payload)]).toEqual([path, 'binary/encrypted']);
    expect(text(payload.metadata?.[METADATA_ENCRYPTION_KEY_ID])).toBe('k2026');
  }
  encrypted = data.map(({ payload }) => payload);
});

test('the codec server decrypts the whole history for an admin (Web UI origin allowed), not for a reader', async () => {
  const body = {
    payloads: encrypted.map((payload) => ({
      metadata: Object.fromEntries(
        Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value!).toString('base64')]),
      ),
      data: Buffer.from(payload.data!).toString('base64'),
    })),
  };
  const preflight = await fetch(`${gateway.apiUrl}/codec/decode`, {
    method: 'OPTIONS',
    headers: {
      origin: WEB_UI,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization,content-type,x-namespace',
    },
  });
  expect(preflight.status).toBe(204);
  expect(preflight.headers.get('access-control-allow-origin')).toBe(WEB_UI);

  // The whole history holds payloads of no tenant too (the seller's answers): an admin's to decode
  // (test/integration/tenant-keys.test.ts covers what a tenant's operator sees).
  const decoded = await call('POST', '/codec/decode', gateway.keys['acme/admin'], body, {
    origin: WEB_UI,
    'x-namespace': stack.client.options.namespace,
  });
  expect(decoded.status).toBe(200);
  expect(decoded.headers.get('access-control-allow-origin')).toBe(WEB_UI);
  const plaintext = (decoded.body.payloads as { metadata: Record<string, string>; data: string }[])
    .map((payload) => Buffer.from(payload.data, 'base64').toString('utf8'))
    .join('\n');
  // The params were there, encrypted; the secrets never were.
  expect(plaintext).toContain(BRAND_DOMAIN);
  expect(plaintext).toContain(String(BUDGET));
  for (const secret of [seller.authToken, ...Object.values(gateway.keys)]) expect(plaintext).not.toContain(secret);

  // Round trip: what the codec server encodes, it decodes to the same bytes.
  const original = decoded.body.payloads.slice(0, 3);
  const reencoded = await call('POST', '/codec/encode', gateway.keys['acme/admin'], { payloads: original });
  expect(reencoded.status).toBe(200);
  const again = await call('POST', '/codec/decode', gateway.keys['acme/admin'], reencoded.body);
  expect(again.body.payloads).toEqual(original);

  const reader = await call('POST', '/codec/decode', gateway.keys['acme/reader'], body);
  expect(reader.status).toBe(403);
  const anonymous = await fetch(`${gateway.apiUrl}/codec/decode`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(anonymous.status).toBe(401);
});

test('a client without the payload keys still lists the encrypted operations: each row says its state is unreadable', async () => {
  const keyless = new Client({ connection: stack.client.connection, namespace: stack.client.options.namespace });
  // The encrypting client lists the same row with its published state.
  const clear = await listOperations(stack.client, { limit: 50 });
  const withKeys = clear.operations.find((row) => row.operation_id === operationId);
  expect(withKeys).toMatchObject({ status: 'completed', task: 'create_media_buy' });
  expect(withKeys?.state_unreadable).toBeUndefined();

  const listed = await listOperations(keyless, { limit: 50 });
  const row = listed.operations.find((candidate) => candidate.operation_id === operationId);
  // Visibility's fields (search attributes are never encrypted) are still there; the memo is not.
  expect(row).toMatchObject({
    operation_id: operationId,
    task: 'create_media_buy',
    agent_id: 'fixture',
    status: 'completed',
    state_unreadable: true,
  });
  expect(row?.updated_at).toBe(row?.closed_at);
});
