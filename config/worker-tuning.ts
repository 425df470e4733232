import { z } from 'zod';
import { ConfigError } from './errors';
import { formatZodIssues } from './zod-format';

/**
 * How much a worker keeps in memory. Every cached workflow holds its own V8 module instances (about 140 KiB per
 * operation, bench/README.md run E); an evicted one is replayed from its history (a few dozen events) when its next
 * timer or signal arrives. Temporal's default sizes the cache from the heap limit (thousands on a large machine).
 */
const tuningSchema = z.object({
  ADCP_MAX_CACHED_WORKFLOWS: z.coerce.number().int().min(0).max(100_000).default(100),
  /** A bundle built by `npm run build:workflows`; unset: a child process bundles at start. */
  ADCP_WORKFLOW_BUNDLE: z.string().min(1).optional(),
});

/**
 * Node flags the worker process runs with: `npm run worker` (package.json, checked by test/unit/worker-tuning.test.ts),
 * `npm start`, the soak and the memory benchmark's "as shipped" worker. V8's defaults size the heap for throughput on
 * a large machine: with 1,000 operations polling, a worker kept about 250 MiB of committed heap pages for 90 MiB of
 * live objects. A young generation of 2 MiB semi-spaces and `--optimize-for-size` (smaller heap growth steps, less
 * code kept) took the peak with 1,000 parked from 351 to 254 MiB in the same run (bench/README.md, run G memory), at
 * some CPU for more frequent collections. Both apply to the workflow thread too (V8 flags are per process).
 */
export const WORKER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2', '--optimize-for-size'];

export interface WorkerTuning {
  maxCachedWorkflows: number;
}

export function loadWorkerTuning(env: NodeJS.ProcessEnv = process.env): WorkerTuning {
  const parsed = tuningSchema.safeParse(env);
  if (!parsed.success) throw new ConfigError(`Invalid environment: ${formatZodIssues(parsed.error.issues)}`);
  return { maxCachedWorkflows: parsed.data.ADCP_MAX_CACHED_WORKFLOWS };
}
