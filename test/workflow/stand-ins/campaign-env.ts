/**
 * The campaign and governance middle layer: the time-skipping server, a real worker over the stand-in bundle
 * (campaign-workflows.ts), and activity stand-ins over a ledger of the sellers' buys kept in the test process, so a
 * test scripts what the sellers answer and checks what reached them. Temporal is real: timers, Updates, signals,
 * continue-as-new and child workflows are the server's.
 */
import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { BuyDigest, CampaignInput } from '../../../contract/campaign';
import type { DiscoveryInput, DiscoveryState } from '../../../contract/discovery';
import type { OperationInput, OperationState } from '../../../contract/operation';
import type { MediaBuyInput } from '../../../contract/media-buy';
import type { ChangeCampaignBuyInput, ChangeCampaignBuyOutcome } from '../../../activities/campaign';
import { resolveTestServer } from '../../../scripts/lib/temporal-binaries';
import { quietRuntime } from '../../harness/temporal';
import type { StandInActivities } from './campaign-workflows';

export interface LedgerBuy {
  workflowId: string;
  sellerId: string;
  mediaBuyId: string;
  status: string;
  budget: number;
  spend: number;
  impressions: number;
  availableActions?: string[];
  reachable?: boolean;
  creatives: Record<string, { status?: string; action?: string }>;
  /** Every change the seller applied or refused, in order. */
  changes: { updateId: string; kind: string; budget?: number; outcome: string }[];
  input: MediaBuyInput;
}

/** What the sellers know: one entry per buy workflow, as the stand-in media buys registered them. */
export class Ledger {
  readonly buys = new Map<string, LedgerBuy>();
  readonly calls: { activity: string; input: unknown }[] = [];
  /** A change a seller refuses (its outcome), by seller; absent: applied. */
  refuse = new Map<string, ChangeCampaignBuyOutcome>();
  /** Sellers that are down: reads say unreachable, changes and reads of the buy fail. */
  readonly down = new Set<string>();
  /** What each seller delivered by a time (the server's clock): the test's sellers deliver on their own. */
  deliver?: (buy: LedgerBuy, nowMs: number) => void;
  /** Called as a read of a buy (the confirm of a budget move's decrease) reaches the seller, before it answers. */
  onRead?: () => Promise<void>;
  private readonly answered = new Map<string, ChangeCampaignBuyOutcome>();

  bySeller(sellerId: string): LedgerBuy | undefined {
    return [...this.buys.values()].find((buy) => buy.sellerId === sellerId);
  }

