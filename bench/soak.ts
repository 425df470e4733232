/**
 * The soak: many create_media_buy operations parked in `submitted` on ONE worker, as `npm run worker` runs it
 * (scripts/worker.cjs: the compiled worker, plain node, MALLOC_ARENA_MAX=2), for a fixed time; then the seller
 * completes every task at a steady rate and every operation must complete (none lost) within its cadence plus 15 s
 * (none late); what is left is ended and the worker is checked for leaks.
 *
 *   npm run bench:soak                                   10,000 operations at 20 starts/s, held 5 minutes
 *   npm run bench:soak -- --operations=100000            100,000 (watcher shards: one per 5,000 operations)
 *   npm run bench:soak -- --operations=2000 --rate=25 --hold-minutes=2 --complete-rate=50
 *   npm run bench:soak -- --watcher=off                  per-operation polls, as before the task watcher
 *
 * Starts its own Temporal dev server (temporary SQLite file), the scripted seller (in this process) and the worker, on
 * loopback and free ports, and stops them again. Every 5 s it samples the worker's and the dev server's RSS and CPU
 * (from /proc); every minute it writes one row: operations started, made their call and completed, polls and list
 * calls the seller answered, the operations the task watchers hold, the worker's RSS (peak of the minute and now),
 * its main and workflow-thread heaps (after a GC, through the bench memory probe), workflow-task and activity
 * schedule-to-start latency (from the worker's own Prometheus histograms), the dev server's CPU and RSS, and how late
 * the operations that completed that minute were (their close time minus the seller's change, minus the cadence).
 *
 * Prints the per-minute table (Markdown) and writes everything to tmp/soak-results.json.
 * Latency figures move with the machine's load (other processes on 2 shared cores); RSS much less.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { z } from 'zod';
import { OrchestratorClient } from '../client/orchestrator-client';
import { statusQuery } from '../contract/operation';
import { TASK_WATCHER_WORKFLOW_TYPE, WATCH_INTERVAL_MS, taskWatcherQuery } from '../contract/task-watcher';
import { MAX_ENTRIES } from '../workflows/task-watcher/machine';
import { dataConverter } from '../client/payload-codec';
import { idempotencyKeyFor } from '../activities/idempotency';
import { WORKER_NODE_FLAGS } from '../config/worker-tuning';
import { freePort, startDevServer } from '../scripts/lib/dev-server';
import { createMediaBuyParams } from '../test/harness/demo-requests';
import { startScriptedSeller } from '../test/fixtures/scripted-seller';
import { mapConcurrent, sleep } from './async';
import { type MemoryReading, readMemory, workflowThreadHeap, writeMemoryProbe } from './memory-probe';
import { ROOT, childEnv, startNodeScript, waitUntil } from './processes';
import { formatBytes, median, quantile } from './stats';
import { connectGrpc } from '../config/grpc-connection';

const optionsSchema = z.object({
  operations: z.coerce.number().int().min(1).max(100_000).default(10_000),
  rate: z.coerce.number().positive().max(500).default(20),
  holdMinutes: z.coerce.number().min(0).max(120).default(5),
  sampleSeconds: z.coerce.number().int().min(1).max(60).default(5),
  /** Seller completions per second after the hold (0: none, every operation is ended as before). */
  completeRate: z.coerce.number().min(0).max(1_000).default(20),
  watcher: z.enum(['on', 'off']).default('on'),
  /** Task watchers per seller (ADCP_TASK_WATCHER_SHARDS); default one per 5,000 operations. */
  shards: z.coerce.number().int().min(1).max(1024).optional(),
});
type SoakOptions = z.infer<typeof optionsSchema>;

const USAGE = `usage: npm run bench:soak -- [--operations=10000] [--rate=20] [--hold-minutes=5] [--sample-seconds=5] [--complete-rate=20] [--watcher=on|off] [--shards=N]`;
/** Lateness allowed past the cadence: a completed task reaches its operation within cadence + this. */
const LATE_AFTER_MS = 15_000;

