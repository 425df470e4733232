/**
 * Reporting-webhook credentials stay out of Temporal history. A seller on the legacy HMAC scheme needs
 * `reporting_webhook.authentication.credentials` to sign its delivery reports; the worker derives one per buy from a
 * server-side master secret and the buy ID at the moment of the create_media_buy call, and the gateway derives the
 * same one to verify. The test checks that the seller received exactly that credential, that not one byte of it is in
 * the history of the buy's workflow or of its create operation (every payload decoded through the data converter,
 * the raw bytes searched too), and that reports signed with it are accepted while a report signed with another
 * buy's credential is refused. The seller echoes the credential in its create answer, as careless sellers do: the
 * worker redacts it before the answer becomes the operation's result.
 */
import { createGateway } from '../../api/app';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Payload } from '@temporalio/common';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import express from 'express';
import { REPORTING_SECRET_ENV, reportingWebhookCredential } from '../../activities/reporting-credentials';
import { createMediaBuyRouter } from '../../api/media-buys';
import { createReportingWebhookRouter } from '../../api/reporting-webhooks';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { MediaBuyClient } from '../../client/media-buy-client';
import { dataConverter } from '../../client/payload-codec';
import { operationIdFor } from '../../protocol';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let seller: MediaBuySeller;
let stack: TestStack;
let server: Server;
let base: string;
const master = randomBytes(36).toString('base64url');
const sellerSecret = randomBytes(36).toString('base64url');
const env = { LIFE_TOKEN: '', LIFE_WEBHOOK_SECRET: sellerSecret, [REPORTING_SECRET_ENV]: master };

beforeAll(async () => {
  // It echoes reporting_webhook (credentials included) in its create answer: the worker must take it out.
  seller = await startMediaBuySeller({ echoReportingWebhook: true });
  env.LIFE_TOKEN = seller.authToken;
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const sellerRegistry = registry([
    {
      id: 'life-hmac',
      url: seller.url,
      protocol: 'mcp',
      token_env: 'LIFE_TOKEN',
      webhooks: { scheme: 'hmac-sha256', secret_env: 'LIFE_WEBHOOK_SECRET' } as never,
    },
  ]);
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env } });
  const mediaBuys = new MediaBuyClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    reportingBaseUrl: base,
    knownSeller: (id) => sellerRegistry.has(id),
  });
  const app = express();
  app.use(
    createReportingWebhookRouter({
      client: stack.client,
      sellers: sellerRegistry,
      authenticator: createWebhookAuthenticator(),
      publicBaseUrl: base,
      env,
      log: () => undefined,
    }),
  );
  app.use(createGateway({ orchestrator: stack.orchestrator, mediaBuyRouter: createMediaBuyRouter({ mediaBuys }) }));
  server.on('request', app);
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  await seller?.close();
});

/** Every payload in a history (inputs, results, signals, markers, memos), wherever it sits. */
function payloadsIn(value: unknown, found: Payload[] = []): Payload[] {
  if (!value || typeof value !== 'object') return found;
  if (value instanceof Uint8Array) return found;
  const record = value as Record<string, unknown>;
  if (record.data instanceof Uint8Array && record.metadata && typeof record.metadata === 'object') {
    found.push(record as unknown as Payload);
    return found;
  }
  for (const item of Array.isArray(value) ? value : Object.values(record)) payloadsIn(item, found);
  return found;
}

/** The history as stored and as the data converter decodes it, one searchable buffer. */
async function historyBytes(workflowId: string): Promise<Buffer> {
  const history = await stack.client.workflow.getHandle(workflowId).fetchHistory();
  const codecs = dataConverter().payloadCodecs ?? [];
  let payloads = payloadsIn(history);
  const raw = payloads.map((payload) => Buffer.from(payload.data ?? new Uint8Array()));
  for (const codec of [...codecs].reverse()) payloads = await codec.decode(payloads);
  const decoded = payloads.map((payload) => Buffer.from(payload.data ?? new Uint8Array()));
  expect(payloads.length).toBeGreaterThan(0);
  return Buffer.concat([Buffer.from(historyToJSON(history)), ...raw, ...decoded]);
}

