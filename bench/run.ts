/**
 * `npm run bench`: the project's speed and memory benchmarks, each measured side by side with a baseline in the
 * same run and reported as a ratio (see bench/README.md). Starts everything it needs on loopback (Temporal dev
 * server, scripted seller, gateway and worker processes) and stops it again.
 *
 *   npm run bench                          all four, 1.5 to 2 minutes on 2 cores
 *   npm run bench -- --only=latency,memory  a subset (latency, throughput, overhead, memory)
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

const BENCHMARKS: Record<string, (stack: BenchStack) => Promise<BenchmarkResult>> = {
  latency: (stack) => webhookLatency(stack, { perMode: 20, firstChangeMs: 2_500, lastChangeMs: 13_500 }),
  throughput: (stack) =>
    gatewayThroughput(stack, { operations: 24, requestsPerRound: 600, rounds: 2, concurrency: 16, warmup: 60 }),
  overhead: (stack) => orchestrationOverhead(stack, { concurrency: 50, rounds: 3, warmup: 10 }),
  memory: (stack) => workerMemory(stack, { operations: 200, startsPerSecond: 40, samples: 3 }),
};

const RESULTS_FILE = path.join(ROOT, 'tmp', 'bench-results.json');
/** A benchmark that takes this long is stuck (each takes well under a minute). */
const BENCHMARK_TIMEOUT_MS = 5 * 60_000;

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

async function main(): Promise<void> {
  const names = selected(process.argv.slice(2));
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
  try {
    for (const name of names) {
      log(`running ${name}...`);
      const began = Date.now();
      const benchmark = BENCHMARKS[name](stack);
      benchmark.catch(() => undefined); // if the race below is lost, its late failure is not news
      const result = await Promise.race([benchmark, stack.failure, deadline(name, BENCHMARK_TIMEOUT_MS)]);
      result.durationMs = Date.now() - began;
      results.push(result);
      log(`${name} done in ${(result.durationMs / 1000).toFixed(1)} s`);
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
  };
  mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
  writeFileSync(RESULTS_FILE, `${JSON.stringify(report, null, 2)}\n`);

  console.log(
    `\nadcp-orchestrator benchmarks, ${startedAt.toISOString()}, ${cpus.length} CPU(s) (${cpus[0]?.model ?? 'unknown'}), ` +
      `Node ${process.version}, load average at start ${loadAtStart.map((load) => load.toFixed(2)).join(' ')}\n`,
  );
  console.log(renderTable(results));
  console.log(`\nTotal ${(durationMs / 1000).toFixed(0)} s. Results: ${path.relative(process.cwd(), RESULTS_FILE)}`);
}

main().catch((error) => {
  console.error(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
