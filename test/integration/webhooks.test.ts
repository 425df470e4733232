/**
 * Seller webhooks through the real gateway into real workflows: the scripted fixture seller (built on
 * @adcp/sdk's server) signs with RFC 9421 through the SDK's own emitter.
 */
import type { AddressInfo } from 'node:net';
import { type Server, createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createGateway } from '../../api/app';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let seller: ScriptedSeller;
let stack: TestStack;
let server: Server;
let base: string;

beforeAll(async () => {
  seller = await startScriptedSeller({ webhookMode: 'rfc9421' });
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const sellers = registry([
    {
      id: 'fixture',
      url: seller.url,
      protocol: 'mcp',
      token_env: 'FIXTURE_TOKEN',
      webhooks: { scheme: 'rfc9421', jwks: seller.webhookJwks } as never,
    },
  ]);
  stack = await startTestStack({
    sellers,
    activities: { env: { FIXTURE_TOKEN: seller.authToken }, publicBaseUrl: base },
  });
  const webhookRouter = createWebhookRouter({
    client: stack.client,
    sellers,
    authenticator: createWebhookAuthenticator(),
    publicBaseUrl: base,
    log: () => undefined,
  });
  server.on('request', createGateway({ orchestrator: stack.orchestrator, webhookRouter }));
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  await seller?.close();
});

async function postWebhook(operationId: string, body: string, headers: Record<string, string>) {
  const response = await fetch(`${base}/webhooks/adcp/${operationId}`, { method: 'POST', headers, body });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

test('a signed completion webhook completes a submitted operation long before the next poll', async () => {
  // Submitted, then completed after 4 s by the seller's own timer (between the polls at 2 s and 6 s).
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 4_000, webhook: true }]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(state.webhookRegistered).toBe(true);
  expect(state.transitions[state.transitions.length - 1]).toMatchObject({ to: 'completed', source: 'webhook' });
  expect(state.webhooksApplied).toBe(1);
  expect(typeof state.result?.media_buy_id).toBe('string');
  const call = seller.callsTo('create_media_buy')[0];
  expect((call.args.push_notification_config as { url: string }).url).toBe(
    `${base}/webhooks/adcp/fixture/${operationId}`,
  );
});

