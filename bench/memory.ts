/**
 * Benchmark 4 (B5): worker memory with many operations parked and polling, peak included.
 *
 * For each worker configuration, in turn and on a fresh worker process each (so no configuration inherits another's
 * allocator high-water marks): read the idle worker, start M create_media_buy operations at a steady rate that the
 * seller keeps `submitted` (so each polls at its cadence: polls at about 2, 6, 14, 30, 62 s ...), sample the process
 * RSS every second (from /proc, no GC: the peak as the OS sees it) for a fixed window, then read it once more after
 * a full GC, terminate the operations and read it again.
 *   - "as shipped": workers/main.ts, as `npm start` runs it (a child process bundles the workflow code at start,
 *     the sticky cache holds ADCP_MAX_CACHED_WORKFLOWS = 100, MALLOC_ARENA_MAX=2);
 *   - "prebuilt bundle": bench/worker.ts with the product's code and a bundle built once by the bench;
 *   - further configurations pass worker options (maxCachedWorkflows, ...) through bench/worker.ts.
 * Then bench/idle-stages.ts builds a worker one stage at a time and reports what each stage costs (where an idle
 * worker's memory goes). Readings inside a worker come from the preloaded probe (memory-probe.ts).
 */
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { idempotencyKeyFor } from '../activities/idempotency';
import { createMediaBuyParams } from '../test/harness/demo-requests';
import { type MemoryReading, workflowThreadHeap } from './memory-probe';
import type { BenchmarkResult, Measurement } from './report';
import { sellerKeepsMediaBuysSubmitted, startMediaBuy } from './operations';
import type { BenchStack, BenchWorker, ExtraWorkerSpec, ProductWorkerOptions } from './stack';
import { mapConcurrent, sleep } from './async';
import { formatBytes, median, ratio } from './stats';

export interface MemoryOptions {
  operations: number;
  /** How fast the parked operations are started. */
  startsPerSecond: number;
  /** How long RSS is sampled from the first start (the dense polls, and the first at a 30 s+ interval). */
  windowSeconds: number;
  /** Readings per state; the median is reported. */
  samples: number;
  /** The configurations compared; the first is the reference ("as shipped"). */
  configurations: Configuration[];
}

export interface Configuration {
  name: string;
  /** undefined: the product worker (`npm run worker`); otherwise a bench-built worker with these settings. */
  spec?: Omit<ExtraWorkerSpec, 'name' | 'kind'>;
  /** The product worker only: compiled with plain node (as shipped since run G, default) or workers/main.ts under tsx. */
  runtime?: 'compiled' | 'tsx';
  /** The product worker only: extra node flags and environment. */
  product?: Omit<ProductWorkerOptions, 'runtime'>;
}

const GOAL_BYTES = 300 * 1024 * 1024;

interface Footprint {
  rssBytes: number;
  mainHeapBytes: number;
  workflowHeapBytes: number;
  /** Heaps of other threads (tsx's module loader). */
  otherHeapBytes: number;
}

async function footprint(worker: BenchWorker, samples: number): Promise<Footprint> {
  const readings: MemoryReading[] = [];
  for (let index = 0; index < samples; index++) {
    readings.push(await worker.memory());
    if (index < samples - 1) await sleep(200);
  }
  return {
    rssBytes: median(readings.map((reading) => reading.rssBytes)),
    mainHeapBytes: median(readings.map((reading) => reading.main.usedHeapBytes)),
    workflowHeapBytes: median(readings.map(workflowThreadHeap).filter(Number.isFinite)),
    otherHeapBytes: median(
      readings.map((reading) =>
        reading.threads
          .filter((thread) => thread.kind === 'other')
          .reduce((sum, thread) => sum + thread.usedHeapBytes, 0),
      ),
    ),
  };
}

function rssNow(pid: number | undefined): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
    return kb * 1024;
  } catch {
    return Number.NaN;
  }
}

interface ConfigurationResult {
  name: string;
  idle: Footprint;
  parked: Footprint;
  afterEnd: Footprint;
  peakRssBytes: number;
  peakAtSeconds: number;
  rssSeries: Array<[number, number]>;
  polls: number;
  startedInMs: number;
  /** Operations whose call had reached the seller by the end of the window. */
  called: number;
  stillSubmitted: number;
}

