/**
 * A campaign survives its worker: the real worker process (`npm run worker`) SIGKILLed twice while the approved
 * campaign is starting its buys and the sellers are creating them (their answers held back). Each chosen seller still
 * ends with exactly one buy, the rejected one with none, and the campaign goes live with every buy accounted for.
 */
import { randomUUID } from 'node:crypto';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@temporalio/client';
import { CampaignClient } from '../../client/campaign-client';
import { dataConverter } from '../../client/payload-codec';
import type { ManagedProcess } from '../../scripts/lib/processes';
import type { CampaignState } from '../../contract/campaign';
import { type CampaignSellers, startCampaignSellers } from '../fixtures/campaign-sellers';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { eventually, testAddress } from '../harness/temporal';
import { startWorkerProcess, writeAgentsFile } from '../harness/worker-process';
import { connectGrpc } from '../../config/grpc-connection';

const DAY = 86_400_000;
let sellers: CampaignSellers;
let steady: MediaBuySeller;
const running: ManagedProcess[] = [];

beforeAll(async () => {
  [sellers, steady] = await Promise.all([startCampaignSellers(), startMediaBuySeller({ name: 'steady' })]);
});

afterAll(async () => {
  await Promise.all(running.map((worker) => worker.stop('SIGKILL')));
  await Promise.all([sellers?.close(), steady?.close()]);
  await closeMCPConnections();
});

test('the approved campaign makes exactly one buy per chosen seller while the worker is SIGKILLed twice', async () => {
  const taskQueue = `campaign-kill-${randomUUID()}`;
  const agents = [
    ...sellers.agents.filter((agent) => agent.id === 'fast' || agent.id === 'rejecting'),
    { id: 'steady', url: steady.url, protocol: 'mcp' as const, token_env: 'STEADY_TOKEN' },
  ];
  const agentsFile = writeAgentsFile(agents);
  const env = { ...sellers.env, STEADY_TOKEN: steady.authToken };
  const connection = await connectGrpc({ address: testAddress() });
  const client = new Client({ connection, dataConverter: dataConverter() });
  const campaigns = new CampaignClient({ client, taskQueue });
  const start = () => startWorkerProcess({ address: testAddress(), taskQueue, agentsFile, env });
  try {
    const first = await start();
    running.push(first);
    const campaignKey = `kill-${randomUUID()}`;
    const { campaignId } = await campaigns.create({
      campaignKey,
      brief: 'Display, through worker crashes',
      totalBudget: 9_000,
      flight: {
        startTime: new Date(Date.now() + 3 * DAY).toISOString(),
        endTime: new Date(Date.now() + 33 * DAY).toISOString(),
      },
      sellerIds: ['fast', 'steady', 'rejecting'],
      timeBudgetMs: 5_000,
      allocation: { kind: 'top_ranked' },
      requestedBy: 'planner@buyer',
    });
    const proposed = await eventually(async () => {
      const state = await campaigns.state(campaignId);
      return state.phase === 'awaiting_approval' ? state : undefined;
    }, 120_000);
    expect(proposed.selection).toMatchObject({ byPolicy: true });
    expect(proposed.selection!.lines.map((line) => line.sellerId).sort()).toEqual(['fast', 'rejecting', 'steady']);
    // The sellers create the buys at once and hold their answers: the worker dies with the creates in flight.
    sellers.fast.scripted.fault('create_media_buy', { kind: 'slow-response', ms: 4_000 }, { times: 2 });
    steady.scripted.fault('create_media_buy', { kind: 'slow-response', ms: 6_000 }, { times: 2 });
    await campaigns.approve(campaignId, { approvedBy: 'cfo@buyer' });

    await eventually(async () => (sellers.fast.buys().length > 0 ? true : undefined), 60_000, 20);
    await first.stop('SIGKILL');

    const second = await start();
    running.push(second);
    await eventually(async () => (steady.buys().length > 0 ? true : undefined), 60_000, 20);
    await second.stop('SIGKILL');

    const third = await start();
    running.push(third);
    const live = await eventually(async () => {
      const view = await campaigns.view(campaignId);
      const statuses = Object.fromEntries(view.buys.map((buy) => [buy.sellerId, buy.status]));
      return statuses.fast === 'pending_creatives' &&
        statuses.steady === 'pending_creatives' &&
        statuses.rejecting === 'rejected'
        ? view
        : undefined;
    }, 180_000);
    expect(live.state.phase).toBe<CampaignState['phase']>('live');
    expect(Object.keys(live.state.buys).sort()).toEqual(['fast', 'rejecting', 'steady']);
    expect(sellers.fast.buys()).toHaveLength(1);
    expect(steady.buys()).toHaveLength(1);
    expect(sellers.rejecting.buys()).toHaveLength(0);
    // The creates were sent again after each crash under the same key, and answered from the seller's idempotency store.
    const fastCreates = sellers.fast.scripted.callsTo('create_media_buy');
    expect(new Set(fastCreates.map((call) => call.args.idempotency_key)).size).toBe(1);
    const history = await client.workflow.getHandle(campaignId).fetchHistory();
    console.info(
      `campaign through 2 SIGKILLs: ${fastCreates.length} create call(s) at fast (${fastCreates.filter((call) => call.replayed).length} replayed), ` +
        `${steady.scripted.callsTo('create_media_buy').length} at steady; campaign history ${history.events?.length ?? 0} events`,
    );

    const canceled = await campaigns.change(campaignId, { kind: 'cancel', requestedBy: 'ops@buyer' });
    expect(canceled.buys).toMatchObject({ fast: { outcome: 'applied' }, steady: { outcome: 'applied' } });
    await third.stop();
  } finally {
    await connection.close();
  }
}, 600_000);
