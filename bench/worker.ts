/**
 * A worker process the bench builds itself, so that it can pass worker options the product's entry point does not
 * expose (cache size, thread pool, V8 context reuse) and load a workflow bundle built once by the bench process:
 *
 *   BENCH_WORKER_KIND=orchestrator  the product's workflows and activities (as workers/worker.ts wires them)
 *   BENCH_WORKER_KIND=bare          bench/bare/workflow.ts and its one activity (the bare-engine baseline of B1)
 *
 * Other settings: BENCH_WORKFLOW_BUNDLE (a bundle file written by the bench; without it the worker bundles at start),
 * BENCH_WORKER_OPTIONS (JSON merged into Worker.create's options), BENCH_SELLER (JSON, the bare worker's seller), and
 * the usual TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, ADCP_TASK_QUEUE, ADCP_AGENTS_FILE and token variables.
 * Prints "bench worker: running" once its pollers start. SIGTERM/SIGINT shut it down (the SDK's own handlers).
 */
import { closeMCPConnections } from '@adcp/sdk';
import { DefaultLogger, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../activities';
import { closeIdleMcpConnections } from '../activities/mcp-connection';
import { DEFAULT_RETRY_BACKOFF } from '../activities/transport-errors';
import { dataConverter } from '../client/payload-codec';
import { loadSellers } from '../config/sellers';
import { loadRuntimeConfig } from '../config/runtime';
import { connectClient } from '../client/connect';
import { connectWorker } from '../config/temporal-connection';
import { workflowPreloadModules } from '../workers/bundle-options';
import { WORKFLOWS_PATH } from '../workers/worker';
import { type BareSeller, createBareActivities } from './bare/activities';
import { BARE_WORKFLOWS_PATH } from './bare/paths';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const kind = process.env.BENCH_WORKER_KIND === 'bare' ? 'bare' : 'orchestrator';
  const extra = JSON.parse(process.env.BENCH_WORKER_OPTIONS ?? '{}') as Partial<WorkerOptions>;
  const bundlePath = process.env.BENCH_WORKFLOW_BUNDLE;
  const runtime = loadRuntimeConfig();
  const { connection, namespace } = await connectWorker();
  const client = kind === 'orchestrator' ? await connectClient() : undefined;
  // Bundled at start: the product's bundle preloads its pure modules as workers/worker.ts does (and as the bundle
  // bench/stack.ts prebuilds); the bare baseline stays as it is.
  const workflows = bundlePath
    ? { workflowBundle: { codePath: bundlePath } }
    : kind === 'bare'
      ? { workflowsPath: BARE_WORKFLOWS_PATH }
      : { workflowsPath: WORKFLOWS_PATH, bundlerOptions: { preloadModules: workflowPreloadModules() } };
  let activities: object;
  if (kind === 'bare') {
    activities = createBareActivities(JSON.parse(process.env.BENCH_SELLER ?? '{}') as BareSeller);
  } else {
    const sellerRegistry = loadSellers();
    const dependencies = {
      sellers: sellerRegistry,
      publicBaseUrl: runtime.publicBaseUrl,
      callTimeoutMs: runtime.callTimeoutMs,
      circuitBreaker: runtime.circuitBreaker,
      retryBackoff: { ...DEFAULT_RETRY_BACKOFF, ...runtime.retryBackoff },
    };
    // The same wiring as workers/worker.ts createOperationWorker, which takes no extra worker options.
    activities = createActivities({ ...dependencies, client: client! });
  }
  const worker = await Worker.create({
    connection,
    namespace,
    taskQueue: runtime.taskQueue,
    dataConverter: dataConverter(),
    ...workflows,
    activities,
    shutdownGraceTime: '5s',
    ...extra,
  });
  console.log(
    `bench worker: running (${kind}, options ${JSON.stringify(extra)}, bundle ${bundlePath ? 'prebuilt' : 'built at start'})`,
  );
  try {
    await worker.run();
  } finally {
    await closeMCPConnections().catch(() => undefined);
    closeIdleMcpConnections();
    await client?.connection.close();
    await connection.close();
  }
}

main().catch((error) => {
  console.error(`bench worker: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
