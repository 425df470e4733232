/**
 * A media buy survives its infrastructure: the worker process SIGKILLed while a change is at the seller and while
 * reports arrive, and the Temporal dev server stopped and restarted on its SQLite file mid-flight. No report is lost
 * (what the gateway accepted is applied; what it could not accept is redelivered and applied) and no change is
 * made twice at the seller.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@temporalio/client';
import express from 'express';
import { createReportingWebhookRouter } from '../../api/reporting-webhooks';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { MediaBuyClient } from '../../client/media-buy-client';
import { dataConverter } from '../../client/payload-codec';
import type { SellerConfig } from '../../config/sellers';
import { freePort, startDevServer } from '../../scripts/lib/dev-server';
import type { ManagedProcess } from '../../scripts/lib/processes';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { eventually, registry, testAddress } from '../harness/temporal';
import { startWorkerProcess, writeAgentsFile } from '../harness/worker-process';
import { connectGrpc } from '../../config/grpc-connection';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let seller: MediaBuySeller;
let agent: SellerConfig;
let server: Server;
let base: string;
let client: Client | undefined;
const running: ManagedProcess[] = [];

beforeAll(async () => {
  seller = await startMediaBuySeller({ webhookMode: 'rfc9421' });
  agent = {
    id: 'life-restart',
    url: seller.url,
    protocol: 'mcp',
    token_env: 'LIFE_TOKEN',
    webhooks: { scheme: 'rfc9421', jwks: seller.scripted.webhookJwks },
  } as SellerConfig;
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // The reporting route in front of whichever Temporal the test currently talks to.
  const app = express();
  app.use((req, res, next) => {
    if (!client) {
      res.status(503).json({ error: { code: 'TEMPORAL_UNAVAILABLE', message: 'no client' } });
      return;
    }
    createReportingWebhookRouter({
      client,
      sellers: registry([agent]),
      authenticator: createWebhookAuthenticator(),
      publicBaseUrl: base,
      log: () => undefined,
    })(req, res, next);
  });
  server.on('request', app);
});

afterAll(async () => {
  await Promise.all(running.map((process) => process.stop('SIGKILL')));
  await new Promise((resolve) => server?.close(resolve));
  await seller?.close();
  await closeMCPConnections();
});

async function createActiveBuy(
  buys: MediaBuyClient,
  buyKey: string,
): Promise<{ id: string; mediaBuyId: string; packageId: string }> {
  const now = Date.now();
  const { mediaBuyWorkflowId: id } = await buys.create({
    buyKey,
    sellerId: agent.id,
    params: {
      account: { account_id: 'acct_restart' },
      start_time: new Date(now - 6 * HOUR).toISOString(),
      end_time: new Date(now + 30 * DAY).toISOString(),
      packages: [{ product_id: 'display_a', budget: 5_000 }],
    },
    reporting: { frequency: 'hourly', expectedDelayMinutes: 60 },
  });
  const created = await eventually(async () => {
    const state = await buys.state(id);
    return state.mediaBuyId ? state : undefined;
  }, 60_000);
  const packageId = Object.keys(created.packages)[0];
  await buys.attachCreatives(
    id,
    { creatives: [{ creative_id: 'cr_1' }], assignments: { cr_1: [packageId] }, requestedBy: 'trafficker@buyer' },
    { idempotencyKey: `${buyKey}-cr` },
  );
  await eventually(async () => ((await buys.state(id)).status === 'active' ? true : undefined), 60_000);
  // The flight began six hours ago: let the seller have delivered since then (reports of past hours carry numbers).
  seller.buy(created.mediaBuyId!)!.creativesSinceMs = now - 6 * HOUR;
  return { id, mediaBuyId: created.mediaBuyId!, packageId };
}

/** Posts the report for hour `n` before now (signed by the seller) to the buy's reporting route; the HTTP statuses. */
async function postReport(
  id: string,
  mediaBuyId: string,
  sequenceNumber: number,
  periodStartMs: number,
): Promise<number[]> {
  const { idempotency_key: _key, ...report } = seller.reportEnvelope(mediaBuyId, {
    sequenceNumber,
    periodStartMs,
    atMs: Date.now(),
  });
  const deliveries = await seller.scripted.sendUnbackedWebhook(`${base}/webhooks/adcp-reporting/${id}`, report);
  return deliveries.map((delivery) => delivery.finalStatus ?? 0);
}

function expectedImpressions(mediaBuyId: string, packageId: string, periodStarts: number[]): number {
  return periodStarts.reduce((sum, start) => sum + seller.periodNumbers(mediaBuyId, start)[packageId].impressions, 0);
}

