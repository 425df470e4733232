/**
 * Benchmark 4: what a waiting operation costs the worker. The polling-only worker process (workers/main.ts) is
 * read idle, then with M create_media_buy operations parked in `submitted`: each workflow sits in the worker's
 * sticky cache while its polling activity waits between looks (retry backoff on the server, so no activity runs
 * on the worker in between). Readings come from the memory probe preloaded into that process (memory-probe.ts):
 * a full GC in each thread first, then process RSS and the V8 heap of the main thread and of the SDK's workflow
 * thread. Each reading is the median of a few samples.
 */
import { randomUUID } from 'node:crypto';
import { type MemoryReading, workflowThreadHeap } from './memory-probe';
import type { BenchmarkResult } from './report';
import { sellerKeepsMediaBuysSubmitted, startMediaBuy } from './operations';
import type { BenchStack, BenchWorker } from './stack';
import { mapConcurrent, sleep, waitFor } from './async';
import { formatBytes, median, ratio } from './stats';

export interface MemoryOptions {
  operations: number;
  /** How fast the parked operations are started. */
  startsPerSecond: number;
  /** Readings per state; the median is reported. */
  samples: number;
}

interface Footprint {
  rssBytes: number;
  mainHeapBytes: number;
  workflowHeapBytes: number;
}

async function footprint(
  worker: BenchWorker,
  samples: number,
): Promise<{ footprint: Footprint; readings: MemoryReading[] }> {
  const readings: MemoryReading[] = [];
  for (let index = 0; index < samples; index++) {
    readings.push(await worker.memory());
    if (index < samples - 1) await sleep(200);
  }
  return {
    footprint: {
      rssBytes: median(readings.map((reading) => reading.rssBytes)),
      mainHeapBytes: median(readings.map((reading) => reading.main.usedHeapBytes)),
      workflowHeapBytes: median(readings.map(workflowThreadHeap)),
    },
    readings,
  };
}

/** Polls a parked operation has had (the looks at about 2, 6 and 14 s) before it counts as settled. */
const SETTLED_AFTER_POLLS = 3;

/** For each of the first looks, the median time after its task was created at which the seller saw it. */
function lookTimes(stack: BenchStack, taskIds: string[]): number[] {
  const created = new Map(taskIds.map((taskId) => [taskId, Date.parse(stack.seller.task(taskId)?.createdAt ?? '')]));
  const offsets = new Map<string, number[]>();
  for (const call of stack.seller.callsTo('tasks/get')) {
    const taskId = String(call.args.task_id);
    const createdAt = created.get(taskId);
    if (createdAt === undefined) continue;
    const list = offsets.get(taskId) ?? [];
    list.push(Date.parse(call.at) - createdAt);
    offsets.set(taskId, list);
  }
  return [0, 1, 2].map((look) =>
    median([...offsets.values()].map((list) => list[look]).filter((value) => value !== undefined)),
  );
}