test('forged, malformed, unknown-operation and wrong-type webhooks are refused; the operation is unchanged', async () => {
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const submitted = await eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return view.state?.status === 'submitted' ? view.state : undefined;
  });
  const body = JSON.stringify({
    idempotency_key: `evt_${randomUUID()}`,
    task_id: submitted.taskId,
    task_type: 'create_media_buy',
    status: 'completed',
    timestamp: new Date().toISOString(),
    result: { media_buy_id: 'forged' },
  });

  const unsigned = await postWebhook(operationId, body, { 'content-type': 'application/json' });
  expect(unsigned.status).toBe(401);
  // At the seller-less URL the operation is looked up first: the refusal does not say why (nor whether it exists).
  expect(unsigned.body.error.reason).toBeUndefined();
  const forged = await postWebhook(operationId, body, {
    'content-type': 'application/json',
    'signature-input':
      'sig1=("@method" "@target-uri" "@authority" "content-type" "content-digest");created=1;expires=2;nonce="n";keyid="nope";alg="ed25519";tag="adcp/webhook-signing/v1"',
    signature: 'sig1=:AAAA:',
    'content-digest': 'sha-256=:AAAA:',
  });
  expect(forged.status).toBe(401);
  expect((await postWebhook(operationId, body, { 'content-type': 'text/plain' })).status).toBe(415);
  const unknown = await postWebhook(`adcp-create_media_buy-${randomUUID()}`, body, {
    'content-type': 'application/json',
  });
  expect({ status: unknown.status, error: unknown.body.error }).toEqual({ status: 401, error: unsigned.body.error });
  const oversized = await fetch(`${base}/webhooks/adcp/${operationId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: 'x'.repeat(1_100_000),
  });
  expect(oversized.status).toBe(413);

  const view = await stack.orchestrator.status(operationId);
  expect(view.state).toMatchObject({ status: 'submitted', webhooksApplied: 0 });
  await stack.orchestrator.cancel(operationId, { requestedBy: 'test', reason: 'cleanup' });
});

test('with the seller in the path, the sender is checked before Temporal is asked: probing learns nothing', async () => {
  const body = JSON.stringify({ task_id: 't', task_type: 'create_media_buy', status: 'completed' });
  const post = async (path: string) => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  const missing = `adcp-create_media_buy-${randomUUID()}`;
  // The seller-less form (URLs handed out before) must look the operation up to know whose signature to expect; a
  // missing one is answered as an unverified request is.
  expect(await post(`/webhooks/adcp/${missing}`)).toMatchObject({ status: 401, body: { code: 'WEBHOOK_REJECTED' } });
  // With the seller in the path, an unsigned request is refused whether or not the operation exists.
  const unsignedMissing = await post(`/webhooks/adcp/fixture/${missing}`);
  expect(unsignedMissing.status).toBe(401);
  expect(unsignedMissing.body.error.reason).toMatch(/^webhook_signature/);
  const unknownSeller = await post(`/webhooks/adcp/no-such-seller/${missing}`);
  expect(unknownSeller).toMatchObject({ status: 401, body: { error: { reason: 'webhooks_not_configured' } } });
});

test('the same signed webhook delivered ten times concurrently is applied once; after the end it is ignored', async () => {
  seller.script('create_media_buy', [
    { status: 'submitted' },
    { status: 'completed', afterMs: 4_000, webhook: { duplicate: 9 } },
  ]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  await seller.webhooksSettled();
  expect(state.status).toBe('completed');
  const deliveries = seller.webhookDeliveries.filter((delivery) => String(delivery.url).endsWith(operationId));
  expect(deliveries.length).toBeGreaterThanOrEqual(10);
  const final = await stack.orchestrator.status(operationId);
  expect(final.state?.webhooksApplied).toBe(1);
  expect(seller.mediaBuys().filter((buy) => buy.mediaBuyId === state.result?.media_buy_id)).toHaveLength(1);
});

test('A2A: the push config travels in configuration.pushNotificationConfig, and the seller’s A2A Task webhook completes the operation', async () => {
  const a2aSeller = await startScriptedSeller({ a2a: 'spec', webhookMode: 'rfc9421' });
  const sellers = registry([
    {
      id: 'fixture-a2a',
      url: a2aSeller.a2aUrl!,
      protocol: 'a2a',
      token_env: 'FIXTURE_TOKEN',
      webhooks: { scheme: 'rfc9421', jwks: a2aSeller.webhookJwks } as never,
    },
  ]);
  const a2aServer = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  const a2aBase = `http://127.0.0.1:${(a2aServer.address() as AddressInfo).port}`;
  const a2aStack = await startTestStack({
    sellers,
    activities: { env: { FIXTURE_TOKEN: a2aSeller.authToken }, publicBaseUrl: a2aBase },
  });
  const router = createWebhookRouter({
    client: a2aStack.client,
    sellers,
    authenticator: createWebhookAuthenticator(),
    publicBaseUrl: a2aBase,
    log: () => undefined,
  });
  a2aServer.on('request', createGateway({ orchestrator: a2aStack.orchestrator, webhookRouter: router }));
  try {
    // Completed by the seller's timer at 4 s, between the polls at 2 s and 6 s; polls see `submitted` until then.
    a2aSeller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterMs: 4_000, webhook: true },
    ]);
    const { operationId } = await a2aStack.orchestrator.start({
      sellerId: 'fixture-a2a',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const state = await a2aStack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(state.transitions.at(-1)).toMatchObject({ to: 'completed', source: 'webhook' });
    expect(typeof state.result?.media_buy_id).toBe('string');
    const call = a2aSeller.callsTo('create_media_buy')[0];
    expect(call.transport).toBe('a2a');
    expect(call.a2a?.pushNotificationConfig).toMatchObject({
      url: `${a2aBase}/webhooks/adcp/fixture-a2a/${operationId}`,
    });
    // An RFC 9421 seller gets no legacy `authentication` block (its presence would switch it to HMAC).
    expect(call.a2a?.pushNotificationConfig?.authentication).toBeUndefined();
    expect(call.args.push_notification_config).toBeUndefined();
  } finally {
    await new Promise((resolve) => a2aServer.close(resolve));
    await a2aStack.close();
    await a2aSeller.close();
  }
});