test('a worker SIGKILLed while a pause is at the seller and reports arrive: the pause is made once, every report applied', async () => {
  const taskQueue = `media-buy-kill-${randomUUID()}`;
  const agentsFile = writeAgentsFile([agent]);
  const workerEnv = { LIFE_TOKEN: seller.authToken };
  const connection = await connectGrpc({ address: testAddress() });
  client = new Client({ connection, dataConverter: dataConverter() });
  const buys = new MediaBuyClient({ client, taskQueue, reportingBaseUrl: base });
  try {
    const first = await startWorkerProcess({ address: testAddress(), taskQueue, agentsFile, env: workerEnv });
    running.push(first);
    const buyKey = `kill-${randomUUID()}`;
    const { id, mediaBuyId, packageId } = await createActiveBuy(buys, buyKey);
    const hourStart = Math.floor(Date.now() / HOUR) * HOUR;
    const periods = [6, 5, 4, 3, 2, 1].map((back) => hourStart - back * HOUR);
    for (const [index, start] of periods.slice(0, 3).entries())
      expect(await postReport(id, mediaBuyId, index + 1, start)).toEqual([200]);

    // The seller applies the pause at once and holds its answer; the worker dies meanwhile.
    seller.scripted.fault('update_media_buy', { kind: 'slow-response', ms: 4_000 }, { times: 2 });
    const paused = buys.change(id, { kind: 'pause', requestedBy: 'ops@buyer' }, { idempotencyKey: `${buyKey}-pause` });
    await eventually(async () => (seller.buy(mediaBuyId)!.updates.length > 0 ? true : undefined), 60_000, 20);
    await first.stop('SIGKILL');
    // Reports keep coming while no worker runs: Temporal has them (200), the workflow applies them later.
    for (const [index, start] of periods.slice(3).entries())
      expect(await postReport(id, mediaBuyId, index + 4, start)).toEqual([200]);

    const second = await startWorkerProcess({ address: testAddress(), taskQueue, agentsFile, env: workerEnv });
    running.push(second);
    expect(await paused).toMatchObject({ outcome: 'applied', status: 'paused' });
    expect(seller.buy(mediaBuyId)!.updates.map((update) => [update.args.paused, update.outcome])).toEqual([
      [true, 'applied'],
    ]);
    const state = await eventually(async () => {
      const current = await buys.state(id);
      return current.reporting.reportsReceived === 6 ? current : undefined;
    }, 60_000);
    expect(state.status).toBe('paused');
    // Each period counted once, whether its report or a pull (the first report was late enough to pull) came first.
    expect(state.reporting.periodsCounted).toBe(6);
    expect(state.reporting.totals.impressions).toBeGreaterThan(0);
    expect(state.reporting.totals.impressions).toBe(expectedImpressions(mediaBuyId, packageId, periods));
    expect(state.reporting.contiguousThrough).toBe(6);
    await second.stop();
  } finally {
    client = undefined;
    await connection.close();
  }
}, 180_000);

test('the dev server restarted on its SQLite file mid-flight: a report refused while it was down is redelivered and applied, a change made once', async () => {
  const dbFilename = path.join(mkdtempSync(path.join(os.tmpdir(), 'adcp-temporal-')), 'temporal.sqlite');
  const port = await freePort();
  let temporal = await startDevServer({ port, headless: true, dbFilename });
  const taskQueue = `media-buy-restart-${randomUUID()}`;
  const worker = await startWorkerProcess({
    address: temporal.address,
    taskQueue,
    agentsFile: writeAgentsFile([agent]),
    env: { LIFE_TOKEN: seller.authToken },
  });
  running.push(worker);
  let connection = await connectGrpc({ address: temporal.address });
  client = new Client({ connection, dataConverter: dataConverter() });
  try {
    const buyKey = `restart-${randomUUID()}`;
    const { id, mediaBuyId, packageId } = await createActiveBuy(
      new MediaBuyClient({ client, taskQueue, reportingBaseUrl: base }),
      buyKey,
    );
    const hourStart = Math.floor(Date.now() / HOUR) * HOUR;
    const periods = [3, 2, 1].map((back) => hourStart - back * HOUR);
    expect(await postReport(id, mediaBuyId, 1, periods[0])).toEqual([200]);

    await temporal.stop();
    // While Temporal is down the route answers 503 (the seller's emitter retries, then gives up): not lost, redelivered.
    expect((await postReport(id, mediaBuyId, 2, periods[1]))[0]).toBe(503);

    temporal = await startDevServer({ port, headless: true, dbFilename });
    await connection.close();
    connection = await connectGrpc({ address: temporal.address });
    client = new Client({ connection, dataConverter: dataConverter() });
    const buys = new MediaBuyClient({ client, taskQueue, reportingBaseUrl: base });
    expect(await postReport(id, mediaBuyId, 2, periods[1])).toEqual([200]);
    expect(await postReport(id, mediaBuyId, 3, periods[2])).toEqual([200]);
    const budget = await buys.change(
      id,
      { kind: 'budget', requestedBy: 'planner@buyer', budgets: { [packageId]: 7_500 } },
      { idempotencyKey: `${buyKey}-budget` },
    );
    expect(budget).toMatchObject({ outcome: 'applied' });
    const again = await buys.change(
      id,
      { kind: 'budget', requestedBy: 'planner@buyer', budgets: { [packageId]: 7_500 } },
      { idempotencyKey: `${buyKey}-budget` },
    );
    expect(again.sequence).toBe(budget.sequence);
    expect(seller.buy(mediaBuyId)!.updates.filter((update) => update.outcome === 'applied')).toHaveLength(1);
    const state = await eventually(async () => {
      const current = await buys.state(id);
      return current.reporting.reportsReceived === 3 ? current : undefined;
    }, 60_000);
    expect(state.reporting.totals.impressions).toBeGreaterThan(0);
    // The three reported hours are counted, and so are earlier hours of the flight that no report covered, which
    // the buy pulls once the first report shows it is behind (the flight began six hours ago): each once, each with
    // the seller's numbers.
    const counted = Object.keys(state.reporting.periods).map((key) => Date.parse(key));
    expect(counted).toEqual(expect.arrayContaining(periods));
    expect(state.reporting.periodsCounted).toBe(counted.length);
    expect(state.reporting.totals.impressions).toBe(expectedImpressions(mediaBuyId, packageId, counted));
    expect(state.packages[packageId].budget).toBe(7_500);
  } finally {
    client = undefined;
    await worker.stop();
    await connection.close();
    await temporal.stop();
  }
}, 240_000);
