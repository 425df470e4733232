/**
 * A media buy's workflow on the time-skipping test server with small stand-ins: a simulated seller in this process
 * answers the buy's operations (the stand-in operation workflow hands each one to it), its get_media_buys reads and
 * its delivery pulls. A real worker runs the real media-buy workflow; the seller's clock is the test server's, so a
 * flight of days passes in seconds.
 *
 *   const stack = await startMediaBuyStandIns();
 *   const handle = await stack.start({ params: stack.seller.createParams({ startInMs: HOUR, flightMs: DAY }) });
 *   ...
 *   await stack.close();
 */
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/activity';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker, bundleWorkflowCode } from '@temporalio/worker';
import type { WorkflowHandle } from '@temporalio/client';
import type { OperationInput, OperationState } from '../../contract/operation';
import { type MediaBuyInput, mediaBuyWorkflowId } from '../../contract/media-buy';
import type {
  PullDeliveryInput,
  PullDeliveryOutcome,
  ReadMediaBuyInput,
  ReadMediaBuyOutcome,
} from '../../activities/media-buy';
import { type MediaBuyStatus, mediaBuyFromList, parseDeliveryPull } from '../../protocol/media-buy';
import { resolveTestServer } from '../../scripts/lib/temporal-binaries';
import type { adcpMediaBuy } from './media-buy-stand-in-workflows';

const HOUR = 3_600_000;

type Json = Record<string, unknown>;

/** What the simulated seller does with each update_media_buy field it is sent. */
export interface StandInBehaviour {
  /** Fields it answers success for and does not apply ('paused', 'packages.paused'). */
  ignores?: string[];
  /** No get_media_buys at all: every read fails as an unknown tool does. */
  noReads?: boolean;
  /** The update answer: the buy described (default), or 3.0's terse affected_packages. */
  updateAnswer?: 'described' | 'affected-packages';
  /** The action vocabulary the buy lists. */
  actions?: 'available-3.1' | 'coarse-3.0';
}

export interface StandInBuy {
  mediaBuyId: string;
  startMs: number;
  endMs: number;
  budgets: Record<string, number>;
  creatives: Record<string, string[]>;
  pauses: { from: number; to?: number }[];
  packagePauses: Record<string, { from: number; to?: number }[]>;
  canceledAtMs?: number;
  creativesAtMs?: number;
  revision: number;
}

/** One call that reached the seller. */
export interface SellerCall {
  task: string;
  params: Json;
  operationId?: string;
}

export class StandInSeller {
  readonly buys = new Map<string, StandInBuy>();
  readonly calls: SellerCall[] = [];
  behaviour: StandInBehaviour = {};
  /** The next create_media_buy answers with this operation status instead of making a buy. */
  failNextCreate?: { status: 'failed' | 'rejected'; code: string };
  private counter = 0;

  constructor(private readonly clock: () => Promise<number>) {}

  private within(pauses: { from: number; to?: number }[] | undefined, atMs: number): boolean {
    return (pauses ?? []).some((pause) => pause.from <= atMs && (pause.to === undefined || atMs < pause.to));
  }

  statusOf(buy: StandInBuy, atMs: number): MediaBuyStatus {
    if (buy.canceledAtMs !== undefined && atMs >= buy.canceledAtMs) return 'canceled';
    if (atMs >= buy.endMs) return 'completed';
    if (this.within(buy.pauses, atMs)) return 'paused';
    if (buy.creativesAtMs === undefined) return 'pending_creatives';
    if (atMs < buy.startMs) return 'pending_start';
    return 'active';
  }

  /** Impressions of one package in one hour: 1,000 while it delivers, 0 otherwise. */
  delivered(buy: StandInBuy, packageId: string, hourMs: number): number {
    const live =
      hourMs >= buy.startMs &&
      hourMs < buy.endMs &&
      buy.creativesAtMs !== undefined &&
      hourMs >= buy.creativesAtMs &&
      (buy.canceledAtMs === undefined || hourMs < buy.canceledAtMs) &&
      !this.within(buy.pauses, hourMs) &&
      !this.within(buy.packagePauses[packageId], hourMs);
    return live ? 1_000 : 0;
  }

  describe(buy: StandInBuy, atMs: number): Json {
    const status = this.statusOf(buy, atMs);
    const live = !['completed', 'canceled', 'rejected'].includes(status);
    const first = status === 'paused' ? 'resume' : 'pause';
    return {
      media_buy_id: buy.mediaBuyId,
      status,
      revision: buy.revision,
      start_time: new Date(buy.startMs).toISOString(),
      end_time: new Date(buy.endMs).toISOString(),
      creative_deadline: new Date(buy.startMs - HOUR).toISOString(),
      ...(this.behaviour.actions === 'coarse-3.0'
        ? { valid_actions: live ? [first, 'cancel', 'update_budget', 'update_dates', 'update_packages'] : [] }
        : {
            available_actions: live
              ? [first, 'cancel', 'increase_budget', 'decrease_budget', 'extend_flight', 'shorten_flight']
              : [],
          }),
      packages: Object.entries(buy.budgets).map(([packageId, budget]) => ({
        package_id: packageId,
        budget,
        paused: status === 'paused' || this.within(buy.packagePauses[packageId], atMs),
        creative_assignments: Object.entries(buy.creatives)
          .filter(([, packages]) => packages.includes(packageId))
          .map(([creativeId]) => ({ creative_id: creativeId })),
      })),
    };
  }

