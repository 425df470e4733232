/**
 * Tenants and principals inside operations (#12 part B), against real Temporal, a real worker and the scripted
 * fixture seller on loopback:
 * - every operation records its tenant and the principal that started it (input, state, AdcpTenant/AdcpPrincipal);
 * - two tenants using the same business key get two operations; another tenant's operation is not found, through
 *   the typed client and through HTTP behind the secure gateway (allowed and denied cases for every route);
 * - answers, cancels and credential refreshes record the authenticated principal (audit trail), not the body's text;
 * - seller credentials are resolved per (tenant, seller): a recording proxy in front of the seller sees each tenant's
 *   own token, an account that is not the tenant's is refused, and no secret reaches history.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createGateway } from '../../api/app';
import {
  ApiKeyStore,
  ROLES,
  createAuthentication,
  createSecureGateway,
  generateApiKey,
  writeKeysFile,
} from '../../api/auth';
import { createTenantResolvers } from '../../api/auth/tenant-of';
import { WorkflowFailedError } from '@temporalio/client';
import { MediaBuyClient, MediaBuyNotFoundError } from '../../client/media-buy-client';
import { OperationNotFoundError } from '../../client/operation-errors';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { SellerRegistry } from '../../config/sellers';
import { SA_PRINCIPAL, SA_TENANT } from '../../config/search-attributes';
import type { CallerIdentity } from '../../protocol/tenancy';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, startTestStack } from '../harness/temporal';

const ACME_TOKEN = `acme-secret-${randomUUID()}`;
const GLOBEX_TOKEN = `globex-secret-${randomUUID()}`;
const ACME: CallerIdentity = { tenant: 'acme', principal: 'acme/trader@acme' };
const GLOBEX: CallerIdentity = { tenant: 'globex', principal: 'globex/trader@globex' };

let seller: ScriptedSeller;
let sellerRegistry: SellerRegistry;
let proxy: Server;
/** The bearer tokens the seller was called with, in order (the proxy records them, then forwards with its own). */
const seen: string[] = [];
let stack: TestStack;
let server: Server;
let base: string;
let dir: string;
const keys: Record<string, string> = {};

