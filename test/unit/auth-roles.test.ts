/**
 * Roles and tenants (#12 item 2) through a real express app with the /v1 access policy in front of stand-in routes:
 * every role on every route, allowed and denied; another tenant's operation answers 404 with exactly the body of an
 * operation that does not exist; a missing role answers 403 naming the role.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import {
  ApiKeyStore,
  type AuthEvent,
  ROLES,
  type Role,
  createAccessControl,
  createAuthentication,
  generateApiKey,
  writeKeysFile,
} from '../../api/auth';

let server: Server;
let base: string;
let dir: string;
const events: AuthEvent[] = [];
const keys: Record<string, string> = {};
/** Operation id → tenant, as the workflow's AdcpTenant search attribute would answer. */
const operations = new Map([
  ['adcp-create_media_buy-acme-1', 'acme'],
  ['adcp-create_media_buy-globex-1', 'globex'],
]);
let temporalDown = false;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'adcp-roles-'));
  const file = path.join(dir, 'keys.json');
  const entries = [];
  for (const role of ROLES) {
    const issued = generateApiKey(`acme-${role}`);
    keys[role] = issued.key;
    entries.push({
      key_id: `acme-${role}`,
      hash: issued.hash,
      principal: `${role}@acme`,
      tenant: 'acme',
      roles: [role],
    });
  }
  const globex = generateApiKey('globex-all');
  keys.globex = globex.key;
  entries.push({
    key_id: 'globex-all',
    hash: globex.hash,
    principal: 'ops@globex',
    tenant: 'globex',
    roles: [...ROLES],
  });
  writeKeysFile(file, { keys: entries });

  const authentication = createAuthentication({
    apiKeys: new ApiKeyStore({ file }),
    onEvent: (event) => events.push(event),
  });
  const app = express();
  app.get('/healthz', (_req, res) => res.json({ status: 'ok' }));
  app.post('/webhooks/adcp/:id', (_req, res) => res.status(202).json({ status: 'accepted' }));
  app.use(
    '/v1',
    createAccessControl({
      authentication,
      tenantOf: {
        operation: async (id) => {
          if (temporalDown) throw Object.assign(new Error('deadline exceeded'), { code: 'TEMPORAL_DOWN' });
          return operations.get(id);
        },
      },
      onEvent: (event) => events.push(event),
    }),
  );
  // Stand-ins for the gateway's routes: they answer who got through.
  const through = (req: Request, res: Response) =>
    res.json({ route: `${req.method} ${req.route?.path}`, principal: req.principal!.id });
  app.post('/v1/operations', through);
  app.get('/v1/operations/:id', through);
  app.post('/v1/operations/:id/input', through);
  app.post('/v1/operations/:id/cancel', through);
  app.post('/v1/operations/:id/credentials-refreshed', through);
  app.post('/v1/sellers/:sellerId/reconcile', through);
  app.post('/v1/media-buys', through);
  app.get('/v1/media-buys/:id', through);
  app.use((_req, res) => res.status(404).json({ error: { code: 'NOT_FOUND' } }));
  app.use((error: { code?: string }, _req: Request, res: Response, _next: NextFunction) =>
    res.status(error.code === 'TEMPORAL_DOWN' ? 503 : 500).json({ error: { code: error.code ?? 'INTERNAL' } }),
  );
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

async function call(method: string, path: string, key?: string) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), 'content-type': 'application/json' },
    ...(method === 'POST' ? { body: '{}' } : {}),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text ? (JSON.parse(text) as any) : undefined,
    challenge: response.headers.get('www-authenticate'),
  };
}

const OWN = 'adcp-create_media_buy-acme-1';
const OTHER = 'adcp-create_media_buy-globex-1';
const ROUTES: { method: string; path: string; allowed: Role[] }[] = [
  { method: 'POST', path: '/v1/operations', allowed: ['buyer'] },
  { method: 'GET', path: `/v1/operations/${OWN}`, allowed: ['reader', 'buyer', 'approver', 'operator', 'admin'] },
  { method: 'POST', path: `/v1/operations/${OWN}/input`, allowed: ['approver'] },
  { method: 'POST', path: `/v1/operations/${OWN}/cancel`, allowed: ['operator'] },
  { method: 'POST', path: `/v1/operations/${OWN}/credentials-refreshed`, allowed: ['operator'] },
  { method: 'POST', path: '/v1/sellers/demo/reconcile', allowed: ['operator'] },
  { method: 'POST', path: '/v1/media-buys', allowed: ['buyer'] },
];

