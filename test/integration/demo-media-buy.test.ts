/**
 * `npm run demo:media-buy` as a user runs it: a child process (`tsx scripts/demo-media-buy.ts`) against a harness
 * gateway (the media-buy and reporting-webhook routers behind a Bearer check, as ADCP_API_KEY asks), a real worker
 * on the test dev server, and the demo life seller the demo itself starts on the port it is given. The demo's output
 * must show the buy's life in order, and the buy it made must really have lived it: reports applied through the
 * gateway's HMAC-verified reporting route (the per-buy credential derived from the seller's configured secret), the
 * final report, and totals reconciled with the seller's lifetime numbers.
 *
 * Each demo spends most of its minute waiting for its flight's wall clock, so both run side by side from the start:
 * each with a life seller of its own (its own port and seller ID, DEMO_MEDIA_BUY_AGENT_ID) and a gateway of its own.
 * The second runs under node with the SWC require hook (test/harness/swc-register.cjs), the first under tsx, as
 * `npm run demo:media-buy` does.
 */
import { createGateway } from '../../api/app';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import express from 'express';
import { createMediaBuyRouter } from '../../api/media-buys';
import { createReportingWebhookRouter } from '../../api/reporting-webhooks';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { MediaBuyClient } from '../../client/media-buy-client';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { freePort } from '../../scripts/lib/dev-server';
import { type TestStack, registry, startTestStack } from '../harness/temporal';

const ROOT = path.resolve(__dirname, '..', '..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const SWC_REGISTER = path.join(ROOT, 'test', 'harness', 'swc-register.cjs');
/** The pull-only demo's seller: its own life seller, so neither demo stops the other's. */
const READS_SELLER_ID = 'demo-life-seller-reads';
const API_KEY = `demo-key-${randomBytes(8).toString('hex')}`;

let stack: TestStack;
let server: Server;
let base: string;
/** A second gateway without a public base URL (what `npm start` runs by default): no reporting webhook. */
let pullOnlyServer: Server;
let pullOnlyBase: string;
let sellerPort: number;
let readsSellerPort: number;
const requests = { authorized: 0, refused: 0 };
type DemoRun = { code: number | null; stdout: string; stderr: string };
/** The two demos, started together once the gateways answer; each test awaits its own. */
let withWebhooks: Promise<DemoRun>;
let pullOnlyRun: Promise<DemoRun>;

beforeAll(async () => {
  sellerPort = await freePort();
  do readsSellerPort = await freePort();
  while (readsSellerPort === sellerPort);
  const env = { DEMO_SELLER_TOKEN, DEMO_SELLER_WEBHOOK_SECRET: randomBytes(32).toString('base64url') };
  const lifeSeller = (id: string, port: number) => ({
    id,
    url: `http://127.0.0.1:${port}/mcp`,
    protocol: 'mcp' as const,
    token_env: 'DEMO_SELLER_TOKEN',
    webhooks: { scheme: 'hmac-sha256', secret_env: 'DEMO_SELLER_WEBHOOK_SECRET' } as never,
  });
  const sellers = registry([lifeSeller('demo-life-seller', sellerPort), lifeSeller(READS_SELLER_ID, readsSellerPort)]);
  stack = await startTestStack({ sellers, activities: { env } });
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const mediaBuys = new MediaBuyClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    reportingBaseUrl: base,
    knownSeller: (id) => sellers.has(id),
  });
  const app = express();
  app.use(
    createReportingWebhookRouter({
      client: stack.client,
      sellers,
      authenticator: createWebhookAuthenticator(),
      publicBaseUrl: base,
      env,
      log: (line) => console.warn(line),
    }),
  );
  app.use('/v1', (req, res, next) => {
    if (req.headers.authorization !== `Bearer ${API_KEY}`) {
      requests.refused += 1;
      res.status(401).json({ error: { code: 'UNAUTHENTICATED', message: 'This request needs credentials.' } });
      return;
    }
    requests.authorized += 1;
    next();
  });
  app.use(createGateway({ orchestrator: stack.orchestrator, mediaBuyRouter: createMediaBuyRouter({ mediaBuys }) }));
  server.on('request', app);

  pullOnlyServer = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  pullOnlyBase = `http://127.0.0.1:${(pullOnlyServer.address() as AddressInfo).port}`;
  const pullOnly = express();
  pullOnly.use(
    createGateway({
      orchestrator: stack.orchestrator,
      mediaBuyRouter: createMediaBuyRouter({
        mediaBuys: new MediaBuyClient({
          client: stack.client,
          taskQueue: stack.taskQueue,
          knownSeller: (id) => sellers.has(id),
        }),
      }),
    }),
  );
  pullOnlyServer.on('request', pullOnly);

  withWebhooks = runDemo({
    ADCP_GATEWAY_URL: base,
    ADCP_API_KEY: API_KEY,
    DEMO_LIFE_SELLER_PORT: String(sellerPort),
    DEMO_FLIGHT_SECONDS: '30',
    DEMO_REPORT_EVERY_MS: '1500',
  });
  pullOnlyRun = runDemo(
    {
      ADCP_GATEWAY_URL: pullOnlyBase,
      DEMO_MEDIA_BUY_AGENT_ID: READS_SELLER_ID,
      DEMO_LIFE_SELLER_PORT: String(readsSellerPort),
      DEMO_FLIGHT_SECONDS: '25',
      DEMO_REPORT_EVERY_MS: '1500',
    },
    'swc',
  );
});

