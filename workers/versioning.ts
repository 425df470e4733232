/**
 * The worker's place in a Worker Deployment (Temporal's Worker Deployment Versioning): which deployment it belongs
 * to, which build it runs, and making that build the deployment's current version so new workflows start on it.
 * What each workflow does when the current build changes (PINNED or AUTO_UPGRADE) is declared in
 * workflows/versioning.ts; the operator's side is docs/upgrades.md.
 *
 * The build id is the package version and a digest of the workflow bundle the worker runs: a change of workflow code
 * is a new build, and two workers running the same code are the same build wherever their checkout lives.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Client, isGrpcServiceError } from '@temporalio/client';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { WorkerOptions } from '@temporalio/worker';
import { projectRoot } from '../config/project-root';
import type { PromotionMode } from '../config/worker-versioning';

export type DeploymentOptions = NonNullable<WorkerOptions['workerDeploymentOptions']>;

const SOURCE_MAP_COMMENT = '//# sourceMappingURL=data:';
const DIGEST_CHARS = 12;

/**
 * A digest of the bundle's code (sha256, first 12 hex digits). The inline source map is left out: it names the source
 * files by absolute path, so the same code bundled in two checkouts would otherwise be two builds.
 */
export function bundleDigest(code: string | Buffer): string {
  const bytes = typeof code === 'string' ? Buffer.from(code) : code;
  const at = bytes.lastIndexOf(SOURCE_MAP_COMMENT);
  return createHash('sha256')
    .update(at < 0 ? bytes : bytes.subarray(0, at))
    .digest('hex')
    .slice(0, DIGEST_CHARS);
}

/** This package's version (package.json), from the sources and from dist/app alike. */
export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(path.join(projectRoot(__dirname), 'package.json'), 'utf8')) as {
    version?: unknown;
  };
  return typeof manifest.version === 'string' ? manifest.version : '0.0.0';
}

/** `0.1.0+3f9a1c2b7d4e`: the package version, then the digest of the bundle's code. */
export function buildIdFor(code: string | Buffer, version: string = packageVersion()): string {
  return `${version}+${bundleDigest(code)}`;
}

