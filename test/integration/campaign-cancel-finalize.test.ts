/**
 * A cancel that reaches a campaign while a seller's draft proposal is being finalized (workflows/campaign/proposals.ts: the
 * get_products refine call runs as a child operation before any media buy exists). Real dev server, the proposal
 * seller on loopback (test/fixtures/campaign-sellers/proposal-seller.ts) whose finalize call the scripted seller's
 * `hang` fault holds open.
 *
 * Whatever wins, the campaign ends honestly: canceled with nothing bought (the finalize operation canceled, no
 * create_media_buy, nothing committed, the cancel answered `applied`), or, when the finalization won, with the one
 * buy it made canceled at the seller. Never a buy started after the cancel, never two.
 */
import { randomUUID } from 'node:crypto';
import { CampaignClient } from '../../client/campaign-client';
import { SellerCapabilitiesClient } from '../../client/seller-capabilities-client';
import { DEMO_ACCOUNT, DEMO_BRAND } from '../../scripts/lib/demo-seller';
import type { CampaignState } from '../../contract/campaign';
import { type ProposalSeller, startProposalSeller } from '../fixtures/campaign-sellers/proposal-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const DAY = 86_400_000;
let drafty: ProposalSeller;
let stack: TestStack;
let capabilities: SellerCapabilitiesClient;
let campaigns: CampaignClient;

beforeAll(async () => {
  drafty = await startProposalSeller({ name: 'drafty', proposalStatus: 'draft' });
  const sellerRegistry = registry([{ id: 'drafty', url: drafty.url, protocol: 'mcp', token_env: 'DRAFTY_TOKEN' }]);
  // A held call ends at its call timeout: shorter here than the default minute, so the held finalize ends within the
  // test, and long enough that the cancel lands before it (a timed-out call would be made again, and answered).
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: { env: { DRAFTY_TOKEN: drafty.authToken }, callTimeoutMs: 20_000 },
  });
  capabilities = new SellerCapabilitiesClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    sellers: sellerRegistry,
  });
  campaigns = new CampaignClient({ client: stack.client, taskQueue: stack.taskQueue, sellers: capabilities });
}, 300_000);

afterAll(async () => {
  await stack?.client.workflow
    .getHandle(capabilities?.workflowId('drafty'))
    .terminate('test over')
    .catch(() => undefined);
  await stack?.close();
  await drafty?.close();
});

/** A campaign over the draft-proposal seller, its proposal selected and the selection approved. */
async function approvedCampaign(): Promise<{ id: string; campaignKey: string }> {
  const campaignKey = `cancel-finalize-${randomUUID()}`;
  const start = Date.now() + 3 * DAY;
  const { campaignId: id } = await campaigns.create({
    campaignKey,
    brief: 'Display and video for a spring outdoor campaign',
    totalBudget: 30_000,
    currency: 'USD',
    flight: { startTime: new Date(start).toISOString(), endTime: new Date(start + 30 * DAY).toISOString() },
    sellerIds: ['drafty'],
    timeBudgetMs: 8_000,
    discoveryParams: { account: DEMO_ACCOUNT, brand: DEMO_BRAND },
    buyParams: { account: DEMO_ACCOUNT, brand: DEMO_BRAND },
    requestedBy: 'planner@buyer',
  });
  await eventually(async () => ((await campaigns.state(id)).phase === 'selecting' ? true : undefined), 120_000);
  await campaigns.select(id, {
    lines: [],
    proposals: [{ sellerId: 'drafty', proposalId: 'drafty_plan_1', budget: 12_000 }],
    selectedBy: 'planner@buyer',
  });
  return { id, campaignKey };
}

/** The finalize calls (get_products refine) that reached the seller so far. */
function finalizeCalls() {
  return drafty.scripted.callsTo('get_products').filter((call) => call.args.buying_mode === 'refine');
}

async function settled(workflowId: string): Promise<{ status: string; pendingActivities: number }> {
  return eventually(async () => {
    const described = await stack.client.workflow.getHandle(workflowId).describe();
    if (described.status.name === 'RUNNING') return undefined;
    return { status: described.status.name, pendingActivities: described.raw.pendingActivities?.length ?? 0 };
  }, 60_000);
}

async function finalState(id: string): Promise<CampaignState> {
  return stack.client.workflow.getHandle(id).result();
}

