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

export interface WorkerTuning {
  maxCachedWorkflows: number;
}

export function loadWorkerTuning(env: NodeJS.ProcessEnv = process.env): WorkerTuning {
  const parsed = tuningSchema.safeParse(env);
  if (!parsed.success) throw new ConfigError(`Invalid environment: ${formatZodIssues(parsed.error.issues)}`);
  return { maxCachedWorkflows: parsed.data.ADCP_MAX_CACHED_WORKFLOWS };
}
