/**
 * Webhook delivery faults end to end: the scripted fixture seller (its @adcp/sdk emitter signs with RFC 9421 or
 * legacy HMAC) → the real gateway on loopback → signals into real operation workflows on a real Temporal dev server.
 * Each test checks what the seller is answered and what the operation's state is afterwards: reordered and late
 * events, stale signatures, a replayed nonce, malformed bodies, a lost webhook, Temporal down, and an HMAC seller.
 *
 * Where a test needs to know which path delivered an event, the seller's `tasks/get` keeps reporting the earlier
 * state (`tasksGet` override) so that a backup poll cannot deliver it first.
 */
import type { AddressInfo } from 'node:net';
import { type Server, createServer } from 'node:http';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import type express from 'express';
import type { Client } from '@temporalio/client';
import { createGateway } from '../../api/app';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { type SellerRegistry, sellerSchema } from '../../config/sellers';
import { freePort, startDevServer } from '../../scripts/lib/dev-server';
import type { OrchestratorClient } from '../../client/orchestrator-client';
import type { OperationState } from '../../contract/operation';
import { type ScriptStep, type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import {
  type SignedWebhook,
  mintWebhookSigningKey,
  signLegacyHmacWebhook,
  signWebhookRequest,
} from '../fixtures/webhook-signing';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

/** The seller's `tasks/get` still says `submitted` (no result): only the webhook can tell the workflow. */
const HIDDEN_FROM_POLLS: ScriptStep['tasksGet'] = { status: 'submitted', result: undefined, completed_at: undefined };
/** Far enough away that a step only begins when the test advances it. */
const MANUAL = 600_000;

interface GatewayAnswer {
  path: string;
  status: number;
}

/** A loopback HTTP server whose handler is attached later (the base URL must exist before the worker starts). */
async function listenOnLoopback(): Promise<{ server: Server; base: string; answers: GatewayAnswer[] }> {
  const server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, answers: [] };
}

/** Mounts the real gateway (operations API + webhook receiver) and records the status of every answer it sends. */
function mountGateway(
  target: { server: Server; base: string; answers: GatewayAnswer[] },
  options: { client: Client; orchestrator: OrchestratorClient; sellers: SellerRegistry; env?: NodeJS.ProcessEnv },
): void {
  const webhookRouter = createWebhookRouter({
    client: options.client,
    sellers: options.sellers,
    authenticator: createWebhookAuthenticator(),
    publicBaseUrl: target.base,
    env: options.env ?? {},
    log: () => undefined,
  });
  const app: express.Express = createGateway({ orchestrator: options.orchestrator, webhookRouter });
  target.server.on('request', (req, res) => {
    res.on('finish', () => target.answers.push({ path: req.url ?? '', status: res.statusCode }));
    app(req, res);
  });
}

function closeServer(server: Server | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

async function post(
  signed: SignedWebhook,
): Promise<{ status: number; body: Record<string, any>; wwwAuthenticate: string | null }> {
  const response = await fetch(signed.url, { method: 'POST', headers: signed.headers, body: signed.body });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, any>,
    wwwAuthenticate: response.headers.get('www-authenticate'),
  };
}

async function stateOf(orchestrator: OrchestratorClient, operationId: string): Promise<OperationState> {
  const view = await orchestrator.status(operationId);
  if (!view.state) throw new Error(`Operation ${operationId} has no state yet.`);
  return view.state;
}

async function waitForState(
  orchestrator: OrchestratorClient,
  operationId: string,
  ready: (state: OperationState) => boolean,
  timeoutMs = 30_000,
): Promise<OperationState> {
  return eventually(async () => {
    const state = (await orchestrator.status(operationId)).state;
    return state && ready(state) ? state : undefined;
  }, timeoutMs);
}

