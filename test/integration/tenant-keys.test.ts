/**
 * Per-tenant data keys (#25 item 6) end to end: an encrypting worker and client (ADCP_PAYLOAD_KEYS) run one operation
 * for each of two tenants at the demo seller, behind the gateway as api/main.ts mounts it. In history each tenant's
 * payloads name their tenant and are encrypted with its own data key; the codec server decodes an operator's own
 * tenant's payloads only (another tenant's, and the shared-key payloads of no tenant, come back still encoded), an
 * admin decodes them all; and on a gateway that runs on its development key, the dev server's Web UI (which sends no
 * credentials) decodes through the codec server.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { loadAuthConfig } from '../../api/auth';
import { createHardenedServer } from '../../api/hardening';
import { mountGateway } from '../../api/mount';
import {
  ENCRYPTED_ENCODING,
  METADATA_ENCRYPTION_TENANT,
  encryptedDataConverter,
  loadPayloadKeys,
  payloadCodecs,
} from '../../client/encryption-codec';
import { MediaBuyClient } from '../../client/media-buy-client';
import { loadRuntimeConfig } from '../../config/runtime';
import type { CallerIdentity } from '../../protocol/tenancy';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { createMediaBuyParams, getProductsParams } from '../harness/demo-requests';
import { type MountedTestGateway, mountTestGateway } from '../harness/mounted-gateway';
import { type TestStack, demoSellerConfig, registry, startTestStack } from '../harness/temporal';

const env = { ADCP_PAYLOAD_KEYS: `k1:${randomBytes(32).toString('base64')}` };
const WEB_UI = 'http://127.0.0.1:8233';
const ACME: CallerIdentity = { tenant: 'acme', principal: 'acme/buyer' };
const GLOBEX: CallerIdentity = { tenant: 'globex', principal: 'globex/buyer' };
const sellers = registry([demoSellerConfig()]);

type JsonPayload = { metadata: Record<string, string>; data: string; at?: string };

let stack: TestStack;
let gateway: MountedTestGateway;
let plain: Client;
const operations: Record<'acme' | 'globex', string> = { acme: '', globex: '' };

beforeAll(async () => {
  stack = await startTestStack({
    sellers,
    activities: { env: { DEMO_SELLER_TOKEN } },
    dataConverter: encryptedDataConverter(env),
  });
  gateway = await mountTestGateway({
    stack,
    sellers,
    tenants: ['acme', 'globex'],
    codecs: payloadCodecs(loadPayloadKeys(env)),
    env: { ADCP_CODEC_CORS_ORIGINS: WEB_UI },
  });
  for (const caller of [ACME, GLOBEX]) {
    const { operationId } = await stack.orchestrator.start(
      { sellerId: 'demo', task: 'get_products', params: getProductsParams, idempotencyKey: randomUUID() },
      caller,
    );
    await stack.orchestrator.result(operationId);
    operations[caller.tenant as 'acme' | 'globex'] = operationId;
  }
  plain = new Client({ connection: stack.client.connection });
});

afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

const text = (base64: string | undefined) =>
  base64 === undefined ? undefined : Buffer.from(base64, 'base64').toString();

/** Every payload of the operation's history as the Web UI holds it (base64 metadata values and data). */
async function storedPayloads(operationId: string): Promise<JsonPayload[]> {
  const history = await plain.workflow.getHandle(operationId).fetchHistory();
  const found: JsonPayload[] = [];
  const visit = (value: unknown, at: string): void => {
    if (!value || typeof value !== 'object') return;
    if (Array.isArray(value)) return value.forEach((item, index) => visit(item, `${at}[${index}]`));
    const record = value as Record<string, unknown>;
    // Search attributes are Payloads too, never encoded by the data converter.
    if (record.indexedFields) return;
    if (record.metadata && typeof record.metadata === 'object' && record.data instanceof Uint8Array) {
      found.push({
        at,
        metadata: Object.fromEntries(
          Object.entries(record.metadata as Record<string, Uint8Array>).map(([key, bytes]) => [
            key,
            Buffer.from(bytes).toString('base64'),
          ]),
        ),
        data: Buffer.from(record.data).toString('base64'),
      });
      return;
    }
    for (const [key, item] of Object.entries(record)) visit(item, `${at}.${key}`);
  };
  visit(history.events, 'events');
  return found;
}

async function decode(
  url: string,
  payloads: JsonPayload[],
  key?: string,
): Promise<{ status: number; payloads: JsonPayload[] }> {
  const response = await fetch(`${url}/codec/decode`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      origin: WEB_UI,
      'x-namespace': 'default',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body: JSON.stringify({ payloads }),
  });
  const body = (await response.json()) as { payloads: JsonPayload[]; detail?: string };
  return { status: response.status, payloads: body.payloads };
}

