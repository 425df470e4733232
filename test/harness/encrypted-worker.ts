/**
 * An in-process worker whose data converter encrypts (client/encryption-codec.ts) with the keys a test chose, for
 * tests that look at what Temporal stores. It runs the operation workflow's activities only.
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../../activities';
import type { SellerRegistry } from '../../config/sellers';
import { encryptedDataConverter } from '../../client/encryption-codec';
import { TEST_RETRY_BACKOFF } from './retry-backoff';
import { quietRuntime, workflowBundle } from './temporal';

export async function startEncryptedWorker(options: {
  address: string;
  taskQueue: string;
  /** ADCP_PAYLOAD_KEYS (and ADCP_PAYLOAD_KEY_ID) for the data converter. */
  env: NodeJS.ProcessEnv;
  sellers: SellerRegistry;
  /** The environment the activities read sellers' tokens from. */
  activityEnv: NodeJS.ProcessEnv;
}): Promise<{ worker: Worker; run: Promise<void> }> {
  quietRuntime();
  const connection = await NativeConnection.connect({ address: options.address });
  const worker = await Worker.create({
    connection,
    namespace: 'default',
    taskQueue: options.taskQueue,
    workflowBundle: await workflowBundle(),
    dataConverter: encryptedDataConverter(options.env),
    activities: createActivities({
      sellers: options.sellers,
      env: options.activityEnv,
      retryBackoff: TEST_RETRY_BACKOFF,
    }),
    shutdownGraceTime: '2s',
  });
  const run = worker.run().finally(() => connection.close());
  return { worker, run };
}
