/**
 * `npm run demo:campaign`: a campaign across three sellers, end to end, in demo time. Beside a running stack
 * (`npm start`, or the Temporal server TEMPORAL_ADDRESS names) it runs there, so the campaign shows in that server's
 * Web UI; with none answering it starts a Temporal dev server of its own (headless, on a free port). Either way it
 * brings three media-buy fixture sellers (real @adcp/sdk servers on loopback, test/fixtures) that deliver by the
 * second and post a reporting webhook every second, the gateway's campaign and reporting routes on a free loopback
 * port, a worker in this process on a task queue of its own, and the typed client.
 *
 * One brief goes to every seller (discovery within a time budget), the top_ranked policy picks each seller's best
 * product, a person approves, and the campaign starts one buy per seller and syncs its creative library to each. The
 * flight is a few minutes long and the campaign's budget allocation policy is `propose`, counting in a reporting
 * period of seconds: one seller (`east`) sells at a quarter of the others' price, so it spends a quarter as fast and
 * under-delivers. Once the minimum observation window has passed, the campaign proposes to move money from it to the
 * sellers that deliver; the demo prints the plan, approves it through `POST /v1/campaigns/:id/budget-moves/decision`
 * (the route a person uses), and prints the moves applied: the decrease confirmed by a read, the increases, and each
 * seller's budget as the seller itself holds it. Then it cancels the campaign and stops everything it started.
 *
 * Settings (environment): TEMPORAL_ADDRESS (a running stack's server), DEMO_CAMPAIGN_OBSERVATION_SECONDS (30: how long
 * the campaign watches a buy deliver before it judges its pacing; at least 10, one reporting period),
 * ADCP_WORKFLOW_BUNDLE (a workflow bundle built ahead of time, `npm run build:workflows`, as a worker takes it; unset,
 * the demo's worker bundles the workflows at start).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { REPORTING_SECRET_ENV } from '../activities/reporting-credentials';
import { createGateway } from '../api/app';
import { createCampaignRouter } from '../api/campaigns';
import { createReportingWebhookRouter } from '../api/reporting-webhooks';
import { createWebhookAuthenticator } from '../api/webhook-verification';
import { moveLines } from '../cli/commands/campaigns';
import { CampaignClient } from '../client/campaign-client';
import { OrchestratorClient } from '../client/orchestrator-client';
import { dataConverter } from '../client/payload-codec';
import { SellerCapabilitiesClient } from '../client/seller-capabilities-client';
import { type SellerConfig, SellerRegistry } from '../config/sellers';
import { createOperationWorker } from '../workers/worker';
import { loadWorkflowBundle } from '../workers/workflow-bundle';
import { temporalSettings } from '../config/temporal-connection';
import { ensureSearchAttributes, freePort, startDevServer } from './lib/dev-server';
import { reportInDemoTime } from './lib/demo-seller';
import { connectGrpc } from '../config/grpc-connection';

/** The Temporal server of a running stack (TEMPORAL_ADDRESS, else npm start's 127.0.0.1:7233), if one answers. */
async function runningTemporal(): Promise<{ address: string; namespace: string } | undefined> {
  const { connectionOptions, namespace } = temporalSettings(process.env);
  let connection: Connection | undefined;
  try {
    connection = await connectGrpc({ ...connectionOptions, connectTimeout: '2s' });
    await connection.withDeadline(Date.now() + 3_000, () => connection!.workflowService.getSystemInfo({}));
    await ensureSearchAttributes(connection, namespace);
    return { address: connectionOptions.address, namespace };
  } catch {
    return undefined;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

const SELLERS = ['north', 'south', 'east'];
/** Price per thousand impressions: every seller delivers about as many impressions a second, so east spends a quarter. */
const CPM: Record<string, number> = { north: 14, south: 14, east: 3.5 };
const SECOND = 1_000;
const FLIGHT_MS = 4 * 60 * SECOND;
const TOTAL_BUDGET = 9_000;

/** How long the campaign watches a buy deliver before it judges its pacing (DEMO_CAMPAIGN_OBSERVATION_SECONDS). */
function observationMs(env: NodeJS.ProcessEnv = process.env): number {
  const name = 'DEMO_CAMPAIGN_OBSERVATION_SECONDS';
  const seconds = env[name] === undefined ? 30 : Number(env[name]);
  if (!Number.isFinite(seconds) || seconds < 10)
    throw new Error(`${name} must be a number of seconds >= 10 (one reporting period); got "${env[name]}".`);
  return seconds * SECOND;
}

// The gateway's JSON answers, read field by field as a person reading them would.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

async function main(): Promise<void> {
  const graceMs = observationMs();
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
  // Delivery by the second (a unit of a second instead of an hour), priced per seller.
  const sellers = await Promise.all(
    SELLERS.map((name) => startMediaBuySeller({ name, deliveryUnitMs: SECOND, cpm: CPM[name] })),
  );
  stops.push(...sellers.map((seller) => () => seller.close()));
  try {
    sellers.forEach((seller, index) => {
      const product = {
        ...productOf(SELLERS[index], CPM[SELLERS[index]]),
        reporting_capabilities: {
          available_reporting_frequencies: ['hourly'],
          available_metrics: ['impressions', 'spend'],
        },
      };
      seller.scripted.setDefaultScript('get_products', [
        { status: 'completed', bare: true, payload: { products: [product] } },
      ]);
      stops.unshift(reportInDemoTime(seller, { reportEveryMs: SECOND }).stop);
    });
    const agents: SellerConfig[] = sellers.map((seller, index) => ({
      id: SELLERS[index],
      url: seller.url,
      protocol: 'mcp',
      token_env: `DEMO_${SELLERS[index].toUpperCase()}_TOKEN`,
    }));
    // Each buy's reporting-webhook credential derives from this secret, in the worker and in the gateway alike.
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...Object.fromEntries(sellers.map((seller, index) => [agents[index].token_env!, seller.authToken])),
      [REPORTING_SECRET_ENV]: randomBytes(32).toString('hex'),
    };
    const registry = new SellerRegistry(agents, 'demo:campaign sellers');
    const taskQueue = `demo-campaign-${randomUUID()}`;
    const { connectionOptions } = temporalSettings(process.env);
    const connection = await connectGrpc({ ...connectionOptions, address: temporal.address });
    stops.unshift(() => connection.close());
    const client = new Client({ connection, namespace: temporal.namespace, dataConverter: dataConverter() });
    const workerConnection = await NativeConnection.connect({ ...connectionOptions, address: temporal.address });
    const prebuilt = process.env.ADCP_WORKFLOW_BUNDLE ? await loadWorkflowBundle() : undefined;
    console.log(
      prebuilt
        ? `demo:campaign: starting a worker on the workflow bundle ${prebuilt.codePath} (ADCP_WORKFLOW_BUNDLE)`
        : 'demo:campaign: bundling the workflows and starting a worker',
    );
    const worker = await createOperationWorker({
      connection: workerConnection,
      namespace: temporal.namespace,
      taskQueue,
      activities: { sellers: registry, env },
      client,
      ...(prebuilt ? { workflowBundle: { codePath: prebuilt.codePath } } : {}),
    });
    const running = worker.run();
    stops.unshift(async () => {
      worker.shutdown();
      await running.catch(() => undefined);
      await workerConnection.close();
    });

    // The gateway's campaign routes and the reporting-webhook route, on a loopback port: the sellers post their
    // reports there, and the demo decides the proposal there, as a person would.
    const listener = createServer();
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const gateway = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
    stops.unshift(() => new Promise((resolve) => listener.close(resolve)));
    const campaigns = new CampaignClient({
      client,
      taskQueue,
      sellers: new SellerCapabilitiesClient({ client, taskQueue, sellers: registry }),
      reportingBaseUrl: gateway,
    });
    listener.on(
      'request',
      createGateway({
        orchestrator: new OrchestratorClient({ client, taskQueue, knownSeller: (id) => registry.has(id) }),
        campaignRouters: [createCampaignRouter({ campaigns })],
        reportingWebhookRouter: createReportingWebhookRouter({
          client,
          sellers: registry,
          authenticator: createWebhookAuthenticator(),
          publicBaseUrl: gateway,
          env,
          log: () => undefined,
        }),
      }),
    );
    const http = async (method: string, path: string, body?: unknown): Promise<Json> => {
      const response = await fetch(`${gateway}${path}`, {
        method,
        ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(30_000),
      });
      const answer = (await response.json()) as Json;
      if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${JSON.stringify(answer)}`);
      return answer;
    };

    const startedAt = Date.now();
    const campaignKey = `demo-${randomUUID().slice(0, 8)}`;
    const { campaignId } = await campaigns.create({
      campaignKey,
      brief: 'Display for a spring outdoor campaign, three regions',
      totalBudget: TOTAL_BUDGET,
      currency: 'USD',
      // The flight starts now: a buy with its creatives in goes active at once.
      flight: {
        startTime: new Date(startedAt).toISOString(),
        endTime: new Date(startedAt + FLIGHT_MS).toISOString(),
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
      // Demo time: the buys report every second, so the campaign counts in periods of 10 s and judges delivery after
      // 30 s of flight (DEMO_CAMPAIGN_OBSERVATION_SECONDS); a plan waits 10 minutes for a person; nothing moves in the
      // flight's last minute.
      budgetAllocation: {
        mode: 'propose',
        reportingPeriodMs: 10 * SECOND,
        underDeliveryGraceMs: graceMs,
        approvalTimeoutMs: 10 * 60 * SECOND,
        freezeBeforeEndMs: 60 * SECOND,
        maxShare: 0.5,
        minMoveAmount: 50,
      },
      monitoring: { intervalMs: 2 * SECOND, underDeliveryGraceMs: graceMs },
      requestedBy: 'planner@buyer',
    });
    console.log(`demo:campaign: campaign ${campaignId} (search attribute AdcpCampaign = "${campaignKey}")`);
    let phase = '';
    const wait = async <T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 150_000): Promise<T> => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const state = await campaigns.state(campaignId);
        if (state.phase !== phase) console.log(`  ${new Date().toISOString()}  phase ${(phase = state.phase)}`);
        const value = await probe();
        if (value !== undefined) return value;
        if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    };
    const proposed = await wait(async () => {
      const state = await campaigns.state(campaignId);
      return state.phase === 'awaiting_approval' ? state : undefined;
    }, 'the selection');
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
    }, 'every buy active');
    const wallMs = Date.now() - startedAt;
    for (const buy of active.buys)
      console.log(
        `  buy at ${buy.sellerId}: ${buy.status} media_buy_id ${buy.mediaBuyId} budget ${buy.committedBudget} (CPM ${CPM[buy.sellerId]})`,
      );
    console.log(
      `demo:campaign: brief to ${SELLERS.length} buys created in ${((createdMs ?? wallMs) / 1000).toFixed(1)} s, all active in ${(wallMs / 1000).toFixed(1)} s`,
    );

    // The campaign follows delivery as the reports come in, and proposes once east's pacing counts.
    console.log('demo:campaign: delivery and pacing as the reports come in; the policy proposes, a person decides');
    let printedPacing = 0;
    const proposal = await wait(
      async () => {
        const view = await http('GET', `/v1/campaigns/${campaignId}`);
        if (Date.now() - printedPacing >= 5 * SECOND) {
          printedPacing = Date.now();
          console.log(
            `  ${new Date().toISOString()}  ${(view.buys as Json[])
              .map((buy) => `${buy.agent_id} spend ${buy.delivery?.spend ?? 0} pacing ${buy.delivery?.pacing ?? '-'}`)
              .join(' · ')}`,
          );
        }
        return view.budget_allocation?.proposal ? view : undefined;
      },
      'a proposal',
      FLIGHT_MS,
    );
    const plan = proposal.budget_allocation.proposal as Json;
    const planned = (proposal.budget_allocation.moves as Json[]).filter((move) => plan.moves.includes(move.id));
    const alert = (proposal.alerts as Json[]).find((entry) => entry.kind === 'allocation_proposal' && entry.open);
    console.log(
      `demo:campaign: plan ${plan.plan} proposed, waiting until ${plan.deadline} (alert: ${alert?.note ?? 'none'})`,
    );
    for (const move of planned)
      console.log(`  proposed move ${move.id}: ${move.amount} from ${move.from} to ${move.to}, because ${move.why}`);

    const decided = await http('POST', `/v1/campaigns/${campaignId}/budget-moves/decision`, {
      plan: plan.plan,
      decision: 'approve',
      decided_by: 'trader@buyer',
      note: 'demo: east under-delivers',
    });
    console.log(`demo:campaign: POST /v1/campaigns/${campaignId}/budget-moves/decision approved plan ${decided.plan}`);
    const FINAL = ['applied', 'returned', 'failed', 'skipped', 'canceled', 'rejected', 'expired'];
    const settled = await wait(async () => {
      const view = await http('GET', `/v1/campaigns/${campaignId}`);
      const moves = (view.budget_allocation.moves as Json[]).filter((move) => plan.moves.includes(move.id));
      return moves.every((move) => FINAL.includes(move.status)) ? { view, moves } : undefined;
    }, 'the moves to end');
    for (const move of settled.moves) {
      console.log(
        `  move ${move.id} ${move.status}: ${move.moved ?? 0} from ${move.from} to ${move.to} (decided by ${move.decided_by})`,
      );
      for (const step of move.steps as Json[])
        console.log(
          `    ${step.at}  ${step.step} at ${step.agent_id ?? '-'}: ${step.budget_before ?? ''}${step.budget_after !== null ? ` → ${step.budget_after}` : ''} ${step.outcome}`,
        );
    }
    const state = await campaigns.state(campaignId);
    for (const line of moveLines(state.budgetAllocation!)) console.log(`  ${line}`);
    // Each seller's budget as the seller holds it (its own buy, not the campaign's record of it).
    let atSellers = 0;
    for (const [index, seller] of sellers.entries()) {
      const buy = seller.buys()[0];
      const budget = buy
        ? buy.packages.reduce((sum, pkg) => sum + (pkg.budgets.at(-1)?.[1] ?? pkg.initialBudget), 0)
        : 0;
      atSellers += budget;
      console.log(
        `  at ${SELLERS[index]}: budget ${budget} (the campaign says ${state.buys[SELLERS[index]]?.committedBudget})`,
      );
    }
    console.log(
      `demo:campaign: ${settled.moves.filter((move) => move.status === 'applied').length} moves applied; the sellers hold ${atSellers} of the campaign's ${TOTAL_BUDGET} (pool ${state.budgetAllocation!.pool})`,
    );
    const history = await client.workflow.getHandle(campaignId).fetchHistory();
    console.log(`demo:campaign: campaign history ${history.events?.length ?? 0} events`);
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
