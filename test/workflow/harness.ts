/**
 * The workflow layer's stack: the time-skipping test server (timers, retry delays and deadlines advance as fast as the
 * workflow runs while a test awaits a result), a real worker running the real workflow bundle, and the small activity
 * stand-ins a test file passes in place of the real activities (Temporal's own pattern for testing a workflow's
 * wiring). No seller, no HTTP.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { resolveTestServer } from '../../scripts/lib/temporal-binaries';
import { quietRuntime, workflowBundle } from '../harness/temporal';

export interface WorkflowStack {
  env: TestWorkflowEnvironment;
  client: Client;
  taskQueue: string;
  close(): Promise<void>;
}

export async function startWorkflowStack(activities: object): Promise<WorkflowStack> {
  quietRuntime();
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: resolveTestServer() } },
  });
  const taskQueue = `workflow-${randomUUID()}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities,
    shutdownGraceTime: '1s',
  });
  const running = worker.run();
  return {
    env,
    client: env.client,
    taskQueue,
    async close() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await env.teardown();
    },
  };
}

/** Asks `probe` every 25 ms (real time) until it answers something, for at most `timeoutMs`. */
export async function until<T>(probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`nothing after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
