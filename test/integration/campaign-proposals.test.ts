/**
 * A campaign accepts a seller's proposal (AdCP 3.1 get_products `proposals[]`) instead of hand-picked products, on the
 * real dev server against real sellers on loopback (test/fixtures/campaign-sellers/proposal-seller.ts: proposals in
 * draft or committed status, finalize by get_products refine, create_media_buy by proposal_id + total_budget,
 * REQUOTE_REQUIRED): a committed proposal is bought as is (mixed with a hand-picked seller), a draft is finalized and
 * then bought, REQUOTE_REQUIRED is quoted again without a second buy, and a proposal of another seller, an unknown or
 * expired one, or one over the budget is refused with a 4xx before it enters the campaign's history.
 */
import { createGateway } from '../../api/app';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createCampaignRouter } from '../../api/campaigns';
import { createDiscoveryRouter } from '../../api/discoveries';
import { CampaignClient } from '../../client/campaign-client';
import { SellerCapabilitiesClient } from '../../client/seller-capabilities-client';
import { DEMO_ACCOUNT, DEMO_BRAND } from '../../scripts/lib/demo-seller';
import type { CampaignState } from '../../contract/campaign';
import { productOf } from '../fixtures/campaign-sellers';
import { type ProposalSeller, startProposalSeller } from '../fixtures/campaign-sellers/proposal-seller';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

type Row = Record<string, any>;
const DAY = 86_400_000;

let committed: ProposalSeller;
let drafty: ProposalSeller;
let requoting: ProposalSeller;
let lapsing: ProposalSeller;
let stubborn: ProposalSeller;
let fast: MediaBuySeller;
let stack: TestStack;
let capabilities: SellerCapabilitiesClient;
let campaigns: CampaignClient;
let server: Server;
let base: string;
const SELLERS = ['committed', 'drafty', 'requoting', 'lapsing', 'stubborn', 'fast'];

beforeAll(async () => {
  [committed, drafty, requoting, lapsing, stubborn, fast] = await Promise.all([
    startProposalSeller({ name: 'committed', proposalStatus: 'committed' }),
    startProposalSeller({ name: 'drafty', proposalStatus: 'draft' }),
    startProposalSeller({ name: 'requoting', proposalStatus: 'committed', requoteCreates: 1 }),
    // Its hold lapses at once: accepting its proposal is refused as expired.
    startProposalSeller({ name: 'lapsing', proposalStatus: 'committed', holdMs: 1 }),
    // Refuses twice: past one requote a person decides.
    startProposalSeller({ name: 'stubborn', proposalStatus: 'committed', requoteCreates: 2 }),
    startMediaBuySeller({ name: 'fast' }),
  ]);
  fast.scripted.setDefaultScript('get_products', [
    { status: 'completed', bare: true, payload: { products: [productOf('fast', 10)] } },
  ]);
  const proposalSellers = { committed, drafty, requoting, lapsing, stubborn };
  const sellerRegistry = registry([
    ...Object.entries(proposalSellers).map(([id, seller]) => ({
      id,
      url: seller.url,
      protocol: 'mcp' as const,
      token_env: `${id.toUpperCase()}_TOKEN`,
    })),
    { id: 'fast', url: fast.url, protocol: 'mcp', token_env: 'FAST_TOKEN' },
  ]);
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: {
      env: {
        ...Object.fromEntries(
          Object.entries(proposalSellers).map(([id, seller]) => [`${id.toUpperCase()}_TOKEN`, seller.authToken]),
        ),
        FAST_TOKEN: fast.authToken,
      },
    },
  });
  capabilities = new SellerCapabilitiesClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    sellers: sellerRegistry,
  });
  const app = express();
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  campaigns = new CampaignClient({ client: stack.client, taskQueue: stack.taskQueue, sellers: capabilities });
  app.use(
    createGateway({
      orchestrator: stack.orchestrator,
      campaignRouters: [createDiscoveryRouter({ campaigns }), createCampaignRouter({ campaigns })],
    }),
  );
}, 300_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  for (const agent of SELLERS)
    await stack?.client.workflow
      .getHandle(capabilities.workflowId(agent))
      .terminate('test over')
      .catch(() => undefined);
  await stack?.close();
  await Promise.all([committed, drafty, requoting, lapsing, stubborn, fast].map((seller) => seller?.close()));
});

