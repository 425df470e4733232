/**
 * Benchmark 3 (B1): what running a call as a durable operation costs. Measured: N concurrent get_products operations
 * through the orchestrator (OrchestratorClient.start, then result(): workflow start, the call in the worker process,
 * completion), on the product's own worker process (the compiled worker as `npm run worker` ships it). Baseline, the floor of this design: the same
 * N calls as a bare Temporal workflow with one ordinary activity making the same @adcp/sdk call
 * (bench/bare/workflow.ts), on a worker process of its own, same server, same seller. Ceiling: the same N calls
 * made directly with @adcp/sdk's ProtocolClient from the bench process. Rounds rotate which mode goes first.
 * Also reads real histories back (B3: a synchronous read).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { ProtocolClient } from '@adcp/sdk/advanced';
import { getProductsParams } from '../test/harness/demo-requests';
import { productCount } from './bare/activities';
import { describeCpuPer } from './cpu';
import { describeTypes, historiesOf } from './history';
import { type Phase, timedPhase, totalOf } from './phases';
import type { BenchmarkResult } from './report';
import { SELLER_ID, type BenchStack } from './stack';
import { ratio } from './stats';

export interface OverheadOptions {
  /** Calls in flight at once (the whole round is started together). */
  concurrency: number;
  rounds: number;
  /** Unmeasured calls per mode before the first round. */
  warmup: number;
}

type Mode = 'orchestrated' | 'bare' | 'direct';

/** CPU ms of one worker process by thread: its main thread, its busiest other thread, and all the rest. */
interface ThreadCpu {
  main: number;
  /** The busiest thread besides the main one over the phase: in a worker under load, the workflow thread. */
  busiest: number;
  rest: number;
}

let clockTicksPerSecond: number | undefined;

/** User + system CPU ms of each thread of `pid` so far, by thread id (Linux; empty elsewhere). */
function threadCpuMs(pid: number | undefined): Map<number, number> {
  const threads = new Map<number, number>();
  if (pid === undefined) return threads;
  clockTicksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        threads.set(Number(tid), ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicksPerSecond);
      } catch {
        // the thread ended between the listing and the read
      }
    }
  } catch {
    // not Linux, or the process is gone
  }
  return threads;
}

function threadCpuSince(pid: number | undefined, before: Map<number, number>): ThreadCpu {
  const deltas = [...threadCpuMs(pid)].map(([tid, ms]) => [tid, ms - (before.get(tid) ?? 0)] as const);
  const main = deltas.find(([tid]) => tid === pid)?.[1] ?? 0;
  const others = deltas.filter(([tid]) => tid !== pid).map(([, ms]) => ms);
  const busiest = Math.max(0, ...others);
  return { main, busiest, rest: others.reduce((sum, ms) => sum + ms, 0) - busiest };
}

function describeThreads(threads: ThreadCpu, calls: number): string {
  const per = (ms: number) => (ms / calls).toFixed(1);
  return `main thread ${per(threads.main)}, busiest other thread (the workflow thread) ${per(threads.busiest)}, rest ${per(threads.rest)}`;
}

const B1_GOAL = 1.0;
const B3_SYNC_READ_GOAL = 12;