const encrypted = (payload: JsonPayload) => text(payload.metadata.encoding) === ENCRYPTED_ENCODING;

test("each tenant's payloads name their tenant and are encrypted with its own key; some payloads are of no tenant", async () => {
  const acme = await storedPayloads(operations.acme);
  expect(acme.length).toBeGreaterThan(3);
  // Every payload the data converter wrote is ciphertext (a local activity's marker data is the SDK's own, in clear).
  expect(acme.filter((payload) => !encrypted(payload)).map((payload) => payload.at)).toEqual([
    expect.stringMatching(/markerRecordedEventAttributes\.details\.data/),
  ]);
  const tenants = new Set(acme.map((payload) => text(payload.metadata[METADATA_ENCRYPTION_TENANT]) ?? '(none)'));
  // The input, the state (memo, result) are acme's; the seller's answers to activities carry no tenant.
  expect([...tenants].sort()).toEqual(['(none)', 'acme']);
  const globex = await storedPayloads(operations.globex);
  expect(globex.some((payload) => text(payload.metadata[METADATA_ENCRYPTION_TENANT]) === 'globex')).toBe(true);
  expect(globex.some((payload) => text(payload.metadata[METADATA_ENCRYPTION_TENANT]) === 'acme')).toBe(false);
});

test("an operator decodes only its tenant's payloads; another tenant's and the shared ones come back encoded; an admin decodes all", async () => {
  const stored = (await storedPayloads(operations.acme)).map(({ metadata, data }) => ({ metadata, data }));
  const ofAcme = stored.filter((payload) => text(payload.metadata[METADATA_ENCRYPTION_TENANT]) === 'acme');
  const shared = stored.filter((payload) => payload.metadata[METADATA_ENCRYPTION_TENANT] === undefined);

  const own = await decode(gateway.apiUrl, ofAcme, gateway.keys['acme/operator']);
  expect(own.status).toBe(200);
  expect(own.payloads.some(encrypted)).toBe(false);
  expect(own.payloads.map((payload) => text(payload.data)).join('\n')).toContain(operations.acme);

  const other = await decode(gateway.apiUrl, stored, gateway.keys['globex/operator']);
  expect(other.status).toBe(200);
  expect(other.payloads).toEqual(stored);

  const sharedForAcme = await decode(gateway.apiUrl, shared, gateway.keys['acme/operator']);
  expect(sharedForAcme.payloads).toEqual(shared);

  const admin = await decode(gateway.apiUrl, stored, gateway.keys['globex/admin']);
  expect(admin.status).toBe(200);
  expect(admin.payloads.some(encrypted)).toBe(false);
});

test("a buy's payloads are its tenant's too", async () => {
  const buys = new MediaBuyClient({ client: stack.client, taskQueue: stack.taskQueue });
  const { mediaBuyWorkflowId } = await buys.create(
    { buyKey: `keys-${randomUUID()}`, sellerId: 'demo', params: createMediaBuyParams() },
    GLOBEX,
  );
  const input = (await storedPayloads(mediaBuyWorkflowId)).find((payload) =>
    payload.at?.endsWith('workflowExecutionStartedEventAttributes.input.payloads[0]'),
  )!;
  expect(text(input.metadata[METADATA_ENCRYPTION_TENANT])).toBe('globex');
  await stack.client.workflow
    .getHandle(mediaBuyWorkflowId)
    .terminate('test over')
    .catch(() => undefined);
});

test('on its development key the gateway decodes for the dev server Web UI, which sends no credentials', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'adcp-dev-codec-'));
  const server = createHardenedServer((_req, res) => res.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  try {
    const runtime = loadRuntimeConfig({ ADCP_TASK_QUEUE: stack.taskQueue, ADCP_GATEWAY_PORT: String(port) });
    const mounted = mountGateway({
      client: stack.client,
      orchestrator: stack.orchestrator,
      mediaBuys: new MediaBuyClient({ client: stack.client, taskQueue: stack.taskQueue }),
      sellers,
      runtime,
      auth: loadAuthConfig({}),
      codecs: payloadCodecs(loadPayloadKeys(env)),
      dataDir: dir,
      env: {},
    });
    expect(mounted.developmentKey).toBeDefined();
    server.removeAllListeners('request');
    server.on('request', mounted.api as http.RequestListener);
    const url = `http://127.0.0.1:${port}`;
    const stored = await storedPayloads(operations.acme);
    const fromTheUi = await decode(url, stored);
    expect(fromTheUi.status).toBe(200);
    expect(fromTheUi.payloads.some(encrypted)).toBe(false);
    // Another origin gets no such trust.
    const elsewhere = await fetch(`${url}/codec/decode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://evil.example' },
      body: JSON.stringify({ payloads: stored }),
    });
    expect(elsewhere.status).toBe(401);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  }
});