describe.each(ROUTES)('$method $path', ({ method, path: route, allowed }) => {
  test.each(ROLES.map((role) => [role, allowed.includes(role)] as const))('%s: allowed %s', async (role, ok) => {
    const answer = await call(method, route, keys[role]);
    if (ok) {
      expect(answer.status).toBe(200);
      expect(answer.body.principal).toBe(`${role}@acme`);
    } else {
      expect(answer.status).toBe(403);
      expect(answer.body.error).toMatchObject({ code: 'FORBIDDEN', required_roles: allowed });
      expect(answer.body.error.message).toContain(`needs the ${allowed.map((name) => `"${name}"`).join(' or ')} role`);
      expect(answer.body.error.message).toContain(`principal "${role}@acme" holds ${role}`);
      expect(answer.challenge).toContain('error="insufficient_scope"');
    }
  });

  test('without credentials: 401 with WWW-Authenticate', async () => {
    const answer = await call(method, route);
    expect(answer.status).toBe(401);
    expect(answer.challenge).toBe('Bearer realm="adcp-orchestrator"');
    expect(answer.body.error.code).toBe('UNAUTHENTICATED');
  });
});

describe('tenant boundary', () => {
  test.each([
    ['GET', `/v1/operations/${OTHER}`],
    ['POST', `/v1/operations/${OTHER}/input`],
    ['POST', `/v1/operations/${OTHER}/cancel`],
    ['POST', `/v1/operations/${OTHER}/credentials-refreshed`],
  ])(
    '%s %s of another tenant answers 404, the same body as an operation that does not exist',
    async (method, route) => {
      const role: Role = route.endsWith('/input') ? 'approver' : route.endsWith(OTHER) ? 'reader' : 'operator';
      const other = await call(method, route, keys[role]);
      const missing = await call(method, route.replace(OTHER, 'adcp-create_media_buy-nope'), keys[role]);
      expect(other.status).toBe(404);
      expect(other.body).toMatchObject({
        code: 'OPERATION_NOT_FOUND',
        error: { code: 'OPERATION_NOT_FOUND', message: `No operation ${OTHER}.` },
      });
      expect(missing.status).toBe(404);
      expect(Object.keys(missing.body).sort()).toEqual(Object.keys(other.body).sort());
      expect(Object.keys(missing.body.error)).toEqual(Object.keys(other.body.error));
      // The owner, with every role, reaches it.
      expect((await call(method, route, keys.globex)).status).toBe(200);
    },
  );

  test('every denial is an access_denied event naming principal and reason, without secrets', async () => {
    events.length = 0;
    await call('POST', `/v1/operations/${OTHER}/cancel`, keys.operator);
    await call('POST', `/v1/operations/${OWN}/cancel`, keys.reader);
    expect(events.filter((event) => event.type === 'access_denied')).toEqual([
      expect.objectContaining({ principal: 'operator@acme', tenant: 'acme', reason: 'other_tenant' }),
      expect.objectContaining({ principal: 'reader@acme', tenant: 'acme', reason: 'missing_role' }),
    ]);
    expect(JSON.stringify(events)).not.toContain(keys.operator!.split('.')[2]);
  });

  test('a media buy whose tenant cannot be looked up is refused (fail closed), not served unchecked', async () => {
    const answer = await call('GET', '/v1/media-buys/mb-1', keys.reader);
    expect(answer).toMatchObject({ status: 404, body: { error: { code: 'MEDIA_BUY_NOT_FOUND' } } });
  });

  test('the tenant lookup failing (Temporal down) goes to the error handler, not to the route', async () => {
    temporalDown = true;
    try {
      expect((await call('GET', `/v1/operations/${OWN}`, keys.reader)).status).toBe(503);
    } finally {
      temporalDown = false;
    }
  });
});

describe('routes outside the table and path variants', () => {
  test('express matches paths case-insensitively, and so does the policy: a reader cannot start via /V1/OPERATIONS', async () => {
    expect((await call('POST', '/V1/Operations', keys.reader)).status).toBe(403);
    expect((await call('POST', '/v1/operations/', keys.reader)).status).toBe(403);
    expect((await call('POST', '/V1/Operations', keys.buyer)).status).toBe(200);
  });

  test('an unknown mutating /v1 route needs operator; an unknown read needs any role; both need credentials', async () => {
    expect((await call('POST', '/v1/not-yet-in-the-table', keys.buyer)).status).toBe(403);
    expect((await call('POST', '/v1/not-yet-in-the-table', keys.operator)).status).toBe(404);
    expect((await call('GET', '/v1/not-yet-in-the-table', keys.reader)).status).toBe(404);
    expect((await call('GET', '/v1/not-yet-in-the-table')).status).toBe(401);
  });

  test('/healthz and the webhook routes are outside authentication', async () => {
    expect((await call('GET', '/healthz')).status).toBe(200);
    expect((await call('POST', '/webhooks/adcp/x')).status).toBe(202);
  });
});