  /** create_media_buy arguments for a buy whose flight starts `startInMs` from now (the server's clock). */
  async createParams(options: { startInMs: number; flightMs: number; budgets?: number[] }): Promise<Json> {
    const now = await this.clock();
    return {
      account: { account_id: 'acct_stand_in' },
      start_time: new Date(now + options.startInMs).toISOString(),
      end_time: new Date(now + options.startInMs + options.flightMs).toISOString(),
      packages: (options.budgets ?? [1_000]).map((budget) => ({ product_id: 'display', budget })),
    };
  }

  private operationState(input: OperationInput & { operationId: string }, fields: Partial<OperationState>) {
    return {
      operationId: input.operationId,
      sellerId: input.sellerId,
      task: input.task,
      inputRounds: 0,
      status: 'completed',
      ...fields,
    } as OperationState;
  }

  async operation(input: OperationInput & { operationId: string }): Promise<OperationState> {
    const now = await this.clock();
    this.calls.push({ task: input.task, params: input.params, operationId: input.operationId });
    const refuse = (code: string, message: string) =>
      this.operationState(input, { status: 'failed', errors: [{ code, message, recovery: 'correctable' }] });
    if (input.task === 'create_media_buy') {
      if (this.failNextCreate) {
        const { status, code } = this.failNextCreate;
        this.failNextCreate = undefined;
        return this.operationState(input, {
          status,
          errors: [{ code, message: `the seller said ${code}`, recovery: 'terminal' }],
          ...(status === 'failed' ? { failure: { reason: 'call_failed', message: `the seller said ${code}` } } : {}),
        });
      }
      this.counter += 1;
      const mediaBuyId = `mb_stand_in_${this.counter}`;
      const packages = Array.isArray(input.params.packages) ? (input.params.packages as Json[]) : [];
      const buy: StandInBuy = {
        mediaBuyId,
        startMs: Date.parse(String(input.params.start_time)),
        endMs: Date.parse(String(input.params.end_time)),
        budgets: Object.fromEntries(packages.map((pkg, index) => [`${mediaBuyId}_p${index + 1}`, Number(pkg.budget)])),
        creatives: {},
        pauses: [],
        packagePauses: {},
        revision: 1,
      };
      this.buys.set(mediaBuyId, buy);
      const described = this.describe(buy, now);
      return this.operationState(input, { result: { ...described, media_buy_status: described.status } });
    }
    const buy =
      input.task === 'sync_creatives'
        ? [...this.buys.values()].find((candidate) =>
            ((input.params.assignments as Json[] | undefined) ?? []).some(
              (assignment) => String(assignment.package_id) in candidate.budgets,
            ),
          )
        : this.buys.get(String(input.params.media_buy_id));
    if (!buy) return refuse('MEDIA_BUY_NOT_FOUND', 'no such buy');
    if (input.task === 'sync_creatives') {
      for (const assignment of (input.params.assignments as Json[] | undefined) ?? []) {
        const creativeId = String(assignment.creative_id);
        buy.creatives[creativeId] = [...new Set([...(buy.creatives[creativeId] ?? []), String(assignment.package_id)])];
      }
      buy.creativesAtMs ??= now;
      buy.revision += 1;
      const creatives = (input.params.creatives as Json[]).map((creative) => ({
        creative_id: creative.creative_id,
        action: 'created',
        status: 'approved',
      }));
      return this.operationState(input, { result: { creatives } });
    }
    // update_media_buy
    const args = input.params;
    const status = this.statusOf(buy, now);
    if (['completed', 'canceled', 'rejected'].includes(status))
      return refuse(args.canceled === true ? 'NOT_CANCELLABLE' : 'INVALID_STATE', `the buy is ${status}`);
    if (args.paused === false && status !== 'paused') return refuse('INVALID_STATE', 'the buy is not paused');
    const ignores = this.behaviour.ignores ?? [];
    if (args.canceled === true) buy.canceledAtMs = now;
    if (args.paused === true && !ignores.includes('paused')) buy.pauses.push({ from: now });
    if (args.paused === false) {
      const open = buy.pauses.find((pause) => pause.to === undefined);
      if (open) open.to = now;
    }
    if (typeof args.start_time === 'string') buy.startMs = Date.parse(args.start_time);
    if (typeof args.end_time === 'string') buy.endMs = Date.parse(args.end_time);
    for (const change of (args.packages as Json[] | undefined) ?? []) {
      const packageId = String(change.package_id);
      if (typeof change.budget === 'number') buy.budgets[packageId] = change.budget;
      if (change.paused === true && !ignores.includes('packages.paused'))
        (buy.packagePauses[packageId] ??= []).push({ from: now });
      if (change.paused === false) {
        const open = buy.packagePauses[packageId]?.find((pause) => pause.to === undefined);
        if (open) open.to = now;
      }
    }
    buy.revision += 1;
    const { status: after, ...described } = this.describe(buy, now);
    if (this.behaviour.updateAnswer === 'affected-packages')
      return this.operationState(input, {
        result: {
          media_buy_id: buy.mediaBuyId,
          implementation_date: new Date(now).toISOString(),
          affected_packages: ((args.packages as Json[] | undefined) ?? []).map((pkg) => ({
            package_id: pkg.package_id,
          })),
        },
      });
    return this.operationState(input, { result: { ...described, media_buy_status: after } });
  }