test('a cancel while the proposal is being finalized: the finalize call is abandoned, nothing is bought, the campaign ends canceled', async () => {
  const { id, campaignKey } = await approvedCampaign();
  const before = finalizeCalls().length;
  // The seller holds the finalize call open (and drops it unprocessed if it ever wakes).
  drafty.scripted.fault('get_products', { kind: 'hang', ms: 120_000, then: 'drop' });
  await campaigns.approve(id, { approvedBy: 'cfo@buyer' });
  await eventually(async () => (finalizeCalls().length > before ? true : undefined));
  const finalizing = await campaigns.state(id);
  expect(finalizing.buys.drafty.proposal?.finalized).toHaveLength(1);
  const finalizeOperationId = finalizing.buys.drafty.proposal!.finalized[0].operationId;

  const answer = await campaigns.change(id, { kind: 'cancel', requestedBy: 'cfo@buyer', reason: 'plan withdrawn' });
  // Nothing existed at the seller to cancel: the cancel did all there was to do.
  expect(answer.outcome).toBe('applied');
  expect(answer.buys.drafty).toMatchObject({ outcome: 'not_needed', status: 'canceled' });

  const ended = await finalState(id);
  expect(ended.phase).toBe('canceled');
  expect(ended.committedBudget).toBe(0);
  expect(ended.buys.drafty).toMatchObject({ finalStatus: 'canceled', committedBudget: 0 });
  expect(ended.buys.drafty.finalMessage).toContain('canceled');
  expect(ended.changes.at(-1)).toMatchObject({ kind: 'cancel', outcome: 'applied' });
  // The finalize operation was canceled, and had ended (its seller call with it) when the campaign closed.
  expect(await settled(finalizeOperationId)).toEqual({ status: 'CANCELLED', pendingActivities: 0 });
  const closes = async (workflowId: string) =>
    (await stack.client.workflow.getHandle(workflowId).describe()).closeTime!.getTime();
  expect(await closes(finalizeOperationId)).toBeLessThanOrEqual(await closes(id));
  // No buy was started, none was made.
  await expect(stack.client.workflow.getHandle(`adcp-media-buy-${campaignKey}.drafty`).describe()).rejects.toThrow(
    /not found/i,
  );
  expect(drafty.creates()).toEqual([]);
  expect(drafty.buys()).toEqual([]);
}, 240_000);

test('a cancel racing the finalize answer: canceled with nothing bought, or the one buy made is canceled at the seller', async () => {
  const { id, campaignKey } = await approvedCampaign();
  const before = finalizeCalls().length;
  const buysBefore = drafty.buys().length;
  // A short hold: the answer comes back about when the cancel arrives (either may win; both must end honestly).
  drafty.scripted.fault('get_products', { kind: 'hang', ms: 1_500 });
  await campaigns.approve(id, { approvedBy: 'cfo@buyer' });
  await eventually(async () => (finalizeCalls().length > before ? true : undefined), 60_000, 25);
  await new Promise((resolve) => setTimeout(resolve, 1_400));
  const answer = await campaigns.change(id, { kind: 'cancel', requestedBy: 'cfo@buyer' });

  const ended = await finalState(id);
  expect(ended.phase).toBe('canceled');
  const made = drafty.buys().slice(buysBefore);
  expect(made.length).toBeLessThanOrEqual(1);
  const buy = ended.buys.drafty;
  if (made.length === 0) {
    // The cancel won: nothing bought, nothing committed, no buy workflow.
    expect(answer.outcome).toBe('applied');
    expect(buy).toMatchObject({ finalStatus: 'canceled', committedBudget: 0 });
    expect(ended.committedBudget).toBe(0);
    await expect(stack.client.workflow.getHandle(buy.workflowId).describe()).rejects.toThrow(/not found/i);
  } else {
    // The finalization won and the buy was made: the cancel reached it at the seller.
    expect(answer.buys.drafty).toMatchObject({ outcome: 'applied' });
    expect(buy.workflowId).toBe(`adcp-media-buy-${campaignKey}.drafty`);
    const mediaBuy = await eventually(async () => {
      const view = await campaigns.view(id);
      const entry = view.buys.find((candidate) => candidate.sellerId === 'drafty');
      return entry?.status === 'canceled' ? entry : undefined;
    });
    expect(mediaBuy.mediaBuyId).toBe(made[0].mediaBuyId);
  }
  // Every finalize operation of this campaign has ended; none is left running at the seller.
  for (const record of buy.proposal!.finalized) {
    const { pendingActivities } = await settled(record.operationId);
    expect(pendingActivities).toBe(0);
  }
}, 240_000);
