/**
 * Worker process: `npm run worker`. Connects with the usual Temporal environment variables, reads the seller
 * list, and runs until SIGINT/SIGTERM, finishing in-flight activities within the grace time.
 */
import { closeMCPConnections } from '@adcp/sdk';
import { closeIdleMcpConnections } from '../activities/mcp-connection';
import { Runtime } from '@temporalio/worker';
import { loadAgents } from '../config/agents';
import { loadRuntimeConfig } from '../config/runtime';
import { connectClient, connectWorker, temporalSettings } from '../config/temporal-connection';
import { loadWorkerTuning } from '../config/worker-tuning';
import { ensureReconciliationSchedules } from './schedules';
import { createOperationWorker } from './worker';
import { loadWorkflowBundle } from './workflow-bundle';

async function main(): Promise<void> {
  const runtime = loadRuntimeConfig();
  const agents = loadAgents();
  const tuning = loadWorkerTuning();
  // Bundled in a child process (or prebuilt): webpack's memory never enters the worker.
  const bundle = await loadWorkflowBundle();
  if (runtime.metricsAddress) {
    // Temporal's worker metrics and the orchestrator's own (operations, seller calls, circuit breakers), one endpoint.
    Runtime.install({
      telemetryOptions: {
        metrics: {
          prometheus: { bindAddress: runtime.metricsAddress, countersTotalSuffix: true, useSecondsForDurations: true },
        },
      },
    });
    console.log(`worker: Prometheus metrics on http://${runtime.metricsAddress}/metrics`);
  }
  const { connection, namespace } = await connectWorker();
  const client = await connectClient();
  const worker = await createOperationWorker({
    connection,
    namespace,
    taskQueue: runtime.taskQueue,
    activities: {
      agents,
      publicBaseUrl: runtime.publicBaseUrl,
      callTimeoutMs: runtime.callTimeoutMs,
      circuitBreaker: runtime.circuitBreaker,
    },
    client,
    workflowBundle: { codePath: bundle.codePath },
    maxCachedWorkflows: tuning.maxCachedWorkflows,
  }).finally(() => bundle.dispose()); // Worker.create has read the code
  if (runtime.reconcileEveryMs !== undefined) {
    const schedules = await ensureReconciliationSchedules({
      client,
      agents,
      taskQueue: runtime.taskQueue,
      intervalMs: runtime.reconcileEveryMs,
    });
    console.log(`worker: reconciliation every ${runtime.reconcileEveryMs / 1000} s (${schedules.join(', ')})`);
  }
  console.log(
    `worker: task queue "${runtime.taskQueue}" on ${temporalSettings().connectionOptions.address} (namespace ${namespace}), ${agents.agents.length} seller(s) from ${agents.source}`,
  );
  try {
    await worker.run();
  } finally {
    await closeMCPConnections().catch(() => undefined);
    closeIdleMcpConnections();
    await client.connection.close();
    await connection.close();
  }
}

main().catch((error) => {
  console.error(`worker: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
