/**
 * Benchmark 3: what running a call as a durable operation costs. Measured: N concurrent get_products operations
 * through the orchestrator (OrchestratorClient.start, then result(): workflow start, the call activity in the
 * worker process, completion). Baseline: the same N calls made directly with @adcp/sdk's ProtocolClient (what the
 * activity itself uses) from the bench process, against the same seller. Rounds alternate which mode goes first.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolClient } from '@adcp/sdk/advanced';
import { getProductsParams } from '../test/harness/demo-requests';
import { describeCpuPer } from './cpu';
import { type Phase, timedPhase, totalOf } from './phases';
import type { BenchmarkResult } from './report';
import { AGENT_ID, type BenchStack } from './stack';
import { ratio } from './stats';

export interface OverheadOptions {
  /** Calls in flight at once (the whole round is started together). */
  concurrency: number;
  rounds: number;
  /** Unmeasured calls per mode before the first round. */
  warmup: number;
}

type Mode = 'orchestrated' | 'direct';

function productCount(body: unknown): number {
  const record = body as { products?: unknown; structuredContent?: { products?: unknown } } | undefined;
  const products = record?.structuredContent?.products ?? record?.products;
  return Array.isArray(products) ? products.length : 0;
}

export async function orchestrationOverhead(stack: BenchStack, options: OverheadOptions): Promise<BenchmarkResult> {
  const { seller } = stack;
  await seller.reset(); // get_products answers at once with one product (the fixture's built-in behaviour)
  const worker = stack.pollingWorker;
  const agent = seller.agent('mcp', AGENT_ID);
  const run = randomUUID().slice(0, 8);
  let sequence = 0;

  const orchestrated = async (): Promise<void> => {
    const { operationId } = await worker.orchestrator.start({
      agentId: AGENT_ID,
      task: 'get_products',
      params: getProductsParams,
      idempotencyKey: `bench-overhead-${run}-${++sequence}`,
    });
    const state = await worker.orchestrator.result(operationId);
    if (state.status !== 'completed' || productCount(state.result) === 0) {
      throw new Error(
        `get_products operation ${operationId} ended ${state.status} without products: ${state.failure?.message ?? ''}`,
      );
    }
  };
  const direct = async (): Promise<void> => {
    const answer = await ProtocolClient.callTool(agent, 'get_products', getProductsParams);
    if (productCount(answer) === 0)
      throw new Error(`A direct get_products call returned no products: ${JSON.stringify(answer).slice(0, 300)}`);
  };

  const round = (mode: Mode, calls: number): Promise<Phase<Mode>> =>
    timedPhase(stack, mode, Array.from({ length: calls }), calls, mode === 'orchestrated' ? orchestrated : direct);

  const callsBefore = seller.callsTo('get_products').length;
  await round('direct', options.warmup);
  await round('orchestrated', options.warmup);
  const rounds: Phase<Mode>[] = [];
  for (let index = 0; index < options.rounds; index++) {
    const order: Mode[] = index % 2 === 0 ? ['direct', 'orchestrated'] : ['orchestrated', 'direct'];
    for (const mode of order) rounds.push(await round(mode, options.concurrency));
  }
  const callsSeen = seller.callsTo('get_products').length - callsBefore;
  const expectedCalls = 2 * (options.warmup + options.rounds * options.concurrency);

  const measured = totalOf(rounds, 'orchestrated');
  const baseline = totalOf(rounds, 'direct');
  return {
    id: 'orchestration-overhead',
    title: '3. Orchestration overhead',
    measured: `get_products as orchestrator operations (start -> result(), worker process "${worker.name}")`,
    baseline: 'the same get_products calls made directly with @adcp/sdk ProtocolClient.callTool from the bench process',
    measurements: [
      {
        metric: `get_products per second, ${options.concurrency} concurrent`,
        unit: 'ops/s',
        measured: measured.perSecond,
        baseline: baseline.perSecond,
        ratio: ratio(measured.perSecond, baseline.perSecond),
      },
      {
        metric: 'time per call, median of rounds',
        unit: 'ms',
        measured: measured.medianMs,
        baseline: baseline.medianMs,
        ratio: ratio(measured.medianMs, baseline.medianMs),
      },
    ],
    notes: [
      `${options.rounds} rounds of ${options.concurrency} concurrent calls per mode after ${options.warmup} warm-up each; every call checked to return products`,
      `the seller handled ${callsSeen} get_products calls, ${expectedCalls} expected (one per call in both modes: no retries, no duplicates)`,
      `CPU per call, all processes: orchestrated ${describeCpuPer(measured.cpu, measured.count)}; direct ${describeCpuPer(baseline.cpu, baseline.count)}`,
    ],
    details: {
      ...options,
      orchestrated: measured,
      direct: baseline,
      rounds,
      sellerCalls: callsSeen,
      expectedSellerCalls: expectedCalls,
    },
  };
}
