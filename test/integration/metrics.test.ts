/**
 * The worker's Prometheus endpoint (ADCP_METRICS_ADDRESS): Temporal's own worker metrics and the orchestrator's
 * (operation transitions and durations, seller call failures), scraped from the real worker process. And the
 * gateway's GET /metrics, scraped from the real gateway process (api/main.ts) after one operation went through it:
 * every metric the Grafana dashboard and the alert rules in monitoring/ use is exported by one of the two.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generateApiKey, writeKeysFile } from '../../api/auth';
import {
  exportedNames,
  histogramsWithoutUnit,
  loadAlertRules,
  loadDashboardQueries,
  metricNamesIn,
} from '../../observability/monitoring-files';
import { startProcess } from '../../scripts/lib/processes';
import { createMediaBuyParams } from '../harness/demo-requests';
import { Client } from '@temporalio/client';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { freePort } from '../../scripts/lib/dev-server';
import type { ManagedProcess } from '../../scripts/lib/processes';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { getProductsParams } from '../harness/demo-requests';
import { eventually, testAddress } from '../harness/temporal';
import { startWorkerProcess, writeAgentsFile } from '../harness/worker-process';
import { dataConverter } from '../../client/payload-codec';
import { connectGrpc } from '../../config/grpc-connection';

let seller: ScriptedSeller;
let worker: ManagedProcess | undefined;
let gateway: ManagedProcess | undefined;

afterAll(async () => {
  await gateway?.stop();
  await worker?.stop();
  await seller?.close();
});

test('the worker serves operation, seller and Temporal metrics in Prometheus format', async () => {
  seller ??= await startScriptedSeller();
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
  const connection = await connectGrpc({ address: testAddress() });
  try {
    const orchestrator = new OrchestratorClient({
      client: new Client({ connection, dataConverter: dataConverter() }),
      taskQueue,
    });
    // The worker reads the seller's capabilities when it starts; that answer counts as a success for the breaker, so
    // it must land before the two failures, or on a loaded machine it may land between them and reset the count.
    await eventually(async () => {
      const body = await (await fetch(`http://${metricsAddress}/metrics`)).text();
      return /temporal_activity_execution_latency_seconds_count\{[^}]*activity_type="fetchSellerCapabilities"/.test(
        body,
      )
        ? true
        : undefined;
    }, 30_000);
    // Two failed attempts (one request each) open the circuit (threshold 2); after 1 s a trial call closes it.
    seller.fault('get_products', { kind: 'http-status', status: 503 }, { times: 2 });
    const { operationId } = await orchestrator.start({
      sellerId: 'metrics-seller',
      task: 'get_products',
      params: getProductsParams,
      retry: { maximumAttempts: 6, initialIntervalMs: 100, maximumIntervalMs: 200 },
    });
    expect((await orchestrator.result(operationId)).status).toBe('completed');

    const text = await eventually(async () => {
      const body = await (await fetch(`http://${metricsAddress}/metrics`)).text();
      // The core records a workflow's completion once the server has taken its last task, which may come after the
      // orchestrator's own metrics on a loaded machine: wait for both.
      return body.includes('adcp_operation_transitions') &&
        body.includes('adcp_operation_duration_seconds') &&
        /temporal_workflow_completed_total\{[^}]*workflow_type="adcpOperation"/.test(body)
        ? body
        : undefined;
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
    expect(text).toMatch(/adcp_operation_duration_seconds_count\{[^}]*status="completed"[^}]*\} 1/);
    expect(text).toMatch(/temporal_workflow_completed_total\{[^}]*workflow_type="adcpOperation"[^}]*\} 1/);
    // Every histogram is named by its unit (Prometheus naming), Temporal's latencies and the operations' durations.
    expect(text).toMatch(/^# TYPE temporal_workflow_task_schedule_to_start_latency_seconds histogram$/m);
    expect(histogramsWithoutUnit(text)).toEqual([]);
  } finally {
    await connection.close();
    await worker.stop();
    worker = undefined;
  }
});

/** The gateway as `npm run gateway` runs it, authenticating with a key file; resolves once it listens. */
async function startGatewayProcess(env: NodeJS.ProcessEnv): Promise<ManagedProcess> {
  const root = path.resolve(__dirname, '..', '..');
  const started = startProcess(
    'gateway',
    path.join(root, 'node_modules', '.bin', 'tsx'),
    [path.join(root, 'api', 'main.ts')],
    {
      env,
    },
  );
  await eventually(async () => {
    if (started.child.exitCode !== null) throw new Error(`gateway exited:\n${started.output()}`);
    return started.output().includes('gateway: http://') ? true : undefined;
  }, 60_000);
  return started;
}

