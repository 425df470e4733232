/**
 * A stack on the Java SDK's time-skipping test server (the project's provisioned binary): timers, activity retry
 * delays and deadlines advance as fast as the workflow can run, so a 24-hour wait takes seconds. The server cannot
 * register custom search attributes, so operations started here are not indexed (see OrchestratorClient options).
 */
import { randomUUID } from 'node:crypto';
import { closeMCPConnections } from '@adcp/sdk';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import type { ActivityDependencies } from '../../activities';
import { OrchestratorClient } from '../../client/orchestrator-client';
import type { SellerRegistry } from '../../config/sellers';
import { resolveTestServer } from '../../scripts/lib/temporal-binaries';
import { createOperationWorker } from '../../workers/worker';
import { TEST_RETRY_BACKOFF } from './retry-backoff';
import { quietRuntime, workflowBundle } from './temporal';
import { dataConverter } from '../../client/payload-codec';

export interface TimeSkippingStack {
  env: TestWorkflowEnvironment;
  orchestrator: OrchestratorClient;
  taskQueue: string;
  worker: Worker;
  /** The test server's clock (advances with skipped time). */
  now(): Promise<number>;
  close(): Promise<void>;
}

export async function startTimeSkippingStack(options: {
  sellers: SellerRegistry;
  activities?: Partial<ActivityDependencies>;
}): Promise<TimeSkippingStack> {
  quietRuntime();
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: resolveTestServer() } },
    client: { dataConverter: dataConverter() },
  });
  const taskQueue = `time-skipping-${randomUUID()}`;
  const worker = await createOperationWorker({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: { sellers: options.sellers, retryBackoff: TEST_RETRY_BACKOFF, ...options.activities },
    client: env.client,
    shutdownGraceTime: '2s',
  });
  const running = worker.run();
  const orchestrator = new OrchestratorClient({
    client: env.client,
    taskQueue,
    knownSeller: (id) => options.sellers.has(id),
    searchAttributes: false,
  });
  return {
    env,
    orchestrator,
    taskQueue,
    worker,
    now: () => env.currentTimeMs(),
    async close() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await env.teardown();
      await closeMCPConnections().catch(() => undefined);
    },
  };
}

/**
 * Sets each seller's clock to the test server's (skipped time included), refreshed continuously, until the returned
 * stop is awaited.
 */
export async function followServerClock(
  stack: TimeSkippingStack,
  sellers: { setClock(clock: () => number): void }[],
): Promise<() => Promise<void>> {
  let cached = await stack.now();
  for (const seller of sellers) seller.setClock(() => cached);
  let running = true;
  const loop = (async () => {
    while (running) {
      cached = await stack.now().catch(() => cached);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  return async () => {
    running = false;
    await loop;
  };
}

/**
 * Waits for `work` (an update whose child operation may wait on a timer): the test server skips time only while the
 * test sleeps or awaits a result, so after half a second without an answer time moves on a second at a time.
 */
export async function answeredWhileTimeMoves<T>(stack: TimeSkippingStack, work: Promise<T>): Promise<T> {
  let done = false;
  const settled = work.then(
    () => (done = true),
    () => (done = true),
  );
  while (!done) {
    await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, 500))]);
    if (!done) await stack.env.sleep(1_000);
  }
  return work;
}
