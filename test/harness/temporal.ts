import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@temporalio/client';
import {
  NativeConnection,
  Runtime,
  DefaultLogger,
  type Worker,
  bundleWorkflowCode,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import type { ActivityDependencies } from '../../activities';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { type SellerConfig, SellerRegistry } from '../../config/sellers';
import { WORKFLOWS_PATH, createOperationWorker } from '../../workers/worker';
import { workflowPayloadConverterPath, workflowPreloadModules } from '../../workers/bundle-options';
import { dataConverter } from '../../client/payload-codec';
import { closeIdleMcpConnections } from '../../activities/mcp-connection';
import { TEST_RETRY_BACKOFF } from './retry-backoff';
import { sharedBuild } from './shared-build';
import { connectGrpc } from '../../config/grpc-connection';

let runtimeInstalled = false;
export function quietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  // Activity failures are logged at WARN, and tests cause many on purpose: keep the output for real errors.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The test bundle of workflows/: with the worker's preloaded modules, so tests run workflows as the worker does. */
export function bundleTestWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    preloadModules: workflowPreloadModules(),
    payloadConverterPath: workflowPayloadConverterPath(),
    logger: new DefaultLogger('WARN'),
  });
}

/**
 * The workflow bundle, once per test file; in a Jest run with the integration project's global setup, once per run
 * (test/harness/shared-build.ts): bundling takes seconds of CPU, and most integration files need it.
 */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= (async () => {
    const shared = sharedBuild('test-workflow-bundle.json', async (partial) => {
      await writeFile(partial, JSON.stringify(await bundleTestWorkflows()));
    });
    if (!shared) return bundleTestWorkflows();
    return JSON.parse(await readFile(await shared, 'utf8')) as WorkflowBundleWithSourceMap;
  })();
  return bundle;
}

export function testAddress(): string {
  const address = process.env.TEMPORAL_TEST_ADDRESS;
  if (!address)
    throw new Error(
      'TEMPORAL_TEST_ADDRESS is not set: run integration tests through jest (globalSetup starts Temporal).',
    );
  return address;
}

export interface TestStack {
  client: Client;
  orchestrator: OrchestratorClient;
  taskQueue: string;
  worker: Worker;
  /** Stops the worker and closes connections. */
  close(): Promise<void>;
}

export function registry(agents: SellerConfig[]): SellerRegistry {
  return new SellerRegistry(agents, 'test agents');
}

/** A client, an orchestrator client and an in-process worker on a fresh task queue (test retry backoff unless given). */
export async function startTestStack(options: {
  sellers: SellerRegistry;
  address?: string;
  activities?: Partial<ActivityDependencies>;
  taskQueue?: string;
  /** The client's and the worker's data converter; default dataConverter() (encrypting when ADCP_PAYLOAD_KEYS is set). */
  dataConverter?: ReturnType<typeof dataConverter>;
}): Promise<TestStack> {
  quietRuntime();
  const address = options.address ?? testAddress();
  const taskQueue = options.taskQueue ?? `test-${randomUUID()}`;
  const connection = await connectGrpc({ address });
  const converter = options.dataConverter ?? dataConverter();
  const client = new Client({ connection, dataConverter: converter });
  const workerConnection = await NativeConnection.connect({ address });
  const worker = await createOperationWorker({
    dataConverter: converter,
    connection: workerConnection,
    namespace: 'default',
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: { sellers: options.sellers, retryBackoff: TEST_RETRY_BACKOFF, ...options.activities },
    client,
    shutdownGraceTime: '2s',
  });
  const running = worker.run();
  const orchestrator = new OrchestratorClient({ client, taskQueue, knownSeller: (id) => options.sellers.has(id) });
  return {
    client,
    orchestrator,
    taskQueue,
    worker,
    async close() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await workerConnection.close();
      await connection.close();
      await closeMCPConnections().catch(() => undefined);
      closeIdleMcpConnections();
    },
  };
}

export function demoSellerConfig(overrides: Partial<SellerConfig> = {}): SellerConfig {
  const url = process.env.DEMO_SELLER_URL;
  if (!url) throw new Error('DEMO_SELLER_URL is not set: globalSetup starts the demo seller.');
  return { id: 'demo', name: 'Demo seller', url, protocol: 'mcp', token_env: 'DEMO_SELLER_TOKEN', ...overrides };
}

export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  throw new Error(`Condition not met within ${timeoutMs} ms${lastError ? `: ${(lastError as Error).message}` : ''}`);
}