/** Versioned polling for `version`; a workflow that declares no behaviour of its own is pinned. */
export function deploymentOptions(version: WorkerDeploymentVersion): DeploymentOptions {
  return { version, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' };
}

export const describeVersion = (version: WorkerDeploymentVersion): string =>
  `${version.deploymentName}.${version.buildId}`;

type DeploymentInfo = temporal.api.deployment.v1.IWorkerDeploymentInfo;
type Timestamp = { seconds?: unknown; nanos?: number | null } | null | undefined;

export type PromotionStep =
  /** The server has not seen this build poll yet: ask again. */
  | { step: 'wait' }
  | { step: 'current' }
  | { step: 'promote' }
  /** Another build stays current (`auto` only). */
  | { step: 'leave'; current: WorkerDeploymentVersion; reason: string };

function millis(time: Timestamp): number | undefined {
  if (!time || time.seconds === undefined || time.seconds === null) return undefined;
  return Number(time.seconds) * 1000 + Math.floor((time.nanos ?? 0) / 1e6);
}

const sameVersion = (
  a: temporal.api.deployment.v1.IWorkerDeploymentVersion | null | undefined,
  b: WorkerDeploymentVersion,
): boolean => a?.buildId === b.buildId && a?.deploymentName === b.deploymentName;

/**
 * What to do for `version` given the deployment as described. `always` promotes whenever the build is not current.
 * `auto` promotes a build that has never been current (or ramping), unless a build the server saw after this one is
 * current: an old build's worker restarting during a rollout, or one an operator rolled away from, leaves the current
 * version alone. With no current version at all, new workflows would reach no versioned worker: promote.
 */
export function nextPromotionStep(
  info: DeploymentInfo | null | undefined,
  version: WorkerDeploymentVersion,
  mode: Exclude<PromotionMode, 'never'>,
): PromotionStep {
  const summaries = info?.versionSummaries ?? [];
  const ours = summaries.find((summary) => sameVersion(summary.deploymentVersion, version));
  if (!ours) return { step: 'wait' };
  const current = info?.routingConfig?.currentDeploymentVersion;
  if (sameVersion(current, version)) return { step: 'current' };
  if (mode === 'always' || !current?.buildId) return { step: 'promote' };
  const currentVersion = { deploymentName: current.deploymentName ?? version.deploymentName, buildId: current.buildId };
  if (millis(ours.firstActivationTime) !== undefined)
    return {
      step: 'leave',
      current: currentVersion,
      reason: 'this build was current before: another build was made current after it',
    };
  const currentSummary = summaries.find((summary) => sameVersion(summary.deploymentVersion, currentVersion));
  const currentCreated = millis(currentSummary?.createTime);
  const oursCreated = millis(ours.createTime);
  if (currentCreated !== undefined && oursCreated !== undefined && currentCreated > oursCreated)
    return { step: 'leave', current: currentVersion, reason: 'the current build first polled after this one' };
  return { step: 'promote' };
}

export type PromotionOutcome =
  { outcome: 'promoted' | 'already current' } | { outcome: 'left'; current: WorkerDeploymentVersion; reason: string };

export interface PromotionOptions {
  client: Client;
  namespace: string;
  version: WorkerDeploymentVersion;
  mode: Exclude<PromotionMode, 'never'>;
  /** Shown in the deployment as its last modifier. */
  identity?: string;
  /** Default 500 ms between looks while the server has not seen the build's pollers. */
  pollIntervalMs?: number;
  /** Default 60 s; then it throws (the worker's keepTrying tries again). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

const GRPC_NOT_FOUND = 5;
const GRPC_FAILED_PRECONDITION = 9;

/** The server has not registered the build's pollers yet, or the deployment changed between describe and set. */
const notYet = (error: unknown): boolean =>
  isGrpcServiceError(error) && (error.code === GRPC_NOT_FOUND || error.code === GRPC_FAILED_PRECONDITION);

/**
 * Makes `version` its deployment's current version once its worker polls (the server refuses a version it has not
 * seen polling), following `mode`. Called by the worker after it starts polling; the deployment's conflict token
 * guards against a concurrent change made between our describe and our set.
 */
export async function promoteBuild(options: PromotionOptions): Promise<PromotionOutcome> {
  const { client, namespace, version } = options;
  const service = client.workflowService;
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    options.signal?.throwIfAborted();
    let described: temporal.api.workflowservice.v1.IDescribeWorkerDeploymentResponse | undefined;
    try {
      described = await service.describeWorkerDeployment({ namespace, deploymentName: version.deploymentName });
    } catch (error) {
      if (!notYet(error)) throw error;
    }
    const next = nextPromotionStep(described?.workerDeploymentInfo, version, options.mode);
    if (next.step === 'current') return { outcome: 'already current' };
    if (next.step === 'leave') return { outcome: 'left', current: next.current, reason: next.reason };
    if (next.step === 'promote') {
      try {
        await service.setWorkerDeploymentCurrentVersion({
          namespace,
          deploymentName: version.deploymentName,
          buildId: version.buildId,
          ...(described?.conflictToken?.length ? { conflictToken: described.conflictToken } : {}),
          ...(options.identity ? { identity: options.identity } : {}),
        });
        return { outcome: 'promoted' };
      } catch (error) {
        if (!notYet(error)) throw error;
      }
    }
    if (Date.now() > deadline)
      throw new Error(
        `Build ${describeVersion(version)} did not become current within ${options.timeoutMs ?? 60_000} ms: the server ` +
          'has not seen its workers poll every task queue of the deployment. Check that they are running.',
      );
    await sleep(options.pollIntervalMs ?? 500, undefined, options.signal ? { signal: options.signal } : {});
  }
}