export async function orchestrationOverhead(stack: BenchStack, options: OverheadOptions): Promise<BenchmarkResult> {
  const { seller, client } = stack;
  await seller.reset(); // get_products answers at once with one product (the fixture's built-in behaviour)
  const worker = stack.pollingWorker;
  const bareWorker = await stack.startWorker({ name: 'bare', kind: 'bare' });
  const agent = seller.agent('mcp', SELLER_ID);
  const run = randomUUID().slice(0, 8);
  let sequence = 0;
  const orchestratedIds: string[] = [];
  const bareIds: string[] = [];

  const orchestrated = async (): Promise<void> => {
    const { operationId } = await worker.orchestrator.start({
      sellerId: SELLER_ID,
      task: 'get_products',
      params: getProductsParams,
      idempotencyKey: `bench-overhead-${run}-${++sequence}`,
    });
    orchestratedIds.push(operationId);
    const state = await worker.orchestrator.result(operationId);
    if (state.status !== 'completed' || productCount(state.result) === 0) {
      throw new Error(
        `get_products operation ${operationId} ended ${state.status} without products: ${state.failure?.message ?? ''}`,
      );
    }
  };
  const bare = async (): Promise<void> => {
    const workflowId = `bench-bare-${run}-${++sequence}`;
    bareIds.push(workflowId);
    const products = await client.workflow.execute('bareCall', {
      taskQueue: bareWorker.taskQueue,
      workflowId,
      args: [{ tool: 'get_products', params: getProductsParams }],
    });
    if (products === 0) throw new Error(`Bare workflow ${workflowId} got no products.`);
  };
  const direct = async (): Promise<void> => {
    const answer = await ProtocolClient.callTool(agent, 'get_products', getProductsParams);
    if (productCount(answer) === 0)
      throw new Error(`A direct get_products call returned no products: ${JSON.stringify(answer).slice(0, 300)}`);
  };
  const run1 = { orchestrated, bare, direct };

  // Per-thread CPU of the worker each mode runs on (measured rounds only): main thread vs workflow thread.
  const threads: Record<'orchestrated' | 'bare', ThreadCpu> = {
    orchestrated: { main: 0, busiest: 0, rest: 0 },
    bare: { main: 0, busiest: 0, rest: 0 },
  };
  const workerPid = { orchestrated: worker.process.child.pid, bare: bareWorker.process.child.pid };
  const round = async (mode: Mode, calls: number, measured = false): Promise<Phase<Mode>> => {
    const pid = mode === 'direct' ? undefined : workerPid[mode];
    const before = threadCpuMs(pid);
    const phase = await timedPhase(stack, mode, Array.from({ length: calls }), calls, run1[mode]);
    if (measured && mode !== 'direct') {
      const used = threadCpuSince(pid, before);
      threads[mode] = {
        main: threads[mode].main + used.main,
        busiest: threads[mode].busiest + used.busiest,
        rest: threads[mode].rest + used.rest,
      };
    }
    return phase;
  };

  const callsBefore = seller.callsTo('get_products').length;
  for (const mode of ['direct', 'bare', 'orchestrated'] as const) await round(mode, options.warmup);
  const rounds: Phase<Mode>[] = [];
  const modes: Mode[] = ['orchestrated', 'bare', 'direct'];
  for (let index = 0; index < options.rounds; index++) {
    // Rotate the order, so slow drift (history growth, JIT, other engineers' load) hits every mode alike.
    const order = modes.map((_, offset) => modes[(index + offset) % modes.length]);
    for (const mode of order) rounds.push(await round(mode, options.concurrency, true));
  }
  const callsSeen = seller.callsTo('get_products').length - callsBefore;
  const expectedCalls = 3 * (options.warmup + options.rounds * options.concurrency);
  await bareWorker.process.stop(5_000);

  const [orchestratedHistory, bareHistory] = await Promise.all([
    historiesOf(client, orchestratedIds.slice(-20)),
    historiesOf(client, bareIds.slice(-20)),
  ]);

  const measured = totalOf(rounds, 'orchestrated');
  const bareTotal = totalOf(rounds, 'bare');
  const baseline = totalOf(rounds, 'direct');
  const b1 = ratio(measured.perSecond, bareTotal.perSecond);
  return {
    id: 'orchestration-overhead',
    title: '3. Orchestration overhead (B1)',
    measured: `get_products as orchestrator operations (start -> result(), worker process "${worker.name}", compiled as shipped)`,
    baseline:
      'a bare Temporal workflow with one ordinary activity making the same @adcp/sdk call (bench/bare/workflow.ts, its own worker process); ceiling: the same calls made directly with ProtocolClient.callTool from the bench process',
    measurements: [
      {
        metric: `B1 get_products/s, ${options.concurrency} concurrent, vs bare`,
        unit: 'ops/s',
        measured: measured.perSecond,
        baseline: bareTotal.perSecond,
        ratio: b1,
        goal: `>= ${B1_GOAL.toFixed(1)}x`,
        met: b1 >= B1_GOAL,
      },
      {
        metric: 'time per call vs bare, median of rounds',
        unit: 'ms',
        measured: measured.medianMs,
        baseline: bareTotal.medianMs,
        ratio: ratio(measured.medianMs, bareTotal.medianMs),
      },
      {
        metric: 'get_products/s vs direct SDK calls (ceiling)',
        unit: 'ops/s',
        measured: measured.perSecond,
        baseline: baseline.perSecond,
        ratio: ratio(measured.perSecond, baseline.perSecond),
      },
      {
        metric: 'B3 history events, synchronous read, vs bare',
        unit: 'events',
        measured: orchestratedHistory.maxEvents,
        baseline: bareHistory.maxEvents,
        ratio: ratio(orchestratedHistory.maxEvents, bareHistory.maxEvents),
        goal: `<= ${B3_SYNC_READ_GOAL} events`,
        met: orchestratedHistory.maxEvents <= B3_SYNC_READ_GOAL,
      },
    ],
    notes: [
      `${options.rounds} rounds of ${options.concurrency} concurrent calls per mode after ${options.warmup} warm-up each; every call checked to return products`,
      `rates: orchestrated ${measured.perSecond.toFixed(1)}/s, bare workflow ${bareTotal.perSecond.toFixed(1)}/s, direct SDK ${baseline.perSecond.toFixed(1)}/s (bare is ${ratio(bareTotal.perSecond, baseline.perSecond).toFixed(2)}x direct)`,
      `the seller handled ${callsSeen} get_products calls, ${expectedCalls} expected (one per call in all three modes: no retries, no duplicates)`,
      `CPU per call, all processes: orchestrated ${describeCpuPer(measured.cpu, measured.count)}; bare ${describeCpuPer(bareTotal.cpu, bareTotal.count)}; direct ${describeCpuPer(baseline.cpu, baseline.count)}`,
      `CPU per call by thread (/proc/<pid>/task): orchestrated worker: ${describeThreads(threads.orchestrated, measured.count)}; bare worker: ${describeThreads(threads.bare, bareTotal.count)}`,
      `history of the last 20 of each (fetchHistory): orchestrated median ${orchestratedHistory.medianEvents}, max ${orchestratedHistory.maxEvents} (${describeTypes(orchestratedHistory.sample.byType)}); bare median ${bareHistory.medianEvents} (${describeTypes(bareHistory.sample.byType)})`,
    ],
    details: {
      ...options,
      orchestrated: measured,
      bare: bareTotal,
      direct: baseline,
      rounds,
      sellerCalls: callsSeen,
      expectedSellerCalls: expectedCalls,
      histories: { orchestrated: orchestratedHistory, bare: bareHistory },
      threadCpuMs: threads,
    },
  };
}