export async function workerMemory(stack: BenchStack, options: MemoryOptions): Promise<BenchmarkResult> {
  const { seller } = stack;
  const worker = stack.pollingWorker;
  const tasks = await sellerKeepsMediaBuysSubmitted(stack);
  const run = randomUUID().slice(0, 8);

  // Let the previous benchmark's last workflow tasks, evictions and connection clean-ups finish first.
  await sleep(3_000);
  const idle = await footprint(worker, options.samples);

  const began = Date.now();
  // Operations arrive at a steady rate, as they would in service, not as one burst.
  const operationIds = await Promise.all(
    Array.from({ length: options.operations }, async (_, index) => {
      await sleep((index * 1000) / options.startsPerSecond);
      return startMediaBuy(stack, worker, `bench-memory-${run}-${index}`);
    }),
  );
  const startedInMs = Date.now() - began;
  const parked = await Promise.all(
    operationIds.map(async (operationId) => ({ operationId, taskId: (await tasks.forOperation(operationId)).taskId })),
  );
  // Settled: every operation has made its first looks (about 2, 6 and 14 s in) and waits for the next (30 s).
  await waitFor(
    () => parked.every(({ taskId }) => (seller.task(taskId)?.polls ?? 0) >= SETTLED_AFTER_POLLS),
    `${options.operations} operations to poll ${SETTLED_AFTER_POLLS} times`,
    120_000,
  );
  const settledInMs = Date.now() - began;
  await sleep(500); // the last looks' workflow-side bookkeeping
  const loaded = await footprint(worker, options.samples);
  const stillSubmitted = parked.filter(({ taskId }) => seller.task(taskId)?.status === 'submitted').length;
  const looks = lookTimes(
    stack,
    parked.map(({ taskId }) => taskId),
  );

  // End them the way a caller would, so each workflow finishes on the worker and leaves its cache.
  const endedAt = Date.now();
  await mapConcurrent(parked, 25, async ({ operationId }) => {
    await worker.orchestrator.cancel(operationId, { requestedBy: 'bench', reason: 'memory benchmark done' });
    await worker.orchestrator.result(operationId);
    stack.running.delete(operationId);
  });
  const canceledInMs = Date.now() - endedAt;
  await sleep(500);
  const after = await footprint(worker, options.samples);

  const perOperation = (key: keyof Footprint) => (loaded.footprint[key] - idle.footprint[key]) / options.operations;
  const row = (metric: string, key: keyof Footprint) => ({
    metric,
    unit: 'bytes' as const,
    measured: loaded.footprint[key],
    baseline: idle.footprint[key],
    ratio: ratio(loaded.footprint[key], idle.footprint[key]),
  });
  const m = options.operations;
  return {
    id: 'worker-memory',
    title: '4. Worker memory',
    measured: `the polling-only worker process with ${m} operations parked in submitted`,
    baseline: 'the same worker process idle (warm: it ran the benchmarks before), read just before',
    measurements: [
      row(`workflow-thread V8 heap, ${m} parked`, 'workflowHeapBytes'),
      row(`main-thread V8 heap, ${m} parked`, 'mainHeapBytes'),
      row(`process RSS, ${m} parked`, 'rssBytes'),
    ],
    notes: [
      `per parked operation: workflow-thread heap ${formatBytes(perOperation('workflowHeapBytes'))}, main-thread heap ${formatBytes(perOperation('mainHeapBytes'))}, RSS ${formatBytes(perOperation('rssBytes'))} (RSS also moves with allocator high-water marks from earlier load: read the heap figures as the per-operation cost)`,
      `measured in the worker process itself (workers/main.ts preloaded with bench/memory-probe.ts): full GC per thread, then RSS and V8 used heap; median of ${options.samples} readings each`,
      `${m} operations started at ${options.startsPerSecond}/s (${(startedInMs / 1000).toFixed(1)} s); all had polled the seller ${SETTLED_AFTER_POLLS} times (looks at about 2, 6, 14 s; the next at 30 s) ${(settledInMs / 1000).toFixed(1)} s after the first start; ${stillSubmitted}/${m} still submitted when read`,
      `under this load the looks came ${looks.map((ms) => (ms / 1000).toFixed(1)).join(', ')} s after submission (median per look; the cadence says 2, 6, 14 s)`,
      `after canceling them through the orchestrator (${(canceledInMs / 1000).toFixed(1)} s): RSS ${formatBytes(after.footprint.rssBytes)}, workflow-thread heap ${formatBytes(after.footprint.workflowHeapBytes)}, main-thread heap ${formatBytes(after.footprint.mainHeapBytes)} (RSS seldom shrinks: freed pages stay with the allocator)`,
    ],
    details: {
      operations: m,
      startsPerSecond: options.startsPerSecond,
      medianLookAfterSubmissionMs: looks,
      idle: idle.footprint,
      parked: loaded.footprint,
      afterCancel: after.footprint,
      perOperationBytes: {
        rss: perOperation('rssBytes'),
        workflowHeap: perOperation('workflowHeapBytes'),
        mainHeap: perOperation('mainHeapBytes'),
      },
      readings: { idle: idle.readings, parked: loaded.readings, afterCancel: after.readings },
    },
  };
}
