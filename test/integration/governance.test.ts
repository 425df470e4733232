/**
 * Governance end to end (#14 item 6): media buys that name a governance agent (test/fixtures/governance-agent, a real
 * @adcp/sdk server) go through an intent check_governance before create_media_buy and before every budget raise, over
 * HTTP (the media-buy API), real Temporal and the media-buy fixture seller on loopback.
 *
 * - denied: the seller never hears of the buy; the buy ends create_failed with the agent's explanation;
 * - conditions with a required value: applied by the orchestrator, re-checked, and the seller gets the capped budget;
 * - conditions without a value: the buy waits (visible over HTTP) for a person's decision, which is recorded;
 *   approved it proceeds, declined it ends without a call to the seller;
 * - human review: the check goes async (submitted), is polled like any operation, and completes;
 * - the seller receives the signed governance_context; report_plan_outcome follows the seller's answer;
 * - a budget raise is checked (and a denied raise never reaches the seller); a budget cut is not checked;
 * - a governed campaign pushes its plan (sync_plans) before discovery, and its buys are checked against that plan;
 * - an unreachable governance agent closes the gate (GOVERNANCE_UNAVAILABLE), and the seller hears nothing.
 */
import { createGateway } from '../../api/app';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import express from 'express';
import { createMediaBuyRouter } from '../../api/media-buys';
import { CampaignClient } from '../../client/campaign-client';
import { MediaBuyClient } from '../../client/media-buy-client';
import { productOf } from '../fixtures/campaign-sellers';
import { type GovernanceAgent, governanceContextClaims, startGovernanceAgent } from '../fixtures/governance-agent';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let seller: MediaBuySeller;
let governance: GovernanceAgent;
let stack: TestStack;
let server: Server;
let base: string;
let campaigns: CampaignClient;