function parseOptions(argv: string[]): SoakOptions {
  const raw: Record<string, string> = {};
  for (const arg of argv) {
    const match = /^--([a-z-]+)=(.+)$/.exec(arg);
    if (!match) throw new Error(`Unknown argument "${arg}".\n${USAGE}`);
    raw[match[1].replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase())] = match[2];
  }
  const parsed = optionsSchema.strict().safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `--${issue.path.join('.') || '?'}: ${issue.message}`);
    throw new Error(`${problems.join('; ')}\n${USAGE}`);
  }
  return parsed.data;
}

const SELLER_ID = 'soak-seller';
const TOKEN_ENV = 'SOAK_SELLER_TOKEN';
const { TaskQueueType } = temporal.api.enums.v1;

/** /proc/<pid>/status VmRSS in bytes (NaN once the process is gone). */
function rssOf(pid: number | undefined): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024;
  } catch {
    return Number.NaN;
  }
}

/** User + system CPU milliseconds of a process (clock ticks are 100 per second on Linux). */
function cpuMsOf(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

interface Histogram {
  buckets: Array<[number, number]>; // [upper bound in seconds, cumulative count]
  sum: number;
  count: number;
}

/** One histogram of the worker's Prometheus text, summed over its label sets. */
function histogram(text: string, name: string): Histogram | undefined {
  const buckets = new Map<number, number>();
  let sum = 0;
  let count = 0;
  let seen = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.startsWith(`${name}_bucket`)) {
      const le = /le="([^"]+)"/.exec(line)?.[1];
      const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
      buckets.set(bound, (buckets.get(bound) ?? 0) + value);
      seen = true;
    } else if (line.startsWith(`${name}_sum`)) sum += value;
    else if (line.startsWith(`${name}_count`)) count += value;
  }
  if (!seen) return undefined;
  return { buckets: [...buckets.entries()].sort((a, b) => a[0] - b[0]), sum, count };
}

/** Mean and p95 (the upper bound of the bucket holding it) of what a histogram gained between two scrapes. */
function windowStats(
  before: Histogram | undefined,
  after: Histogram | undefined,
): { mean: number; p95: number; n: number } {
  if (!after) return { mean: Number.NaN, p95: Number.NaN, n: 0 };
  const n = after.count - (before?.count ?? 0);
  if (n <= 0) return { mean: Number.NaN, p95: Number.NaN, n: 0 };
  const mean = (after.sum - (before?.sum ?? 0)) / n;
  const previous = new Map(before?.buckets ?? []);
  const target = 0.95 * n;
  let p95 = Number.POSITIVE_INFINITY;
  for (const [bound, cumulative] of after.buckets) {
    if (cumulative - (previous.get(bound) ?? 0) >= target) {
      p95 = bound;
      break;
    }
  }
  return { mean, p95, n };
}

/** The first metric name of the text that starts with one of `names` (the SDK's suffix depends on its settings). */
function metricName(text: string, names: string[]): string | undefined {
  return names.find((name) => text.includes(`${name}_bucket`));
}

