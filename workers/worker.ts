import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDependencies } from '../activities';

export const WORKFLOWS_PATH = require.resolve('../workflows');

export interface OperationWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: ActivityDependencies;
  /** A prebuilt bundle (tests build it once); otherwise the worker bundles workflows/ at start. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  shutdownGraceTime?: WorkerOptions['shutdownGraceTime'];
}

/** The worker that runs operation workflows and their activities; one per process, scaled by adding processes. */
export async function createOperationWorker(options: OperationWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: createActivities(options.activities),
    shutdownGraceTime: options.shutdownGraceTime ?? '10s',
  });
}
