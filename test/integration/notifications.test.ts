/**
 * Notifications to the buyer's systems (#12 item 6), against real Temporal, a real worker, the scripted fixture seller
 * and a receiver on loopback that verifies every notification's RFC 9421 signature against the JWKS the gateway
 * publishes at /.well-known/jwks.json, and keeps each idempotency key once. Events: input-required, completed (with
 * the media buy), rejected, failed and timed out; a receiver failure is retried without holding the operation back.
 */
import { randomUUID } from 'node:crypto';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  InMemoryReplayStore,
  InMemoryRevocationStore,
  StaticJwksResolver,
  verifyWebhookSignature,
} from '@adcp/sdk/signing/server';
import { createGateway } from '../../api/app';
import { SellerRegistry } from '../../config/sellers';
import { generateNotificationJwk, notificationKeyFromJwk } from '../../config/notification-key';
import type { CallerIdentity } from '../../protocol/tenancy';
import type { BuyerNotification } from '../../contract/notification';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, startTestStack } from '../harness/temporal';

const ACME: CallerIdentity = { tenant: 'acme', principal: 'acme/trader@acme' };
const key = notificationKeyFromJwk(generateNotificationJwk('notify-test-key'));

let seller: ScriptedSeller;
let stack: TestStack;
let gateway: Server;
let receiver: Server;
let receiverUrl: string;
let jwksUrl: string;

/** What the receiver saw: every POST, and the notifications it accepted (once per idempotency key). */
const deliveries: { key: string; verified: boolean; status: number }[] = [];
const accepted = new Map<string, BuyerNotification>();
/** Idempotency keys whose first delivery the receiver answers 503 (the activity retries). */
const failFirst = new Set<string>();
const replayStore = new InMemoryReplayStore();
const revocationStore = new InMemoryRevocationStore();

async function verify(req: http.IncomingMessage, body: string): Promise<boolean> {
  // The receiver knows nothing but the gateway's JWKS URL.
  const jwks = (await (await fetch(jwksUrl)).json()) as { keys: ConstructorParameters<typeof StaticJwksResolver>[0] };
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers[name] = value;
  try {
    await verifyWebhookSignature(
      { method: 'POST', url: `${receiverUrl.replace(/\/notify$/, '')}${req.url}`, headers, body },
      { jwks: new StaticJwksResolver(jwks.keys), replayStore, revocationStore },
    );
    return true;
  } catch {
    return false;
  }
}

function startReceiver(): Promise<Server> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      void (async () => {
        const verified = await verify(req, body);
        const notification = JSON.parse(body) as BuyerNotification;
        const idempotencyKey = String(req.headers['idempotency-key'] ?? '');
        let status = verified && idempotencyKey === notification.idempotency_key ? 200 : 401;
        if (status === 200 && failFirst.delete(idempotencyKey)) status = 503;
        deliveries.push({ key: idempotencyKey, verified, status });
        if (status === 200 && !accepted.has(idempotencyKey)) accepted.set(idempotencyKey, notification);
        res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
      })();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

beforeAll(async () => {
  receiver = await startReceiver();
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/notify`;
  seller = await startScriptedSeller();
  const sellerRegistry = new SellerRegistry(
    [{ id: 'fixture', url: seller.url, protocol: 'mcp' }],
    'notification agents',
    [{ id: 'acme', sellers: { fixture: { token_env: 'ACME_FIXTURE_TOKEN' } }, notification_url: receiverUrl }],
  );
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: { env: { ACME_FIXTURE_TOKEN: seller.authToken }, notificationKey: key },
  });
  gateway = http.createServer(createGateway({ orchestrator: stack.orchestrator, notificationJwks: [key.publicJwk] }));
  await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
  jwksUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/.well-known/jwks.json`;
});

afterAll(async () => {
  await new Promise((resolve) => gateway?.close(resolve));
  await stack?.close();
  await seller?.close();
  await new Promise((resolve) => receiver?.close(resolve));
});

