/**
 * The worker's Prometheus endpoint (ADCP_METRICS_ADDRESS): Temporal's own worker metrics and the orchestrator's
 * (operation transitions and durations, seller call failures), scraped from the real worker process.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { freePort } from '../../scripts/lib/dev-server';
import type { ManagedProcess } from '../../scripts/lib/processes';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { getProductsParams } from '../harness/demo-requests';
import { eventually, testAddress } from '../harness/temporal';
import { startWorkerProcess, writeAgentsFile } from '../harness/worker-process';
import { dataConverter } from '../../client/payload-codec';

let seller: ScriptedSeller;
let worker: ManagedProcess | undefined;

afterAll(async () => {
  await worker?.stop();
  await seller?.close();
});

test('the worker serves operation, seller and Temporal metrics in Prometheus format', async () => {
  seller = await startScriptedSeller();
  const metricsAddress = `127.0.0.1:${await freePort()}`;
  const taskQueue = `metrics-${randomUUID()}`;
  const agentsFile = writeAgentsFile([
    { id: 'metrics-seller', url: seller.url, protocol: 'mcp', token_env: 'METRICS_SELLER_TOKEN' },
  ]);
  worker = await startWorkerProcess({
    address: testAddress(),
    taskQueue,
    agentsFile,
    env: {
      METRICS_SELLER_TOKEN: seller.authToken,
      ADCP_METRICS_ADDRESS: metricsAddress,
      ADCP_RECONCILE_EVERY: 'off',
      ADCP_CIRCUIT_FAILURES: '2',
      ADCP_CIRCUIT_COOL_OFF_MS: '1000',
    },
  });
  const connection = await Connection.connect({ address: testAddress() });
  try {
    const orchestrator = new OrchestratorClient({
      client: new Client({ connection, dataConverter: dataConverter() }),
      taskQueue,
    });
    // Two failed attempts (one request each) open the circuit (threshold 2); after 1 s a trial call closes it.
    seller.fault('get_products', { kind: 'http-status', status: 503 }, { times: 2 });
    const { operationId } = await orchestrator.start({
      agentId: 'metrics-seller',
      task: 'get_products',
      params: getProductsParams,
      retry: { maximumAttempts: 6, initialIntervalMs: 100, maximumIntervalMs: 200 },
    });
    expect((await orchestrator.result(operationId)).status).toBe('completed');

    const text = await eventually(async () => {
      const body = await (await fetch(`http://${metricsAddress}/metrics`)).text();
      return body.includes('adcp_operation_transitions') && body.includes('adcp_operation_duration') ? body : undefined;
    }, 30_000);
    expect(text).toMatch(
      /adcp_operation_transitions_total\{[^}]*agent="metrics-seller"[^}]*source="call"[^}]*task="get_products"[^}]*to="completed"[^}]*\} 1/,
    );
    expect(text).toMatch(/adcp_seller_call_failures_total\{[^}]*code="TRANSPORT_HTTP_503"[^}]*\} 2/);
    for (const [from, to] of [
      ['closed', 'open'],
      ['open', 'half-open'],
      ['half-open', 'closed'],
    ]) {
      expect(text).toMatch(
        new RegExp(
          `adcp_seller_circuit_transitions_total\\{[^}]*from="${from}"[^}]*seller="metrics-seller"[^}]*to="${to}"[^}]*\\} 1`,
        ),
      );
    }
    expect(text).toMatch(/adcp_operation_duration\S*_count\{[^}]*status="completed"[^}]*\} 1/);
    expect(text).toMatch(/temporal_workflow_completed_total\{[^}]*workflow_type="adcpOperation"[^}]*\} 1/);
  } finally {
    await connection.close();
  }
});