/** How many `webhookReceived` signals reached the workflow: what the gateway actually forwarded to Temporal. */
async function webhookSignals(client: Client, operationId: string): Promise<number> {
  const history = await client.workflow.getHandle(operationId).fetchHistory();
  return (history.events ?? []).filter(
    (event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'webhookReceived',
  ).length;
}

function steps(state: OperationState): string[] {
  return state.transitions.map((transition) => `${transition.from}->${transition.to}:${transition.source}`);
}

/** A 3.x MCP webhook body as the SDK emitter builds it (compact JSON, `idempotency_key` first). */
function webhookBody(taskId: string, fields: Record<string, unknown>): Record<string, unknown> {
  return {
    idempotency_key: `evt_${randomUUID()}`,
    task_id: taskId,
    task_type: 'create_media_buy',
    protocol: 'media-buy',
    timestamp: new Date().toISOString(),
    ...fields,
  };
}

const webhookKey = mintWebhookSigningKey(`buyer-test-key-${randomUUID()}`);
const legacySecret = randomBytes(32).toString('hex');

let rfcSeller: ScriptedSeller;
let hmacSeller: ScriptedSeller;
let stack: TestStack;
let gateway: Awaited<ReturnType<typeof listenOnLoopback>>;

beforeAll(async () => {
  [rfcSeller, hmacSeller] = await Promise.all([
    startScriptedSeller({ webhookMode: 'rfc9421' }),
    startScriptedSeller({ webhookMode: 'hmac' }),
  ]);
  gateway = await listenOnLoopback();
  const env = {
    FIXTURE_TOKEN: rfcSeller.authToken,
    LEGACY_TOKEN: hmacSeller.authToken,
    LEGACY_WEBHOOK_SECRET: legacySecret,
  };
  // Parsed as agents.json entries are. The test signs some requests itself with a second key the seller publishes.
  const sellerRegistry = registry([
    sellerSchema.parse({
      id: 'fixture',
      url: rfcSeller.url,
      protocol: 'mcp',
      token_env: 'FIXTURE_TOKEN',
      webhooks: { scheme: 'rfc9421', jwks: { keys: [...rfcSeller.webhookJwks.keys, webhookKey.publicJwk] } },
    }),
    sellerSchema.parse({
      id: 'legacy',
      url: hmacSeller.url,
      protocol: 'mcp',
      token_env: 'LEGACY_TOKEN',
      webhooks: { scheme: 'hmac-sha256', secret_env: 'LEGACY_WEBHOOK_SECRET' },
    }),
  ]);
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env, publicBaseUrl: gateway.base } });
  mountGateway(gateway, { client: stack.client, orchestrator: stack.orchestrator, sellers: sellerRegistry, env });
});

afterAll(async () => {
  await closeServer(gateway?.server);
  await stack?.close();
  await Promise.all([rfcSeller?.close(), hmacSeller?.close()]);
});

beforeEach(async () => {
  await Promise.all([rfcSeller.reset(), hmacSeller.reset()]);
});

