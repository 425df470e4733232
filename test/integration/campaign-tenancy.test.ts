/**
 * Campaigns and discoveries are tenant-scoped (#12), against real Temporal, a real worker and the campaign fixture
 * seller on loopback:
 * - a campaign records its tenant and principal (input, state, AdcpTenant/AdcpPrincipal), its discovery and its buys
 *   carry them (the buys' state and search attributes);
 * - two tenants using the same campaign key get two campaigns;
 * - another tenant's campaign or discovery is not found, through the typed client and through HTTP behind the secure
 *   gateway, with the very body a missing one gets; its own tenant sees it.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createGateway } from '../../api/app';
import {
  ApiKeyStore,
  ROLES,
  createAuthentication,
  createSecureGateway,
  generateApiKey,
  writeKeysFile,
} from '../../api/auth';
import { createTenantResolvers } from '../../api/auth/tenant-of';
import { createCampaignRouter } from '../../api/campaigns';
import { createDiscoveryRouter } from '../../api/discoveries';
import { createMediaBuyRouter } from '../../api/media-buys';
import { CampaignClient, CampaignNotFoundError } from '../../client/campaign-client';
import { MediaBuyClient, MediaBuyNotFoundError } from '../../client/media-buy-client';
import { SA_PRINCIPAL, SA_TENANT } from '../../config/search-attributes';
import type { CallerIdentity } from '../../protocol/tenancy';
import { DEMO_ACCOUNT, DEMO_BRAND } from '../../scripts/lib/demo-seller';
import type { CampaignState } from '../../contract/campaign';
import { type MediaBuyState, mediaBuyStateQuery } from '../../contract/media-buy';
import { type CampaignSellers, startCampaignSellers } from '../fixtures/campaign-sellers';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

type Row = Record<string, any>;
const DAY = 86_400_000;
const ACME: CallerIdentity = { tenant: 'acme', principal: 'acme/planner@acme' };
const GLOBEX: CallerIdentity = { tenant: 'globex', principal: 'globex/planner@globex' };

let sellers: CampaignSellers;
let stack: TestStack;
let campaigns: CampaignClient;
let mediaBuys: MediaBuyClient;
let server: Server;
let base: string;
let dir: string;
const keys: Record<string, string> = {};
/** Workflows this file starts, terminated at the end (buys outlive their campaign by design). */
const started = new Set<string>();