async function post(path: string, body: unknown): Promise<{ status: number; body: Row }> {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Row };
}

async function phase(id: string, wanted: CampaignState['phase']): Promise<CampaignState> {
  return eventually(async () => {
    const state = await campaigns.state(id);
    return state.phase === wanted ? state : undefined;
  }, 120_000);
}

function flight() {
  const start = Date.now() + 3 * DAY;
  return { start_time: new Date(start).toISOString(), end_time: new Date(start + 30 * DAY).toISOString() };
}

/** A campaign over these sellers, in the selecting phase. */
async function campaignAt(sellerIds: string[]): Promise<{ id: string; campaignKey: string; state: CampaignState }> {
  const campaignKey = `prop-${randomUUID()}`;
  const created = await post('/v1/campaigns', {
    campaign_key: campaignKey,
    brief: 'Display and video for a spring outdoor campaign',
    total_budget: 30_000,
    currency: 'USD',
    flight: flight(),
    agent_ids: sellerIds,
    time_budget_seconds: 8,
    discovery_params: { account: DEMO_ACCOUNT, brand: DEMO_BRAND },
    buy_params: { account: DEMO_ACCOUNT, brand: DEMO_BRAND },
    requested_by: 'planner@buyer',
  });
  expect(created.status).toBe(202);
  const id = created.body.id as string;
  return { id, campaignKey, state: await phase(id, 'selecting') };
}

async function updateEvents(id: string): Promise<number> {
  const history = await stack.client.workflow.getHandle(id).fetchHistory();
  return (history.events ?? []).filter((event) => event.workflowExecutionUpdateAcceptedEventAttributes).length;
}

/** The campaign's buys once each has its media-buy status from the seller. */
async function buysSettled(id: string, wanted: Record<string, string>) {
  return eventually(async () => {
    const view = await campaigns.view(id);
    const statuses = Object.fromEntries(view.buys.map((buy) => [buy.sellerId, buy.status]));
    return Object.entries(wanted).every(([sellerId, status]) => statuses[sellerId] === status) ? view : undefined;
  }, 120_000);
}