afterAll(async () => {
  await new Promise((resolve) => pullOnlyServer?.close(resolve));
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
});

function runDemo(env: Record<string, string>, loader: 'tsx' | 'swc' = 'tsx'): Promise<DemoRun> {
  const [command, args] = loader === 'tsx' ? [TSX, []] : [process.execPath, ['--require', SWC_REGISTER]];
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args, 'scripts/demo-media-buy.ts'], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test('the demo shows a media buy living its life through the gateway, and the buy really lived it', async () => {
  const run = await withWebhooks;
  if (run.code !== 0 || process.env.DEMO_MEDIA_BUY_PRINT) console.info(run.stdout, run.stderr);
  expect(run.code).toBe(0);
  const out = run.stdout;

  if (process.env.DEMO_MEDIA_BUY_PRINT) {
    const shown = /media buy (adcp-media-buy-demo-\S+)/.exec(out);
    if (shown) {
      const answer = await fetch(`${base}/v1/media-buys/${shown[1]}`, {
        headers: { authorization: `Bearer ${API_KEY}` },
      });
      console.info(JSON.stringify(((await answer.json()) as Record<string, any>).delivery, null, 1));
    }
  }

  // The life, in order, as the demo printed it.
  const milestones = [
    /media buy (adcp-media-buy-demo-\S+)/,
    /-> pending_creatives/,
    /media_buy_id: mb_life_/,
    /creatives synced: applied/,
    /pending_creatives -> pending_start/,
    /pending_start -> active {2}\(report\)/,
    /delivery: [1-9]\d* impressions/,
    /pause: applied, the buy is paused/,
    /resume: applied, the buy is active/,
    /budget: applied, the buy is active/,
    /active -> completed {2}\(report\)/,
    /final: completed; [1-9]\d* impressions, spend [\d.]+; final report recorded; seller's lifetime numbers: reconciled/,
  ];
  let at = 0;
  for (const milestone of milestones) {
    const found = milestone.exec(out.slice(at));
    if (!found) throw new Error(`The demo output lacks ${milestone} after position ${at}:\n${out}`);
    at += found.index + found[0].length;
  }
  expect(out).not.toMatch(/no reporting webhook/);

  // The buy the demo made, as the gateway shows it.
  const id = /media buy (adcp-media-buy-demo-\S+)/.exec(out)![1];
  const view = (await (
    await fetch(`${base}/v1/media-buys/${id}`, { headers: { authorization: `Bearer ${API_KEY}` } })
  ).json()) as Record<string, any>;
  expect(view.done).toBe(true);
  expect(view.status_history.map((move: { to: string }) => move.to)).toEqual([
    'pending_creatives',
    'pending_start',
    'active',
    'paused',
    'active',
    'completed',
  ]);
  expect(view.changes.map((change: { kind: string; outcome: string }) => `${change.kind}:${change.outcome}`)).toEqual([
    'pause:applied',
    'resume:applied',
    'budget:applied',
  ]);
  expect(view.delivery.reports.applied).toBeGreaterThan(3);
  expect(view.delivery.final_report).not.toBeNull();
  expect(view.delivery.reconciliation).toMatchObject({ outcome: 'reconciled' });
  expect(view.delivery.totals.impressions).toBeGreaterThan(0);
  expect(requests.refused).toBe(0);
  expect(requests.authorized).toBeGreaterThan(5);
}, 300_000);

test('without a reporting URL at the gateway the demo moves the buy by reads and ends on the lifetime pull', async () => {
  const run = await pullOnlyRun;
  if (run.code !== 0 || process.env.DEMO_MEDIA_BUY_PRINT) console.info(run.stdout, run.stderr);
  expect(run.code).toBe(0);
  const out = run.stdout;
  expect(out).toMatch(/no reporting webhook/);
  expect(out).toMatch(/pending_start -> active {2}\(read\)/);
  expect(out).toMatch(/pause: applied, the buy is paused[\s\S]*resume: applied[\s\S]*budget: applied/);
  expect(out).toMatch(/active -> completed {2}\(read\)/);
  expect(out).toMatch(
    /final: completed; [1-9]\d* impressions, spend [\d.]+; final report not received; seller's lifetime numbers: reconciled/,
  );
}, 300_000);
