/**
 * State survives restarts: the worker process SIGKILLed mid-operation, and the Temporal dev server stopped and
 * restarted on its SQLite file mid-operation. Each operation still completes with exactly one media buy.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@temporalio/client';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { freePort, startDevServer } from '../../scripts/lib/dev-server';
import { DEMO_SELLER_TOKEN, demoOrders } from '../../scripts/lib/demo-seller';
import type { ManagedProcess } from '../../scripts/lib/processes';
import { createMediaBuyParams, uniqueBudget } from '../harness/demo-requests';
import { demoSellerConfig, eventually, testAddress } from '../harness/temporal';
import { startWorkerProcess, writeAgentsFile } from '../harness/worker-process';
import { dataConverter } from '../../client/payload-codec';
import { connectGrpc } from '../../config/grpc-connection';

const upstream = () => process.env.DEMO_UPSTREAM_URL!;
const workerEnv = { DEMO_SELLER_TOKEN };
const running: ManagedProcess[] = [];

afterAll(async () => {
  await Promise.all(running.map((process) => process.stop('SIGKILL')));
  await closeMCPConnections();
});

test('a worker SIGKILLed during an operation: the restarted worker completes it with exactly one media buy', async () => {
  const taskQueue = `kill-${randomUUID()}`;
  const agentsFile = writeAgentsFile([demoSellerConfig()]);
  const connection = await connectGrpc({ address: testAddress() });
  const client = new Client({ connection, dataConverter: dataConverter() });
  const orchestrator = new OrchestratorClient({ client, taskQueue });
  try {
    const first = await startWorkerProcess({ address: testAddress(), taskQueue, agentsFile, env: workerEnv });
    running.push(first);
    const budget = uniqueBudget();
    const { operationId } = await orchestrator.start({
      sellerId: 'demo',
      task: 'create_media_buy',
      params: createMediaBuyParams(budget),
      idempotencyKey: randomUUID(),
    });

    // Kill the worker the moment the seller call has been handed to it.
    const handle = client.workflow.getHandle(operationId);
    await eventually(
      async () => {
        const history = await handle.fetchHistory();
        return history.events?.some((event) => event.activityTaskStartedEventAttributes) ? true : undefined;
      },
      60_000,
      20,
    );
    await first.stop('SIGKILL');
    expect((await handle.describe()).status.name).toBe('RUNNING');

    const second = await startWorkerProcess({ address: testAddress(), taskQueue, agentsFile, env: workerEnv });
    running.push(second);
    const state = await orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(typeof state.result?.media_buy_id).toBe('string');
    const after = await demoOrders(upstream(), budget);
    expect(after.length).toBe(1);
    await second.stop();
  } finally {
    await connection.close();
  }
});

test('the dev server stopped and restarted on its SQLite file during an operation: it still completes', async () => {
  const dbFilename = path.join(mkdtempSync(path.join(os.tmpdir(), 'adcp-temporal-')), 'temporal.sqlite');
  const port = await freePort();
  let server = await startDevServer({ port, headless: true, dbFilename });
  const taskQueue = `restart-${randomUUID()}`;
  const agentsFile = writeAgentsFile([demoSellerConfig()]);
  const worker = await startWorkerProcess({ address: server.address, taskQueue, agentsFile, env: workerEnv });
  running.push(worker);
  let connection = await connectGrpc({ address: server.address });
  try {
    const budget = uniqueBudget();
    const orchestrator = new OrchestratorClient({
      client: new Client({ connection, dataConverter: dataConverter() }),
      taskQueue,
    });
    const { operationId } = await orchestrator.start({
      sellerId: 'demo',
      task: 'create_media_buy',
      params: createMediaBuyParams(budget),
      idempotencyKey: randomUUID(),
    });
    await server.stop();
    await connection.close();

    server = await startDevServer({ port, headless: true, dbFilename });
    connection = await connectGrpc({ address: server.address });
    const client = new Client({ connection, dataConverter: dataConverter() });
    expect((await client.workflow.getHandle(operationId).describe()).status.name).not.toBe('TERMINATED');
    const state = await new OrchestratorClient({ client, taskQueue }).result(operationId);
    expect(state.status).toBe('completed');
    expect(typeof state.result?.media_buy_id).toBe('string');
    expect((await demoOrders(upstream(), budget)).length).toBe(1);
  } finally {
    await worker.stop();
    await connection.close();
    await server.stop();
  }
});
