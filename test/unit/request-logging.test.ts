/**
 * The gateway's request log (observability/request-logging.ts) over real HTTP on loopback: one line per request
 * with its request ID (the caller's, the trace's, or a new one, always answered in X-Request-Id), the operation ID
 * from the URL of both webhook forms, and the request's own logger for lines a route writes about it (made on first
 * use), carrying the same request ID.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createLogger } from '../../observability/logger';
import { requestLoggerOf, requestLogging } from '../../observability/request-logging';

const lines: Record<string, unknown>[] = [];
let server: http.Server;
let base: string;

beforeAll(async () => {
  const logger = createLogger({
    service: 'gateway',
    env: { ADCP_LOG_FORMAT: 'json', ADCP_LOG_LEVEL: 'info' },
    destination: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  const app = express();
  app.use(requestLogging(logger));
  app.post('/webhooks/adcp/:sellerId/:operationId', (_req, res) => {
    res.json({ status: 'accepted' });
  });
  app.post('/webhooks/adcp/:operationId', (_req, res) => {
    res.json({ status: 'accepted' });
  });
  app.get('/v1/operations/:id', (_req, res) => {
    requestLoggerOf(res).warn({ why: 'test' }, 'a line about this request');
    requestLoggerOf(res).warn({ why: 'again' }, 'a second line about this request');
    res.status(404).json({ error: { code: 'OPERATION_NOT_FOUND' } });
  });
  server = await new Promise<http.Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
});

/** The lines logged for one request, found by the request ID it was answered with. */
async function request(path: string, init: RequestInit = {}): Promise<{ requestId: string; logged: typeof lines }> {
  const response = await fetch(`${base}${path}`, init);
  await response.arrayBuffer();
  const requestId = response.headers.get('x-request-id') ?? '';
  // The access line is written when the response finishes, which may be just after the client has it.
  for (let i = 0; i < 50 && !lines.some((line) => line.requestId === requestId && typeof line.route === 'string'); i++)
    await new Promise((resolve) => setTimeout(resolve, 10));
  return { requestId, logged: lines.filter((line) => line.requestId === requestId) };
}

test('a webhook with the seller in the path logs its operation ID, not the seller; the older form too', async () => {
  const operationId = `adcp-create_media_buy-${randomUUID()}`;
  const withSeller = await request(`/webhooks/adcp/fixture/${operationId}`, { method: 'POST' });
  expect(withSeller.requestId).toMatch(/^[0-9a-f-]{36}$/);
  expect(withSeller.logged).toEqual([
    expect.objectContaining({
      msg: 'request',
      method: 'POST',
      route: '/webhooks/adcp/:sellerId/:operationId',
      status: 200,
      operationId,
    }),
  ]);
  const older = await request(`/webhooks/adcp/${operationId}?x=1`, { method: 'POST' });
  expect(older.logged).toEqual([
    expect.objectContaining({ msg: 'request', route: '/webhooks/adcp/:operationId', operationId }),
  ]);
});

test("a route's own lines carry the request ID; the caller's X-Request-Id is kept, else the trace's", async () => {
  const given = `req-${randomUUID()}`;
  const described = await request('/v1/operations/op-1', { headers: { 'x-request-id': given } });
  expect(described.requestId).toBe(given);
  expect(described.logged.map((line) => [line.msg, line.level])).toEqual([
    ['a line about this request', 'warn'],
    ['a second line about this request', 'warn'],
    ['request refused', 'warn'],
  ]);
  expect(described.logged[2]).toMatchObject({ status: 404, route: '/v1/operations/:id', operationId: 'op-1' });

  const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
  const traced = await request('/v1/operations/op-2', { headers: { traceparent: `00-${trace}-00f067aa0ba902b7-01` } });
  expect(traced.requestId).toBe(trace);
  const zero = await request('/v1/operations/op-3', {
    headers: { traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, 'x-request-id': 'bad id with spaces' },
  });
  expect(zero.requestId).toMatch(/^[0-9a-f-]{36}$/);
});