function signed(body: string, secret: string): Record<string, string> {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return {
    'content-type': 'application/json',
    'x-adcp-timestamp': timestamp,
    'x-adcp-signature': `sha256=${signature}`,
  };
}

test('the per-buy reporting credential reaches the seller, never the history, and verifies its reports', async () => {
  const now = Date.now();
  const buyKey = `cred-${randomUUID()}`;
  const created = await fetch(`${base}/v1/media-buys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      buy_key: buyKey,
      agent_id: 'life-hmac',
      params: {
        account: { account_id: 'acct_cred' },
        brand: { domain: 'acme.example' },
        start_time: new Date(now - 2 * HOUR).toISOString(),
        end_time: new Date(now + 30 * DAY).toISOString(),
        packages: [{ product_id: 'display_a', pricing_option_id: 'cpm', budget: 10_000 }],
      },
      reporting: { frequency: 'hourly' },
      requested_by: 'planner@buyer',
    }),
  });
  expect(created.status).toBe(202);
  const id = ((await created.json()) as { id: string }).id;
  const view = await eventually(async () => {
    const answer = (await (await fetch(`${base}/v1/media-buys/${id}`)).json()) as Record<string, any>;
    return answer.status === 'pending_creatives' ? answer : undefined;
  }, 30_000);
  const mediaBuyId = view.media_buy_id as string;

  // The seller got the buy's own credential, derived from the master secret and the buy ID.
  const credential = reportingWebhookCredential(master, id);
  expect(credential.length).toBeGreaterThanOrEqual(32);
  expect(seller.buy(mediaBuyId)!.request.reporting_webhook).toEqual({
    url: `${base}/webhooks/adcp-reporting/${id}`,
    reporting_frequency: 'hourly',
    authentication: { schemes: ['HMAC-SHA256'], credentials: credential },
  });

  // Not one byte of it in the buy's history or in its create operation's: inputs, call plans, results, memos.
  const createOperationId = operationIdFor('create_media_buy', buyKey);
  for (const workflowId of [id, createOperationId]) {
    const bytes = await historyBytes(workflowId);
    expect(bytes.includes(mediaBuyId)).toBe(true); // the search reaches into the decoded payloads
    expect(bytes.includes(Buffer.from(credential))).toBe(false);
    expect(bytes.includes(Buffer.from(Buffer.from(credential).toString('base64')))).toBe(false);
    expect(bytes.includes(Buffer.from(master))).toBe(false);
    expect(bytes.includes(Buffer.from(sellerSecret))).toBe(false);
  }

  // A report signed with the buy's credential is accepted; one signed with another buy's credential, or with the
  // seller's shared secret, is refused.
  const periodStartMs = Math.floor(now / HOUR) * HOUR - HOUR;
  const body = JSON.stringify(seller.reportEnvelope(mediaBuyId, { sequenceNumber: 1, periodStartMs, atMs: now }));
  const url = `${base}/webhooks/adcp-reporting/${id}`;
  const otherBuy = reportingWebhookCredential(master, `${id}-other`);
  for (const wrong of [otherBuy, sellerSecret]) {
    const refused = await fetch(url, { method: 'POST', headers: signed(body, wrong), body });
    expect(refused.status).toBe(401);
  }
  const accepted = await fetch(url, { method: 'POST', headers: signed(body, credential), body });
  expect(accepted.status).toBe(200);
  await eventually(async () => {
    const delivery = (await (await fetch(`${base}/v1/media-buys/${id}/delivery`)).json()) as Record<string, any>;
    return delivery.reports.applied === 1 ? true : undefined;
  }, 20_000);
});