  activities(): Record<string, (input: never) => Promise<unknown>> {
    return {
      readCampaignBuys: async (input: { buys: { sellerId: string; workflowId: string }[] }) => {
        this.calls.push({ activity: 'readCampaignBuys', input });
        const nowMs = Context.current().info.currentAttemptScheduledTimestampMs;
        return input.buys.map(({ sellerId, workflowId }): BuyDigest => {
          const buy = this.buys.get(workflowId);
          if (!buy) return { sellerId, workflowId, found: false, packages: [], creatives: {} };
          if (this.down.has(sellerId))
            return {
              sellerId,
              workflowId,
              found: true,
              status: buy.status,
              mediaBuyId: buy.mediaBuyId,
              packages: [],
              creatives: buy.creatives,
              seller: { reachable: false, error: 'connection refused' },
            } as BuyDigest;
          this.deliver?.(buy, nowMs);
          return {
            sellerId,
            workflowId,
            found: true,
            status: buy.status,
            mediaBuyId: buy.mediaBuyId,
            done: ['completed', 'canceled', 'rejected'].includes(buy.status),
            packages: [{ packageId: `${buy.mediaBuyId}_pkg_1`, productId: `${sellerId}_display`, budget: buy.budget }],
            totals: { spend: buy.spend, impressions: buy.impressions },
            creatives: buy.creatives,
            ...(buy.availableActions ? { availableActions: buy.availableActions } : {}),
            ...(buy.reachable !== undefined || this.down.size > 0
              ? { seller: { reachable: buy.reachable ?? true } }
              : {}),
          } as BuyDigest;
        });
      },
      changeCampaignBuy: async (input: ChangeCampaignBuyInput) => {
        this.calls.push({ activity: 'changeCampaignBuy', input });
        // An Update with the same ID is answered once (Temporal deduplicates it on the buy's workflow).
        const earlier = this.answered.get(input.updateId);
        if (earlier) return earlier;
        const buy = this.buys.get(input.workflowId);
        if (!buy) return { outcome: 'failed', error: { code: 'MEDIA_BUY_NOT_FOUND', message: input.workflowId } };
        const refused = this.down.has(buy.sellerId)
          ? { outcome: 'failed' as const, error: { code: 'SERVICE_UNAVAILABLE', message: `${buy.sellerId} is down` } }
          : this.refuse.get(buy.sellerId);
        const outcome: ChangeCampaignBuyOutcome = refused ?? { outcome: 'applied' };
        if (outcome.outcome === 'applied') {
          if (input.kind === 'pause') buy.status = 'paused';
          if (input.kind === 'resume') buy.status = 'active';
          if (input.kind === 'cancel') buy.status = 'canceled';
          if (input.kind === 'budget') buy.budget = input.budget!;
        }
        buy.changes.push({
          updateId: input.updateId,
          kind: input.kind,
          ...(input.budget !== undefined ? { budget: input.budget } : {}),
          outcome: outcome.outcome,
        });
        const answer = { ...outcome, status: buy.status };
        this.answered.set(input.updateId, answer);
        return answer;
      },
      // The read that confirms a budget move's decrease: the buy's packages as the seller holds them.
      readMediaBuy: async (input: { sellerId: string; mediaBuyId: string }) => {
        this.calls.push({ activity: 'readMediaBuy', input });
        await this.onRead?.();
        const buy = [...this.buys.values()].find((entry) => entry.mediaBuyId === input.mediaBuyId);
        if (!buy || this.down.has(buy.sellerId)) return { found: false, note: `${input.sellerId} did not answer` };
        return {
          found: true,
          snapshot: { packages: [{ packageId: `${buy.mediaBuyId}_pkg_1`, budget: buy.budget }] },
        };
      },
      readBuyGovernance: async (input: { workflowId: string }) => {
        this.calls.push({ activity: 'readBuyGovernance', input });
        const buy = this.buys.get(input.workflowId);
        if (!buy) return { found: false };
        return {
          found: true,
          mediaBuyId: buy.mediaBuyId,
          governanceContext: `gc_${buy.sellerId}`,
          checkId: `chk_${buy.sellerId}`,
        };
      },
      syncCampaignCreatives: async (input: { workflowId: string; creatives: { creative_id: string }[] }) => {
        this.calls.push({ activity: 'syncCampaignCreatives', input });
        const buy = this.buys.get(input.workflowId);
        if (!buy) return { outcome: 'failed', error: { code: 'MEDIA_BUY_NOT_FOUND', message: input.workflowId } };
        for (const creative of input.creatives)
          buy.creatives[creative.creative_id] = { status: 'approved', action: 'created' };
        return { outcome: 'applied' };
      },
    };
  }
}

export interface StandInEnv {
  env: TestWorkflowEnvironment;
  taskQueue: string;
  ledger: Ledger;
  /** The test's answer to each stand-in operation (governance calls, finalizes); default: completed, no result. */
  operation: (input: OperationInput & { workflowId: string }) => OperationState;
  operations: (OperationInput & { workflowId: string })[];
  discovery: (input: DiscoveryInput) => DiscoveryState;
  now(): Promise<number>;
  /** Stops the worker (what still runs is cancelled) and starts a new one: the workflows go on from their history. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The stand-in bundle, once per test file. */
export function standInBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({
    workflowsPath: require.resolve('./campaign-workflows'),
    logger: new DefaultLogger('WARN'),
  });
  return bundle;
}

export async function startStandInEnv(
  extra: Record<string, (input: never) => Promise<unknown>> = {},
  /** No workflow cache: every task replays the history (a test that restarts the worker sets it). */
  options: { noCache?: boolean } = {},
): Promise<StandInEnv> {
  quietRuntime();
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: resolveTestServer() } },
  });
  const taskQueue = `cg-${randomUUID()}`;
  const ledger = new Ledger();
  const harness: StandInEnv = {
    env,
    taskQueue,
    ledger,
    operation: (input) =>
      ({ operationId: input.workflowId, status: 'completed', result: {} }) as unknown as OperationState,
    operations: [],
    discovery: () => {
      throw new Error('no discovery scripted');
    },
    now: () => env.currentTimeMs(),
    restart: async () => undefined,
    close: async () => undefined,
  };
  const standIns: StandInActivities = {
    standInDiscovery: async (input) => harness.discovery(input),
    standInOperation: async (input) => {
      harness.operations.push(input);
      return harness.operation(input);
    },
    standInBuyStarted: async ({ workflowId, buy }) => {
      const packages = (buy.params.packages as { budget?: number }[] | undefined) ?? [];
      const budget = packages.reduce((sum, entry) => sum + (entry.budget ?? 0), 0);
      ledger.buys.set(workflowId, {
        workflowId,
        sellerId: buy.sellerId,
        mediaBuyId: `mb_${buy.sellerId}`,
        status: 'active',
        budget,
        spend: 0,
        impressions: 0,
        creatives: {},
        changes: [],
        input: buy,
      });
    },
  };
  const startWorker = async () => {
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await standInBundle(),
      activities: { ...ledger.activities(), ...standIns, ...extra },
      // A restart cancels what is still running at once (its retry goes to the next worker).
      shutdownGraceTime: '1s',
      // Without a cache there is no sticky queue: a stopped worker leaves no task on a queue nobody polls.
      ...(options.noCache ? { maxCachedWorkflows: 0 } : {}),
    });
    const running = worker.run();
    return async () => {
      worker.shutdown();
      await running.catch(() => undefined);
    };
  };
  let stop = await startWorker();
  harness.restart = async () => {
    await stop();
    stop = await startWorker();
  };
  harness.close = async () => {
    await stop();
    await env.teardown();
  };
  return harness;
}

