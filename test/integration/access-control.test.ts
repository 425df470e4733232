/**
 * Access control over the real gateway (#12 items 1, 2, 5): createGateway wrapped by createSecureGateway (hardening,
 * the /v1 access policy, rate limits, strict JSON), against real Temporal, a real worker and the demo seller.
 * Principals come from hashed API keys and from a JWT verified against a JWKS.
 *
 * Operations do not record their tenant yet (the lead adds it to the workflow input and the AdcpTenant search
 * attribute); until then `tenantOf` here reads a map filled when the gateway answers a start, standing in for it.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express from 'express';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { createGateway } from '../../api/app';
import {
  ApiKeyStore,
  ROLES,
  createAuthentication,
  createJwtVerifier,
  createSecureGateway,
  generateApiKey,
  writeKeysFile,
} from '../../api/auth';
import { LOOPBACK_HOSTS, createHardenedServer } from '../../api/hardening';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { getProductsParams } from '../harness/demo-requests';
import { type TestStack, demoSellerConfig, eventually, registry, startTestStack } from '../harness/temporal';

let stack: TestStack;
let server: Server;
let base: string;
let dir: string;
let jwt: string;
const keys: Record<string, string> = {};
const tenants = new Map<string, string>();

beforeAll(async () => {
  stack = await startTestStack({ sellers: registry([demoSellerConfig()]), activities: { env: { DEMO_SELLER_TOKEN } } });
  dir = mkdtempSync(path.join(tmpdir(), 'adcp-access-'));
  const file = path.join(dir, 'keys.json');
  const entries = [];
  for (const tenant of ['acme', 'globex']) {
    for (const role of ROLES) {
      const issued = generateApiKey(`${tenant}-${role}`);
      keys[`${tenant}/${role}`] = issued.key;
      entries.push({
        key_id: `${tenant}-${role}`,
        hash: issued.hash,
        principal: `${role}@${tenant}`,
        tenant,
        roles: [role],
      });
    }
  }
  writeKeysFile(file, { keys: entries });

  const idpKey = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(idpKey.publicKey)), kid: 'idp', alg: 'ES256' };
  jwt = await new SignJWT({ tenant: 'acme', roles: ['reader'] })
    .setProtectedHeader({ alg: 'ES256', kid: 'idp' })
    .setSubject('carol@acme.example')
    .setIssuer('https://idp.acme.example/')
    .setAudience('adcp-orchestrator')
    .setIssuedAt()
    .setExpirationTime('10m')
    .sign(idpKey.privateKey);

  const authentication = createAuthentication({
    apiKeys: new ApiKeyStore({ file }),
    jwt: createJwtVerifier({
      jwks: { keys: [jwk] },
      issuer: 'https://idp.acme.example/',
      audience: 'adcp-orchestrator',
    }),
  });

  // Stand-in for binding the tenant on create (the workflow input and search attribute, once the lead adds them).
  const gateway = express();
  gateway.post('/v1/operations', (req, res, next) => {
    const json = res.json.bind(res);
    res.json = (body: { operation_id?: string }) => {
      if (res.statusCode === 202 && body?.operation_id) tenants.set(body.operation_id, req.principal!.tenant);
      return json(body);
    };
    next();
  });
  gateway.use(createGateway({ orchestrator: stack.orchestrator, webUiUrl: 'http://127.0.0.1:8233' }));
  const app = createSecureGateway({
    gateway,
    authentication,
    tenantOf: { operation: async (id) => tenants.get(id) },
    allowedHosts: LOOPBACK_HOSTS,
  });
  server = createHardenedServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function call(method: string, route: string, credential?: string, body?: unknown) {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: {
      ...(credential ? { authorization: `Bearer ${credential}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, any> };
}

let operationId: string;

test('a buyer starts an operation; a reader of the same tenant follows it to its result', async () => {
  expect(
    (await call('POST', '/v1/operations', undefined, { agent_id: 'demo', task: 'get_products', params: {} })).status,
  ).toBe(401);
  const refused = await call('POST', '/v1/operations', keys['acme/reader'], {
    agent_id: 'demo',
    task: 'get_products',
    params: getProductsParams,
  });
  expect(refused).toMatchObject({ status: 403, body: { error: { code: 'FORBIDDEN', required_roles: ['buyer'] } } });

  const started = await call('POST', '/v1/operations', keys['acme/buyer'], {
    agent_id: 'demo',
    task: 'get_products',
    params: getProductsParams,
    idempotency_key: randomUUID(),
  });
  expect(started.status).toBe(202);
  operationId = started.body.operation_id;
  const final = await eventually(async () => {
    const read = await call('GET', `/v1/operations/${operationId}`, keys['acme/reader']);
    return read.body.running === false ? read : undefined;
  });
  expect(final).toMatchObject({ status: 200, body: { operation_id: operationId, status: 'completed' } });
  expect(final.headers.get('x-content-type-options')).toBe('nosniff');
});

test("another tenant's principals get 404 on every operation route, the same answer as for no such operation", async () => {
  const missing = `adcp-get_products-${randomUUID()}`;
  const routes: [string, string, string, unknown?][] = [
    ['GET', '', 'reader'],
    ['POST', '/input', 'approver', { input: { approved: true }, idempotency_key: 'approval-1' }],
    ['POST', '/cancel', 'operator', { requested_by: 'ops', reason: 'test' }],
    ['POST', '/credentials-refreshed', 'operator', { refreshed_by: 'ops' }],
  ];
  for (const [method, suffix, role, body] of routes) {
    const other = await call(method, `/v1/operations/${operationId}${suffix}`, keys[`globex/${role}`], body);
    const none = await call(method, `/v1/operations/${missing}${suffix}`, keys[`globex/${role}`], body);
    expect(other.status).toBe(404);
    // The same problem, word for word but for the ID the caller sent.
    const named = (body: Record<string, unknown>, id: string) =>
      JSON.parse(JSON.stringify(body).replaceAll(id, '<id>')) as Record<string, unknown>;
    expect(other.body).toMatchObject({
      code: 'OPERATION_NOT_FOUND',
      error: { code: 'OPERATION_NOT_FOUND', message: `No operation ${operationId}.` },
    });
    expect(named(none.body, missing)).toEqual(named(other.body, operationId));
  }
});

test('within the tenant, each role reaches the gateway only on its own routes', async () => {
  // Approver: its answer reaches the operation, which refuses it (it is not waiting for input).
  const answer = await call('POST', `/v1/operations/${operationId}/input`, keys['acme/approver'], {
    input: { approved: true },
    idempotency_key: 'approval-1',
  });
  expect(answer.status).toBe(409);
  // Operator: the cancel reaches the operation, which has ended.
  const cancel = await call('POST', `/v1/operations/${operationId}/cancel`, keys['acme/operator'], {
    requested_by: 'ops',
    reason: 'test',
  });
  expect(cancel).toMatchObject({ status: 409, body: { error: { code: 'OPERATION_ENDED', status: 'completed' } } });
  // A buyer can neither cancel nor answer.
  for (const suffix of ['/cancel', '/input']) {
    const denied = await call('POST', `/v1/operations/${operationId}${suffix}`, keys['acme/buyer'], {});
    expect(denied.status).toBe(403);
  }
  // Reconcile needs operator.
  expect((await call('POST', '/v1/sellers/demo/reconcile', keys['acme/buyer'], { requested_by: 'ops' })).status).toBe(
    403,
  );
});

test('a JWT from the identity provider authenticates a reader of the tenant', async () => {
  const read = await call('GET', `/v1/operations/${operationId}`, jwt);
  expect(read).toMatchObject({ status: 200, body: { operation_id: operationId } });
  expect(
    (await call('POST', `/v1/operations/${operationId}/cancel`, jwt, { requested_by: 'x', reason: 'y' })).status,
  ).toBe(403);
});

test('/healthz stays outside authentication; hardening answers before authentication', async () => {
  expect((await fetch(`${base}/healthz`)).status).toBe(200);
  expect((await fetch(`${base}/v1/operations/%ZZ`)).status).toBe(400);
  const deep = await call('POST', '/v1/operations', keys['acme/buyer'], undefined);
  expect(deep.status).toBe(400); // no body
  const nested = await fetch(`${base}/v1/operations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keys['acme/buyer']}`, 'content-type': 'application/json' },
    body: `{"agent_id":"demo","task":"get_products","params":${'{"a":'.repeat(4000)}1${'}'.repeat(4000)}}`,
  });
  expect(nested.status).toBe(400);
  expect(((await nested.json()) as any).error.code).toBe('NESTING_TOO_DEEP');
});

test('the Host allow-list guards the whole gateway, /healthz included (DNS rebinding)', async () => {
  const status = await new Promise<number>((resolve, reject) => {
    const port = (server.address() as AddressInfo).port;
    http
      .get(
        { host: '127.0.0.1', port, path: '/healthz', headers: { host: `rebind.attacker.example:${port}` } },
        (response) => {
          response.resume();
          resolve(response.statusCode!);
        },
      )
      .on('error', reject);
  });
  expect(status).toBe(421);
});
