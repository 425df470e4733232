/**
 * The gateway's Temporal transport (ADCP_GATEWAY_TEMPORAL_TRANSPORT, config/temporal-connection.ts): over the Rust
 * core's NativeConnection, the gateway's default, seller webhooks keep every answer they have over grpc-js: a
 * verified event reaches the workflow (200), an operation that does not exist answers 404, one that has ended 200
 * "ignored", and Temporal out of reach 503 with Retry-After (whether the gateway's deadline or the core's retries end
 * the call first). Real Temporal (reached through a loopback TCP relay the test can cut), a real worker, RFC 9421
 * signatures by a key the seller's JWKS lists.
 */
import { randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Client } from '@temporalio/client';
import { createGateway } from '../../api/app';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { isTemporalUnavailable } from '../../client/temporal-errors';
import { connectClient } from '../../client/connect';
import { DEFAULT_GATEWAY_TEMPORAL_TRANSPORT, gatewayTemporalTransport } from '../../config/temporal-connection';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { type SignedWebhook, mintWebhookSigningKey, signWebhookRequest } from '../fixtures/webhook-signing';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack, testAddress } from '../harness/temporal';

const webhookKey = mintWebhookSigningKey(`transport-test-key-${randomUUID()}`);
let seller: ScriptedSeller;
let stack: TestStack;
let nativeClient: Client;
let relay: { address: string; cut(): void; close(): Promise<void> };
let server: Server;
let base: string;

/** A TCP relay to Temporal on a loopback port; cut() drops every connection and refuses new ones. */
async function startRelay(target: string): Promise<typeof relay> {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const sockets = new Set<net.Socket>();
  let cut = false;
  const listener = net.createServer((incoming) => {
    if (cut) {
      incoming.destroy();
      return;
    }
    const outgoing = net.connect(port, host);
    for (const socket of [incoming, outgoing]) {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    incoming.pipe(outgoing).pipe(incoming);
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(listener.address() as AddressInfo).port}`,
    cut() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    close: () => new Promise((resolve) => listener.close(() => resolve())),
  };
}

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
      webhooks: { scheme: 'rfc9421', jwks: { keys: [...seller.webhookJwks.keys, webhookKey.publicJwk] } } as never,
    },
  ]);
  stack = await startTestStack({
    sellers,
    activities: { env: { FIXTURE_TOKEN: seller.authToken }, publicBaseUrl: base },
  });
  relay = await startRelay(testAddress());
  nativeClient = await connectClient({ TEMPORAL_ADDRESS: relay.address, TEMPORAL_NAMESPACE: 'default' }, undefined, {
    transport: gatewayTemporalTransport({}),
  });
  const webhookRouter = createWebhookRouter({
    client: nativeClient,
    sellers,
    authenticator: createWebhookAuthenticator(),
    publicBaseUrl: base,
    log: () => undefined,
  });
  server.on('request', createGateway({ orchestrator: stack.orchestrator, webhookRouter }));
}, 120_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await nativeClient?.connection.close().catch(() => undefined);
  await relay?.close();
  await stack?.close();
  await seller?.close();
});

async function post(signed: SignedWebhook) {
  const response = await fetch(signed.url, { method: 'POST', headers: signed.headers, body: signed.body });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as Record<string, any>,
  };
}

function event(taskId: string, status: string) {
  return {
    idempotency_key: `evt_${randomUUID()}`,
    task_id: taskId,
    task_type: 'create_media_buy',
    status,
    timestamp: new Date().toISOString(),
    message: `transport test: ${status}`,
  };
}

test('the transport comes from ADCP_GATEWAY_TEMPORAL_TRANSPORT: native by default, grpc-js on request, else a clear error', () => {
  expect(DEFAULT_GATEWAY_TEMPORAL_TRANSPORT).toBe('native');
  expect(gatewayTemporalTransport({})).toBe('native');
  expect(gatewayTemporalTransport({ ADCP_GATEWAY_TEMPORAL_TRANSPORT: ' GRPC-JS ' })).toBe('grpc-js');
  expect(gatewayTemporalTransport({ ADCP_GATEWAY_TEMPORAL_TRANSPORT: 'native' })).toBe('native');
  expect(() => gatewayTemporalTransport({ ADCP_GATEWAY_TEMPORAL_TRANSPORT: 'http3' })).toThrow(
    /ADCP_GATEWAY_TEMPORAL_TRANSPORT is "http3"; expected one of native, grpc-js/,
  );
});

test('over the native transport: a verified event is applied, an unknown operation is 404, an ended one is ignored', async () => {
  seller.script('create_media_buy', [
    { status: 'submitted' },
    { status: 'completed', afterMs: 600_000, webhook: false },
  ]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const submitted = await eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return view.state?.status === 'submitted' && view.state.taskId ? view.state : undefined;
  });
  const taskId = submitted.taskId!;

  const accepted = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/fixture/${operationId}`,
      key: webhookKey.signerKey,
      body: event(taskId, 'working'),
    }),
  );
  expect(accepted).toMatchObject({ status: 200, body: { status: 'accepted' } });
  await eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return (view.state?.webhooksApplied ?? 0) >= 1 ? view : undefined;
  });

  const missing = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/fixture/adcp-create_media_buy-${randomUUID()}`,
      key: webhookKey.signerKey,
      body: event('task_nobody_has', 'working'),
    }),
  );
  expect(missing).toMatchObject({ status: 404, body: { error: { code: 'OPERATION_NOT_FOUND' } } });

  await stack.orchestrator.cancel(operationId, { requestedBy: 'test', reason: 'transport test done' });
  await stack.orchestrator.result(operationId).catch(() => undefined);
  const ended = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/fixture/${operationId}`,
      key: webhookKey.signerKey,
      body: event(taskId, 'working'),
    }),
  );
  expect(ended).toMatchObject({ status: 200, body: { status: 'ignored' } });
});

test('over the native transport, Temporal out of reach answers a verified webhook 503 with Retry-After', async () => {
  relay.cut();
  const unreachable = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/fixture/adcp-create_media_buy-${randomUUID()}`,
      key: webhookKey.signerKey,
      body: event('task_unreachable', 'working'),
    }),
  );
  expect(unreachable).toMatchObject({
    status: 503,
    retryAfter: '5',
    body: { error: { code: 'TEMPORAL_UNAVAILABLE' } },
  });
  // Without a deadline the core gives up on its own (UNAVAILABLE, or CANCELLED when the connection closes under the
  // call): still "retry later".
  const failure = await nativeClient.workflow
    .getHandle(`adcp-create_media_buy-${randomUUID()}`)
    .describe()
    .then(
      () => undefined,
      (error: unknown) => error,
    );
  expect(isTemporalUnavailable(failure)).toBe(true);
}, 90_000);
