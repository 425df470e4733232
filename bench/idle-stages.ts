/**
 * Where an idle worker's memory goes (B5): this script builds a worker the way workers/main.ts does, one stage at a
 * time, and after each stage runs a full GC and prints one JSON line with the process RSS and the main thread's V8
 * heap. The bench runs it as its own process (bench/memory.ts) and reads the lines; differences between stages are
 * what each stage costs. BENCH_WORKFLOW_BUNDLE set: load the bundle the bench built; unset: bundle at start (webpack
 * in the worker process, as workers/main.ts does today). BENCH_WORKER_OPTIONS as in bench/worker.ts.
 */
import v8 from 'node:v8';

function stage(name: string): void {
  (globalThis as { gc?: () => void }).gc?.();
  const heap = v8.getHeapStatistics();
  console.log(
    `STAGE ${JSON.stringify({ name, rssBytes: process.memoryUsage().rss, mainHeapBytes: heap.used_heap_size, externalBytes: heap.external_memory })}`,
  );
}

async function main(): Promise<void> {
  stage('node + tsx');
  const { DefaultLogger, Runtime, Worker, NativeConnection } = await import('@temporalio/worker');
  stage('@temporalio/worker loaded');
  const { createActivities } = await import('../activities');
  const { createMediaBuyActivities } = await import('../activities/media-buy');
  const { createReconciliationActivities } = await import('../activities/reconciliation');
  const { loadSellers } = await import('../config/sellers');
  const { loadRuntimeConfig } = await import('../config/runtime');
  const { connectClient } = await import('../client/connect');
  const { dataConverter } = await import('../client/payload-codec');
  const { WORKFLOWS_PATH } = await import('../workers/worker');
  const { workflowPreloadModules } = await import('../workers/bundle-options');
  stage('activities loaded (@adcp/sdk, MCP SDK, zod, ...)');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const runtime = loadRuntimeConfig();
  const sellerRegistry = loadSellers();
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  const client = await connectClient();
  stage('Temporal connections (Rust core runtime, gRPC client)');
  const bundlePath = process.env.BENCH_WORKFLOW_BUNDLE;
  const extra = JSON.parse(process.env.BENCH_WORKER_OPTIONS ?? '{}') as Record<string, unknown>;
  const worker = await Worker.create({
    connection,
    namespace: process.env.TEMPORAL_NAMESPACE ?? 'default',
    taskQueue: runtime.taskQueue,
    dataConverter: dataConverter(),
    // Bundled at start with the preloaded modules, as workers/worker.ts bundles (and bench/stack.ts prebuilds).
    ...(bundlePath
      ? { workflowBundle: { codePath: bundlePath } }
      : { workflowsPath: WORKFLOWS_PATH, bundlerOptions: { preloadModules: workflowPreloadModules() } }),
    activities: {
      ...createActivities({ sellers: sellerRegistry }),
      ...createReconciliationActivities({ sellers: sellerRegistry, client }),
      ...createMediaBuyActivities({ sellers: sellerRegistry }),
    },
    ...extra,
  });
  stage(
    bundlePath
      ? 'Worker.create, prebuilt bundle (workflow thread, V8 context)'
      : 'Worker.create, bundling at start (webpack in process)',
  );
  const running = worker.run();
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  stage('worker running 3 s, idle');
  worker.shutdown();
  await running;
  await client.connection.close();
  await connection.close();
}

main().catch((error) => {
  console.error(`idle-stages: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
