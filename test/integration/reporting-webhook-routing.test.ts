/**
 * Reporting webhooks are verified, parsed and signalled, like task webhooks: the reporting URL a buy registers names
 * its seller, the gateway verifies a report as the seller the URL names and signals the whole fire once, and the
 * buy's workflow alone judges whether it is its own: a report verified as another seller, or a row about another buy,
 * is refused in the buy's state (reports.refusals) while the seller hears 200, never 409. The form without the seller
 * (registered by buys created before it was in the path) still reaches the buy, with one lookup more. Real gateway
 * route, real Temporal dev server, the fixture media-buy seller; the gateway's Temporal client counts its calls.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { REPORTING_SECRET_ENV } from '../../activities/reporting-credentials';
import { createGateway } from '../../api/app';
import { createMediaBuyRouter } from '../../api/media-buys';
import { createReportingWebhookRouter } from '../../api/reporting-webhooks';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { MediaBuyClient } from '../../client/media-buy-client';
import { dataConverter } from '../../client/payload-codec';
import type { SellerRegistry } from '../../config/sellers';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { mintWebhookSigningKey, signWebhookRequest } from '../fixtures/webhook-signing';
import { type TestStack, eventually, registry, startTestStack, testAddress } from '../harness/temporal';
import { connectGrpc } from '../../config/grpc-connection';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let seller: MediaBuySeller;
let stack: TestStack;
let sellerRegistry: SellerRegistry;
let server: Server;
let base: string;
let gatewayConnection: Connection;
const env: Record<string, string> = { LIFE_TOKEN: '', [REPORTING_SECRET_ENV]: randomBytes(36).toString('base64url') };
/** The buy's seller signs with a key its JWKS lists; another configured seller signs with its own. */
const lifeKey = mintWebhookSigningKey(`routing-life-key-${randomUUID()}`);
const otherKey = mintWebhookSigningKey(`routing-other-key-${randomUUID()}`);
/** The Temporal RPCs the gateway's reporting route made, by method name, since the last reset. */
let calls: string[] = [];

type GrpcInterceptor = NonNullable<NonNullable<Parameters<typeof Connection.connect>[0]>['interceptors']>[number];
const countCalls: GrpcInterceptor = (options, nextCall) => {
  calls.push(options.method_definition.path.split('/').pop()!);
  return nextCall(options) as ReturnType<GrpcInterceptor>;
};

beforeAll(async () => {
  seller = await startMediaBuySeller({ webhookMode: 'rfc9421' });
  env.LIFE_TOKEN = seller.authToken;
  sellerRegistry = registry([
    {
      id: 'life-route',
      url: seller.url,
      protocol: 'mcp',
      token_env: 'LIFE_TOKEN',
      webhooks: {
        scheme: 'rfc9421',
        jwks: { keys: [...seller.scripted.webhookJwks.keys, lifeKey.publicJwk] },
      } as never,
    },
    {
      id: 'other-route',
      url: 'http://127.0.0.1:9/mcp',
      protocol: 'mcp',
      webhooks: { scheme: 'rfc9421', jwks: { keys: [otherKey.publicJwk] } } as never,
    },
  ]);
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env } });
  gatewayConnection = await connectGrpc({
    address: testAddress(),
    interceptors: [countCalls, makeGrpcRetryInterceptor(defaultGrpcRetryOptions())],
  });
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const app = express();
  app.use(
    createReportingWebhookRouter({
      client: new Client({ connection: gatewayConnection, dataConverter: dataConverter() }),
      sellers: sellerRegistry,
      authenticator: createWebhookAuthenticator(),
      publicBaseUrl: base,
      env,
      log: () => undefined,
    }),
  );
  const mediaBuys = new MediaBuyClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    reportingBaseUrl: base,
    knownSeller: (id) => sellerRegistry.has(id),
  });
  app.use(createGateway({ orchestrator: stack.orchestrator, mediaBuyRouter: createMediaBuyRouter({ mediaBuys }) }));
  server.on('request', app);
}, 120_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await gatewayConnection?.close();
  await stack?.close();
  await seller?.close();
});

type Json = Record<string, any>;

