import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ConfigError } from './errors';
import { formatZodIssues } from './zod-format';

/**
 * The worker's Worker Deployment Versioning settings (workers/versioning.ts, docs/upgrades.md). A worker names its
 * deployment and its build; each workflow's behaviour across builds (PINNED or AUTO_UPGRADE) is declared in
 * workflows/versioning.ts.
 */
const DEPLOYMENT_NAME = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[^.\s]+$/, 'must have no dots or spaces');

const DEFAULT_TASK_QUEUE = 'adcp-operations';
const DEFAULT_DEPLOYMENT = 'adcp-orchestrator';

const versioningSchema = z.object({
  /** `off`: an unversioned worker (a Temporal server without Worker Deployments, older than 1.29). */
  ADCP_WORKER_VERSIONING: z.enum(['on', 'off']).default('on'),
  /**
   * Default `adcp-orchestrator` on the default task queue, `adcp-orchestrator-<ADCP_TASK_QUEUE>` on another: a
   * deployment's current version applies to every task queue its workers poll, so two installations sharing a
   * namespace must not share a deployment. Temporal writes a version as `<deployment>.<build>`.
   */
  ADCP_WORKER_DEPLOYMENT: DEPLOYMENT_NAME.optional(),
  /** Default: the package version and a digest of the workflow bundle (workers/versioning.ts). */
  ADCP_WORKER_BUILD_ID: z
    .string()
    .min(1)
    .max(200)
    .regex(/^\S+$/, 'must have no spaces')
    .refine((value) => !value.startsWith('__'), 'must not start with "__" (reserved by Temporal)')
    .optional(),
  /**
   * When the worker makes its build the deployment's current version (new workflows start on it):
   *   auto    a build that has never been current, once it polls, unless a build seen after it is current already
   *           (an old build's worker restarting during a rollout, or after a rollback, does not take over);
   *   always  at every start (one worker process, development);
   *   never   the operator does (`temporal worker deployment set-current-version`).
   */
  ADCP_WORKER_PROMOTE: z.enum(['auto', 'always', 'never']).default('auto'),
});

export type PromotionMode = z.infer<typeof versioningSchema>['ADCP_WORKER_PROMOTE'];

export type WorkerVersioningConfig =
  { enabled: false } | { enabled: true; deploymentName: string; buildId?: string; promote: PromotionMode };

/**
 * The deployment of the workers polling `taskQueue` when ADCP_WORKER_DEPLOYMENT does not name it. A long task queue
 * name is cut, and a digest of the whole name keeps two such queues apart.
 */
export function defaultDeploymentName(taskQueue: string): string {
  if (taskQueue === DEFAULT_TASK_QUEUE) return DEFAULT_DEPLOYMENT;
  const name = `${DEFAULT_DEPLOYMENT}-${taskQueue.replace(/[.\s]/g, '-')}`;
  if (name.length <= 120) return name;
  return `${name.slice(0, 100)}-${createHash('sha256').update(taskQueue).digest('hex').slice(0, 12)}`;
}

/** `taskQueue` is the one the worker polls (ADCP_TASK_QUEUE, config/runtime.ts). */
export function loadWorkerVersioning(taskQueue: string, env: NodeJS.ProcessEnv = process.env): WorkerVersioningConfig {
  const parsed = versioningSchema.safeParse(env);
  if (!parsed.success) throw new ConfigError(`Invalid environment: ${formatZodIssues(parsed.error.issues)}`);
  const value = parsed.data;
  if (value.ADCP_WORKER_VERSIONING === 'off') return { enabled: false };
  const deploymentName = value.ADCP_WORKER_DEPLOYMENT ?? defaultDeploymentName(taskQueue);
  return {
    enabled: true,
    deploymentName,
    ...(value.ADCP_WORKER_BUILD_ID !== undefined ? { buildId: value.ADCP_WORKER_BUILD_ID } : {}),
    promote: value.ADCP_WORKER_PROMOTE,
  };
}