beforeAll(async () => {
  seller = await startMediaBuySeller({ name: 'gov-seller' });
  governance = await startGovernanceAgent({ budgetCap: 5_000 });
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const sellerRegistry = registry([
    { id: 'gov-seller', url: seller.url, protocol: 'mcp', token_env: 'GOV_SELLER_TOKEN' },
    { id: 'governance', url: governance.url, protocol: 'mcp', token_env: 'GOVERNANCE_TOKEN' },
    // Nothing listens there: the gate that cannot be reached stays closed.
    { id: 'governance-down', url: 'http://127.0.0.1:9/mcp', protocol: 'mcp' },
  ]);
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: { env: { GOV_SELLER_TOKEN: seller.authToken, GOVERNANCE_TOKEN: governance.authToken } },
  });
  const mediaBuys = new MediaBuyClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    knownSeller: (id) => sellerRegistry.has(id),
  });
  campaigns = new CampaignClient({ client: stack.client, taskQueue: stack.taskQueue });
  seller.scripted.setDefaultScript('get_products', [
    { status: 'completed', bare: true, payload: { products: [productOf('gov', 10)] } },
  ]);
  const app = express();
  app.use(createGateway({ orchestrator: stack.orchestrator, mediaBuyRouter: createMediaBuyRouter({ mediaBuys }) }));
  server.on('request', app);
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  await governance?.close();
  await seller?.close();
});

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${base}${path}`, {
    method,
    ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

/** A governed buy with its own plan and product id (so the seller's log can be searched for it). */
async function createGovernedBuy(planId: string, budget = 4_000): Promise<{ id: string; productId: string }> {
  const now = Date.now();
  const productId = `prod_${planId}`;
  const created = await call('POST', '/v1/media-buys', {
    buy_key: `buy-${planId}`,
    agent_id: 'gov-seller',
    params: {
      account: { account_id: 'acct_gov' },
      brand: { domain: 'acme.example' },
      start_time: new Date(now - HOUR).toISOString(),
      end_time: new Date(now + 30 * DAY).toISOString(),
      packages: [{ product_id: productId, pricing_option_id: 'cpm', budget }],
    },
    requested_by: 'planner@buyer',
    governance: { agent_id: 'governance', plan_id: planId },
  });
  expect(created.status).toBe(202);
  return { id: created.body.id as string, productId };
}

function sellerCreatesFor(productId: string) {
  return seller.scripted
    .callsTo('create_media_buy')
    .filter((entry) => JSON.stringify(entry.args.packages ?? []).includes(productId));
}

function checksFor(planId: string) {
  return governance.callsTo('check_governance').filter((entry) => entry.args.plan_id === planId);
}

async function viewWhen(id: string, ready: (view: Record<string, any>) => boolean, timeoutMs = 40_000) {
  return eventually(async () => {
    const view = (await call('GET', `/v1/media-buys/${id}`)).body;
    return ready(view) ? view : undefined;
  }, timeoutMs);
}

test('a denied spend makes no buy: the seller is never called and the buy ends with the explanation', async () => {
  const planId = `plan-deny-${randomUUID().slice(0, 8)}`;
  governance.setPlanMode(planId, 'deny');
  const { id, productId } = await createGovernedBuy(planId);
  const view = await viewWhen(id, (body) => body.status === 'create_failed');
  expect(view.failure).toMatchObject({
    reason: 'governance_denied',
    error: { code: 'GOVERNANCE_DENIED' },
  });
  expect(view.failure.message).toContain(`does not authorise this create_media_buy`);
  expect(view.governance).toMatchObject({ status: 'denied', agent_id: 'governance', plan_id: planId });
  expect(view.governance.checks).toHaveLength(1);
  expect(view.governance.checks[0]).toMatchObject({ verdict: 'denied', tool: 'create_media_buy' });
  expect(view.media_buy_id).toBeNull();
  expect(sellerCreatesFor(productId)).toHaveLength(0);
  // The intent check carried the whole create payload, as the seller would have received it.
  const [check] = checksFor(planId);
  expect(check.args).toMatchObject({ tool: 'create_media_buy', payload: { packages: [{ product_id: productId }] } });
  expect(check.args.governance_context).toBeUndefined();
});

test('approved: the seller receives the governance_context, and report_plan_outcome follows the create', async () => {
  const planId = `plan-ok-${randomUUID().slice(0, 8)}`;
  governance.setPlanMode(planId, 'approve');
  const { id, productId } = await createGovernedBuy(planId, 4_000);
  const view = await viewWhen(id, (body) => body.status === 'pending_creatives');
  const [check] = checksFor(planId);
  const issued = check.answer.governance_context as string;
  expect(governanceContextClaims(issued)).toMatchObject({ sub: planId, phase: 'intent', tool: 'create_media_buy' });
  const creates = sellerCreatesFor(productId);
  expect(creates.length).toBeGreaterThanOrEqual(1);
  expect(creates.every((entry) => entry.args.governance_context === issued)).toBe(true);
  expect(view.governance).toMatchObject({ status: 'approved' });
  expect(view.governance.checks[0]).toMatchObject({ verdict: 'approved', has_governance_context: true });
  // The token is for the seller, not for HTTP readers of the buy.
  expect(JSON.stringify(view)).not.toContain(issued);

  const outcome = await eventually(async () =>
    governance.callsTo('report_plan_outcome').find((entry) => entry.args.plan_id === planId),
  );
  expect(outcome.args).toMatchObject({
    outcome: 'completed',
    check_id: check.answer.check_id,
    governance_context: issued,
    seller_response: { seller_reference: view.media_buy_id, committed_budget: 4_000 },
  });
  expect(typeof outcome.args.idempotency_key).toBe('string');
  const reported = await viewWhen(id, (body) => body.governance.outcomes.length > 0);
  expect(reported.governance.outcomes[0]).toMatchObject({ action: 'create', outcome: 'completed' });
});

test('machine-applicable conditions are applied and re-checked: the seller gets the capped budget', async () => {
  const planId = `plan-cap-${randomUUID().slice(0, 8)}`;
  governance.setPlanMode(planId, 'conditions');
  const { id, productId } = await createGovernedBuy(planId, 8_000);
  const view = await viewWhen(id, (body) => body.status === 'pending_creatives');
  const checks = checksFor(planId);
  expect(checks.map((entry) => entry.answer.verdict)).toEqual(['conditions', 'approved']);
  // The re-check carried the adjusted payload and the context of the first answer.
  expect(checks[1].args.payload).toMatchObject({ packages: [{ product_id: productId, budget: 5_000 }] });
  expect(checks[1].args.governance_context).toBe(checks[0].answer.governance_context);
  const creates = sellerCreatesFor(productId);
  expect(creates.length).toBeGreaterThanOrEqual(1);
  expect(creates[0].args.packages).toEqual([expect.objectContaining({ product_id: productId, budget: 5_000 })]);
  expect(creates[0].args.governance_context).toBe(checks[1].answer.governance_context);
  expect(view.governance.checks.map((entry: any) => [entry.verdict, entry.applied ?? null])).toEqual([
    ['conditions', 'machine'],
    ['approved', null],
  ]);
});

test('conditions a person must decide: the buy waits, the decision is recorded, then it proceeds', async () => {
  const planId = `plan-person-${randomUUID().slice(0, 8)}`;
  governance.setPlanMode(planId, 'advisory-conditions');
  const { id, productId } = await createGovernedBuy(planId);
  const waiting = await viewWhen(id, (body) => body.governance?.status === 'awaiting_decision');
  expect(waiting.status).toBe('creating');
  expect(waiting.governance.pending).toMatchObject({
    action: 'create',
    tool: 'create_media_buy',
    conditions: [{ field: 'payload.brand_safety_ack' }],
  });
  expect(waiting.governance.pending.explanation).toContain('Brand safety');
  expect(sellerCreatesFor(productId)).toHaveLength(0);

  // A decision without who decides is refused before it reaches the workflow.
  const anonymous = await call('POST', `${`/v1/media-buys/${id}`}/governance/decision`, { decision: 'approve' });
  expect(anonymous.status).toBe(400);
  expect(anonymous.body.error).toMatchObject({ code: 'INVALID_REQUEST', field: 'decided_by' });

  const decided = await call('POST', `/v1/media-buys/${id}/governance/decision`, {
    decision: 'approve',
    decided_by: 'brand-safety@buyer',
    note: 'exclusions confirmed',
    values: { 'payload.brand_safety_ack': true },
  });
  expect(decided.status).toBe(200);
  expect(decided.body).toMatchObject({ accepted: true, action: 'create', decision: 'approve' });
  const view = await viewWhen(id, (body) => body.status === 'pending_creatives');
  expect(view.governance.decisions).toEqual([
    expect.objectContaining({ decision: 'approve', decided_by: 'brand-safety@buyer', action: 'create' }),
  ]);
  expect(view.governance.pending).toBeUndefined();
  const checks = checksFor(planId);
  expect(checks.map((entry) => entry.answer.verdict)).toEqual(['conditions', 'approved']);
  expect(checks[1].args.payload).toMatchObject({ brand_safety_ack: true });
  expect(sellerCreatesFor(productId)[0].args.brand_safety_ack).toBe(true);

  // Nothing waits any more: a second decision is refused.
  const again = await call('POST', `/v1/media-buys/${id}/governance/decision`, {
    decision: 'decline',
    decided_by: 'late@buyer',
  });
  expect(again.status).toBe(409);
  expect(again.body.error.code).toBe('INVALID_STATE');
});

test('a person who declines the conditions stops the spend before the seller', async () => {
  const planId = `plan-decline-${randomUUID().slice(0, 8)}`;
  governance.setPlanMode(planId, 'advisory-conditions');
  const { id, productId } = await createGovernedBuy(planId);
  await viewWhen(id, (body) => body.governance?.status === 'awaiting_decision');
  const decided = await call('POST', `/v1/media-buys/${id}/governance/decision`, {
    decision: 'decline',
    decided_by: 'cmo@buyer',
  });
  expect(decided.status).toBe(200);
  const view = await viewWhen(id, (body) => body.status === 'create_failed');
  expect(view.failure.error.code).toBe('GOVERNANCE_DECLINED');
  expect(view.failure.message).toContain('cmo@buyer declined');
  expect(sellerCreatesFor(productId)).toHaveLength(0);
});

test('an async review (submitted) is waited for like any operation and completes', async () => {
  const planId = `plan-review-${randomUUID().slice(0, 8)}`;
  governance.setPlanMode(planId, 'review');
  const { id, productId } = await createGovernedBuy(planId);
  const view = await viewWhen(id, (body) => body.status === 'pending_creatives', 60_000);
  const review = governance.reviews().find((task) => task.planId === planId)!;
  expect(review).toMatchObject({ status: 'completed' });
  expect(review.polls).toBeGreaterThanOrEqual(1);
  const [check] = checksFor(planId);
  expect(check.answer).toMatchObject({ status: 'submitted', task_id: review.taskId });
  const token = review.result!.governance_context as string;
  expect(sellerCreatesFor(productId)[0].args.governance_context).toBe(token);
  expect(view.governance.checks[0]).toMatchObject({ verdict: 'approved', round: 1 });
});

test('a budget raise is checked (and a denied one never reaches the seller); a cut is not checked', async () => {
  const planId = `plan-change-${randomUUID().slice(0, 8)}`;
  governance.setPlanMode(planId, 'approve');
  const { id } = await createGovernedBuy(planId, 4_000);
  const created = await viewWhen(id, (body) => body.status === 'pending_creatives');
  const mediaBuyId = created.media_buy_id as string;
  const packageId = created.packages[0].package_id as string;
  const createContext = checksFor(planId)[0].answer.governance_context as string;

  const raised = await call('POST', `/v1/media-buys/${id}/changes`, {
    kind: 'budget',
    requested_by: 'optimizer@buyer',
    budgets: { [packageId]: 6_000 },
  });
  expect(raised.status).toBe(200);
  expect(raised.body.outcome).toBe('applied');
  let checks = checksFor(planId);
  expect(checks).toHaveLength(2);
  expect(checks[1].args).toMatchObject({
    tool: 'update_media_buy',
    governance_context: createContext,
    payload: { media_buy_id: mediaBuyId, packages: [{ package_id: packageId, budget: 6_000 }] },
  });
  const updates = seller.buy(mediaBuyId)!.updates;
  expect(updates).toHaveLength(1);
  expect(updates[0].args.governance_context).toBe(checks[1].answer.governance_context);

  const cut = await call('POST', `/v1/media-buys/${id}/changes`, {
    kind: 'budget',
    requested_by: 'optimizer@buyer',
    budgets: { [packageId]: 3_000 },
  });
  expect(cut.body.outcome).toBe('applied');
  expect(checksFor(planId)).toHaveLength(2);
  expect(seller.buy(mediaBuyId)!.updates).toHaveLength(2);
  expect(seller.buy(mediaBuyId)!.updates[1].args.governance_context).toBeUndefined();

  // Chosen per request: this raise (to 9,000) is denied, whatever the plan's mode.
  governance.modeFor((args) =>
    args.tool === 'update_media_buy' && JSON.stringify(args.payload).includes('"budget":9000') ? 'deny' : undefined,
  );
  const refused = await call('POST', `/v1/media-buys/${id}/changes`, {
    kind: 'budget',
    requested_by: 'optimizer@buyer',
    budgets: { [packageId]: 9_000 },
  });
  governance.modeFor(undefined);
  expect(refused.status).toBe(409);
  expect(refused.body).toMatchObject({ outcome: 'refused', error: { code: 'GOVERNANCE_DENIED' } });
  checks = checksFor(planId);
  expect(checks).toHaveLength(3);
  expect(checks[2].answer.verdict).toBe('denied');
  expect(seller.buy(mediaBuyId)!.updates).toHaveLength(2);
  // Reported: the create and the checked raise (the cut was not governed; the denied raise never reached the seller).
  const reported = await eventually(async () => {
    const calls = governance.callsTo('report_plan_outcome').filter((entry) => entry.args.plan_id === planId);
    return calls.length >= 2 ? calls : undefined;
  });
  expect(reported.map((entry) => entry.args.check_id).sort()).toEqual(
    [checks[0].answer.check_id, checks[1].answer.check_id].sort(),
  );
  expect(reported.every((entry) => entry.args.outcome === 'completed')).toBe(true);
});

test('a buy the seller rejects after an approved check is reported to the governance agent as failed', async () => {
  const planId = `plan-rejected-${randomUUID().slice(0, 8)}`;
  governance.setPlanMode(planId, 'approve');
  seller.scripted.script('create_media_buy', [
    {
      status: 'rejected',
      message: 'The seller does not accept this advertiser.',
      errors: [{ code: 'POLICY_VIOLATION', message: 'advertiser category not accepted', recovery: 'terminal' }],
    },
  ]);
  const { id } = await createGovernedBuy(planId);
  const view = await viewWhen(id, (body) => body.status === 'rejected');
  expect(view.governance.status).toBe('approved');
  const outcome = await eventually(async () =>
    governance.callsTo('report_plan_outcome').find((entry) => entry.args.plan_id === planId),
  );
  expect(outcome.args).toMatchObject({
    outcome: 'failed',
    check_id: checksFor(planId)[0].answer.check_id,
    governance_context: checksFor(planId)[0].answer.governance_context,
    error: { code: 'POLICY_VIOLATION' },
  });
  expect(outcome.args.seller_response).toBeUndefined();
});

test('a governed campaign syncs its plan while planning, and its buy is checked against that plan', async () => {
  const campaignKey = `gov-campaign-${randomUUID().slice(0, 8)}`;
  const now = Date.now();
  const flight = { startTime: new Date(now - HOUR).toISOString(), endTime: new Date(now + 20 * DAY).toISOString() };
  const { campaignId } = await campaigns.create({
    campaignKey,
    brief: 'Spring launch: display for adults 25-54 in the US',
    totalBudget: 4_000,
    currency: 'USD',
    flight,
    sellerIds: ['gov-seller'],
    timeBudgetMs: 10_000,
    allocation: { kind: 'top_ranked' },
    buyParams: { account: { account_id: 'acct_gov' }, brand: { domain: 'acme.example' } },
    requestedBy: 'planner@buyer',
    governance: { sellerId: 'governance', plan: { countries: ['US'] } },
  });
  const planned = await eventually(async () => {
    const state = await campaigns.state(campaignId);
    return state.phase === 'awaiting_approval' ? state : undefined;
  });
  // The plan reached the agent before any spend was approved.
  expect(planned.governance).toMatchObject({
    sellerId: 'governance',
    planId: campaignKey,
    status: 'synced',
    version: 1,
  });
  const [sync] = governance.callsTo('sync_plans').filter((entry) => JSON.stringify(entry.args).includes(campaignKey));
  expect(sync.args.plans).toEqual([
    expect.objectContaining({
      plan_id: campaignKey,
      objectives: 'Spring launch: display for adults 25-54 in the US',
      brand: { domain: 'acme.example' },
      countries: ['US'],
      budget: expect.objectContaining({ total: 4_000, currency: 'USD' }),
      flight: { start: flight.startTime, end: flight.endTime },
      ext: { adcp_orchestrator: { sellers: ['gov-seller'] } },
    }),
  ]);
  expect(governance.plans().get(campaignKey)?.version).toBe(1);
  expect(checksFor(campaignKey)).toHaveLength(0);

  await campaigns.approve(campaignId, { approvedBy: 'cfo@buyer' });
  const view = await eventually(async () => {
    const current = await campaigns.view(campaignId);
    const buy = current.buys[0];
    return buy?.mediaBuyId && buy.governance?.status === 'approved' ? current : undefined;
  });
  const [check] = checksFor(campaignKey);
  expect(check.args).toMatchObject({ tool: 'create_media_buy', plan_id: campaignKey });
  const creates = sellerCreatesFor('gov_display');
  const mine = creates.filter((entry) => entry.args.governance_context === check.answer.governance_context);
  expect(mine.length).toBeGreaterThanOrEqual(1);
  expect(view.buys[0]).toMatchObject({ sellerId: 'gov-seller', status: 'pending_creatives' });
  for (const id of [campaignId, view.buys[0].workflowId])
    await stack.client.workflow
      .getHandle(id)
      .terminate('test done')
      .catch(() => undefined);
});

test('an unreachable governance agent closes the gate: no verdict, no call to the seller', async () => {
  const planId = `plan-down-${randomUUID().slice(0, 8)}`;
  const productId = `prod_${planId}`;
  const now = Date.now();
  const created = await call('POST', '/v1/media-buys', {
    buy_key: `buy-${planId}`,
    agent_id: 'gov-seller',
    params: {
      start_time: new Date(now - HOUR).toISOString(),
      end_time: new Date(now + 30 * DAY).toISOString(),
      packages: [{ product_id: productId, pricing_option_id: 'cpm', budget: 1_000 }],
    },
    governance: { agent_id: 'governance-down', plan_id: planId },
  });
  expect(created.status).toBe(202);
  const view = await viewWhen(created.body.id as string, (body) => body.status === 'create_failed', 110_000);
  expect(view.failure.error.code).toBe('GOVERNANCE_UNAVAILABLE');
  expect(view.governance).toMatchObject({ status: 'unavailable', checks: [{ verdict: 'error' }] });
  expect(sellerCreatesFor(productId)).toHaveLength(0);
}, 120_000);
