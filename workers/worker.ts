import type { Client } from '@temporalio/client';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDependencies } from '../activities';
import { StoredCapabilitiesCache } from '../activities/stored-capabilities';
import { dataConverter } from '../client/payload-codec';
import type { Tracing } from '../observability/tracing';
import { observabilityWorkerOptions } from '../observability/worker-options';
import { WORKFLOWS_PATH } from './workflow-bundle';
import { workflowPreloadModules } from './bundle-options';
import { deploymentOptions } from './versioning';

export { WORKFLOWS_PATH };

export interface OperationWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: ActivityDependencies;
  /** The reconciliation activities read visibility and signal operations through it. */
  client: Client;
  /** A prebuilt bundle (tests build it once); otherwise the worker bundles workflows/ at start. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  shutdownGraceTime?: WorkerOptions['shutdownGraceTime'];
  /** Traces (observability/tracing.ts); without it no tracing interceptor is registered. */
  tracing?: Tracing;
  /** Workflows kept in the sticky cache (config/worker-tuning.ts); Temporal's heap-sized default when unset. */
  maxCachedWorkflows?: number;
  /** Default dataConverter(): gzip, plus encryption when ADCP_PAYLOAD_KEYS is set. Tests pass their own keys. */
  dataConverter?: WorkerOptions['dataConverter'];
  /**
   * The Worker Deployment version this worker runs (workers/versioning.ts): it then polls as that build, and each
   * workflow keeps the behaviour workflows/versioning.ts declares. Unset: an unversioned worker (most tests, and the
   * time-skipping server, which has no Worker Deployments).
   */
  deployment?: WorkerDeploymentVersion;
}

/** The worker that runs operation and reconciliation workflows and their activities; one per process, scaled by adding processes. */
export async function createOperationWorker(options: OperationWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    dataConverter: options.dataConverter ?? dataConverter(),
    ...(options.workflowBundle
      ? { workflowBundle: options.workflowBundle }
      : { workflowsPath: WORKFLOWS_PATH, bundlerOptions: { preloadModules: workflowPreloadModules() } }),
    activities: createActivities({
      // Calls choose the wire version and read method from the sellers' stored capabilities (memo, cached).
      storedCapabilities: new StoredCapabilitiesCache({ client: options.client, taskQueue: options.taskQueue }),
      ...options.activities,
      client: options.client,
    }),
    shutdownGraceTime: options.shutdownGraceTime ?? '10s',
    // Correlation fields on activity log lines; OpenTelemetry interceptors and the workflow span sink when tracing.
    ...observabilityWorkerOptions({ tracing: options.tracing, prebuiltBundle: options.workflowBundle !== undefined }),
    ...(options.maxCachedWorkflows !== undefined ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
    ...(options.deployment ? { workerDeploymentOptions: deploymentOptions(options.deployment) } : {}),
  });
}