async function createBuy(): Promise<{ id: string; mediaBuyId: string; registeredUrl: string }> {
  const now = Date.now();
  const created = await fetch(`${base}/v1/media-buys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      buy_key: `route-${randomUUID()}`,
      agent_id: 'life-route',
      params: {
        account: { account_id: 'acct_route' },
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
    const answer = (await (await fetch(`${base}/v1/media-buys/${id}`)).json()) as Json;
    return answer.status === 'pending_creatives' ? answer : undefined;
  }, 30_000);
  const mediaBuyId = view.media_buy_id as string;
  const registeredUrl = (seller.buy(mediaBuyId)!.request.reporting_webhook as { url: string }).url;
  return { id, mediaBuyId, registeredUrl };
}

function envelope(mediaBuyId: string, sequenceNumber: number): Json {
  const now = Date.now();
  const hour = Math.floor(now / HOUR) * HOUR;
  return seller.reportEnvelope(mediaBuyId, {
    sequenceNumber,
    periodStartMs: hour - (5 - sequenceNumber) * HOUR,
    atMs: now,
  }) as Json;
}

async function post(url: string, body: Json, key = lifeKey): Promise<{ status: number; body: Json }> {
  const signed = signWebhookRequest({ url, body: JSON.stringify(body), key: key.signerKey });
  const answer = await fetch(url, { method: 'POST', headers: signed.headers, body: signed.body });
  return { status: answer.status, body: (await answer.json()) as Json };
}

async function reports(id: string, until: (reports: Json) => boolean): Promise<Json> {
  let last: Json = {};
  return eventually(async () => {
    last = ((await (await fetch(`${base}/v1/media-buys/${id}/delivery`)).json()) as Json).reports as Json;
    return until(last) ? last : undefined;
  }, 20_000).catch((error: Error) => {
    throw new Error(`${error.message}; reports: ${JSON.stringify(last)}`);
  });
}

test('the registered reporting URL names the seller; a verified report there is one Temporal call, the signal', async () => {
  const { id, mediaBuyId, registeredUrl } = await createBuy();
  expect(registeredUrl).toBe(`${base}/webhooks/adcp-reporting/life-route/${id}`);
  calls = [];
  expect(await post(registeredUrl, envelope(mediaBuyId, 1))).toMatchObject({
    status: 200,
    body: { status: 'accepted' },
  });
  expect(calls).toEqual(['SignalWorkflowExecution']);
  await reports(id, (seen) => seen.received === 1 && seen.refused === 0);
});

test('a report verified as another seller at its own URL form is 200, one call, and refused in the buy state', async () => {
  const { id, mediaBuyId } = await createBuy();
  // other-route's key verifies as other-route, the seller this URL names; the buy is life-route's.
  const misrouted = `${base}/webhooks/adcp-reporting/other-route/${id}`;
  calls = [];
  expect(await post(misrouted, envelope(mediaBuyId, 1), otherKey)).toMatchObject({
    status: 200,
    body: { status: 'accepted' },
  });
  expect(calls).toEqual(['SignalWorkflowExecution']);
  const seen = await reports(id, (reported) => reported.refused === 1);
  expect(seen.received).toBe(0);
  expect(seen.refusals).toEqual([
    expect.objectContaining({ reason: 'seller_mismatch', media_buy_id: mediaBuyId, agent_id: 'other-route' }),
  ]);
  // The same report signed by the buy's own seller, at its URL, is taken (the refused one shadowed nothing).
  expect((await post(`${base}/webhooks/adcp-reporting/life-route/${id}`, envelope(mediaBuyId, 1))).status).toBe(200);
  await reports(id, (reported) => reported.received === 1);
  // Another seller's signature at the buy's seller's URL does not verify: 401, no Temporal call.
  calls = [];
  const forged = await post(`${base}/webhooks/adcp-reporting/life-route/${id}`, envelope(mediaBuyId, 2), otherKey);
  expect(forged.status).toBe(401);
  expect(calls).toEqual([]);
});

test('a fire naming this buy and another is one signal: the own row is taken, the other refused, no 409', async () => {
  const { id, mediaBuyId, registeredUrl } = await createBuy();
  const fire = envelope(mediaBuyId, 1);
  const rows = fire.result.media_buy_deliveries as Json[];
  fire.result.media_buy_deliveries = [{ ...rows[0], media_buy_id: 'mb_not_this_buy' }, ...rows];
  calls = [];
  expect(await post(registeredUrl, fire)).toMatchObject({ status: 200, body: { status: 'accepted' } });
  expect(calls).toEqual(['SignalWorkflowExecution']);
  const seen = await reports(id, (reported) => reported.received === 1 && reported.refused === 1);
  expect(seen.refusals).toEqual([
    expect.objectContaining({ reason: 'media_buy_mismatch', media_buy_id: 'mb_not_this_buy' }),
  ]);
  // A fire only about another buy: 200 as well, refused by the buy.
  const elsewhere = envelope(mediaBuyId, 2);
  elsewhere.result.media_buy_deliveries = [
    { ...(elsewhere.result.media_buy_deliveries as Json[])[0], media_buy_id: 'mb_not_this_buy' },
  ];
  expect((await post(registeredUrl, elsewhere)).status).toBe(200);
  await reports(id, (reported) => reported.received === 1 && reported.refused === 2);
});

test('the reporting URL form without the seller (buys created before) still reaches the buy, with one lookup', async () => {
  const { id, mediaBuyId } = await createBuy();
  const oldForm = `${base}/webhooks/adcp-reporting/${id}`;
  calls = [];
  expect(await post(oldForm, envelope(mediaBuyId, 1))).toMatchObject({ status: 200, body: { status: 'accepted' } });
  expect(calls).toEqual(['DescribeWorkflowExecution', 'SignalWorkflowExecution']);
  await reports(id, (reported) => reported.received === 1);
  // There, another seller's signature is judged against the buy's seller: 401, as before.
  expect((await post(oldForm, envelope(mediaBuyId, 2), otherKey)).status).toBe(401);
  // An unknown buy answers as an unverified report does.
  expect(
    (await post(`${base}/webhooks/adcp-reporting/adcp-media-buy-${randomUUID()}`, envelope(mediaBuyId, 3))).status,
  ).toBe(401);
});