beforeAll(async () => {
  sellers = await startCampaignSellers();
  stack = await startTestStack({ sellers: registry(sellers.agents), activities: { env: sellers.env } });
  campaigns = new CampaignClient({ client: stack.client, taskQueue: stack.taskQueue });
  mediaBuys = new MediaBuyClient({ client: stack.client, taskQueue: stack.taskQueue });

  dir = mkdtempSync(path.join(tmpdir(), 'adcp-campaign-tenancy-'));
  const file = path.join(dir, 'keys.json');
  const entries = [];
  for (const tenant of ['acme', 'globex']) {
    for (const role of ROLES) {
      const issued = generateApiKey(`${tenant}-${role}`);
      keys[`${tenant}/${role}`] = issued.key;
      entries.push({
        key_id: `${tenant}-${role}`,
        hash: issued.hash,
        principal: `${role}@${tenant}`,
        tenant,
        roles: [role],
      });
    }
  }
  writeKeysFile(file, { keys: entries });
  const app = createSecureGateway({
    gateway: createGateway({
      orchestrator: stack.orchestrator,
      mediaBuyRouter: createMediaBuyRouter({ mediaBuys }),
      campaignRouters: [createDiscoveryRouter({ campaigns }), createCampaignRouter({ campaigns })],
    }),
    authentication: createAuthentication({ apiKeys: new ApiKeyStore({ file }) }),
    tenantOf: createTenantResolvers({ client: stack.client }),
  });
  server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 300_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  for (const id of started)
    await stack?.client.workflow
      .getHandle(id)
      .terminate('test over')
      .catch(() => undefined);
  await stack?.close();
  await sellers?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function call(method: string, route: string, key: string, body?: unknown) {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${keys[key]}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as Row };
}

function flight() {
  const start = Date.now() + 3 * DAY;
  return { startTime: new Date(start).toISOString(), endTime: new Date(start + 30 * DAY).toISOString() };
}

function campaignRequest(campaignKey: string) {
  return {
    campaignKey,
    brief: 'Display for a spring outdoor campaign',
    totalBudget: 10_000,
    currency: 'USD',
    flight: flight(),
    sellerIds: ['fast'],
    timeBudgetMs: 8_000,
    discoveryParams: { account: DEMO_ACCOUNT, brand: DEMO_BRAND },
    buyParams: { account: DEMO_ACCOUNT, brand: DEMO_BRAND },
    allocation: { kind: 'top_ranked' as const },
    requestedBy: 'planner@buyer',
  };
}

async function phase(id: string, wanted: CampaignState['phase'], caller: CallerIdentity): Promise<CampaignState> {
  return eventually(async () => {
    const state = await campaigns.state(id, caller);
    return state.phase === wanted ? state : undefined;
  }, 120_000);
}

test('a campaign records its tenant; its discovery and buys carry it; another tenant finds none of them', async () => {
  const key = `camp-${randomUUID()}`;
  const acme = await campaigns.create(campaignRequest(key), ACME);
  started.add(acme.campaignId);
  // The same key in another tenant is another campaign; the same key again in the same tenant is the same one.
  const globex = await campaigns.create(campaignRequest(key), GLOBEX);
  started.add(globex.campaignId);
  expect(acme).toEqual({ campaignId: `adcp-campaign-acme:${key}`, created: true });
  expect(globex).toEqual({ campaignId: `adcp-campaign-globex:${key}`, created: true });
  expect(await campaigns.create(campaignRequest(key), ACME)).toEqual({ ...acme, created: false });
  // Globex starting under acme's scoped key would be globex's own key: it cannot reach acme's campaign either.
  await expect(campaigns.create(campaignRequest(`acme:${key}`), GLOBEX)).resolves.toMatchObject({
    campaignId: `adcp-campaign-globex:acme:${key}`,
  });
  started.add(`adcp-campaign-globex:acme:${key}`);

  const description = await stack.client.workflow.getHandle(acme.campaignId).describe();
  expect(description.typedSearchAttributes.get(SA_TENANT)).toBe('acme');
  expect(description.typedSearchAttributes.get(SA_PRINCIPAL)).toBe(ACME.principal);

  const waiting = await phase(acme.campaignId, 'awaiting_approval', ACME);
  expect(waiting).toMatchObject({ tenant: 'acme', principal: ACME.principal });
  started.add(waiting.discoveryId);
  const discovery = await campaigns.discovery(waiting.discoveryId, ACME);
  expect(discovery.state).toMatchObject({ tenant: 'acme', principal: ACME.principal });
  const operationId = discovery.state.sellers.fast.operationId!;
  expect((await stack.client.workflow.getHandle(operationId).describe()).typedSearchAttributes.get(SA_TENANT)).toBe(
    'acme',
  );

  // Globex: acme's campaign and discovery are not found, for reads and for every change.
  const notFound = expect.any(CampaignNotFoundError);
  await expect(campaigns.view(acme.campaignId, GLOBEX)).rejects.toEqual(notFound);
  await expect(campaigns.state(acme.campaignId, GLOBEX)).rejects.toEqual(notFound);
  await expect(campaigns.discovery(waiting.discoveryId, GLOBEX)).rejects.toEqual(notFound);
  await expect(campaigns.discoveryResult(waiting.discoveryId, GLOBEX)).rejects.toEqual(notFound);
  await expect(
    campaigns.select(acme.campaignId, { lines: waiting.selection!.lines, selectedBy: 'x@globex' }, {}, GLOBEX),
  ).rejects.toEqual(notFound);
  await expect(campaigns.approve(acme.campaignId, { approvedBy: 'x@globex' }, {}, GLOBEX)).rejects.toEqual(notFound);
  await expect(
    campaigns.change(acme.campaignId, { kind: 'cancel', requestedBy: 'x@globex' }, {}, GLOBEX),
  ).rejects.toEqual(notFound);
  expect((await campaigns.state(acme.campaignId, ACME)).phase).toBe('awaiting_approval');

  // Acme approves: the buy is acme's (state, search attributes), so globex cannot read it either.
  await campaigns.approve(acme.campaignId, { approvedBy: 'cfo@acme' }, {}, ACME);
  const buying = await eventually(async () => {
    const view = await campaigns.view(acme.campaignId, ACME);
    return view.buys.length === 1 && view.buys[0].status ? view : undefined;
  }, 120_000);
  const buyId = buying.buys[0].workflowId;
  started.add(buyId);
  expect(buyId).toBe(`adcp-media-buy-acme:${key}.fast`);
  const buy: MediaBuyState = await stack.client.workflow.getHandle(buyId).query(mediaBuyStateQuery);
  expect(buy).toMatchObject({ tenant: 'acme', principal: ACME.principal });
  const buyDescription = await stack.client.workflow.getHandle(buyId).describe();
  expect(buyDescription.typedSearchAttributes.get(SA_TENANT)).toBe('acme');
  expect(buyDescription.typedSearchAttributes.get(SA_PRINCIPAL)).toBe(ACME.principal);
  await expect(mediaBuys.view(buyId, GLOBEX)).rejects.toEqual(expect.any(MediaBuyNotFoundError));
  expect((await mediaBuys.view(buyId, ACME)).state.tenant).toBe('acme');
  expect((await call('GET', `/v1/media-buys/${buyId}`, 'globex/reader')).status).toBe(404);
  expect((await call('GET', `/v1/media-buys/${buyId}`, 'acme/reader')).status).toBe(200);
}, 240_000);

test('over HTTP another tenant gets the 404 of a missing campaign or discovery; the owner sees it', async () => {
  const key = `http-${randomUUID()}`;
  const created = await call('POST', '/v1/campaigns', 'acme/buyer', {
    campaign_key: key,
    brief: 'Display for a spring outdoor campaign',
    total_budget: 10_000,
    flight: { start_time: flight().startTime, end_time: flight().endTime },
    agent_ids: ['fast'],
    time_budget_seconds: 8,
    discovery_params: { account: DEMO_ACCOUNT, brand: DEMO_BRAND },
    requested_by: 'planner@acme',
  });
  expect(created.status).toBe(202);
  const id = created.body.id as string;
  started.add(id);
  expect(id).toBe(`adcp-campaign-acme:${key}`);
  // The same request by globex is globex's own campaign, not acme's (created, another ID).
  const theirs = await call('POST', '/v1/campaigns', 'globex/buyer', {
    campaign_key: key,
    brief: 'x',
    total_budget: 1,
    flight: { start_time: flight().startTime, end_time: flight().endTime },
    agent_ids: ['fast'],
    time_budget_seconds: 8,
    requested_by: 'planner@globex',
  });
  expect(theirs).toMatchObject({ status: 202, body: { id: `adcp-campaign-globex:${key}`, created: true } });
  started.add(theirs.body.id);

  const mine = await call('GET', `/v1/campaigns/${id}`, 'acme/reader');
  expect(mine).toMatchObject({
    status: 200,
    body: { id, campaign_key: `acme:${key}`, tenant: 'acme', principal: 'acme/buyer@acme' },
  });
  const discoveryId = mine.body.discovery_id as string;
  started.add(discoveryId);

  // Another tenant's campaign answers exactly like one that does not exist.
  const missingId = `adcp-campaign-acme:missing-${randomUUID()}`;
  const missing = await call('GET', `/v1/campaigns/${missingId}`, 'globex/reader');
  const denied = await call('GET', `/v1/campaigns/${id}`, 'globex/reader');
  expect(missing.status).toBe(404);
  expect(denied).toEqual({ status: 404, body: JSON.parse(JSON.stringify(missing.body).replaceAll(missingId, id)) });
  expect(denied.body.error.code).toBe('NOT_FOUND');
  // ... and for the owner too, a missing one is that same 404 (through the campaigns API's own answer).
  expect(await call('GET', `/v1/campaigns/${missingId}`, 'acme/reader')).toEqual(missing);

  for (const [route, role, body] of [
    [
      `/v1/campaigns/${id}/selection`,
      'buyer',
      { lines: [{ agent_id: 'fast', product_id: 'fast_display', budget: 1 }], selected_by: 'x@globex' },
    ],
    [`/v1/campaigns/${id}/approval`, 'approver', { approved_by: 'x@globex' }],
    [`/v1/campaigns/${id}/changes`, 'buyer', { kind: 'cancel', requested_by: 'x@globex' }],
    [
      `/v1/campaigns/${id}/creatives`,
      'buyer',
      { creatives: [{ creative_id: 'cr_x', format_id: { id: 'display_300x250' } }], requested_by: 'x@globex' },
    ],
  ] as const) {
    const answer = await call('POST', route, `globex/${role}`, body);
    expect(answer).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
  }
  // The creative library reads like the campaign: its owner's, nobody else's.
  expect((await call('GET', `/v1/campaigns/${id}/creatives`, 'globex/reader')).status).toBe(404);
  expect((await call('GET', `/v1/campaigns/${id}/creatives`, 'acme/reader')).status).toBe(200);
  expect((await call('GET', `/v1/discoveries/${discoveryId}`, 'globex/reader')).status).toBe(404);
  expect((await call('GET', `/v1/discoveries/${discoveryId}`, 'acme/reader')).status).toBe(200);

  // The campaign goes on for its owner: globex's refused changes did nothing.
  await phase(id, 'selecting', ACME);
  const cancel = await call('POST', `/v1/campaigns/${id}/changes`, 'acme/buyer', {
    kind: 'cancel',
    requested_by: 'planner@acme',
  });
  expect(cancel.status).toBe(200);

  // A standalone discovery is scoped the same way.
  const discoveryKey = `disc-${randomUUID()}`;
  const discovered = await call('POST', '/v1/discoveries', 'acme/buyer', {
    discovery_key: discoveryKey,
    brief: 'Display',
    agent_ids: ['fast'],
    time_budget_seconds: 8,
    params: { account: DEMO_ACCOUNT, brand: DEMO_BRAND },
  });
  expect(discovered).toMatchObject({ status: 202, body: { id: `adcp-discovery-acme:${discoveryKey}` } });
  started.add(discovered.body.id);
  const other = await call('GET', `/v1/discoveries/${discovered.body.id}`, 'globex/reader');
  // The same problem a discovery that does not exist gets: nothing tells the other tenant it exists.
  const missingDiscovery = `adcp-discovery-acme:disc-${randomUUID()}`;
  const missingAnswer = await call('GET', `/v1/discoveries/${missingDiscovery}`, 'globex/reader');
  expect(other).toEqual({
    status: 404,
    body: {
      type: 'urn:adcp-orchestrator:problem:NOT_FOUND',
      title: 'Not Found',
      status: 404,
      code: 'NOT_FOUND',
      detail: `No campaign or discovery ${discovered.body.id}.`,
      instance: `/v1/discoveries/${discovered.body.id}`,
      error: { code: 'NOT_FOUND', message: `No campaign or discovery ${discovered.body.id}.` },
    },
  });
  expect(JSON.stringify(other).replaceAll(discovered.body.id, missingDiscovery)).toBe(JSON.stringify(missingAnswer));
  const owned = await call('GET', `/v1/discoveries/${discovered.body.id}`, 'acme/reader');
  expect(owned).toMatchObject({ status: 200, body: { tenant: 'acme', principal: 'acme/buyer@acme' } });
}, 240_000);
