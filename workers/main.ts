/**
 * Worker process: `npm run worker`. Connects with the usual Temporal environment variables, reads the seller
 * list, and runs until SIGINT/SIGTERM, finishing in-flight activities within the grace time.
 */
import { closeMCPConnections } from '@adcp/sdk';
import { loadAgents } from '../config/agents';
import { loadRuntimeConfig } from '../config/runtime';
import { connectWorker, temporalSettings } from '../config/temporal-connection';
import { createOperationWorker } from './worker';

async function main(): Promise<void> {
  const runtime = loadRuntimeConfig();
  const agents = loadAgents();
  const { connection, namespace } = await connectWorker();
  const worker = await createOperationWorker({
    connection,
    namespace,
    taskQueue: runtime.taskQueue,
    activities: { agents, publicBaseUrl: runtime.publicBaseUrl },
  });
  console.log(
    `worker: task queue "${runtime.taskQueue}" on ${temporalSettings().connectionOptions.address} (namespace ${namespace}), ${agents.agents.length} seller(s) from ${agents.source}`,
  );
  try {
    await worker.run();
  } finally {
    await closeMCPConnections().catch(() => undefined);
    await connection.close();
  }
}

main().catch((error) => {
  console.error(`worker: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
