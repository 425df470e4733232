import type { Client } from '@temporalio/client';
import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDependencies } from '../activities';
import { createMediaBuyActivities } from '../activities/media-buy';
import { createReconciliationActivities } from '../activities/reconciliation';
import { dataConverter } from '../client/payload-codec';
import { WORKFLOWS_PATH } from './workflow-bundle';

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
  /** Workflows kept in the sticky cache (config/worker-tuning.ts); Temporal's heap-sized default when unset. */
  maxCachedWorkflows?: number;
}

/** The worker that runs operation and reconciliation workflows and their activities; one per process, scaled by adding processes. */
export async function createOperationWorker(options: OperationWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    dataConverter: dataConverter(),
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: {
      ...createActivities(options.activities),
      ...createReconciliationActivities({
        agents: options.activities.agents,
        client: options.client,
        ...(options.activities.seller ? { seller: options.activities.seller } : {}),
        ...(options.activities.env ? { env: options.activities.env } : {}),
      }),
      ...createMediaBuyActivities({
        agents: options.activities.agents,
        ...(options.activities.seller ? { seller: options.activities.seller } : {}),
        ...(options.activities.env ? { env: options.activities.env } : {}),
        ...(options.activities.readTimeoutMs ? { readTimeoutMs: options.activities.readTimeoutMs } : {}),
      }),
    },
    shutdownGraceTime: options.shutdownGraceTime ?? '10s',
    ...(options.maxCachedWorkflows !== undefined ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
  });
}
