/**
 * How delivery reports are authenticated when the seller signs with RFC 9421 (AdCP 3.x still requires
 * `reporting_webhook.authentication` on create). The worker sends the buy's own derived credential with the Bearer
 * scheme; the gateway's reporting route accepts a report that carries EITHER that credential OR a valid RFC 9421
 * signature by the buy's seller, and refuses everything else with 401 before any Temporal call: a wrong token,
 * another buy's credential, and a report signed by another configured seller. A gateway without the master secret
 * takes the seller's signature only. Real Temporal dev server, the fixture seller on loopback, real HTTP.
 */
import { createGateway } from '../../api/app';
import { randomBytes, randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { REPORTING_SECRET_ENV, reportingWebhookCredential } from '../../activities/reporting-credentials';
import { createMediaBuyRouter } from '../../api/media-buys';
import { createReportingWebhookRouter } from '../../api/reporting-webhooks';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { MediaBuyClient } from '../../client/media-buy-client';
import type { SellerRegistry } from '../../config/sellers';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { mintWebhookSigningKey, signWebhookRequest } from '../fixtures/webhook-signing';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let seller: MediaBuySeller;
let stack: TestStack;
let sellerRegistry: SellerRegistry;
const servers: Server[] = [];
let base: string;
const master = randomBytes(36).toString('base64url');
const env: Record<string, string> = { LIFE_TOKEN: '', [REPORTING_SECRET_ENV]: master };
const otherSellerKey = mintWebhookSigningKey('other-seller-key');
/** A second key of life-sig's own (as a seller rotating keys publishes two), so the test can sign as that seller. */
const lifeSecondKey = mintWebhookSigningKey('life-sig-second-key');

async function listen(app: express.Express): Promise<string> {
  const server = await new Promise<Server>((resolve) => {
    const listening = createServer(app).listen(0, '127.0.0.1', () => resolve(listening));
  });
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  seller = await startMediaBuySeller({ webhookMode: 'rfc9421' });
  env.LIFE_TOKEN = seller.authToken;
  sellerRegistry = registry([
    {
      id: 'life-sig',
      url: seller.url,
      protocol: 'mcp',
      token_env: 'LIFE_TOKEN',
      webhooks: {
        scheme: 'rfc9421',
        jwks: { keys: [...seller.scripted.webhookJwks.keys, lifeSecondKey.publicJwk] },
      } as never,
    },
    {
      // Another seller the gateway knows (never called here): its signature must not pass for life-sig's buy.
      id: 'other-sig',
      url: 'http://127.0.0.1:9/mcp',
      protocol: 'mcp',
      webhooks: { scheme: 'rfc9421', jwks: { keys: [otherSellerKey.publicJwk] } } as never,
    },
  ]);
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env } });
  const app = express();
  app.use(
    createReportingWebhookRouter({
      client: stack.client,
      sellers: sellerRegistry,
      authenticator: createWebhookAuthenticator(),
      // The base is set once the server listens; the route rebuilds the signed target URI from it.
      get publicBaseUrl() {
        return base;
      },
      env,
      log: () => undefined,
    }),
  );
  base = await listen(app);
  const mediaBuys = new MediaBuyClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    reportingBaseUrl: base,
    knownSeller: (id) => sellerRegistry.has(id),
  });
  app.use(createGateway({ orchestrator: stack.orchestrator, mediaBuyRouter: createMediaBuyRouter({ mediaBuys }) }));
}, 120_000);

afterAll(async () => {
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  await stack?.close();
  await seller?.close();
});

async function report(url: string, headers: Record<string, string>, body: string | Buffer): Promise<number> {
  const answer = await fetch(url, { method: 'POST', headers, body });
  await answer.arrayBuffer();
  return answer.status;
}

