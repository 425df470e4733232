/**
 * The media-buy workflow against a seller nobody here wrote: @adcp/sdk's guaranteed example seller (unmodified, from
 * node_modules, behind its mock upstream). Its guaranteed flow as far as it goes: create (pending_creatives),
 * sync_creatives with the package assignment, a read of the buy, a pause and a cancel, each through the workflow and
 * its child operations; the workflow then settles with a lifetime delivery pull and ends. It runs with a reporting
 * URL (ADCP_PUBLIC_BASE_URL in production), so create_media_buy registers a reporting webhook: the example seller
 * validates the 3.x request and requires `reporting_webhook.authentication`, which the worker fills with the buy's
 * derived credential (activities/media-buy.ts).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { REPORTING_SECRET_ENV, reportingWebhookCredential } from '../../activities/reporting-credentials';
import { createReportingWebhookRouter } from '../../api/reporting-webhooks';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { MediaBuyClient } from '../../client/media-buy-client';
import { DEMO_ACCOUNT, DEMO_BRAND } from '../../scripts/lib/demo-seller';
import {
  EXAMPLE_SELLER_TOKEN,
  EXAMPLE_SELLER_TOKEN_ENV,
  type ExampleSeller,
  startExampleSeller,
} from '../harness/example-sellers';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

type Row = Record<string, any>;

let seller: ExampleSeller;
let stack: TestStack;
let buys: MediaBuyClient;
let server: Server;
let base: string;
const master = randomBytes(36).toString('base64url');
const env = { [EXAMPLE_SELLER_TOKEN_ENV]: EXAMPLE_SELLER_TOKEN, [REPORTING_SECRET_ENV]: master };

beforeAll(async () => {
  seller = await startExampleSeller('guaranteed');
  const sellerRegistry = registry([seller.agent]);
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env } });
  // The gateway's reporting route on loopback: the URL the buy registers, verified with the buy's credential.
  const app = express();
  server = await new Promise<Server>((resolve) => {
    const listening = createServer(app).listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
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
  buys = new MediaBuyClient({ client: stack.client, taskQueue: stack.taskQueue, reportingBaseUrl: base });
}, 300_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  await seller?.stop();
});

test('the guaranteed example seller: created pending_creatives, creatives synced and assigned, paused, canceled, settled', async () => {
  const products = await stack.orchestrator.result(
    (
      await stack.orchestrator.start({
        sellerId: 'guaranteed',
        task: 'get_products',
        params: {
          buying_mode: 'brief',
          brief: 'Outdoor video for a spring campaign',
          account: DEMO_ACCOUNT,
          brand: DEMO_BRAND,
        },
        idempotencyKey: randomUUID(),
      })
    ).operationId,
  );
  expect(products.status).toBe('completed');
  const product = (products.result?.products as Row[])[0];
  const pricing = product.pricing_options[0] as Row;
  const start = new Date(Date.now() + 3 * 86_400_000);
  const { mediaBuyWorkflowId: id } = await buys.create({
    buyKey: `example-${randomUUID()}`,
    sellerId: 'guaranteed',
    params: {
      account: DEMO_ACCOUNT,
      brand: DEMO_BRAND,
      start_time: start.toISOString(),
      end_time: new Date(start.getTime() + 30 * 86_400_000).toISOString(),
      packages: [
        {
          product_id: product.product_id,
          pricing_option_id: pricing.pricing_option_id,
          budget: Math.max(Number(pricing.min_spend ?? 0) * 2, 10_000),
        },
      ],
    },
    requestedBy: 'planner@buyer',
  });
  const created = await eventually(async () => {
    const state = await buys.state(id);
    return state.status !== 'creating' ? state : undefined;
  }, 120_000);
  expect(created.failure).toBeUndefined();
  expect(created.status).toBe('pending_creatives');
  expect(typeof created.mediaBuyId).toBe('string');
  // The reporting webhook was registered with the buy, and the seller accepted the create that carried it.
  expect(created.reporting.registered).toMatchObject({ url: `${base}/webhooks/adcp-reporting/${id}` });
  // A report carrying the buy's credential reaches the buy; one without it is refused before any Temporal call.
  const reportUrl = `${base}/webhooks/adcp-reporting/${id}`;
  const refused = await fetch(reportUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  expect(refused.status).toBe(401);
  const withCredential = await fetch(reportUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${reportingWebhookCredential(master, id)}` },
    body: '{}',
  });
  expect(withCredential.status).toBe(400); // authenticated; the empty body is then refused as a report
  const packageId = Object.keys(created.packages)[0];
  expect(packageId).toBeDefined();

  const creativeId = `cr_example_${randomUUID().slice(0, 8)}`;
  const formatId = (product.format_ids as Row[])[0];
  const attached = await buys.attachCreatives(id, {
    creatives: [
      {
        creative_id: creativeId,
        name: 'Spring video',
        format_id: formatId,
        assets: {
          video: {
            asset_type: 'video',
            url: 'https://cdn.example/spring-15s.mp4',
            width: 1920,
            height: 1080,
            duration_ms: 15_000,
          },
          image: { asset_type: 'image', url: 'https://cdn.example/spring-1080.png', width: 1080, height: 1080 },
          headline: { asset_type: 'text', content: 'Spring into the outdoors' },
          click_url: { asset_type: 'url', url: 'https://acmeoutdoor.example/spring' },
        },
      },
    ],
    assignments: { [creativeId]: [packageId] },
    requestedBy: 'trafficker@buyer',
  });
  expect(attached.outcome).toBe('applied');
  const synced = await eventually(async () => {
    const state = await buys.state(id);
    return state.reads >= 1 ? state : undefined; // the read that follows a sync
  }, 60_000);
  expect(synced.creatives[creativeId]).toMatchObject({
    action: expect.stringMatching(/^(created|updated|unchanged)$/),
    packageIds: [packageId],
  });

  // Onward as far as the seller goes: what it answers to a pause is recorded either way; a cancel ends the buy.
  const paused = await buys
    .change(id, { kind: 'pause', requestedBy: 'ops@buyer' })
    .catch((error: Error) => ({ outcome: `refused: ${error.message}` }));
  const canceled = await buys.change(id, { kind: 'cancel', requestedBy: 'ops@buyer', reason: 'interop run over' });
  // This seller answers the cancel "canceled" but keeps that state in its adapter only: its get_media_buys reads the
  // upstream order, still live. The read after the change is the judge, so the cancel is sent, not confirmed, and the
  // buy's view says what the seller's read says.
  expect(canceled).toMatchObject({ outcome: 'sent' });
  expect(canceled.status).not.toBe('canceled');
  const afterCancel = await buys.state(id);
  expect(afterCancel.changes.at(-1)?.note).toContain('a read of the buy right after shows status:');
  // The buy waits for its final report before it settles (the seller registered a webhook). This seller sends none
  // (its product says `supports_webhooks: false`), so the test sends the final report the way a seller would with
  // the credential it was given: Bearer, to the buy's reporting URL. The workflow then settles with a lifetime pull.
  const finalReport = await fetch(reportUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${reportingWebhookCredential(master, id)}` },
    body: JSON.stringify({
      idempotency_key: randomUUID(),
      timestamp: new Date().toISOString(),
      result: {
        notification_type: 'final',
        sequence_number: 1,
        media_buy_deliveries: [{ media_buy_id: created.mediaBuyId, status: 'canceled' }],
      },
    }),
  });
  expect(finalReport.status).toBe(200);
  const final = await buys.result(id);
  expect(final.status).toBe('canceled');
  expect(final.done).toBe(true);
  expect(final.reporting.finalReport).toMatchObject({ sequenceNumber: 1 });
  // The final report carried no numbers: the seller's lifetime numbers become the record, and any the seller has
  // (its mock delivery) show up as a discrepancy against the nothing its webhook reported.
  const reconciliation = final.reporting.reconciliation!;
  expect(reconciliation.replaced).toBe(true);
  expect(final.reporting.totals).toEqual(reconciliation.seller.totals);
  expect(reconciliation.outcome).toBe(
    Number(reconciliation.seller.totals.impressions ?? 0) > 0 ? 'large_discrepancy' : 'reconciled',
  );
  console.info(
    `guaranteed example seller: ${final.statusHistory.map((move) => `${move.to} (${move.source})`).join(' → ')}; pause: ${paused.outcome}; ` +
      `revision ${final.revision ?? 'n/a'}; available_actions ${JSON.stringify(final.availableActions ?? null)}; reconciliation ${final.reporting.reconciliation?.outcome ?? 'none'}; anomalies ${final.anomalies.map((anomaly) => anomaly.note).join(' | ') || 'none'}`,
  );
}, 300_000);
