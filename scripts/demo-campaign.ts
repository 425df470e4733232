/**
 * `npm run demo:campaign`: a campaign across five sellers, end to end. Beside a running stack (`npm start`, or the
 * Temporal server TEMPORAL_ADDRESS names) it runs there, so the campaign shows in that server's Web UI; with none
 * answering it starts a Temporal dev server of its own (headless, on a free port). Either way it brings five
 * media-buy fixture sellers (real @adcp/sdk servers on loopback, test/fixtures), a worker in this process on a task
 * queue of its own, and the typed client. One brief goes to every seller (discovery within a time budget), the
 * top_ranked policy picks each seller's best product, a person approves, and the campaign starts one buy per seller
 * and syncs its creative library to each (through each buy's workflow), so every buy leaves pending_creatives and goes
 * active (the flight starts now). It prints each phase as it happens, then the wall time from brief to every buy
 * active and the campaign's history size at that point. Everything it started is stopped at the end.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { CampaignClient } from '../client/campaign-client';
import { dataConverter } from '../client/payload-codec';
import { SellerCapabilitiesClient } from '../client/seller-capabilities-client';
import { type SellerConfig, SellerRegistry } from '../config/sellers';
import { createOperationWorker } from '../workers/worker';
import { temporalSettings } from '../config/temporal-connection';
import { ensureSearchAttributes, freePort, startDevServer } from './lib/dev-server';

/** The Temporal server of a running stack (TEMPORAL_ADDRESS, else npm start's 127.0.0.1:7233), if one answers. */
async function runningTemporal(): Promise<{ address: string; namespace: string } | undefined> {
  const { connectionOptions, namespace } = temporalSettings(process.env);
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ ...connectionOptions, connectTimeout: '2s' });
    await connection.withDeadline(Date.now() + 3_000, () => connection!.workflowService.getSystemInfo({}));
    await ensureSearchAttributes(connection, namespace);
    return { address: connectionOptions.address, namespace };
  } catch {
    return undefined;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

const SELLERS = ['north', 'south', 'east', 'west', 'central'];
const DAY = 86_400_000;

async function main(): Promise<void> {
  // The demo prints its own lines; the worker's go to the log only when something is wrong.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const { startMediaBuySeller } = await import('../test/fixtures/media-buy-seller');
  const { productOf } = await import('../test/fixtures/campaign-sellers');
  const stops: (() => Promise<unknown>)[] = [];
  let temporal = await runningTemporal();
  if (temporal) {
    console.log(
      `demo:campaign: using the Temporal server at ${temporal.address} (a running stack: the campaign shows in its Web UI${process.env.TEMPORAL_ADDRESS ? '' : ', http://127.0.0.1:8233'}); starting ${SELLERS.length} sellers`,
    );
  } else {
    const port = await freePort();
    console.log(`demo:campaign: starting a Temporal dev server on 127.0.0.1:${port} and ${SELLERS.length} sellers`);
    const server = await startDevServer({ port, headless: true });
    stops.push(() => server.stop());
    temporal = { address: server.address, namespace: server.namespace };
  }
  const sellers = await Promise.all(SELLERS.map((name) => startMediaBuySeller({ name })));
  stops.push(...sellers.map((seller) => () => seller.close()));
  try {
    sellers.forEach((seller, index) =>
      seller.scripted.setDefaultScript('get_products', [
        { status: 'completed', bare: true, payload: { products: [productOf(SELLERS[index], 8 + index)] } },
      ]),
    );
    const agents: SellerConfig[] = sellers.map((seller, index) => ({
      id: SELLERS[index],
      url: seller.url,
      protocol: 'mcp',
      token_env: `DEMO_${SELLERS[index].toUpperCase()}_TOKEN`,
    }));
    const env = Object.fromEntries(sellers.map((seller, index) => [agents[index].token_env!, seller.authToken]));
    const registry = new SellerRegistry(agents, 'demo:campaign sellers');
    const taskQueue = `demo-campaign-${randomUUID()}`;
    const { connectionOptions } = temporalSettings(process.env);
    const connection = await Connection.connect({ ...connectionOptions, address: temporal.address });
    stops.unshift(() => connection.close());
    const client = new Client({ connection, namespace: temporal.namespace, dataConverter: dataConverter() });
    const workerConnection = await NativeConnection.connect({ ...connectionOptions, address: temporal.address });
    console.log('demo:campaign: bundling the workflows and starting a worker');
    const worker = await createOperationWorker({
      connection: workerConnection,
      namespace: temporal.namespace,
      taskQueue,
      activities: { sellers: registry, env: { ...process.env, ...env } },
      client,
    });
    const running = worker.run();
    stops.unshift(async () => {
      worker.shutdown();
      await running.catch(() => undefined);
      await workerConnection.close();
    });
    const campaigns = new CampaignClient({
      client,
      taskQueue,
      sellers: new SellerCapabilitiesClient({ client, taskQueue, sellers: registry }),
    });

    const startedAt = Date.now();
    const campaignKey = `demo-${randomUUID().slice(0, 8)}`;
    const { campaignId } = await campaigns.create({
      campaignKey,
      brief: 'Display for a spring outdoor campaign, five regions',
      totalBudget: 50_000,
      currency: 'USD',
      // The flight starts now: a buy with its creatives in goes active at once.
      flight: {
        startTime: new Date(startedAt).toISOString(),
        endTime: new Date(startedAt + 30 * DAY).toISOString(),
      },
      creatives: [
        {
          creative_id: 'spring_display_300x250',
          name: 'Spring outdoor display',
          format_id: { agent_url: 'https://creative.adcontextprotocol.org', id: 'display_300x250' },
          assets: { image: { url: 'https://cdn.example/spring-300x250.png', width: 300, height: 250 } },
        },
      ],
      sellerIds: SELLERS,
      timeBudgetMs: 5_000,
      allocation: { kind: 'top_ranked' },
      requestedBy: 'planner@buyer',
    });
    console.log(`demo:campaign: campaign ${campaignId} (search attribute AdcpCampaign = "${campaignKey}")`);
    let phase = '';
    const wait = async <T>(probe: () => Promise<T | undefined>): Promise<T> => {
      for (;;) {
        const state = await campaigns.state(campaignId);
        if (state.phase !== phase) console.log(`  ${new Date().toISOString()}  phase ${(phase = state.phase)}`);
        const value = await probe();
        if (value !== undefined) return value;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    };
    const proposed = await wait(async () => {
      const state = await campaigns.state(campaignId);
      return state.phase === 'awaiting_approval' ? state : undefined;
    });
    for (const line of proposed.selection!.lines)
      console.log(`  selected by policy: ${line.sellerId} ${line.productId} budget ${line.budget}`);
    await campaigns.approve(campaignId, { approvedBy: 'cfo@buyer', note: 'demo' });
    let createdMs: number | undefined;
    const active = await wait(async () => {
      const view = await campaigns.view(campaignId);
      if (view.buys.length === SELLERS.length && view.buys.every((buy) => buy.mediaBuyId))
        createdMs ??= Date.now() - startedAt;
      return view.buys.length === SELLERS.length && view.buys.every((buy) => buy.status === 'active')
        ? view
        : undefined;
    });
    const wallMs = Date.now() - startedAt;
    const history = await client.workflow.getHandle(campaignId).fetchHistory();
    // The campaign records each seller's review of the creatives on its next poll of the buys (seconds later).
    const reviewed = await wait(async () => {
      const state = await campaigns.state(campaignId);
      return Object.values(state.buys).every((buy) => Object.keys(buy.creatives ?? {}).length > 0) ? state : undefined;
    });
    active.state = reviewed;
    for (const buy of active.buys) {
      const followed = active.state.buys[buy.sellerId];
      const reviews = Object.entries(followed?.creatives ?? {})
        .map(([creativeId, review]) => `${creativeId} ${review.status ?? review.action ?? '?'}`)
        .join(', ');
      console.log(
        `  buy at ${buy.sellerId}: ${buy.status} media_buy_id ${buy.mediaBuyId} budget ${buy.committedBudget}; creatives: ${reviews || '(not read yet)'}; formats missing: ${followed?.coverage?.missing.join(', ') || 'none'}`,
      );
    }
    const bytes = Buffer.byteLength(JSON.stringify(history));
    console.log(
      `demo:campaign: brief to ${SELLERS.length} buys created in ${((createdMs ?? wallMs) / 1000).toFixed(1)} s, all active in ${(wallMs / 1000).toFixed(1)} s; campaign history then ${history.events?.length ?? 0} events (${Math.round(bytes / 1024)} KiB as JSON)`,
    );
    const canceled = await campaigns.change(campaignId, { kind: 'cancel', requestedBy: 'demo', reason: 'demo over' });
    console.log(`demo:campaign: canceled (${canceled.outcome}); every buy: ${JSON.stringify(canceled.buys)}`);
  } finally {
    for (const stop of stops) await stop().catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(`demo:campaign: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
