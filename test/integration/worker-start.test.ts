/**
 * The worker process (workers/main.ts) polls first and ensures the sellers' capabilities workflows beside polling:
 * a seller's capabilities workflow appears once the worker runs, and when Temporal refuses to start it the worker
 * still completes operations while the start is logged and tried again.
 */
import { randomUUID } from 'node:crypto';
import { closeMCPConnections } from '@adcp/sdk';
import { Client, Connection } from '@temporalio/client';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { dataConverter } from '../../client/payload-codec';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import type { ManagedProcess } from '../../scripts/lib/processes';
import { sellerCapabilitiesWorkflowId } from '../../contract/seller-capabilities';
import { getProductsParams } from '../harness/demo-requests';
import { demoSellerConfig, eventually, testAddress } from '../harness/temporal';
import { startWorkerProcess, writeAgentsFile } from '../harness/worker-process';
import { connectGrpc } from '../../config/grpc-connection';

const running: ManagedProcess[] = [];
let connection: Connection;
let client: Client;

beforeAll(async () => {
  connection = await connectGrpc({ address: testAddress() });
  client = new Client({ connection, dataConverter: dataConverter() });
});

afterAll(async () => {
  await Promise.all(running.map((worker) => worker.stop('SIGKILL')));
  await connection?.close();
  await closeMCPConnections();
});

async function startWorker(taskQueue: string): Promise<ManagedProcess> {
  const worker = await startWorkerProcess({
    address: testAddress(),
    taskQueue,
    agentsFile: writeAgentsFile([demoSellerConfig()]),
    env: { ADCP_RECONCILE_EVERY: 'off', DEMO_SELLER_TOKEN },
    // Under tsx, as `ADCP_WORKER_RUNTIME=tsx npm run worker` runs it (the other files load the sources through SWC).
    loader: 'tsx',
  });
  running.push(worker);
  return worker;
}

async function completesAnOperation(taskQueue: string): Promise<void> {
  const orchestrator = new OrchestratorClient({ client, taskQueue });
  const { operationId } = await orchestrator.start({
    sellerId: 'demo',
    task: 'get_products',
    params: getProductsParams,
    idempotencyKey: randomUUID(),
  });
  expect((await orchestrator.result(operationId)).status).toBe('completed');
}

test("the seller's capabilities workflow is started by the worker, beside polling", async () => {
  const taskQueue = `worker-start-${randomUUID()}`;
  const worker = await startWorker(taskQueue);
  await completesAnOperation(taskQueue);
  const description = await eventually(async () => {
    const found = await client.workflow
      .getHandle(sellerCapabilitiesWorkflowId(taskQueue, 'demo'))
      .describe()
      .catch(() => undefined);
    return found?.status.name === 'RUNNING' ? found : undefined;
  }, 60_000);
  expect(description.taskQueue).toBe(taskQueue);
  expect(worker.output()).toMatch(/Seller capabilities kept/);
});

test('when Temporal refuses the capabilities workflow, the worker still polls and tries the start again', async () => {
  // A task queue name Temporal accepts (under its 1,000-character limit on names) whose capabilities workflow ID,
  // `adcp-seller-capabilities:<task queue>:demo`, exceeds that limit: every start of it is refused.
  const taskQueue = `worker-start-${randomUUID()}-`.padEnd(980, 'q');
  expect(sellerCapabilitiesWorkflowId(taskQueue, 'demo').length).toBeGreaterThan(1_000);
  const worker = await startWorker(taskQueue);
  await completesAnOperation(taskQueue);
  // Logged and retried with backoff (1 s, then 2 s, ...), not given up after the first refusal.
  await eventually(async () => (/"attempts":2/.test(worker.output()) ? true : undefined), 60_000);
  expect(worker.output()).toMatch(/Starting the sellers' capabilities workflows failed; trying again/);
  expect(worker.output()).not.toMatch(/Seller capabilities kept/);
});