test('a committed proposal is bought as is (proposal_id + total_budget), next to a hand-picked seller; bad proposals are refused before history', async () => {
  const { id, state } = await campaignAt(['committed', 'lapsing', 'fast']);
  const discovery = await campaigns.discoveryResult(state.discoveryId);
  expect(
    discovery.proposals.map((proposal) => `${proposal.sellerId}/${proposal.proposalId}/${proposal.status}`),
  ).toEqual(expect.arrayContaining(['committed/committed_plan_1/committed', 'lapsing/lapsing_plan_1/committed']));
  const offered = discovery.proposals.find((proposal) => proposal.sellerId === 'committed')!;
  expect(offered).toMatchObject({ budgetGuidance: { min: 1_000, max: 50_000, currency: 'USD' } });
  expect(Date.parse(offered.expiresAt!)).toBeGreaterThan(Date.now());

  const before = await updateEvents(id);
  const select = (body: Row) => post(`/v1/campaigns/${id}/selection`, { selected_by: 'planner@buyer', ...body });
  // Another seller's proposal, an unknown one, an expired one, one over the budget, a seller twice: refused.
  const elsewhere = await select({ proposals: [{ agent_id: 'fast', proposal_id: 'committed_plan_1', budget: 5_000 }] });
  expect(elsewhere).toMatchObject({ status: 409, body: { error: { code: 'PROPOSAL_NOT_FOUND' } } });
  expect(elsewhere.body.error.message).toContain('offered by seller committed, not fast');
  const unknown = await select({ proposals: [{ agent_id: 'committed', proposal_id: 'no_such_plan', budget: 5_000 }] });
  expect(unknown).toMatchObject({ status: 409, body: { error: { code: 'PROPOSAL_NOT_FOUND' } } });
  const expired = await select({ proposals: [{ agent_id: 'lapsing', proposal_id: 'lapsing_plan_1', budget: 5_000 }] });
  expect(expired).toMatchObject({ status: 409, body: { error: { code: 'PROPOSAL_EXPIRED' } } });
  const over = await select({
    lines: [{ agent_id: 'fast', product_id: 'fast_display', budget: 15_000 }],
    proposals: [{ agent_id: 'committed', proposal_id: 'committed_plan_1', budget: 20_000 }],
  });
  expect(over).toMatchObject({ status: 409, body: { error: { code: 'BUDGET_EXCEEDED' } } });
  const twice = await select({
    lines: [{ agent_id: 'committed', product_id: 'committed_display', budget: 1_000 }],
    proposals: [{ agent_id: 'committed', proposal_id: 'committed_plan_1', budget: 5_000 }],
  });
  expect(twice).toMatchObject({ status: 400, body: { error: { code: 'INVALID_REQUEST' } } });
  expect((await select({ proposals: [] })).status).toBe(400);
  expect((await select({ proposals: [{ agent_id: 'committed', proposal_id: 'committed_plan_1' }] })).status).toBe(400);
  expect(await updateEvents(id)).toBe(before);

  const selected = await select({
    lines: [{ agent_id: 'fast', product_id: 'fast_display', pricing_option_id: 'cpm_fixed', budget: 5_000 }],
    proposals: [{ agent_id: 'committed', proposal_id: 'committed_plan_1', budget: 20_000 }],
  });
  expect(selected).toMatchObject({ status: 200, body: { committed_budget: 25_000 } });
  expect(committed.creates()).toHaveLength(0); // nothing is spent before the approval
  const approved = await post(`/v1/campaigns/${id}/approval`, { approved_by: 'cfo@buyer' });
  expect(approved).toMatchObject({ status: 200, body: { buys: ['fast', 'committed'] } });

  await buysSettled(id, { fast: 'pending_creatives', committed: 'pending_creatives' });
  expect(committed.finalizes()).toEqual([]); // committed: bought as is
  expect(committed.buys()).toHaveLength(1);
  const [buy] = committed.buys();
  expect(buy.args).toMatchObject({
    proposal_id: 'committed_plan_1',
    total_budget: { amount: 20_000, currency: 'USD' },
    account: DEMO_ACCOUNT,
  });
  expect(buy.args.packages).toBeUndefined();
  expect(buy.packages.map((pkg) => pkg.budget)).toEqual([12_000, 8_000]);
  expect(fast.buys()).toHaveLength(1);
  expect(fast.buys()[0].request).toMatchObject({ packages: [{ product_id: 'fast_display', budget: 5_000 }] });

  const view = (await (await fetch(`${base}/v1/campaigns/${id}`)).json()) as Row;
  expect(view).toMatchObject({
    phase: 'live',
    committed_budget: 25_000,
    selection: { proposals: [{ agent_id: 'committed', proposal_id: 'committed_plan_1', budget: 20_000 }] },
  });
  const proposalBuy = view.buys.find((entry: Row) => entry.agent_id === 'committed');
  expect(proposalBuy).toMatchObject({
    status: 'pending_creatives',
    proposal: { proposal_id: 'committed_plan_1', bought_proposal_id: 'committed_plan_1', requotes: [], finalized: [] },
  });
  expect(view.buys.find((entry: Row) => entry.agent_id === 'fast').proposal).toBeNull();
}, 240_000);

test('a draft proposal is finalized (get_products refine, action finalize) and the committed proposal is bought', async () => {
  const { id, campaignKey } = await campaignAt(['drafty']);
  const selected = await campaigns.select(id, {
    lines: [],
    proposals: [{ sellerId: 'drafty', proposalId: 'drafty_plan_1', budget: 12_000 }],
    selectedBy: 'planner@buyer',
  });
  expect(selected).toEqual({ accepted: true, committedBudget: 12_000 });
  expect(drafty.finalizes()).toEqual([]); // a draft is finalized before spend, not at selection
  await campaigns.approve(id, { approvedBy: 'cfo@buyer' });

  await buysSettled(id, { drafty: 'pending_creatives' });
  expect(drafty.finalizes()).toEqual([{ source: 'drafty_plan_1', committed: 'drafty_plan_2' }]);
  const finalizeCall = drafty.scripted.callsTo('get_products').find((call) => call.args.buying_mode === 'refine');
  expect(finalizeCall?.args).toMatchObject({
    refine: [{ scope: 'proposal', proposal_id: 'drafty_plan_1', action: 'finalize' }],
    brand: DEMO_BRAND,
  });
  expect(finalizeCall?.args.brief).toBeUndefined();
  // The draft itself was never sent to create_media_buy.
  expect(drafty.creates().map((create) => `${create.proposalId}:${create.outcome}`)).toEqual(['drafty_plan_2:created']);
  expect(drafty.buys()).toHaveLength(1);
  expect(drafty.buys()[0].args).toMatchObject({ proposal_id: 'drafty_plan_2', total_budget: { amount: 12_000 } });

  const state = await campaigns.state(id);
  expect(state.buys.drafty).toMatchObject({
    workflowId: `adcp-media-buy-${campaignKey}.drafty`,
    committedBudget: 12_000,
    proposal: {
      proposalId: 'drafty_plan_1',
      status: 'draft',
      boughtProposalId: 'drafty_plan_2',
      finalized: [{ from: 'drafty_plan_1', to: 'drafty_plan_2' }],
    },
  });
}, 240_000);