async function measureConfiguration(
  stack: BenchStack,
  configuration: Configuration,
  options: MemoryOptions,
): Promise<ConfigurationResult> {
  await sellerKeepsMediaBuysSubmitted(stack);
  const worker = configuration.spec
    ? await stack.startWorker({ ...configuration.spec, name: `memory: ${configuration.name}`, kind: 'orchestrator' })
    : await stack.startProductWorker(`memory: ${configuration.name}`, {
        ...configuration.product,
        runtime: configuration.runtime ?? 'compiled',
      });
  try {
    await sleep(2_000);
    const idle = await footprint(worker, options.samples);
    const run = randomUUID().slice(0, 8);
    const pid = worker.process.child.pid;
    const began = Date.now();
    const series: Array<[number, number]> = [];
    const sampler = setInterval(() => series.push([(Date.now() - began) / 1000, rssNow(pid)]), 1_000);
    let operationIds: string[] = [];
    try {
      const starts = await Promise.allSettled(
        Array.from({ length: options.operations }, async (_, index) => {
          await sleep((index * 1000) / options.startsPerSecond);
          // A start the loaded server did not answer in time is sent again (same key and request: the same operation).
          const params = createMediaBuyParams();
          for (let attempt = 1; ; attempt++) {
            try {
              return await startMediaBuy(stack, worker, `bench-memory-${run}-${index}`, params);
            } catch (error) {
              if (attempt >= 3) throw error;
              await sleep(1_000 * attempt);
            }
          }
        }),
      );
      operationIds = starts.flatMap((start) => (start.status === 'fulfilled' ? [start.value] : []));
      const failedStart = starts.find((start): start is PromiseRejectedResult => start.status === 'rejected');
      if (failedStart) {
        throw new Error(
          `${options.operations - operationIds.length} of ${options.operations} starts failed on "${configuration.name}": ${String(failedStart.reason)} (cause: ${String((failedStart.reason as { cause?: unknown })?.cause)})`,
        );
      }
      const startedInMs = Date.now() - began;
      await sleep(Math.max(0, began + options.windowSeconds * 1000 - Date.now()));
      clearInterval(sampler);
      const parked = await footprint(worker, options.samples);
      // Read from the seller without waiting: under load some calls may not have been made yet (reported).
      const keys = new Set(operationIds.map((operationId) => idempotencyKeyFor(operationId, 'call')));
      const taskIds = new Set(
        stack.seller
          .tasks()
          .filter((task) => task.idempotencyKey !== undefined && keys.has(task.idempotencyKey))
          .map((task) => task.taskId),
      );
      const polls = stack.seller.callsTo('tasks/get').filter((call) => taskIds.has(String(call.args.task_id))).length;
      const called = taskIds.size;
      const stillSubmitted = [...taskIds].filter((taskId) => stack.seller.task(taskId)?.status === 'submitted').length;
      await mapConcurrent(operationIds, 50, async (operationId) => {
        await stack.client.workflow.getHandle(operationId).terminate('bench: memory done');
        stack.running.delete(operationId);
      });
      await sleep(3_000);
      const afterEnd = await footprint(worker, options.samples);
      const peak = series.reduce((best, sample) => (sample[1] > best[1] ? sample : best), [0, 0] as [number, number]);
      return {
        name: configuration.name,
        idle,
        parked,
        afterEnd,
        peakRssBytes: Math.max(peak[1], parked.rssBytes),
        peakAtSeconds: peak[0],
        rssSeries: series,
        polls,
        startedInMs,
        called,
        stillSubmitted,
      };
    } finally {
      clearInterval(sampler);
    }
  } finally {
    await worker.process.stop(5_000);
  }
}

interface Stage {
  name: string;
  rssBytes: number;
  mainHeapBytes: number;
}

function parseStages(output: string): Stage[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('STAGE '))
    .map((line) => JSON.parse(line.slice('STAGE '.length)) as Stage);
}

/** RSS of a bare `node` and of `node --import tsx`, after a GC: what the runtime and the TypeScript loader cost. */
function nodeBaseline(withTsx: boolean): number {
  const out = execFileSync(
    process.execPath,
    ['--expose-gc', ...(withTsx ? ['--import', 'tsx'] : []), '-e', 'gc(); console.log(process.memoryUsage().rss)'],
    { encoding: 'utf8' },
  );
  return Number(out.trim());
}

function describeStages(stages: Stage[]): string {
  return stages
    .map((stage, index) => {
      const delta = index === 0 ? stage.rssBytes : stage.rssBytes - stages[index - 1].rssBytes;
      return `${stage.name}: ${index === 0 ? '' : '+'}${formatBytes(delta)} RSS (heap ${formatBytes(stage.mainHeapBytes)})`;
    })
    .join('; ');
}