interface Row {
  minute: number;
  started: number;
  called: number;
  /** Operations completed so far (closed Completed). */
  completed: number;
  polls: number;
  /** tasks/list calls the seller answered this minute. */
  listings: number;
  /** Operations the task watchers hold (sum of their views). */
  watched: number;
  /** Of the operations that closed this minute: close time - seller change - cadence, max and p95 (ms). */
  latenessMaxMs: number;
  latenessP95Ms: number;
  closed: number;
  workerRssPeak: number;
  workerRss: number;
  mainHeap: number;
  workflowHeap: number;
  workerCpuPercent: number;
  scheduleToStartMeanMs: number;
  scheduleToStartP95Ms: number;
  workflowTasks: number;
  activityScheduleToStartMeanMs: number;
  activityScheduleToStartP95Ms: number;
  activityTasks: number;
  temporalCpuPercent: number;
  temporalRss: number;
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const began = Date.now();
  const loadAtStart = os.loadavg();
  const log = (line: string) => console.log(`[soak ${((Date.now() - began) / 1000).toFixed(0)} s] ${line}`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'adcp-soak-'));
  const cleanups: Array<() => Promise<unknown>> = [async () => rmSync(dir, { recursive: true, force: true })];
  const cleanup = async () => {
    for (const step of cleanups.reverse()) await step().catch((error) => log(`cleanup: ${(error as Error).message}`));
  };
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log(`${signal}: stopping everything...`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  try {
    log(
      `starting Temporal dev server and the scripted seller (load average ${loadAtStart.map((l) => l.toFixed(1)).join(' ')})...`,
    );
    const [server, seller] = await Promise.all([
      startDevServer({ port: await freePort(), headless: true, dbFilename: path.join(dir, 'temporal.sqlite') }),
      startScriptedSeller({ a2a: false, name: SELLER_ID }),
    ]);
    cleanups.push(() => server.stop());
    cleanups.push(() => seller.close());
    await seller.reset();
    seller.setDefaultScript('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterPolls: 1_000_000 },
    ]);

    const agentsFile = path.join(dir, 'agents.json');
    writeFileSync(
      agentsFile,
      JSON.stringify({
        agents: [{ id: SELLER_ID, name: 'Soak seller', url: seller.url, protocol: 'mcp', token_env: TOKEN_ENV }],
      }),
    );
    const taskQueue = `soak-${randomUUID().slice(0, 8)}`;
    const shards = options.shards ?? Math.max(1, Math.ceil(options.operations / 5_000));
    if (options.operations / shards > MAX_ENTRIES * 0.9)
      throw new Error(`--shards=${shards} leaves over ${MAX_ENTRIES * 0.9} operations per watcher; use more.`);
    const metricsAddress = `127.0.0.1:${await freePort()}`;
    const worker = startNodeScript('worker (soak)', 'scripts/worker.cjs', {
      tsx: false,
      env: childEnv({
        TEMPORAL_ADDRESS: server.address,
        TEMPORAL_NAMESPACE: server.namespace,
        ADCP_AGENTS_FILE: agentsFile,
        [TOKEN_ENV]: seller.authToken,
        ADCP_TASK_QUEUE: taskQueue,
        ADCP_RECONCILE_EVERY: 'off',
        ADCP_METRICS_ADDRESS: metricsAddress,
        MALLOC_ARENA_MAX: '2',
        // A worker of its own: fail rather than measure the tsx fallback.
        ADCP_WORKER_RUNTIME: 'compiled',
        ADCP_TASK_WATCHER: options.watcher,
        ADCP_TASK_WATCHER_SHARDS: String(shards),
      }),
      // BENCH_CPU_PROFILE=<dir>: the worker writes a V8 CPU profile there when it stops (bench/README.md).
      execArgv: [
        '--expose-gc',
        '--require',
        writeMemoryProbe(dir),
        ...WORKER_NODE_FLAGS,
        ...(process.env.BENCH_CPU_PROFILE
          ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROFILE)}`]
          : []),
      ],
    });
    cleanups.push(() => worker.stop(20_000));
    let stopping = false;
    cleanups.push(async () => {
      stopping = true;
    });
    // A worker that dies mid-soak says why (its output's tail), rather than leaving a closed IPC channel to explain.
    worker.child.once('exit', (code, signal) => {
      if (!stopping) log(`the worker exited (${code ?? signal}); its last output:\n${worker.output().slice(-3_000)}`);
    });

    const connection = await connectGrpc({ address: server.address });
    cleanups.push(() => connection.close());
    const client = new Client({ connection, namespace: server.namespace, dataConverter: dataConverter() });
    await waitUntil(worker, `pollers on ${taskQueue}`, async () => {
      for (const taskQueueType of [TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY]) {
        const answer = await client.workflowService.describeTaskQueue({
          namespace: server.namespace,
          taskQueue: { name: taskQueue },
          taskQueueType,
        });
        if ((answer.pollers ?? []).length === 0) return false;
      }
      return true;
    });
    const orchestrator = new OrchestratorClient({ client, taskQueue, knownSeller: (id) => id === SELLER_ID });
    const scrape = async () => {
      const response = await fetch(`http://${metricsAddress}/metrics`).catch(() => undefined);
      return response?.ok ? response.text() : '';
    };
    const footprint = async (samples = 3) => {
      const readings: MemoryReading[] = [];
      for (let index = 0; index < samples; index++) readings.push(await readMemory(worker.child, 60_000));
      return {
        rssBytes: median(readings.map((reading) => reading.rssBytes)),
        mainHeapBytes: median(readings.map((reading) => reading.main.usedHeapBytes)),
        workflowHeapBytes: median(readings.map(workflowThreadHeap).filter(Number.isFinite)),
      };
    };
    await sleep(3_000);
    const idle = await footprint();
    log(
      `worker idle: RSS ${formatBytes(idle.rssBytes)}, main heap ${formatBytes(idle.mainHeapBytes)}, workflow heap ${formatBytes(idle.workflowHeapBytes)}`,
    );

    // Samples every few seconds; a row per minute.
    const t0 = Date.now();
    const samples: Array<{
      t: number;
      workerRss: number;
      temporalRss: number;
      workerCpuMs: number;
      temporalCpuMs: number;
    }> = [];
    const sample = () =>
      samples.push({
        t: (Date.now() - t0) / 1000,
        workerRss: rssOf(worker.child.pid),
        temporalRss: rssOf(server.child.pid),
        workerCpuMs: cpuMsOf(worker.child.pid),
        temporalCpuMs: cpuMsOf(server.child.pid),
      });
    sample();
    const sampler = setInterval(sample, options.sampleSeconds * 1000);
    cleanups.push(async () => clearInterval(sampler));

    const operationIds: string[] = [];
    let startFailures = 0;
    const rows: Row[] = [];
    let lastMetrics = await scrape();
    let lastPolls = 0;
    let lastListings = 0;
    /** Operation -> when the seller completed its task / when its workflow closed Completed (ms). */
    const changedAt = new Map<string, number>();
    const closedAt = new Map<string, number>();
    const taskOf = new Map<string, string>();
    let closedQueriedTo = 0;
    /** The operations that closed Completed since the last call (visibility, by close time). */
    const collectClosed = async (): Promise<string[]> => {
      if (changedAt.size === 0) return [];
      const from = new Date(Math.max(closedQueriedTo - 10_000, 0)).toISOString();
      const newly: string[] = [];
      let latest = closedQueriedTo;
      const query = `WorkflowType = 'adcpOperation' AND TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Completed' AND CloseTime >= '${from}'`;
      for await (const execution of client.workflow.list({ query })) {
        if (closedAt.has(execution.workflowId) || !execution.closeTime) continue;
        const at = execution.closeTime.getTime();
        closedAt.set(execution.workflowId, at);
        newly.push(execution.workflowId);
        latest = Math.max(latest, at);
      }
      closedQueriedTo = latest;
      return newly;
    };
    const watchedNow = async (): Promise<number> => {
      let watching = 0;
      const query = `WorkflowType = '${TASK_WATCHER_WORKFLOW_TYPE}' AND TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Running'`;
      for await (const execution of client.workflow.list({ query })) {
        const view = await client
          .withDeadline(Date.now() + 10_000, () =>
            client.workflow.getHandle(execution.workflowId).query(taskWatcherQuery),
          )
          .catch(() => undefined);
        watching += view?.watching ?? 0;
      }
      return watching;
    };
    let minuteStartSample = 0;
    let minute = 0;
    const callKeys = new Map<string, string>(); // idempotency key of the call -> operation
    const calledCount = () => {
      let called = 0;
      for (const task of seller.tasks())
        if (task.idempotencyKey !== undefined && callKeys.has(task.idempotencyKey)) called++;
      return called;
    };
    const writeRow = async () => {
      minute++;
      const memory = await footprint(1).catch(() => ({
        rssBytes: Number.NaN,
        mainHeapBytes: Number.NaN,
        workflowHeapBytes: Number.NaN,
      }));
      sample();
      const window = samples.slice(minuteStartSample);
      minuteStartSample = samples.length - 1;
      const first = window[0];
      const last = window[window.length - 1];
      const seconds = Math.max(last.t - first.t, 1);
      const metrics = await scrape();
      // The worker exports durations in seconds (useSecondsForDurations), under names without a unit suffix.
      const windowOf = (names: string[]) => {
        const name = metricName(metrics, names);
        return name
          ? windowStats(histogram(lastMetrics, name), histogram(metrics, name))
          : windowStats(undefined, undefined);
      };
      const latency = windowOf([
        'temporal_workflow_task_schedule_to_start_latency_seconds',
        'temporal_workflow_task_schedule_to_start_latency',
      ]);
      const activityLatency = windowOf([
        'temporal_activity_schedule_to_start_latency_seconds',
        'temporal_activity_schedule_to_start_latency',
      ]);
      const scale = 1000;
      lastMetrics = metrics;
      const polls = seller.callsTo('tasks/get').length;
      const listings = seller.callsTo('tasks/list').length;
      const closedThisMinute = await collectClosed();
      const lateness = closedThisMinute
        .map((operationId) => closedAt.get(operationId)! - changedAt.get(operationId)! - WATCH_INTERVAL_MS)
        .filter(Number.isFinite);
      const watched = options.watcher === 'on' ? await watchedNow() : 0;
      const row: Row = {
        minute,
        started: operationIds.length,
        called: calledCount(),
        completed: closedAt.size,
        polls: polls - lastPolls,
        listings: listings - lastListings,
        watched,
        latenessMaxMs: lateness.length > 0 ? Math.max(...lateness) : Number.NaN,
        latenessP95Ms: lateness.length > 0 ? quantile(lateness, 0.95) : Number.NaN,
        closed: closedThisMinute.length,
        workerRssPeak: Math.max(...window.map((s) => s.workerRss)),
        workerRss: last.workerRss,
        mainHeap: memory.mainHeapBytes,
        workflowHeap: memory.workflowHeapBytes,
        workerCpuPercent: ((last.workerCpuMs - first.workerCpuMs) / (seconds * 1000)) * 100,
        scheduleToStartMeanMs: latency.mean * scale,
        scheduleToStartP95Ms: latency.p95 * scale,
        workflowTasks: latency.n,
        activityScheduleToStartMeanMs: activityLatency.mean * scale,
        activityScheduleToStartP95Ms: activityLatency.p95 * scale,
        activityTasks: activityLatency.n,
        temporalCpuPercent: ((last.temporalCpuMs - first.temporalCpuMs) / (seconds * 1000)) * 100,
        temporalRss: last.temporalRss,
      };
      lastPolls = polls;
      lastListings = listings;
      rows.push(row);
      log(
        `minute ${row.minute}: started ${row.started}, called ${row.called}, polls ${row.polls}, worker RSS ${formatBytes(row.workerRss)} (peak ${formatBytes(row.workerRssPeak)}), ` +
          `heaps ${formatBytes(row.mainHeap)} / ${formatBytes(row.workflowHeap)}, worker CPU ${row.workerCpuPercent.toFixed(0)}%, ` +
          `schedule-to-start mean ${row.scheduleToStartMeanMs.toFixed(0)} ms p95 <= ${row.scheduleToStartP95Ms} ms (${row.workflowTasks} workflow tasks), ` +
          `activities ${row.activityScheduleToStartMeanMs.toFixed(0)} ms p95 <= ${row.activityScheduleToStartP95Ms} ms (${row.activityTasks}), ` +
          `Temporal CPU ${row.temporalCpuPercent.toFixed(0)}% RSS ${formatBytes(row.temporalRss)}`,
      );
    };
    let rowTimer: NodeJS.Timeout | undefined;
    let rowWriting: Promise<void> = Promise.resolve();
    const scheduleRows = () => {
      rowTimer = setInterval(() => {
        rowWriting = rowWriting.then(writeRow).catch((error: unknown) => log(`row: ${(error as Error).message}`));
      }, 60_000);
    };
    scheduleRows();
    cleanups.push(async () => clearInterval(rowTimer));

    log(
      `starting ${options.operations} create_media_buy operations at ${options.rate}/s on task queue ${taskQueue}...`,
    );
    const run = randomUUID().slice(0, 8);
    const startBegan = Date.now();
    await mapConcurrent(
      Array.from({ length: options.operations }, (_, index) => index),
      64,
      async (index) => {
        const due = startBegan + (index * 1000) / options.rate;
        if (due > Date.now()) await sleep(due - Date.now());
        // A start the loaded server did not answer in time is sent again (same key and request: the same operation).
        const params = createMediaBuyParams();
        for (let attempt = 1; attempt <= 3; attempt++) {
          try {
            const { operationId } = await orchestrator.start({
              sellerId: SELLER_ID,
              task: 'create_media_buy',
              params,
              idempotencyKey: `soak-${run}-${index}`,
            });
            operationIds.push(operationId);
            callKeys.set(idempotencyKeyFor(operationId, 'call'), operationId);
            return;
          } catch (error) {
            if (attempt < 3) await sleep(1_000 * attempt);
            else if (startFailures++ === 0) log(`a start failed: ${(error as Error).message}`);
          }
        }
      },
    );
    const startSeconds = (Date.now() - startBegan) / 1000;
    log(
      `${operationIds.length} started in ${startSeconds.toFixed(0)} s (${startFailures} failed); holding ${options.holdMinutes} min...`,
    );
    await sleep(options.holdMinutes * 60_000);
    const parkedFootprint = await footprint();
    const calledAtEnd = calledCount();
    const parkedTasks = seller
      .tasks()
      .filter((task) => task.idempotencyKey !== undefined && callKeys.has(task.idempotencyKey));
    const stillSubmitted = parkedTasks.filter((task) => task.status === 'submitted').length;
    for (const task of parkedTasks) taskOf.set(callKeys.get(task.idempotencyKey!)!, task.taskId);

    // The seller completes every task, in the order the operations started, at a steady rate.
    let completionSeconds = 0;
    let lastChangeAt = 0;
    if (options.completeRate > 0) {
      log(`the seller completes ${taskOf.size} tasks at ${options.completeRate}/s...`);
      const completeBegan = Date.now();
      let index = 0;
      for (const operationId of operationIds) {
        const taskId = taskOf.get(operationId);
        if (!taskId) continue;
        const due = completeBegan + (index++ * 1000) / options.completeRate;
        if (due > Date.now()) await sleep(due - Date.now());
        try {
          const advanced = seller.advanceTask(taskId);
          lastChangeAt = Date.parse(advanced.history[advanced.history.length - 1].at);
          changedAt.set(operationId, lastChangeAt);
        } catch (error) {
          log(`could not complete ${taskId}: ${(error as Error).message}`);
        }
      }
      // Every one should close within the cadence + 15 s of its change; allow a little more before calling it lost.
      const waitUntil = lastChangeAt + WATCH_INTERVAL_MS + LATE_AFTER_MS + 60_000;
      while (Date.now() < waitUntil) {
        await sleep(10_000);
        await rowWriting;
        if (options.watcher === 'on' && closedAt.size >= changedAt.size) break;
        await collectClosed();
        if (closedAt.size >= changedAt.size) break;
      }
      completionSeconds = (Date.now() - completeBegan) / 1000;
    }
    await rowWriting;
    clearInterval(rowTimer);
    await writeRow();
    await collectClosed();
    const latenessAll = [...changedAt.keys()].map((operationId) =>
      closedAt.has(operationId)
        ? closedAt.get(operationId)! - changedAt.get(operationId)! - WATCH_INTERVAL_MS
        : Number.POSITIVE_INFINITY,
    );
    const lost = latenessAll.filter((late) => late === Number.POSITIVE_INFINITY).length;
    const late = latenessAll.filter((value) => value > LATE_AFTER_MS).length;
    const finite = latenessAll.filter(Number.isFinite);
    // What the operations that did not close knew, before they are ended: for finding out why (up to 20).
    const lostOperations = await mapConcurrent(
      [...changedAt.keys()].filter((operationId) => !closedAt.has(operationId)).slice(0, 20),
      4,
      async (operationId) => {
        const state = await client.workflow
          .getHandle(operationId)
          .query(statusQuery)
          .catch((error: unknown) => ({ queryFailed: (error as Error).message }));
        return { operationId, changedAt: new Date(changedAt.get(operationId)!).toISOString(), state };
      },
    );
    for (const entry of lostOperations.slice(0, 3))
      log(
        `not closed: ${entry.operationId}, changed at ${entry.changedAt}: ${JSON.stringify(entry.state).slice(0, 600)}`,
      );

    log(`ending what is left of ${operationIds.length} operations...`);
    const endBegan = Date.now();
    await mapConcurrent(
      operationIds.filter((operationId) => !closedAt.has(operationId)),
      32,
      async (operationId) => {
        await client.workflow
          .getHandle(operationId)
          .terminate('soak finished')
          .catch(() => undefined);
      },
    );
    const endSeconds = (Date.now() - endBegan) / 1000;
    await sleep(10_000);
    // The worker's seller-capabilities workflow (one per seller) is meant to keep running: only operations count.
    const openAfter = (
      await client.workflow.count(
        `TaskQueue="${taskQueue}" AND ExecutionStatus="Running" AND WorkflowType="adcpOperation"`,
      )
    ).count;
    const afterEnd = await footprint();
    log('idle for 60 s more, then the last reading...');
    await sleep(60_000);
    const afterIdle = await footprint();
    const metrics = await scrape();
    const slotsUsed = metrics
      .split('\n')
      .filter((line) => /^temporal_worker_task_slots_used\{/.test(line))
      .map((line) => `${/worker_type="([^"]+)"/.exec(line)?.[1] ?? '?'}=${line.slice(line.lastIndexOf(' ') + 1)}`);
    const stickyCache = metrics
      .split('\n')
      .find((line) => /^temporal_sticky_cache_size/.test(line))
      ?.split(' ')
      .pop();
    clearInterval(sampler);
    await cleanup();

    const summary = {
      options,
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: os.loadavg(),
      durationSeconds: (Date.now() - began) / 1000,
      started: operationIds.length,
      startFailures,
      startSeconds,
      calledAtEnd,
      stillSubmitted,
      shards,
      completion: {
        rate: options.completeRate,
        seconds: completionSeconds,
        changed: changedAt.size,
        completed: [...changedAt.keys()].filter((operationId) => closedAt.has(operationId)).length,
        lost,
        lostOperations,
        lateBeyond15s: late,
        latenessMs:
          finite.length > 0
            ? { max: Math.max(...finite), p95: quantile(finite, 0.95), median: quantile(finite, 0.5) }
            : undefined,
      },
      idle,
      parked: parkedFootprint,
      peakWorkerRss: Math.max(...samples.map((s) => s.workerRss).filter(Number.isFinite)),
      peakTemporalRss: Math.max(...samples.map((s) => s.temporalRss).filter(Number.isFinite)),
      endSeconds,
      openAfterEnd: openAfter,
      afterEnd,
      afterIdle,
      slotsUsedAfterEnd: slotsUsed,
      stickyCacheAfterEnd: stickyCache,
    };
    const file = path.join(ROOT, 'tmp', 'soak-results.json');
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify({ ...summary, rows, samples }, null, 2)}\n`);

    const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
    const late_ = (ms: number) => (Number.isFinite(ms) ? (ms / 1000).toFixed(1) : '-');
    const s = (ms: number) =>
      Number.isFinite(ms) ? (ms / 1000).toFixed(ms < 10_000 ? 2 : 0) : ms === Number.POSITIVE_INFINITY ? '>1000' : '-';
    console.log(
      `\n| min | started | called | completed | polls | lists | watched | worker RSS peak / end (MiB) | main / workflow heap (MiB) | worker CPU | WFT schedule-to-start mean / p95 (s) | WFTs | activity schedule-to-start mean / p95 (s) | Temporal CPU | Temporal RSS (MiB) | closed | late max / p95 (s) |`,
    );
    console.log(
      `| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |`,
    );
    for (const row of rows) {
      console.log(
        `| ${row.minute} | ${row.started} | ${row.called} | ${row.completed} | ${row.polls} | ${row.listings} | ${row.watched} | ${mib(row.workerRssPeak)} / ${mib(row.workerRss)} | ${mib(row.mainHeap)} / ${mib(row.workflowHeap)} | ${row.workerCpuPercent.toFixed(0)}% | ${s(row.scheduleToStartMeanMs)} / ${s(row.scheduleToStartP95Ms)} | ${row.workflowTasks} | ${s(row.activityScheduleToStartMeanMs)} / ${s(row.activityScheduleToStartP95Ms)} | ${row.temporalCpuPercent.toFixed(0)}% | ${mib(row.temporalRss)} | ${row.closed} | ${late_(row.latenessMaxMs)} / ${late_(row.latenessP95Ms)} |`,
      );
    }
    console.log(
      `\n${summary.started} started in ${startSeconds.toFixed(0)} s (${startFailures} failed); ${calledAtEnd} had made their call at the end of the hold, ${stillSubmitted} submitted (watcher ${options.watcher}, ${shards} shard(s)). ` +
        `Completion at ${options.completeRate}/s: ${summary.completion.completed} of ${summary.completion.changed} completed in ${completionSeconds.toFixed(0)} s, ${lost} lost, ${late} late beyond cadence + ${LATE_AFTER_MS / 1000} s` +
        (summary.completion.latenessMs
          ? ` (lateness past the ${WATCH_INTERVAL_MS / 1000} s cadence: median ${late_(summary.completion.latenessMs.median)} s, p95 ${late_(summary.completion.latenessMs.p95)} s, max ${late_(summary.completion.latenessMs.max)} s). `
          : '. ') +
        `Worker: idle ${formatBytes(idle.rssBytes)}, peak ${formatBytes(summary.peakWorkerRss)}, parked after a GC ${formatBytes(parkedFootprint.rssBytes)} (heaps ${formatBytes(parkedFootprint.mainHeapBytes)} / ${formatBytes(parkedFootprint.workflowHeapBytes)}); ` +
        `ended in ${endSeconds.toFixed(0)} s; ${openAfter} still open; after a GC ${formatBytes(afterEnd.rssBytes)} (heaps ${formatBytes(afterEnd.mainHeapBytes)} / ${formatBytes(afterEnd.workflowHeapBytes)}), ` +
        `60 s later ${formatBytes(afterIdle.rssBytes)} (heaps ${formatBytes(afterIdle.mainHeapBytes)} / ${formatBytes(afterIdle.workflowHeapBytes)}); task slots in use ${slotsUsed.join(', ') || 'n/a'}, sticky cache ${stickyCache ?? 'n/a'}. ` +
        `Temporal peak RSS ${formatBytes(summary.peakTemporalRss)}. Load average ${loadAtStart.map((l) => l.toFixed(1)).join(' ')} at start, ${summary.loadAverageAtEnd.map((l) => l.toFixed(1)).join(' ')} at the end. Results: tmp/soak-results.json`,
    );
    if (openAfter > 0 || lost > 0 || late > 0) process.exitCode = 1;
  } catch (error) {
    await cleanup();
    throw error;
  }
}

main().catch((error) => {
  console.error(`soak: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