  async readMediaBuy(input: ReadMediaBuyInput): Promise<ReadMediaBuyOutcome> {
    const now = await this.clock();
    this.calls.push({ task: 'get_media_buys', params: { media_buy_ids: [input.mediaBuyId] } });
    if (this.behaviour.noReads) {
      throw ApplicationFailure.create({
        type: 'SellerError',
        message: 'UNSUPPORTED_FEATURE: get_media_buys is not a tool of this seller',
        nonRetryable: true,
        details: [{ code: 'UNSUPPORTED_FEATURE', message: 'get_media_buys is not a tool of this seller' }],
      });
    }
    const buy = this.buys.get(input.mediaBuyId);
    const snapshot = mediaBuyFromList({ media_buys: buy ? [this.describe(buy, now)] : [] }, input.mediaBuyId);
    return snapshot ? { found: true, snapshot } : { found: false, note: `no buy ${input.mediaBuyId}` };
  }

  async pullDelivery(input: PullDeliveryInput): Promise<PullDeliveryOutcome> {
    const now = await this.clock();
    this.calls.push({ task: 'get_media_buy_delivery', params: { ...input } });
    const buy = this.buys.get(input.mediaBuyId);
    if (!buy) return { found: false, note: 'no such buy' };
    const byPackage = Object.keys(buy.budgets).map((packageId) => {
      let impressions = 0;
      for (let hour = Math.floor(buy.startMs / HOUR) * HOUR; hour + HOUR <= Math.min(now, buy.endMs); hour += HOUR)
        impressions += this.delivered(buy, packageId, hour);
      return { package_id: packageId, impressions };
    });
    const pull = parseDeliveryPull(
      {
        media_buy_deliveries: [
          {
            media_buy_id: buy.mediaBuyId,
            status: this.statusOf(buy, now),
            totals: { impressions: byPackage.reduce((sum, row) => sum + row.impressions, 0) },
            by_package: byPackage,
          },
        ],
      },
      buy.mediaBuyId,
    );
    return pull ? { found: true, pull } : { found: false };
  }

  /** The update_media_buy calls that reached the seller, oldest first. */
  updates(): Json[] {
    return this.calls.filter((call) => call.task === 'update_media_buy').map((call) => call.params);
  }
}

export interface MediaBuyStandIns {
  env: TestWorkflowEnvironment;
  seller: StandInSeller;
  taskQueue: string;
  /** Starts a buy (not indexed: the test server has no custom search attributes). */
  start(input: Partial<MediaBuyInput> & { params: Json }): Promise<WorkflowHandle<typeof adcpMediaBuy>>;
  now(): Promise<number>;
  close(): Promise<void>;
}

let runtimeInstalled = false;

export async function startMediaBuyStandIns(): Promise<MediaBuyStandIns> {
  if (!runtimeInstalled) {
    runtimeInstalled = true;
    Runtime.install({ logger: new DefaultLogger('ERROR') });
  }
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: resolveTestServer() } },
  });
  const seller = new StandInSeller(() => env.currentTimeMs());
  const taskQueue = `media-buy-stand-ins-${randomUUID()}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    workflowBundle: await bundleWorkflowCode({
      workflowsPath: require.resolve('./media-buy-stand-in-workflows'),
      logger: new DefaultLogger('WARN'),
    }),
    activities: {
      standInOperation: (input: OperationInput & { operationId: string }) => seller.operation(input),
      readMediaBuy: (input: ReadMediaBuyInput) => seller.readMediaBuy(input),
      pullDelivery: (input: PullDeliveryInput) => seller.pullDelivery(input),
    },
    shutdownGraceTime: '1s',
  });
  const running = worker.run();
  return {
    env,
    seller,
    taskQueue,
    async start(input) {
      const buyKey = input.buyKey ?? `stand-in-${randomUUID()}`;
      return env.client.workflow.start<typeof adcpMediaBuy>('adcpMediaBuy', {
        workflowId: mediaBuyWorkflowId(buyKey),
        taskQueue,
        args: [{ sellerId: 'stand-in', indexed: false, ...input, buyKey }],
      });
    },
    now: () => env.currentTimeMs(),
    async close() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await env.teardown();
    },
  };
}
