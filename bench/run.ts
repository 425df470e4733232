/**
 * `npm run bench`: the project's speed and memory benchmarks, each measured side by side with a baseline in the
 * same run and reported as a ratio (see bench/README.md). Starts everything it needs on loopback (Temporal dev
 * server, scripted seller, gateway and worker processes) and stops it again.
 *
 *   npm run bench                          all of them, about 30 minutes on 2 shared cores
 *   npm run bench -- --only=latency,memory  a subset (see --help)
 *   npm run bench -- --help                 the benchmarks and options
 *
 * Prints a table and writes tmp/bench-results.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { webhookLatency } from './latency';
import { workerMemory } from './memory';
import { orchestrationOverhead } from './overhead';
import { ROOT } from './processes';
import { type BenchmarkResult, renderTable } from './report';
import { type BenchStack, startBenchStack } from './stack';
import { gatewayThroughput } from './throughput';
import { longWaitHistory } from './long-wait';
import { workerKill } from './kill';
import { parkedOperations } from './parked';
import { schemaCheckCpu } from './schema-check';

const BENCHMARKS: Record<string, (stack: BenchStack, log: (line: string) => void) => Promise<BenchmarkResult>> = {
  latency: (stack) => webhookLatency(stack, { perMode: 20, firstChangeMs: 2_500, lastChangeMs: 13_500 }),
  throughput: (stack) =>
    gatewayThroughput(stack, {
      operations: 24,
      requestsPerRound: 600,
      rounds: 2,
      concurrency: 16,
      warmup: 60,
      pacedSeconds: 5,
    }),
  overhead: (stack) => orchestrationOverhead(stack, { concurrency: 50, rounds: 3, warmup: 10 }),
  memory: (stack) =>
    workerMemory(stack, {
      operations: 1_000,
      startsPerSecond: 25,
      windowSeconds: 70,
      samples: 3,
      configurations: [
        // `npm run worker` since run G: scripts/worker.cjs, the compiled worker, plain node with WORKER_NODE_FLAGS.
        { name: 'as shipped (compiled, small V8 heap)' },
        // The same without the heap flags: V8's default heap sizing.
        { name: 'compiled, default V8 heap', product: { nodeFlags: [] } },
        // What `npm run worker` ran until run G: workers/main.ts under tsx, default heap (same code, same settings).
        { name: 'under tsx (run F)', runtime: 'tsx' },
      ],
    }),
  'long-wait': (stack) => longWaitHistory(stack, { waitHours: 23 }),
  'schema-check': () => schemaCheckCpu({ iterations: 10_000 }),
  kill: (stack) =>
    workerKill(stack, {
      waiting: Number(process.env.BENCH_KILL_WAITING ?? 300),
      inFlight: Number(process.env.BENCH_KILL_IN_FLIGHT ?? 30),
      startsPerSecond: 40,
      restartAfterMs: 1_000,
    }),
  parked: (stack, log) =>
    parkedOperations(
      stack,
      {
        operations: Number(process.env.BENCH_PARKED_OPERATIONS ?? 1_000),
        startsPerSecond: Number(process.env.BENCH_PARKED_START_RATE ?? 25),
        settleSeconds: 90,
        windowSeconds: Number(process.env.BENCH_PARKED_WINDOW_SECONDS ?? 300),
        idleSeconds: Number(process.env.BENCH_PARKED_IDLE_SECONDS ?? 300),
        changes: 20,
        unlisted: 10,
      },
      log,
    ),
};

const RESULTS_FILE = path.join(ROOT, 'tmp', 'bench-results.json');
/** A benchmark that takes this long is stuck (the memory benchmark takes 8 to 10 minutes on 2 shared cores). */
const BENCHMARK_TIMEOUT_MS = 15 * 60_000;
/**
 * Longer bounds: parked runs two modes in turn, each a settle, an idle reading, the starts, a window and 20 changes
 * (about 26 minutes with 1,000 operations, 39 with 2,000 at the default 300 s readings).
 */
const TIMEOUTS_MS: Record<string, number> = { parked: 60 * 60_000 };

function deadline(name: string, ms: number): Promise<never> {
  return new Promise((_, reject) => {
    setTimeout(() => reject(new Error(`Benchmark ${name} did not finish within ${ms / 1000} s.`)), ms).unref();
  });
}

function selected(argv: string[]): string[] {
  const only = argv.find((arg) => arg.startsWith('--only='))?.slice('--only='.length);
  if (!only) return Object.keys(BENCHMARKS);
  const names = only.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !(name in BENCHMARKS));
  if (unknown.length > 0) {
    throw new Error(`Unknown benchmark ${unknown.join(', ')}; choose from ${Object.keys(BENCHMARKS).join(', ')}.`);
  }
  return names;
}

/** One line per benchmark for --help: what it measures and which goal of issue 15 it reports. */
const DESCRIPTIONS: Record<string, string> = {
  latency: 'webhook vs polling: seller change -> workflow state (20 create_media_buy per mode)',
  throughput: 'B2: signed webhooks/s through the gateway vs plain signals; p99 at half the gateway maximum',
  overhead: 'B1: get_products as operations vs a bare workflow+activity vs direct SDK calls; B3 sync-read history',
  memory: 'B5: worker RSS with 1,000 operations parked and polling, peak, per configuration; idle breakdown',
  kill: 'B4: SIGKILL a worker with operations waiting and calls in flight; retry and poll delays, lost/duplicated',
  'long-wait': 'B3: history events of a 23-hour polled create_media_buy (time-skipping server)',
  parked:
    'B6: engine CPU per parked operation-hour with the task watcher vs per-operation polls; change -> state delay',
  'schema-check': 'B7: CPU per seller answer checked against its AdCP version schema (in-process, no stack needed)',
};