/** A campaign's input for the stand-ins (never indexed: the time-skipping server has no custom search attributes). */
export function campaignInputOf(overrides: Partial<CampaignInput> = {}): CampaignInput {
  const start = Date.parse('2026-03-01T00:00:00Z');
  return {
    campaignKey: `cg-${randomUUID()}`,
    brief: 'Display for spring',
    totalBudget: 10_000,
    currency: 'USD',
    flight: { startTime: new Date(start).toISOString(), endTime: new Date(start + 30 * 86_400_000).toISOString() },
    sellerIds: ['a', 'b'],
    timeBudgetMs: 5_000,
    requestedBy: 'planner@buyer',
    indexed: false,
    ...overrides,
  };
}

/** A discovery that found one display product at each seller. */
export function discoveryFor(input: DiscoveryInput, failed: string[] = []): DiscoveryState {
  const answered = input.sellerIds.filter((id) => !failed.includes(id));
  return {
    discoveryKey: input.discoveryKey,
    brief: input.brief,
    status: 'completed',
    partial: failed.length > 0,
    startedAt: new Date(0).toISOString(),
    deadline: new Date(0).toISOString(),
    sellers: Object.fromEntries(
      input.sellerIds.map((sellerId) => [
        sellerId,
        failed.includes(sellerId)
          ? { sellerId, status: 'failed' as const, error: { code: 'SERVICE_UNAVAILABLE', message: 'down' } }
          : { sellerId, status: 'answered' as const, productCount: 1 },
      ]),
    ),
    catalogue: answered.map((sellerId, index) => ({
      sellerId,
      productId: `${sellerId}_display`,
      channels: ['display'],
      formats: ['display_300x250'],
      pricingOptions: [{ pricingOptionId: 'cpm_fixed', pricingModel: 'cpm', price: 10, fixed: true, currency: 'USD' }],
      reportingFrequencies: ['daily'],
      raw: {},
      rank: index + 1,
      score: 1,
      reasons: [],
    })) as unknown as DiscoveryState['catalogue'],
    proposals: [],
    incomplete: [],
  };
}

/**
 * The test server skips time only while a test sleeps or awaits a result: anything else waits in real time, and a
 * workflow task whose completion was lost would wait for a timeout that never comes. So while a test waits (a probe,
 * an Update's answer, and each query a probe makes), after half a second time moves on a second at a time. A wait
 * that still gets no answer fails after `timeoutMs` of real time, saying so, instead of running into Jest's timeout.
 */
export function waiting(harness: Pick<StandInEnv, 'env'>) {
  const tick = async (startedAt: number) => {
    if (Date.now() - startedAt > 500) await harness.env.sleep(1_000);
    else await new Promise((resolve) => setTimeout(resolve, 50));
  };
  /** An Update's (or any call's) answer, time moving on while it is awaited. */
  async function answered<T>(work: Promise<T>, timeoutMs = 60_000): Promise<T> {
    const startedAt = Date.now();
    let done = false;
    const settled = work.then(
      () => (done = true),
      () => (done = true),
    );
    while (!done) {
      if (Date.now() - startedAt > timeoutMs) throw new Error(`no answer within ${timeoutMs} ms of real time`);
      await Promise.race([settled, tick(startedAt)]);
    }
    return work;
  }
  return {
    /** Polls a probe until it answers (or `timeoutMs` of real time passed); time moves on during each probe too. */
    async until<T>(probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
      const startedAt = Date.now();
      for (;;) {
        const value = await answered(probe(), timeoutMs);
        if (value !== undefined) return value;
        if (Date.now() - startedAt > timeoutMs) throw new Error(`not within ${timeoutMs} ms`);
        await tick(startedAt);
      }
    },
    answered,
  };
}