test('REQUOTE_REQUIRED: no buy is created, the campaign records it, finalizes the proposal afresh and buys once', async () => {
  const { id, campaignKey } = await campaignAt(['requoting']);
  await campaigns.select(id, {
    lines: [],
    proposals: [{ sellerId: 'requoting', proposalId: 'requoting_plan_1', budget: 9_000 }],
    selectedBy: 'planner@buyer',
  });
  await campaigns.approve(id, { approvedBy: 'cfo@buyer' });

  const view = await buysSettled(id, { requoting: 'pending_creatives' });
  expect(requoting.creates().map((create) => `${create.proposalId}:${create.outcome}`)).toEqual([
    'requoting_plan_1:REQUOTE_REQUIRED',
    'requoting_plan_2:created',
  ]);
  expect(requoting.buys()).toHaveLength(1);
  expect(requoting.finalizes()).toEqual([{ source: 'requoting_plan_1', committed: 'requoting_plan_2' }]);
  // The refused attempt is its own (ended) buy workflow; the campaign follows the next key, never the same one twice.
  const firstAttempt = await stack.client.workflow.getHandle(`adcp-media-buy-${campaignKey}.requoting`).result();
  expect(firstAttempt).toMatchObject({ status: 'create_failed' });
  expect(view.buys.find((buy) => buy.sellerId === 'requoting')?.workflowId).toBe(
    `adcp-media-buy-${campaignKey}.requoting.requote-1`,
  );
  const state = await campaigns.state(id);
  expect(state.buys.requoting).toMatchObject({
    committedBudget: 9_000,
    proposal: {
      boughtProposalId: 'requoting_plan_2',
      requotes: [{ proposalId: 'requoting_plan_1', code: 'REQUOTE_REQUIRED' }],
    },
  });
  expect(state.buys.requoting.finalStatus).toBeUndefined();
  expect(state.alerts).toEqual(
    expect.arrayContaining([expect.objectContaining({ kind: 'proposal_requote', sellerId: 'requoting' })]),
  );
  expect(state.alerts.some((alert) => alert.kind === 'buy_failed')).toBe(false);
}, 240_000);

test('a second REQUOTE_REQUIRED leaves the seller without a buy for a person: nothing committed, the campaign ends', async () => {
  const { id, campaignKey } = await campaignAt(['stubborn']);
  await campaigns.select(id, {
    lines: [],
    proposals: [{ sellerId: 'stubborn', proposalId: 'stubborn_plan_1', budget: 7_000 }],
    selectedBy: 'planner@buyer',
  });
  await campaigns.approve(id, { approvedBy: 'cfo@buyer' });
  const ended = await phase(id, 'ended');
  expect(stubborn.creates().map((create) => `${create.proposalId}:${create.outcome}`)).toEqual([
    'stubborn_plan_1:REQUOTE_REQUIRED',
    'stubborn_plan_2:REQUOTE_REQUIRED',
  ]);
  expect(stubborn.buys()).toHaveLength(0);
  expect(ended.committedBudget).toBe(0);
  expect(ended.buys.stubborn).toMatchObject({
    workflowId: `adcp-media-buy-${campaignKey}.stubborn.requote-1`,
    finalStatus: 'requote_required',
    committedBudget: 0,
    proposal: { needsPerson: expect.stringContaining('a person must choose new terms') },
  });
  expect(ended.buys.stubborn.proposal!.requotes.map((requote) => requote.proposalId)).toEqual([
    'stubborn_plan_1',
    'stubborn_plan_2',
  ]);
  const view = (await (await fetch(`${base}/v1/campaigns/${id}`)).json()) as Row;
  expect(view.buys[0].proposal).toMatchObject({ needs_person: expect.any(String), requotes: [{}, {}] });
}, 240_000);