const HELP = `Usage: npm run bench [-- options]

Runs the project's benchmarks, each against a baseline measured in the same run, on a stack it starts on loopback
(Temporal dev server, scripted seller, gateway and worker processes, free ports) and stops again. Prints a table
with each goal of issue 15 beside its value, and writes every raw number to tmp/bench-results.json.
See bench/README.md.

Benchmarks (in the order they run):
${Object.keys(BENCHMARKS)
  .map((name) => `  ${name.padEnd(11)} ${DESCRIPTIONS[name] ?? ''}`)
  .join('\n')}

Options:
  --only=NAMES   a comma-separated subset of the names above (default: all)
  --help, -h     print this help and exit, starting nothing

Environment:
  BENCH_CPU_PROFILE=DIR   the gateway and the product workers write V8 CPU profiles to DIR when they stop
  BENCH_KILL_WAITING=N    kill: operations waiting when the worker is killed (default 300)
  BENCH_KILL_IN_FLIGHT=N  kill: calls in flight when the worker is killed (default 30)
  BENCH_PARKED_OPERATIONS=N        parked: operations parked per mode (default 1000)
  BENCH_PARKED_WINDOW_SECONDS=N    parked: the CPU window (default 300)
  BENCH_PARKED_IDLE_SECONDS=N      parked: the idle reading before each mode (default 300)
  BENCH_PARKED_START_RATE=N        parked: operation starts per second (default 25; lower it on a loaded machine)

All of them take about 30 minutes on 2 shared cores; each benchmark is stopped after 15 minutes (parked: 30).
`;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(HELP);
    return;
  }
  const unknownOptions = args.filter((arg) => !arg.startsWith('--only='));
  if (unknownOptions.length > 0) {
    throw new Error(`Unknown option ${unknownOptions.join(' ')}; see \`npm run bench -- --help\`.`);
  }
  const names = selected(args);
  const startedAt = new Date();
  const loadAtStart = os.loadavg();
  const elapsed = () => `${((Date.now() - startedAt.getTime()) / 1000).toFixed(1)} s`;
  const log = (line: string) => console.log(`[bench ${elapsed()}] ${line}`);

  const stack = await startBenchStack(log);
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= stack.close());
  // Ctrl-C reaches this process twice (from the terminal and relayed by tsx): stop once, ignore the repeat.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      log(`${signal}: stopping everything...`);
      void stop().finally(() => process.exit(130));
    });
  }

  const results: BenchmarkResult[] = [];
  const failures: Array<{ name: string; message: string }> = [];
  let stackFailed = false;
  stack.failure.catch(() => (stackFailed = true));
  try {
    for (const name of names) {
      log(`running ${name}...`);
      const began = Date.now();
      const benchmark = BENCHMARKS[name](stack, log);
      benchmark.catch(() => undefined); // if the race below is lost, its late failure is not news
      try {
        const result = await Promise.race([
          benchmark,
          stack.failure,
          deadline(name, TIMEOUTS_MS[name] ?? BENCHMARK_TIMEOUT_MS),
        ]);
        result.durationMs = Date.now() - began;
        results.push(result);
        log(`${name} done in ${(result.durationMs / 1000).toFixed(1)} s`);
      } catch (error) {
        // Said now, and the others still run: one failed benchmark does not void the numbers of the rest.
        const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
        log(`${name} failed: ${message}`);
        failures.push({ name, message: error instanceof Error ? error.message : String(error) });
        if (stackFailed) break;
      }
    }
  } finally {
    log('stopping workers, gateway, seller and Temporal...');
    await stop();
  }

  const durationMs = Date.now() - startedAt.getTime();
  const cpus = os.cpus();
  const report = {
    generatedAt: startedAt.toISOString(),
    durationMs,
    machine: {
      cpus: cpus.length,
      cpuModel: cpus[0]?.model,
      totalMemoryBytes: os.totalmem(),
      platform: `${os.platform()} ${os.release()}`,
      node: process.version,
      loadAverageAtStart: loadAtStart,
    },
    benchmarks: results,
    failures,
  };
  mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
  writeFileSync(RESULTS_FILE, `${JSON.stringify(report, null, 2)}\n`);

  console.log(
    `\nadcp-orchestrator benchmarks, ${startedAt.toISOString()}, ${cpus.length} CPU(s) (${cpus[0]?.model ?? 'unknown'}), ` +
      `Node ${process.version}, load average at start ${loadAtStart.map((load) => load.toFixed(2)).join(' ')}\n`,
  );
  console.log(renderTable(results));
  console.log(`\nTotal ${(durationMs / 1000).toFixed(0)} s. Results: ${path.relative(process.cwd(), RESULTS_FILE)}`);
  if (failures.length > 0) {
    console.error(`\nFAILED: ${failures.map(({ name, message }) => `${name} (${message})`).join('; ')}`);
    process.exitCode = 1;
  }
}

main().catch((error) => {
  console.error(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