test('every metric the dashboard and the alert rules use is exported by the gateway or the worker', async () => {
  seller ??= await startScriptedSeller();
  const metricsAddress = `127.0.0.1:${await freePort()}`;
  const gatewayPort = await freePort();
  const taskQueue = `monitoring-${randomUUID()}`;
  const agentsFile = writeAgentsFile([
    { id: 'monitored-seller', url: seller.url, protocol: 'mcp', token_env: 'MONITORED_SELLER_TOKEN' },
  ]);
  const keysDir = mkdtempSync(path.join(os.tmpdir(), 'adcp-monitoring-keys-'));
  const apiKey = generateApiKey('monitoring');
  writeKeysFile(path.join(keysDir, 'keys.json'), {
    keys: [
      {
        key_id: 'monitoring',
        hash: apiKey.hash,
        principal: 'monitoring@acme',
        tenant: 'acme',
        roles: ['reader', 'buyer', 'approver', 'operator'],
      },
    ],
  });
  const env = {
    TEMPORAL_ADDRESS: testAddress(),
    TEMPORAL_NAMESPACE: 'default',
    ADCP_TASK_QUEUE: taskQueue,
    ADCP_AGENTS_FILE: agentsFile,
    ADCP_RECONCILE_EVERY: 'off',
  };
  [worker, gateway] = await Promise.all([
    startWorkerProcess({
      address: testAddress(),
      taskQueue,
      agentsFile,
      env: {
        ...env,
        MONITORED_SELLER_TOKEN: seller.authToken,
        ADCP_METRICS_ADDRESS: metricsAddress,
        // One failed call opens the circuit, so the breaker's metrics are there too.
        ADCP_CIRCUIT_FAILURES: '1',
        ADCP_CIRCUIT_COOL_OFF_MS: '500',
      },
    }),
    startGatewayProcess({
      ...env,
      ADCP_GATEWAY_PORT: String(gatewayPort),
      ADCP_API_KEYS_FILE: path.join(keysDir, 'keys.json'),
    }),
  ]);
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const call = async (method: string, route: string, body?: unknown) => {
    const response = await fetch(`${gatewayUrl}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey.key}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  // One operation through the gateway: a failed attempt, a question for a person, the answer, completion.
  seller.fault('create_media_buy', { kind: 'http-status', status: 503 }, { times: 1 });
  seller.script('create_media_buy', [
    { status: 'input-required', reason: 'APPROVAL_REQUIRED', message: 'Needs sign-off' },
    { status: 'completed' },
  ]);
  const started = await call('POST', '/v1/operations', {
    agent_id: 'monitored-seller',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotency_key: randomUUID(),
    retry: { max_attempts: 5, initial_interval_seconds: 1, maximum_interval_seconds: 1 },
  });
  expect(started.status).toBe(202);
  const operationId = String(started.body.operation_id);
  const statusOf = async () => (await call('GET', `/v1/operations/${operationId}`)).body.status;
  await eventually(async () => ((await statusOf()) === 'input-required' ? true : undefined), 60_000);
  // While it waits on a person, the gateway counts it (Temporal visibility) among the pending operations.
  const waitingText = await eventually(async () => {
    const body = await (await fetch(`${gatewayUrl}/metrics`)).text();
    return /adcp_operations_pending\{task="create_media_buy",status="input-required"\} [1-9]/.test(body)
      ? body
      : undefined;
  }, 30_000);
  expect(waitingText).toMatch(/adcp_operations_pending_truncated 0/);
  const answered = await call('POST', `/v1/operations/${operationId}/input`, {
    input: { approved: true },
    idempotency_key: 'monitoring-approval',
  });
  expect(answered.status).toBe(200);
  await eventually(async () => ((await statusOf()) === 'completed' ? true : undefined), 60_000);
  // A webhook the gateway cannot verify (this seller has no webhook credentials), and a route that does not exist.
  const refused = await fetch(`${gatewayUrl}/webhooks/adcp/${operationId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ status: 'completed' }),
  });
  expect(refused.status).toBe(401);
  expect(refused.headers.get('x-request-id')).toMatch(/\S/);
  expect((await call('GET', '/v1/nothing-here')).status).toBe(404);

  const gatewayText = await (await fetch(`${gatewayUrl}/metrics`)).text();
  const workerText = await eventually(async () => {
    const body = await (await fetch(`http://${metricsAddress}/metrics`)).text();
    return /adcp_operation_outcomes_total\{[^}]*status="completed"/.test(body) ? body : undefined;
  }, 30_000);

  // What the gateway counted: the routes by template, the refusal by reason.
  expect(gatewayText).toMatch(
    /adcp_gateway_http_requests_total\{method="POST",route="\/v1\/operations",status="202"\} 1/,
  );
  expect(gatewayText).toMatch(
    /adcp_gateway_http_requests_total\{method="GET",route="\/v1\/operations\/:id",status="200"\} \d+/,
  );
  expect(gatewayText).toMatch(/adcp_gateway_http_requests_total\{method="GET",route="unmatched",status="404"\} 1/);
  expect(gatewayText).toMatch(
    /adcp_gateway_webhook_verification_failures_total\{webhook="task",reason="webhooks_not_configured"\} 1/,
  );
  expect(gatewayText).toMatch(/adcp_gateway_http_request_duration_seconds_bucket\{[^}]*route="\/v1\/operations"/);
  expect(gatewayText).toMatch(/# TYPE adcp_operations_pending gauge/);
  expect(histogramsWithoutUnit(gatewayText)).toEqual([]);
  // What the worker counted: the approval wait and the outcome.
  expect(workerText).toMatch(/adcp_operation_input_wait_seconds_count\{[^}]*to="(working|completed)"/);
  expect(workerText).toMatch(/adcp_operation_outcomes_total\{[^}]*reason="none"[^}]*status="completed"[^}]*\} 1/);

  const exported = new Set([...exportedNames(gatewayText), ...exportedNames(workerText)]);
  const used = [
    ...loadDashboardQueries().map(({ panel, expr }) => ({ where: `dashboard panel "${panel}"`, expr })),
    ...loadAlertRules().map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr })),
  ];
  const missing = used.flatMap(({ where, expr }) =>
    metricNamesIn(expr)
      .filter((name) => !exported.has(name))
      .map((name) => `${name} (${where})`),
  );
  expect(missing).toEqual([]);
});