export async function workerMemory(stack: BenchStack, options: MemoryOptions): Promise<BenchmarkResult> {
  const results: ConfigurationResult[] = [];
  for (const configuration of options.configurations) {
    results.push(await measureConfiguration(stack, configuration, options));
  }
  const [bareNode, nodeWithTsx] = [nodeBaseline(false), nodeBaseline(true)];
  // (Bundling with webpack in the worker's process is no longer what any worker does: only the prebuilt bundle.)
  const stagesPrebuilt = parseStages(
    await stack.runScript('bench/idle-stages.ts', { BENCH_WORKFLOW_BUNDLE: stack.bundles.orchestrator }),
  );

  const reference = results[0];
  const m = options.operations;
  const measurements: Measurement[] = [];
  for (const result of results) {
    const worst = Math.max(result.peakRssBytes, result.parked.rssBytes, result.idle.rssBytes);
    // B5 is the worker as `npm run worker` runs it (the first configuration); the others are for comparison only.
    const shipped = result === reference;
    measurements.push({
      metric: shipped ? `B5 peak RSS, ${m} parked, ${result.name}` : `peak RSS, ${m} parked, ${result.name}`,
      unit: 'bytes',
      measured: worst,
      baseline: result.idle.rssBytes,
      ratio: ratio(worst, result.idle.rssBytes),
      ...(shipped ? { goal: '<= 300 MiB', met: worst <= GOAL_BYTES } : {}),
    });
  }
  for (const result of results.slice(1)) {
    measurements.push({
      metric: `peak RSS, ${result.name} vs ${reference.name}`,
      unit: 'bytes',
      measured: result.peakRssBytes,
      baseline: reference.peakRssBytes,
      ratio: ratio(result.peakRssBytes, reference.peakRssBytes),
    });
  }
  const notes = results.map(
    (result) =>
      `${result.name}: idle RSS ${formatBytes(result.idle.rssBytes)} (main heap ${formatBytes(result.idle.mainHeapBytes)}, workflow-thread heap ${formatBytes(result.idle.workflowHeapBytes)}, other threads ${formatBytes(result.idle.otherHeapBytes)}); ` +
      `peak RSS ${formatBytes(result.peakRssBytes)} at ${result.peakAtSeconds.toFixed(0)} s; after ${options.windowSeconds} s and a GC: RSS ${formatBytes(result.parked.rssBytes)}, main heap ${formatBytes(result.parked.mainHeapBytes)}, workflow-thread heap ${formatBytes(result.parked.workflowHeapBytes)} ` +
      `(${formatBytes((result.parked.workflowHeapBytes - result.idle.workflowHeapBytes) / m)} workflow heap per parked operation); ${result.polls} polls made, ${formatBytes((result.peakRssBytes - result.idle.rssBytes) / Math.max(result.polls, 1))} peak RSS growth per poll; ` +
      `after terminating them: RSS ${formatBytes(result.afterEnd.rssBytes)}, workflow-thread heap ${formatBytes(result.afterEnd.workflowHeapBytes)}; at the end of the window ${result.called}/${m} had made their call (the rest still queued on the worker) and ${result.stillSubmitted} were submitted and polling`,
  );
  notes.unshift(
    `${m} create_media_buy operations started at ${options.startsPerSecond}/s on a fresh worker process per configuration, kept submitted by the seller (polling at their cadence); RSS sampled every second from /proc for ${options.windowSeconds} s from the first start (peak), then read after a full GC in every thread (median of ${options.samples})`,
  );
  notes.push(
    `where an idle worker's memory goes (bench/idle-stages.ts, RSS after a GC per stage): node alone ${formatBytes(bareNode)}, with tsx's loader ${formatBytes(nodeWithTsx)} (+${formatBytes(nodeWithTsx - bareNode)}); with the prebuilt bundle, under tsx: ${describeStages(stagesPrebuilt)}`,
  );
  return {
    id: 'worker-memory',
    title: '4. Worker memory (B5)',
    measured: `a worker process with ${m} operations parked in submitted and polling, peak RSS over ${options.windowSeconds} s`,
    baseline: 'the same worker process idle, read just before (fresh process per configuration)',
    measurements,
    notes,
    details: {
      ...options,
      results,
      idleStages: {
        bareNodeRss: bareNode,
        nodeWithTsxRss: nodeWithTsx,
        prebuiltBundle: stagesPrebuilt,
      },
    },
  };
}