test('an RFC 9421 seller gets a Bearer credential on create; its reports pass by that credential or by its signature, nothing else', async () => {
  const now = Date.now();
  const created = await fetch(`${base}/v1/media-buys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      buy_key: `sig-${randomUUID()}`,
      agent_id: 'life-sig',
      params: {
        account: { account_id: 'acct_sig' },
        brand: { domain: 'acme.example' },
        start_time: new Date(now - 6 * HOUR).toISOString(),
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

  // AdCP 3.x requires authentication even though this seller signs: the buy's own credential, scheme Bearer.
  const credential = reportingWebhookCredential(master, id);
  expect(seller.buy(mediaBuyId)!.request.reporting_webhook).toEqual({
    url: `${base}/webhooks/adcp-reporting/${id}`,
    reporting_frequency: 'hourly',
    authentication: { schemes: ['Bearer'], credentials: credential },
  });

  const url = `${base}/webhooks/adcp-reporting/${id}`;
  const hour = Math.floor(now / HOUR) * HOUR;
  const envelope = (sequenceNumber: number) =>
    JSON.stringify(
      seller.reportEnvelope(mediaBuyId, {
        sequenceNumber,
        periodStartMs: hour - (5 - sequenceNumber) * HOUR,
        atMs: now,
      }),
    );
  /** The buy's workflow has received `count` reports (each accepted report is signalled to it). */
  const applied = async (count: number) => {
    let last: unknown;
    await eventually(async () => {
      const delivery = (await (await fetch(`${base}/v1/media-buys/${id}/delivery`)).json()) as Record<string, any>;
      last = delivery.reports;
      return delivery.reports.received === count ? true : undefined;
    }, 20_000).catch((error: Error) => {
      throw new Error(`${error.message}; reports: ${JSON.stringify(last)}`);
    });
  };
  const json = { 'content-type': 'application/json' };

  // Refused, each with 401: no credential at all, a wrong token, another buy's credential, and a body signed by
  // another configured seller (valid signature, wrong seller) with or without a wrong token beside it.
  const body1 = envelope(1);
  expect(await report(url, json, body1)).toBe(401);
  expect(await report(url, { ...json, authorization: `Bearer ${randomBytes(33).toString('base64url')}` }, body1)).toBe(
    401,
  );
  const otherBuy = reportingWebhookCredential(master, `${id}-other`);
  expect(await report(url, { ...json, authorization: `Bearer ${otherBuy}` }, body1)).toBe(401);
  const forged = signWebhookRequest({ url, body: body1, key: otherSellerKey.signerKey });
  expect(await report(url, forged.headers, forged.body)).toBe(401);
  const forgedAgain = signWebhookRequest({ url, body: body1, key: otherSellerKey.signerKey });
  expect(await report(url, { ...forgedAgain.headers, authorization: `Bearer ${otherBuy}` }, forgedAgain.body)).toBe(
    401,
  );

  // Bearer only (no signature): accepted.
  expect(await report(url, { ...json, authorization: `Bearer ${credential}` }, body1)).toBe(200);
  await applied(1);

  // RFC 9421 only (the seller's own signature, no Authorization header): accepted.
  const { idempotency_key: _key, ...report2 } = JSON.parse(envelope(2)) as Record<string, unknown>;
  const deliveries = await seller.scripted.sendUnbackedWebhook(url, report2);
  expect(deliveries.map((delivery) => delivery.finalStatus)).toEqual([200]);
  await applied(2);

  // A valid signature beside a wrong token: either way is enough, so the signature carries it.
  const both = signWebhookRequest({ url, body: envelope(3), key: lifeSecondKey.signerKey });
  expect(await report(url, { ...both.headers, authorization: `Bearer ${otherBuy}` }, both.body)).toBe(200);
  await applied(3);

  // A gateway without the master secret cannot know the credential: the Bearer report is refused there, while the
  // seller's signature still passes.
  const { [REPORTING_SECRET_ENV]: _secret, ...withoutSecret } = env;
  const bare = express();
  let bareBase = '';
  bare.use(
    createReportingWebhookRouter({
      client: stack.client,
      sellers: sellerRegistry,
      authenticator: createWebhookAuthenticator(),
      get publicBaseUrl() {
        return bareBase;
      },
      env: withoutSecret,
      log: () => undefined,
    }),
  );
  bareBase = await listen(bare);
  const bareUrl = `${bareBase}/webhooks/adcp-reporting/${id}`;
  const body4 = envelope(4);
  expect(await report(bareUrl, { ...json, authorization: `Bearer ${credential}` }, body4)).toBe(401);
  const { idempotency_key: _key4, ...report4 } = JSON.parse(body4) as Record<string, unknown>;
  const signedOnly = await seller.scripted.sendUnbackedWebhook(bareUrl, report4);
  expect(signedOnly.map((delivery) => delivery.finalStatus)).toEqual([200]);
  await applied(4);
}, 180_000);
