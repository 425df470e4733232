/**
 * The gateway's request log and metrics over real HTTP, with a real worker and the demo seller: every answer carries
 * a request ID (the caller's X-Request-Id, else its traceparent's trace ID, else a new one) and leaves one log line
 * with the route template, the status and, where the route knows them, the operation ID, seller and task; GET
 * /metrics counts the same requests by route template.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway } from '../../api/app';
import { observeGateway } from '../../observability/gateway-observability';
import { createLogger } from '../../observability/logger';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { getProductsParams } from '../harness/demo-requests';
import { type TestStack, demoSellerConfig, registry, startTestStack } from '../harness/temporal';

let stack: TestStack;
let server: Server;
let base: string;
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  stack = await startTestStack({ sellers: registry([demoSellerConfig()]), activities: { env: { DEMO_SELLER_TOKEN } } });
  const logger = createLogger({
    service: 'gateway',
    env: { ADCP_LOG_FORMAT: 'json' },
    destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  const app = observeGateway(createGateway({ orchestrator: stack.orchestrator }), { logger });
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
});

const lineFor = (requestId: string) => lines.find((line) => line.requestId === requestId);

test('a request keeps the caller’s X-Request-Id, and its log line names the operation, seller and task', async () => {
  const started = await fetch(`${base}/v1/operations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': 'checkout-42' },
    body: JSON.stringify({ agent_id: 'demo', task: 'get_products', params: getProductsParams }),
  });
  expect(started.status).toBe(202);
  expect(started.headers.get('x-request-id')).toBe('checkout-42');
  const operationId = ((await started.json()) as { operation_id: string }).operation_id;
  await stack.orchestrator.result(operationId);
  expect(lineFor('checkout-42')).toMatchObject({
    service: 'gateway',
    level: 'info',
    method: 'POST',
    route: '/v1/operations',
    status: 202,
    operationId,
    seller: 'demo',
    task: 'get_products',
  });

  // A W3C traceparent: its trace ID becomes the request ID, so logs and traces meet.
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const read = await fetch(`${base}/v1/operations/${operationId}`, {
    headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
  });
  expect(read.status).toBe(200);
  expect(read.headers.get('x-request-id')).toBe(traceId);
  expect(lineFor(traceId)).toMatchObject({
    route: '/v1/operations/:id',
    status: 200,
    operationId,
    seller: 'demo',
    task: 'get_products',
  });
});

test('without one the gateway issues a request ID; refusals log at warn; /metrics counts by route template', async () => {
  const missing = await fetch(`${base}/v1/operations/adcp-get_products-does-not-exist`, {
    headers: { 'x-request-id': 'not a valid id!' },
  });
  expect(missing.status).toBe(404);
  const issued = missing.headers.get('x-request-id')!;
  expect(issued).toMatch(/^[0-9a-f-]{36}$/);
  expect(lineFor(issued)).toMatchObject({
    level: 'warn',
    route: '/v1/operations/:id',
    status: 404,
    operationId: 'adcp-get_products-does-not-exist',
  });

  const metrics = await fetch(`${base}/metrics`);
  expect(metrics.status).toBe(200);
  expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
  const text = await metrics.text();
  expect(text).toMatch(/adcp_gateway_http_requests_total\{method="POST",route="\/v1\/operations",status="202"\} 1/);
  expect(text).toMatch(/adcp_gateway_http_requests_total\{method="GET",route="\/v1\/operations\/:id",status="404"\} 1/);
  // One series per route template, never per operation ID.
  expect(text).not.toMatch(/route="\/v1\/operations\/adcp-/);
});