/** Starts create_media_buy on `sellerId` with `script` and waits until the seller's first answer (submitted) is applied. */
async function startSubmitted(
  sellerId: 'fixture' | 'legacy',
  script: ScriptStep[],
): Promise<{ operationId: string; taskId: string; url: string }> {
  (sellerId === 'fixture' ? rfcSeller : hmacSeller).script('create_media_buy', script);
  const { operationId } = await stack.orchestrator.start({
    sellerId,
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const state = await waitForState(
    stack.orchestrator,
    operationId,
    (candidate) => candidate.status === 'submitted' && candidate.taskId !== undefined,
  );
  return { operationId, taskId: state.taskId!, url: `${gateway.base}/webhooks/adcp/${sellerId}/${operationId}` };
}

async function cancel(operationId: string): Promise<void> {
  await stack.orchestrator.cancel(operationId, { requestedBy: 'webhook-delivery.test', reason: 'cleanup' });
}

test('reordered events: an older event delivered after a newer one is ignored, and a finished operation stays finished', async () => {
  const { operationId, taskId, url } = await startSubmitted('fixture', [
    { status: 'submitted' },
    { status: 'working', progress: { percentage: 80, current_step: 'trafficking' }, afterMs: MANUAL },
    { status: 'completed', afterMs: MANUAL, tasksGet: HIDDEN_FROM_POLLS },
  ]);

  // The newer event: the seller moves to working 80% and its emitter sends the webhook at once.
  rfcSeller.advanceTask(taskId);
  const working = await waitForState(stack.orchestrator, operationId, (state) => state.progress?.percentage === 80);
  await rfcSeller.webhooksSettled();
  const newer = rfcSeller.webhookDeliveries.find(
    (delivery) => delivery.taskId === taskId && delivery.status === 'working',
  )!;
  expect(newer.finalStatus).toBe(200);
  const newerAt = String(newer.payload.timestamp);
  expect(working.sellerUpdatedAt).toBe(newerAt);

  // The older event (working 20%, a second earlier) arrives late, through the seller's own signed emitter.
  const olderAt = new Date(Date.parse(newerAt) - 1_000).toISOString();
  const [older] = await rfcSeller.sendWebhook(taskId, {
    timestamp: olderAt,
    result: { percentage: 20, current_step: 'booking' },
  });
  expect(older).toMatchObject({ delivered: true, finalStatus: 200 }); // durable at Temporal; the workflow decides
  // webhooksApplied counts every distinct event the workflow took from its inbox, the ignored late one included.
  const afterOlder = await waitForState(stack.orchestrator, operationId, (state) => state.webhooksApplied === 2);
  expect(afterOlder).toMatchObject({
    status: 'working',
    progress: { percentage: 80, currentStep: 'trafficking' },
    sellerUpdatedAt: newerAt,
  });
  expect(steps(afterOlder)).toEqual(['pending->submitted:call', 'submitted->working:webhook']);
  expect(afterOlder.anomalies).toContainEqual(
    expect.objectContaining({
      source: 'webhook',
      note: expect.stringContaining(`ignored out-of-order working from ${olderAt}`),
    }),
  );

  // Completion by webhook; then later events, even ones newer than the completion, never reopen the operation.
  rfcSeller.advanceTask(taskId);
  const completed = await stack.orchestrator.result(operationId);
  expect(completed.status).toBe('completed');
  expect(steps(completed)).toEqual([
    'pending->submitted:call',
    'submitted->working:webhook',
    'working->completed:webhook',
  ]);
  const signalsAtEnd = await webhookSignals(stack.client, operationId);
  expect(signalsAtEnd).toBe(3);

  const [lateWorking] = await rfcSeller.sendWebhook(taskId, {
    status: 'working',
    timestamp: new Date(Date.now() + 1_000).toISOString(),
    result: { percentage: 90 },
  });
  expect(lateWorking).toMatchObject({ delivered: true, finalStatus: 200 });
  const lateFailed = await post(
    signWebhookRequest({
      url,
      key: webhookKey.signerKey,
      body: webhookBody(taskId, {
        status: 'failed',
        timestamp: new Date(Date.now() + 2_000).toISOString(),
        result: { errors: [{ code: 'LATE', message: 'late failure' }] },
      }),
    }),
  );
  expect(lateFailed).toMatchObject({ status: 200, body: { status: 'ignored' } });

  const final = await stateOf(stack.orchestrator, operationId);
  expect(final).toMatchObject({
    status: 'completed',
    webhooksApplied: completed.webhooksApplied,
    transitionCount: completed.transitionCount,
  });
  expect(final.transitions).toEqual(completed.transitions);
  expect(await webhookSignals(stack.client, operationId)).toBe(signalsAtEnd);
});

test('an RFC 9421 signature created too long ago (or in the future) is refused with 401 and a reason code; the operation is unchanged', async () => {
  const { operationId, taskId, url } = await startSubmitted('fixture', [
    { status: 'submitted' },
    { status: 'completed', afterMs: MANUAL },
  ]);
  const body = webhookBody(taskId, { status: 'completed', result: { media_buy_id: 'mb_stale_signature' } });
  const now = Math.floor(Date.now() / 1000);

  for (const createdAt of [now - 600, now + 600]) {
    const answer = await post(signWebhookRequest({ url, body, key: webhookKey.signerKey, nowSeconds: createdAt }));
    expect(answer.status).toBe(401);
    expect(answer.body.error).toMatchObject({ code: 'WEBHOOK_REJECTED', reason: 'webhook_signature_window_invalid' });
    expect(answer.wwwAuthenticate).toBe('Signature error="webhook_signature_window_invalid"');
  }
  const unchanged = await stateOf(stack.orchestrator, operationId);
  expect(unchanged).toMatchObject({ status: 'submitted', webhooksApplied: 0 });
  // The submitted answer carries only the context the seller echoes (the operation's ID): no buy came of the webhook.
  expect(unchanged.result).toEqual({ context: { adcp_orchestrator: { operation_id: operationId } } });
  expect(steps(unchanged)).toEqual(['pending->submitted:call']);
  expect(await webhookSignals(stack.client, operationId)).toBe(0);

  // The same key and body signed now are accepted: the signing time alone was the problem.
  const fresh = await post(signWebhookRequest({ url, body, key: webhookKey.signerKey }));
  expect(fresh).toMatchObject({ status: 200, body: { status: 'accepted' } });
  const completed = await stack.orchestrator.result(operationId);
  expect(completed).toMatchObject({
    status: 'completed',
    webhooksApplied: 1,
    result: { media_buy_id: 'mb_stale_signature' },
  });
});

test('a legacy HMAC webhook with X-ADCP-Timestamp outside ±300 s is refused with 401; the operation is unchanged', async () => {
  const { operationId, taskId, url } = await startSubmitted('legacy', [
    { status: 'submitted' },
    { status: 'completed', afterMs: MANUAL },
  ]);
  const body = JSON.stringify(webhookBody(taskId, { status: 'completed', result: { media_buy_id: 'mb_stale_hmac' } }));
  const now = Math.floor(Date.now() / 1000);

  for (const timestampSeconds of [now - 400, now + 400]) {
    const answer = await post(signLegacyHmacWebhook({ url, body, secret: legacySecret, timestampSeconds }));
    expect(answer.status).toBe(401);
    expect(answer.body.error).toMatchObject({ code: 'WEBHOOK_REJECTED', reason: 'hmac_timestamp_out_of_window' });
  }
  const unchanged = await stateOf(stack.orchestrator, operationId);
  expect(unchanged).toMatchObject({ status: 'submitted', webhooksApplied: 0 });
  expect(steps(unchanged)).toEqual(['pending->submitted:call']);
  expect(await webhookSignals(stack.client, operationId)).toBe(0);

  // Same secret and body with the current time: accepted.
  const fresh = await post(signLegacyHmacWebhook({ url, body, secret: legacySecret }));
  expect(fresh).toMatchObject({ status: 200, body: { status: 'accepted' } });
  expect(await stack.orchestrator.result(operationId)).toMatchObject({
    status: 'completed',
    webhooksApplied: 1,
    result: { media_buy_id: 'mb_stale_hmac' },
  });
});

test('a replayed RFC 9421 request (same nonce) is refused as webhook_signature_replayed; a re-signed duplicate gets 2xx; the event is applied once', async () => {
  const { operationId, taskId, url } = await startSubmitted('fixture', [
    { status: 'submitted' },
    { status: 'working', progress: { percentage: 40 }, afterMs: MANUAL, webhook: false },
    { status: 'completed', afterMs: MANUAL, tasksGet: HIDDEN_FROM_POLLS },
  ]);
  rfcSeller.advanceTask(taskId); // the seller is working 40% (its tasks/get agrees with the event below)
  const body = webhookBody(taskId, { status: 'working', result: { percentage: 40 } });
  const signed = signWebhookRequest({ url, body, key: webhookKey.signerKey });

  const first = await post(signed);
  expect(first).toMatchObject({ status: 200, body: { status: 'accepted' } });
  // Byte for byte the same request again: the verifier's replay store refuses it (AdCP webhook-signing vector 016),
  // with the WWW-Authenticate code that tells an SDK emitter not to retry it.
  const replayed = await post(signed);
  expect(replayed.status).toBe(401);
  expect(replayed.body.error).toMatchObject({ code: 'WEBHOOK_REJECTED', reason: 'webhook_signature_replayed' });
  expect(replayed.wwwAuthenticate).toBe('Signature error="webhook_signature_replayed"');
  // A retry the way a conformant emitter sends it (same event and idempotency_key, fresh nonce) is a duplicate: 2xx.
  const duplicate = await post(signWebhookRequest({ url, body, key: webhookKey.signerKey }));
  expect(duplicate).toMatchObject({ status: 200, body: { status: 'accepted' } });

  const working = await waitForState(stack.orchestrator, operationId, (state) => state.status === 'working');
  expect(working.progress).toEqual({ percentage: 40 });
  rfcSeller.advanceTask(taskId);
  const completed = await stack.orchestrator.result(operationId);
  // Signals are handled in history order, so the duplicate was handled before the completion: it was not applied.
  expect(completed).toMatchObject({ status: 'completed', webhooksApplied: 2 });
  expect(steps(completed)).toEqual([
    'pending->submitted:call',
    'submitted->working:webhook',
    'working->completed:webhook',
  ]);
  expect(completed.anomalies.filter((anomaly) => anomaly.source === 'webhook')).toEqual([]);
  // First, duplicate and completion reached Temporal; the replay was stopped at the gateway.
  expect(await webhookSignals(stack.client, operationId)).toBe(3);
});

test('malformed JSON at the webhook route is a 400 MALFORMED_JSON, a non-webhook JSON body a 400 INVALID_WEBHOOK; the operation is unchanged', async () => {
  const { operationId, taskId, url } = await startSubmitted('fixture', [
    { status: 'submitted' },
    { status: 'completed', afterMs: MANUAL },
  ]);
  const truncated = JSON.stringify(
    webhookBody(taskId, { status: 'completed', result: { media_buy_id: 'mb_malformed' } }),
  ).slice(0, -7);

  // Correctly signed, so the body is what fails (unsigned bodies are refused before anything parses them).
  const malformed = await post(signWebhookRequest({ url, body: truncated, key: webhookKey.signerKey }));
  expect(malformed.status).toBe(400);
  expect(malformed.body.error).toEqual({
    code: 'MALFORMED_JSON',
    message: expect.stringMatching(/^The body is not valid JSON/),
  });
  const unsigned = await post({ url, headers: { 'content-type': 'application/json' }, body: Buffer.from(truncated) });
  expect(unsigned.status).toBe(401);

  const notAWebhook = await post(
    signWebhookRequest({
      url,
      body: { idempotency_key: `evt_${randomUUID()}`, status: 'completed', taskId },
      key: webhookKey.signerKey,
    }),
  );
  expect(notAWebhook.status).toBe(400);
  expect(notAWebhook.body.error).toMatchObject({
    code: 'INVALID_WEBHOOK',
    field: 'task_id',
    message: expect.stringContaining('"task_id"'),
  });

  const unchanged = await stateOf(stack.orchestrator, operationId);
  expect(unchanged).toMatchObject({ status: 'submitted', webhooksApplied: 0, anomalies: [] });
  expect(steps(unchanged)).toEqual(['pending->submitted:call']);
  expect(await webhookSignals(stack.client, operationId)).toBe(0);
  await cancel(operationId);
});

test('a webhook the seller loses: the operation still completes, by backup polling', async () => {
  const { operationId, taskId } = await startSubmitted('fixture', [
    { status: 'submitted' },
    { status: 'completed', afterMs: MANUAL, webhook: { drop: true } },
  ]);
  rfcSeller.advanceTask(taskId); // completed at the seller; its webhook never arrives

  const completed = await stack.orchestrator.result(operationId);
  expect(completed).toMatchObject({ status: 'completed', webhookRegistered: true, webhooksApplied: 0 });
  expect(completed.pollCount).toBeGreaterThanOrEqual(1);
  expect(steps(completed)).toEqual(['pending->submitted:call', 'submitted->completed:poll']);
  expect(typeof completed.result?.media_buy_id).toBe('string');
  const deliveries = rfcSeller.webhookDeliveries.filter((delivery) => delivery.taskId === taskId);
  expect(deliveries).toEqual([
    expect.objectContaining({ status: 'completed', dropped: true, delivered: false, attempts: 0 }),
  ]);
  expect(gateway.answers.filter((answer) => answer.path.endsWith(`/${operationId}`))).toEqual([]);
  expect(await webhookSignals(stack.client, operationId)).toBe(0);
});

test('a legacy-HMAC seller end to end: its HMAC-signed webhook completes the operation; a wrong secret gets 401', async () => {
  const { operationId, taskId, url } = await startSubmitted('legacy', [
    { status: 'submitted' },
    { status: 'completed', afterMs: MANUAL, tasksGet: HIDDEN_FROM_POLLS },
  ]);
  // The secret reaches the seller in push_notification_config (rc.2 §3.1), read from the variable secret_env names
  // at send time (the call plan in history names the variable only); operation_id is the 3.1 correlation id.
  const call = hmacSeller.callsTo('create_media_buy')[0];
  expect(call.args.push_notification_config).toEqual({
    url,
    operation_id: operationId,
    authentication: { schemes: ['HMAC-SHA256'], credentials: legacySecret },
  });

  const forged = await post(
    signLegacyHmacWebhook({
      url,
      secret: randomBytes(32).toString('hex'),
      body: webhookBody(taskId, { status: 'completed', result: { media_buy_id: 'mb_forged' } }),
    }),
  );
  expect(forged.status).toBe(401);
  expect(forged.body.error).toMatchObject({ code: 'WEBHOOK_REJECTED', reason: 'hmac_signature_invalid' });
  const unchanged = await stateOf(stack.orchestrator, operationId);
  expect(unchanged).toMatchObject({ status: 'submitted', webhooksApplied: 0 });
  expect(await webhookSignals(stack.client, operationId)).toBe(0);

  hmacSeller.advanceTask(taskId);
  const completed = await stack.orchestrator.result(operationId);
  expect(completed).toMatchObject({ status: 'completed', webhooksApplied: 1 });
  expect(steps(completed)).toEqual(['pending->submitted:call', 'submitted->completed:webhook']);
  expect(completed.result?.media_buy_id).toBe(hmacSeller.mediaBuys()[0].mediaBuyId);
  await hmacSeller.webhooksSettled();
  const deliveries = hmacSeller.webhookDeliveries.filter((delivery) => delivery.taskId === taskId);
  expect(deliveries).toEqual([
    expect.objectContaining({ mode: 'hmac', status: 'completed', delivered: true, finalStatus: 200, attempts: 1 }),
  ]);
});

test('Temporal stopped: the gateway answers 503, the seller retries, and after a restart on the same SQLite file the event completes the operation', async () => {
  const dbFilename = path.join(mkdtempSync(path.join(os.tmpdir(), 'adcp-webhook-delivery-')), 'temporal.sqlite');
  const port = await freePort();
  let temporal = await startDevServer({ port, headless: true, dbFilename });
  // Retries long enough to outlast the outage, as a production emitter's would.
  const seller = await startScriptedSeller({
    webhookMode: 'rfc9421',
    webhookRetries: { maxAttempts: 60, initialDelayMs: 250, maxDelayMs: 1_000, jitter: 0 },
  });
  const own = await listenOnLoopback();
  let ownStack: TestStack | undefined;
  try {
    const sellerRegistry = registry([
      sellerSchema.parse({
        id: 'fixture',
        url: seller.url,
        protocol: 'mcp',
        token_env: 'FIXTURE_TOKEN',
        webhooks: { scheme: 'rfc9421', jwks: seller.webhookJwks },
      }),
    ]);
    ownStack = await startTestStack({
      sellers: sellerRegistry,
      address: temporal.address,
      activities: { env: { FIXTURE_TOKEN: seller.authToken }, publicBaseUrl: own.base },
    });
    mountGateway(own, { client: ownStack.client, orchestrator: ownStack.orchestrator, sellers: sellerRegistry });

    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterMs: MANUAL, tasksGet: HIDDEN_FROM_POLLS },
    ]);
    const { operationId } = await ownStack.orchestrator.start({
      sellerId: 'fixture',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const submitted = await waitForState(
      ownStack.orchestrator,
      operationId,
      (state) => state.status === 'submitted' && state.taskId !== undefined,
    );
    const webhookPath = `/webhooks/adcp/fixture/${operationId}`;

    await temporal.stop();
    seller.advanceTask(submitted.taskId!); // completed at the seller; the emitter starts delivering
    await eventually(
      async () =>
        own.answers.some((answer) => answer.path === webhookPath && answer.status === 503) ? true : undefined,
      90_000,
    );

    temporal = await startDevServer({ port, headless: true, dbFilename });
    const completed = await ownStack.orchestrator.result(operationId);
    expect(completed).toMatchObject({ status: 'completed', webhooksApplied: 1 });
    expect(steps(completed)).toEqual(['pending->submitted:call', 'submitted->completed:webhook']);
    expect(completed.result?.media_buy_id).toBe(seller.mediaBuys()[0].mediaBuyId);

    await seller.webhooksSettled();
    const [delivery] = seller.webhookDeliveries.filter((candidate) => candidate.taskId === submitted.taskId);
    // One event, retried by the emitter: every answer before the restart was 503, the last one 200.
    expect(delivery).toMatchObject({ status: 'completed', delivered: true, finalStatus: 200 });
    expect(delivery.attempts).toBeGreaterThan(1);
    expect(delivery.errors.length).toBe(delivery.attempts - 1);
    for (const error of delivery.errors) expect(error).toMatch(/HTTP 503/);
    const statuses = own.answers.filter((answer) => answer.path === webhookPath).map((answer) => answer.status);
    expect(statuses[statuses.length - 1]).toBe(200);
    expect(new Set(statuses.slice(0, -1))).toEqual(new Set([503]));
    expect(await webhookSignals(ownStack.client, operationId)).toBe(1);
  } finally {
    await closeServer(own.server);
    await ownStack?.close();
    await seller.close();
    await temporal.stop();
  }
});
