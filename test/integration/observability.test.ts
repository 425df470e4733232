/**
 * Logs and traces of one operation run through a real worker (in this process, so the logger's destination and an
 * in-memory span exporter can be read): every log line about the operation carries its operation, workflow and
 * run IDs, seller and task, from the worker, the workflow and the activities alike; and the trace runs client →
 * workflow → activity → the seller's HTTP call, with parent/child links and the seller and task on the last span.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { dataConverter } from '../../client/payload-codec';
import { TemporalPinoLogger, createLogger } from '../../observability/logger';
import { SELLER_SPAN_ATTRIBUTES } from '../../activities/seller-spans';
import {
  type Tracing,
  startTracing,
  tracingClientInterceptors,
  tracingWorkerOptions,
} from '../../observability/tracing';
import { workflowInterceptorModules } from '../../observability/workflow-modules';
import { workflowPreloadModules } from '../../workers/bundle-options';
import { WORKFLOWS_PATH, createOperationWorker } from '../../workers/worker';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { getProductsParams } from '../harness/demo-requests';
import { eventually, registry, testAddress } from '../harness/temporal';
import { startWorkerProcess, writeAgentsFile } from '../harness/worker-process';
import { connectGrpc } from '../../config/grpc-connection';

const SELLER_ID = 'observed-seller';
const lines: string[] = [];
const spans = new InMemorySpanExporter();
let tracing: Tracing;
let seller: ScriptedSeller;
let worker: Worker;
let running: Promise<void>;
let workerConnection: NativeConnection;
let connection: Connection;
let operationId: string;
let bundleCode: string;

type LogLine = Record<string, unknown> & { msg: string };

function logLines(): LogLine[] {
  return lines.map((line) => JSON.parse(line) as LogLine);
}

beforeAll(async () => {
  // What workers/main.ts installs, with the lines captured instead of written to stdout.
  tracing = startTracing({ serviceName: 'observability-test', spanProcessor: new SimpleSpanProcessor(spans) });
  const logger = createLogger({
    service: 'worker',
    env: { ADCP_LOG_LEVEL: 'debug', ADCP_LOG_FORMAT: 'json' },
    destination: { write: (line: string) => void lines.push(line) },
  });
  Runtime.install({ logger: new TemporalPinoLogger(logger) });
  seller = await startScriptedSeller();
  const taskQueue = `observability-${randomUUID()}`;
  // The bundle a tracing worker builds at start (workers/workflow-bundle.ts): log fields and OpenTelemetry modules,
  // and the shared preloaded modules. The OpenTelemetry interceptor module itself is not preloaded (module-level
  // state, see workers/bundle-options.ts): it is evaluated per workflow, next to the preloaded ones.
  ({ code: bundleCode } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: workflowInterceptorModules(true),
    preloadModules: workflowPreloadModules(),
    logger: new DefaultLogger('WARN'),
  }));
  connection = await connectGrpc({ address: testAddress() });
  const client = new Client({
    connection,
    dataConverter: dataConverter(),
    interceptors: { workflow: tracingClientInterceptors(tracing) },
  });
  workerConnection = await NativeConnection.connect({ address: testAddress() });
  worker = await createOperationWorker({
    connection: workerConnection,
    namespace: 'default',
    taskQueue,
    workflowBundle: { code: bundleCode },
    activities: {
      sellers: registry([{ id: SELLER_ID, url: seller.url, protocol: 'mcp', token_env: 'OBSERVED_SELLER_TOKEN' }]),
      env: { OBSERVED_SELLER_TOKEN: seller.authToken },
    },
    client,
    tracing,
    shutdownGraceTime: '2s',
  });
  running = worker.run();
  const orchestrator = new OrchestratorClient({ client, taskQueue });
  ({ operationId } = await orchestrator.start({
    sellerId: SELLER_ID,
    task: 'get_products',
    params: getProductsParams,
  }));
  expect((await orchestrator.result(operationId)).status).toBe('completed');
});

afterAll(async () => {
  if (worker?.getState() === 'RUNNING') worker.shutdown();
  await running?.catch(() => undefined);
  await workerConnection?.close();
  await connection?.close();
  await seller?.close();
  await tracing?.shutdown();
});

test('every log line about the operation carries its operation, workflow and run IDs, seller and task', async () => {
  // Workflow lines come through a sink after the workflow task completes.
  await eventually(async () =>
    logLines().some((line) => line.workflowId === operationId && line.msg === 'Workflow completed') ? true : undefined,
  );
  const about = logLines().filter((line) => line.workflowId === operationId);
  const activityLines = about.filter((line) => typeof line.activityType === 'string');
  const workflowLines = about.filter(
    (line) => line.workflowType === 'adcpOperation' && line.activityType === undefined,
  );
  expect(activityLines.length).toBeGreaterThan(0);
  expect(workflowLines.length).toBeGreaterThan(0);
  // The call itself is among the activity lines (a read runs as a local activity, planned inside it: revision 3).
  expect(activityLines.map((line) => line.activityType)).toEqual(expect.arrayContaining(['sendCall']));
  expect(activityLines.map((line) => line.activityType)).not.toContain('planCall');
  for (const line of about) {
    expect(line).toMatchObject({
      service: 'worker',
      operationId,
      workflowId: operationId,
      runId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      seller: SELLER_ID,
      task: 'get_products',
    });
    expect(typeof line.level).toBe('string');
    expect(line).not.toHaveProperty('taskToken');
  }
  // One run: the activity lines name the same run as the workflow lines.
  expect(new Set(about.map((line) => line.runId)).size).toBe(1);
});

test('one trace links the client start, the workflow, its activities and the seller call', async () => {
  const finished = await eventually(async () => {
    const all = spans.getFinishedSpans();
    return all.some((span) => span.name === 'RunWorkflow:adcpOperation') &&
      all.some((span) => span.name === 'adcp get_products')
      ? all
      : undefined;
  });
  const byId = new Map(finished.map((span) => [span.spanContext().spanId, span]));
  const parentOf = (span: ReadableSpan) => (span.parentSpanId ? byId.get(span.parentSpanId) : undefined);

  const sellerCall = finished.find((span) => span.name === 'adcp get_products')!;
  expect(sellerCall.attributes).toMatchObject({
    [SELLER_SPAN_ATTRIBUTES.seller]: SELLER_ID,
    [SELLER_SPAN_ATTRIBUTES.task]: 'get_products',
    [SELLER_SPAN_ATTRIBUTES.protocol]: 'mcp',
    [SELLER_SPAN_ATTRIBUTES.method]: 'call',
  });
  // seller call ← activity run ← activity scheduled by the workflow ← workflow run ← the client's start.
  const activityRun = parentOf(sellerCall)!;
  expect(activityRun.name).toBe('RunActivity:sendCall');
  expect(activityRun.attributes).toMatchObject({ temporalWorkflowId: operationId });
  const activityStart = parentOf(activityRun)!;
  expect(activityStart.name).toMatch(/^StartActivity:sendCall$/);
  const workflowRun = parentOf(activityStart)!;
  expect(workflowRun.name).toBe('RunWorkflow:adcpOperation');
  const clientStart = parentOf(workflowRun)!;
  expect(clientStart.name).toMatch(/Workflow:adcpOperation$/);
  expect(clientStart.parentSpanId).toBeUndefined();
  const traceIds = new Set(
    [sellerCall, activityRun, activityStart, workflowRun, clientStart].map((span) => span.spanContext().traceId),
  );
  expect(traceIds.size).toBe(1);
});

test('the tracing bundle preloads the shared modules, and not the OpenTelemetry interceptor module', () => {
  const preloadBlock = /exports\.preloadModules = function preloadModules\(\) \{([\s\S]*?)\n\}/.exec(bundleCode);
  expect(preloadBlock).not.toBeNull();
  expect(preloadBlock![1]).toContain('"./workflows/index.ts"');
  expect(preloadBlock![1]).not.toContain('interceptors-opentelemetry');
  // The interceptor module is in the bundle all the same, evaluated per workflow.
  expect(bundleCode).toContain('@temporalio/interceptors-opentelemetry/lib/workflow');
});

test('the committed histories replay with the log and tracing interceptors in the bundle', async () => {
  // The interceptors add log fields and spans, never commands: what running operations recorded replays unchanged.
  const dir = path.resolve(__dirname, '..', 'histories');
  const files = readdirSync(dir).filter((file) => file.endsWith('.json'));
  expect(files.length).toBeGreaterThan(0);
  for (const file of files) {
    const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    await expect(
      Worker.runReplayHistory(
        { workflowBundle: { code: bundleCode }, sinks: tracingWorkerOptions(tracing).sinks },
        history,
        file,
      ),
    ).resolves.toBeUndefined();
  }
});

const EXPECTED_SPANS = ['RunWorkflow:adcpOperation', 'RunActivity:sendCall', 'adcp get_products', 'otlp-test-worker'];

test('the worker process exports its spans over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set', async () => {
  // A collector stand-in: records what the exporter posts to /v1/traces.
  const posts: { path: string; body: Buffer }[] = [];
  const collector = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      posts.push({ path: req.url ?? '', body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
  const taskQueue = `otlp-${randomUUID()}`;
  const worker = await startWorkerProcess({
    address: testAddress(),
    taskQueue,
    agentsFile: writeAgentsFile([
      { id: SELLER_ID, url: seller.url, protocol: 'mcp', token_env: 'OBSERVED_SELLER_TOKEN' },
    ]),
    env: {
      OBSERVED_SELLER_TOKEN: seller.authToken,
      ADCP_RECONCILE_EVERY: 'off',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_SERVICE_NAME: 'otlp-test-worker',
      // The batch processor's delay (default 5 s), short so the spans arrive while the test waits.
      OTEL_BSP_SCHEDULE_DELAY: '200',
    },
  });
  try {
    const client = new Client({
      connection,
      dataConverter: dataConverter(),
      interceptors: { workflow: tracingClientInterceptors(tracing) },
    });
    const orchestrator = new OrchestratorClient({ client, taskQueue });
    const started = await orchestrator.start({ sellerId: SELLER_ID, task: 'get_products', params: getProductsParams });
    expect((await orchestrator.result(started.operationId)).status).toBe('completed');
    // Workflow spans (through the sink), activity spans and the seller call, from the worker process.
    await eventually(async () => {
      const exported = Buffer.concat(posts.map((post) => post.body)).toString('latin1');
      return EXPECTED_SPANS.every((name) => exported.includes(name)) ? true : undefined;
    }, 30_000);
  } finally {
    await worker.stop();
    await new Promise((resolve) => collector.close(resolve));
  }
  const exported = Buffer.concat(posts.map((post) => post.body)).toString('latin1');
  expect(posts.every((post) => post.path === '/v1/traces')).toBe(true);
  for (const name of EXPECTED_SPANS) expect(exported).toContain(name);
});