function start(params: Record<string, unknown> = createMediaBuyParams(), budgetMs?: number) {
  return stack.orchestrator.start(
    {
      sellerId: 'fixture',
      task: 'create_media_buy',
      params,
      idempotencyKey: randomUUID(),
      ...(budgetMs ? { budgetMs } : {}),
    },
    ACME,
  );
}

test('the JWKS holds only the public key', async () => {
  const jwks = (await (await fetch(jwksUrl)).json()) as { keys: Record<string, unknown>[] };
  expect(jwks.keys).toHaveLength(1);
  expect(jwks.keys[0]).toMatchObject({
    kid: 'notify-test-key',
    kty: 'OKP',
    crv: 'Ed25519',
    adcp_use: 'webhook-signing',
  });
  expect(jwks.keys[0]).not.toHaveProperty('d');
});

test('input-required then completed: each notified once, signed, the completion with its media buy', async () => {
  seller.script('create_media_buy', [
    { status: 'input-required', reason: 'APPROVAL_REQUIRED', message: 'Budget needs sign-off' },
    { status: 'completed' },
  ]);
  const { operationId } = await start();
  // The receiver fails the first delivery of the question: the activity retries, the operation does not wait.
  failFirst.add(`${operationId}:input_required:1`);
  const question = await eventually(async () => accepted.get(`${operationId}:input_required:1`));
  expect(question).toMatchObject({
    event: 'input_required',
    operation_id: operationId,
    tenant: 'acme',
    status: 'input-required',
    input_request: { reason: 'APPROVAL_REQUIRED', message: 'Budget needs sign-off', round: 1 },
  });
  await stack.orchestrator.provideInput(operationId, { input: { approved: true }, idempotencyKey: 'ok' }, ACME);
  const final = await stack.orchestrator.result(operationId, ACME);
  expect(final.status).toBe('completed');
  const completed = await eventually(async () => accepted.get(`${operationId}:completed`));
  expect(completed).toMatchObject({
    event: 'completed',
    status: 'completed',
    resource: { media_buy_id: final.resource!.mediaBuyId },
  });

  const mine = deliveries.filter((delivery) => delivery.key.startsWith(`${operationId}:`));
  expect(mine.every((delivery) => delivery.verified)).toBe(true);
  // The question was delivered twice (503, then 200) under one key; the receiver kept it once.
  expect(mine.filter((delivery) => delivery.key === `${operationId}:input_required:1`).map((d) => d.status)).toEqual([
    503, 200,
  ]);
  expect([...accepted.keys()].filter((k) => k.startsWith(`${operationId}:`)).sort()).toEqual(
    [`${operationId}:completed`, `${operationId}:input_required:1`].sort(),
  );
});

test('rejected, failed and timed out are notified with why', async () => {
  const cases = [
    { script: { status: 'rejected', message: 'Inventory no longer available' }, event: 'rejected' },
    { script: { status: 'failed', message: 'Seller error' }, event: 'failed' },
    { script: { status: 'working' }, event: 'timed_out', budgetMs: 5_000 },
  ] as const;
  const events: BuyerNotification[] = [];
  for (const { script, event, ...rest } of cases) {
    seller.script('create_media_buy', [script]);
    const { operationId } = await start(createMediaBuyParams(), 'budgetMs' in rest ? rest.budgetMs : undefined);
    // Failed and rejected operations end their workflow Failed: the state is in the failure.
    await stack.orchestrator.result(operationId, ACME).catch(() => undefined);
    events.push(await eventually(async () => accepted.get(`${operationId}:${event}`)));
  }
  expect(events.map((event) => [event.event, event.status])).toEqual([
    ['rejected', 'rejected'],
    ['failed', 'failed'],
    ['timed_out', 'failed'],
  ]);
  expect(events[2]!.failure).toMatchObject({ reason: 'timed_out' });
  for (const event of events) expect(event.failure?.message).toEqual(expect.any(String));
});