/** A loopback proxy that records the credential each request carries and forwards it with the seller's own token. */
function startRecordingProxy(target: URL, token: string): Promise<Server> {
  const proxyServer = http.createServer((req, res) => {
    seen.push(String(req.headers.authorization ?? ''));
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host, authorization: `Bearer ${token}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  return new Promise((resolve) => proxyServer.listen(0, '127.0.0.1', () => resolve(proxyServer)));
}

beforeAll(async () => {
  seller = await startScriptedSeller();
  const sellerUrl = new URL(seller.url);
  proxy = await startRecordingProxy(sellerUrl, seller.authToken);
  const proxied = new URL(seller.url);
  proxied.port = String((proxy.address() as AddressInfo).port);
  sellerRegistry = new SellerRegistry([{ id: 'fixture', url: proxied.toString(), protocol: 'mcp' }], 'tenancy agents', [
    {
      id: 'acme',
      sellers: {
        fixture: {
          token_env: 'ACME_FIXTURE_TOKEN',
          accounts: [createMediaBuyParams().account as Record<string, unknown>],
        },
      },
    },
    { id: 'globex', sellers: { fixture: { token_env: 'GLOBEX_FIXTURE_TOKEN' } } },
  ]);
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: { env: { ACME_FIXTURE_TOKEN: ACME_TOKEN, GLOBEX_FIXTURE_TOKEN: GLOBEX_TOKEN } },
  });

  dir = mkdtempSync(path.join(tmpdir(), 'adcp-tenancy-'));
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
  const app = createSecureGateway({
    gateway: createGateway({ orchestrator: stack.orchestrator }),
    authentication: createAuthentication({ apiKeys: new ApiKeyStore({ file }) }),
    tenantOf: createTenantResolvers({ client: stack.client }),
  });
  server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  await new Promise((resolve) => proxy?.close(resolve));
  await seller?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function call(method: string, route: string, key?: string, body?: unknown) {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: {
      ...(key ? { authorization: `Bearer ${keys[key]}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

async function settled(operationId: string, status: string, caller?: CallerIdentity) {
  return eventually(async () => {
    const view = await stack.orchestrator.status(operationId, caller);
    return view.state?.status === status ? view.state : undefined;
  });
}

/** The whole history as text, with every payload's bytes decoded (proto JSON carries them base64). */
async function historyText(operationId: string): Promise<string> {
  const history = await stack.client.workflow.getHandle(operationId).fetchHistory();
  return JSON.stringify(history).replace(/"data":"([A-Za-z0-9+/=]*)"/g, (_match, data: string) =>
    JSON.stringify(Buffer.from(data, 'base64').toString('utf8')),
  );
}

describe('typed client', () => {
  test('two tenants with the same key get two operations, each with its own seller credential', async () => {
    const key = `po-${randomUUID()}`;
    const request = {
      sellerId: 'fixture',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: key,
    };

    seen.length = 0;
    const acme = await stack.orchestrator.start(request, ACME);
    const acmeState = await settled(acme.operationId, 'completed', ACME);
    const acmeCalls = [...new Set(seen)];

    seen.length = 0;
    const globex = await stack.orchestrator.start(request, GLOBEX);
    await settled(globex.operationId, 'completed', GLOBEX);
    const globexCalls = [...new Set(seen)];

    expect(acme.created && globex.created).toBe(true);
    expect(acme.operationId).toBe(`adcp-create_media_buy-acme:${key}`);
    expect(globex.operationId).toBe(`adcp-create_media_buy-globex:${key}`);
    // Each tenant's calls carried its own credential, and only that one.
    expect(acmeCalls).toEqual([`Bearer ${ACME_TOKEN}`]);
    expect(globexCalls).toEqual([`Bearer ${GLOBEX_TOKEN}`]);

    expect(acmeState).toMatchObject({ tenant: 'acme', principal: 'acme/trader@acme' });
    expect(acmeState.audit?.[0]).toMatchObject({ action: 'started', principal: 'acme/trader@acme' });
    const description = await stack.client.workflow.getHandle(acme.operationId).describe();
    expect(description.typedSearchAttributes.get(SA_TENANT)).toBe('acme');
    expect(description.typedSearchAttributes.get(SA_PRINCIPAL)).toBe('acme/trader@acme');

    // The same key again is the same operation, for its own tenant only.
    const again = await stack.orchestrator.start(request, ACME);
    expect(again).toMatchObject({ operationId: acme.operationId, created: false });

    // Another tenant's operation is not found: read, result, answer, refresh and cancel alike.
    await expect(stack.orchestrator.status(acme.operationId, GLOBEX)).rejects.toThrow(OperationNotFoundError);
    await expect(stack.orchestrator.result(acme.operationId, GLOBEX)).rejects.toThrow(OperationNotFoundError);
    await expect(
      stack.orchestrator.provideInput(acme.operationId, { input: { approved: true }, idempotencyKey: 'x' }, GLOBEX),
    ).rejects.toThrow(OperationNotFoundError);
    await expect(stack.orchestrator.credentialsRefreshed(acme.operationId, 'ops', GLOBEX)).rejects.toThrow(
      OperationNotFoundError,
    );
    await expect(
      stack.orchestrator.cancel(acme.operationId, { requestedBy: 'ops', reason: 'probe' }, GLOBEX),
    ).rejects.toThrow(OperationNotFoundError);
    expect((await stack.orchestrator.result(acme.operationId, ACME)).status).toBe('completed');

    // Lists are per tenant.
    const acmeList = await eventually(async () => {
      const page = await stack.orchestrator.list({ limit: 200 }, ACME);
      return page.operations.some((row) => row.operation_id === acme.operationId) ? page : undefined;
    });
    expect(acmeList.operations.every((row) => row.tenant === 'acme')).toBe(true);
    const globexList = await eventually(async () => {
      const page = await stack.orchestrator.list({ limit: 200 }, GLOBEX);
      return page.operations.some((row) => row.operation_id === globex.operationId) ? page : undefined;
    });
    expect(globexList.operations.map((row) => row.operation_id)).not.toContain(acme.operationId);

    // The secret was resolved at call time: it is nowhere in the history.
    const text = await historyText(acme.operationId);
    expect(text).toContain('acme/trader@acme');
    expect(text).not.toContain(ACME_TOKEN);
    expect(text).not.toContain(GLOBEX_TOKEN);
  });

  test("another tenant's account, or a seller the tenant has no access to, is refused at start and by the worker", async () => {
    const INITECH: CallerIdentity = { tenant: 'initech', principal: 'initech/bob' };
    const otherAccount = { ...createMediaBuyParams(), account: { account_id: 'globex-main' } };
    const request = (params: Record<string, unknown>) => ({
      sellerId: 'fixture',
      task: 'create_media_buy',
      params,
      idempotencyKey: randomUUID(),
    });
    // The gateway's client checks at start: a 400 naming the field, nothing started.
    const checking = new OrchestratorClient({
      client: stack.client,
      taskQueue: stack.taskQueue,
      checkTenantAccess: (sellerId, tenant, account) => sellerRegistry.checkTenantAccess(sellerId, tenant, account),
    });
    await expect(checking.start(request(otherAccount), ACME)).rejects.toMatchObject({
      name: 'OperationRequestError',
      field: 'params.account',
      message: expect.stringMatching(/not one of tenant "acme"'s accounts at seller "fixture"/),
    });
    await expect(checking.start(request(createMediaBuyParams()), INITECH)).rejects.toMatchObject({
      field: 'agent_id',
      message: expect.stringMatching(/Tenant "initech" has no access configured for seller "fixture"/),
    });

    // A client without the check: the worker refuses before any call reaches the seller (no shared credential).
    seen.length = 0;
    for (const [params, caller, why] of [
      [otherAccount, ACME, /not one of tenant "acme"'s accounts/],
      [createMediaBuyParams(), INITECH, /Tenant "initech" has no access configured/],
    ] as const) {
      const started = await stack.orchestrator.start(request(params), caller);
      const failure = await stack.orchestrator.result(started.operationId, caller).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(WorkflowFailedError);
      const messages: string[] = [];
      for (let cause = failure as Error | undefined; cause; cause = cause.cause as Error | undefined)
        messages.push(cause.message);
      expect(messages.join(' / ')).toMatch(why);
    }
    expect(seen).toEqual([]);
  });
});

describe('media buys', () => {
  test("two tenants' equal buy keys are two buys; another tenant's buy is not found; its operations carry the tenant", async () => {
    const buys = new MediaBuyClient({ client: stack.client, taskQueue: stack.taskQueue });
    const buyKey = `buy-${randomUUID()}`;
    const request = { buyKey, sellerId: 'fixture', params: createMediaBuyParams(), requestedBy: 'trader' };
    const acme = await buys.create(request, ACME);
    const globex = await buys.create(request, GLOBEX);
    expect(acme.mediaBuyWorkflowId).toBe(`adcp-media-buy-acme:${buyKey}`);
    expect(globex.mediaBuyWorkflowId).toBe(`adcp-media-buy-globex:${buyKey}`);
    await expect(buys.view(acme.mediaBuyWorkflowId, GLOBEX)).rejects.toThrow(MediaBuyNotFoundError);
    await expect(
      buys.change(acme.mediaBuyWorkflowId, { kind: 'pause', requestedBy: 'probe' }, {}, GLOBEX),
    ).rejects.toThrow(MediaBuyNotFoundError);
    const state = await eventually(async () => {
      const current = await buys.state(acme.mediaBuyWorkflowId, ACME);
      return current.mediaBuyId ? current : undefined;
    });
    expect(state).toMatchObject({ tenant: 'acme', principal: 'acme/trader@acme' });
    // The buy's create operation is acme's: scoped ID, its tenant, acme's credential.
    const create = await stack.orchestrator.status(state.createOperationId, ACME);
    expect(create.state).toMatchObject({ tenant: 'acme', principal: 'acme/trader@acme' });
    await expect(stack.orchestrator.status(state.createOperationId, GLOBEX)).rejects.toThrow(OperationNotFoundError);
  });
});

describe('HTTP behind the secure gateway', () => {
  test('start, read, list, answer and cancel: allowed for the tenant, not found for the other', async () => {
    // acme's task asks for approval, and asks again after the first answer.
    seller.script('create_media_buy', [
      { status: 'input-required', reason: 'APPROVAL_REQUIRED', message: 'Budget needs sign-off' },
      { status: 'input-required', reason: 'APPROVAL_REQUIRED', message: 'Second sign-off' },
    ]);
    const key = `http-${randomUUID()}`;
    const start = {
      agent_id: 'fixture',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotency_key: key,
    };
    const started = await call('POST', '/v1/operations', 'acme/buyer', start);
    expect(started.status).toBe(202);
    const operationId = started.body.operation_id as string;
    expect(operationId).toBe(`adcp-create_media_buy-acme:${key}`);
    const route = `/v1/operations/${encodeURIComponent(operationId)}`;

    // A reader of the same tenant sees it, with who started it.
    const read = await eventually(async () => {
      const answer = await call('GET', route, 'acme/reader');
      return answer.body.status === 'input-required' ? answer : undefined;
    });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ tenant: 'acme', principal: 'acme/buyer@acme' });

    // Every role of the other tenant: 404 with the body of an operation that does not exist.
    const missing = await call('GET', `/v1/operations/adcp-create_media_buy-acme:${randomUUID()}`, 'acme/reader');
    for (const [method, suffix, role, body] of [
      ['GET', '', 'globex/reader', undefined],
      ['POST', '/input', 'globex/approver', { input: { approved: true }, idempotency_key: 'probe' }],
      ['POST', '/cancel', 'globex/operator', { requested_by: 'probe', reason: 'probe' }],
      ['POST', '/credentials-refreshed', 'globex/operator', { refreshed_by: 'probe' }],
    ] as const) {
      const denied = await call(method, `${route}${suffix}`, role, body);
      expect([method, suffix, denied.status]).toEqual([method, suffix, 404]);
      expect(denied.body.error.code).toBe(missing.body.error.code);
    }

    // The same key from the other tenant is another operation.
    const other = await call('POST', '/v1/operations', 'globex/buyer', start);
    expect(other.status).toBe(202);
    expect(other.body.operation_id).toBe(`adcp-create_media_buy-globex:${key}`);
    await eventually(async () => {
      const answer = await call(
        'GET',
        `/v1/operations/${encodeURIComponent(other.body.operation_id)}`,
        'globex/reader',
      );
      return answer.body.status === 'completed' ? answer : undefined;
    });

    // Lists: each tenant sees its own.
    const acmeList = await eventually(async () => {
      const answer = await call('GET', '/v1/operations?limit=200', 'acme/reader');
      const ids = (answer.body.operations as { operation_id: string }[]).map((row) => row.operation_id);
      return ids.includes(operationId) ? ids : undefined;
    });
    expect(acmeList).not.toContain(other.body.operation_id);
    const globexList = await call('GET', '/v1/operations?limit=200', 'globex/reader');
    expect((globexList.body.operations as { operation_id: string }[]).map((row) => row.operation_id)).not.toContain(
      operationId,
    );

    // The answer records the authenticated approver; provided_by stays a note.
    const answered = await call('POST', `${route}/input`, 'acme/approver', {
      input: { approved: true },
      provided_by: 'Jane (finance)',
      idempotency_key: 'approve-1',
    });
    expect(answered.status).toBe(200);
    const afterAnswer = await eventually(async () => {
      const answer = await call('GET', route, 'acme/reader');
      return answer.body.input_rounds === 2 && answer.body.status === 'input-required' ? answer : undefined;
    });
    expect(afterAnswer.body.audit).toEqual([
      expect.objectContaining({ action: 'started', principal: 'acme/buyer@acme' }),
      expect.objectContaining({ action: 'input_provided', principal: 'acme/approver@acme', note: 'Jane (finance)' }),
    ]);

    // The cancel records the authenticated operator.
    const canceled = await call('POST', `${route}/cancel`, 'acme/operator', {
      requested_by: 'night shift',
      reason: 'campaign pulled',
    });
    expect(canceled.status).toBe(202);
    const final = await eventually(async () => {
      const answer = await call('GET', route, 'acme/reader');
      return answer.body.status === 'canceled' ? answer : undefined;
    });
    expect(final.body.cancellation).toMatchObject({ requested_by: 'night shift', principal: 'acme/operator@acme' });
    expect(final.body.audit.at(-1)).toMatchObject({ action: 'cancel_requested', principal: 'acme/operator@acme' });

    // In history: the principals, from credentials; never a token.
    const text = await historyText(operationId);
    expect(text).toContain('acme/approver@acme');
    expect(text).toContain('acme/operator@acme');
    expect(text).not.toContain(ACME_TOKEN);
    expect(text).not.toContain(keys['acme/approver']!);
  });
});
