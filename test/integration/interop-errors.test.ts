/**
 * Interop with sellers that answer errors, nobody here wrote them: @adcp/sdk 6.11's example sellers, unmodified from
 * node_modules (test/harness/example-sellers.ts), each behind a recording proxy (test/fixtures/recording-proxy.ts)
 * that counts the tools/call requests the seller saw and the idempotency_key each carried.
 *
 * - error_compliant (examples/error-compliant-server.ts): answers AdCP structured errors built with adcpError() -
 *   INVALID_REQUEST with field and suggestion, PRODUCT_NOT_FOUND, BUDGET_TOO_LOW with details, and RATE_LIMITED with
 *   retry_after once 50 requests arrive within its 60 s window - and MCP input validation for requests its lenient
 *   schema still refuses. It runs with a clock the test can move forward (test/fixtures/example-clock.cjs), so a
 *   used-up window ends in seconds rather than most of a minute.
 * - comply_controller (examples/comply-controller-seller.ts) and seller_test_controller
 *   (examples/seller-test-controller.ts): only the compliance test controller (comply_test_controller: seed and force
 *   resource statuses), which answers its own error shape `{success: false, error, error_detail}`; no sales tools.
 *   Neither offers forced *task* statuses or forced transport failures, so those are not driven here (the scripted
 *   fixture seller covers them in statuses/errors-and-idempotency).
 *
 * Every operation goes through the product's entry points (OrchestratorClient to start, the HTTP API's
 * GET /v1/operations/:id to read) on a real Temporal dev server with the product's worker.
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createGateway } from '../../api/app';
import { MediaBuyClient } from '../../client/media-buy-client';
import { OperationParamsError } from '../../client/operation-errors';
import { idempotencyKeyFor } from '../../activities/idempotency';
import type { OperationState } from '../../contract/operation';
import {
  EXAMPLE_SELLER_TOKEN,
  EXAMPLE_SELLER_TOKEN_ENV,
  type ExampleSeller,
  listTools,
  startExampleSeller,
  startExampleSellers,
  stopExampleSellers,
} from '../harness/example-sellers';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';
import { operationSummary } from '../harness/interop';
import { type RecordingProxy, startRecordingProxy } from '../fixtures/recording-proxy';

const SELLERS = ['error_compliant', 'comply_controller', 'seller_test_controller'] as const;
type ErrorSeller = (typeof SELLERS)[number];

/**
 * The retry_after the RATE_LIMITED test has the operation refused with: long enough to see the call waiting for its
 * next attempt on a loaded machine, short enough not to wait out most of the seller's 60 s window.
 */
const RATE_LIMITED_WAIT_S = 10;

type Row = Record<string, any>;

let sellers: Record<ErrorSeller, ExampleSeller> | undefined;
const proxies: Partial<Record<ErrorSeller, RecordingProxy>> = {};
let stack: TestStack | undefined;
let api: { server: Server; url: string } | undefined;
/** Media-buy workflows the tests started: terminated at the end (they would otherwise follow their flights). */
const startedBuys: string[] = [];
const mediaBuys = () => new MediaBuyClient({ client: stack!.client, taskQueue: stack!.taskQueue });

beforeAll(async () => {
  // The error-compliant seller runs with a clock the RATE_LIMITED test moves forward (its window is a fixed 60 s).
  const [errorCompliant, controllers] = await Promise.allSettled([
    startExampleSeller('error_compliant', { clock: true }),
    startExampleSellers(['comply_controller', 'seller_test_controller'] as const),
  ]);
  if (errorCompliant.status === 'rejected' || controllers.status === 'rejected') {
    if (errorCompliant.status === 'fulfilled') await errorCompliant.value.stop();
    if (controllers.status === 'fulfilled') await stopExampleSellers(controllers.value);
    throw errorCompliant.status === 'rejected' ? errorCompliant.reason : (controllers as PromiseRejectedResult).reason;
  }
  sellers = { error_compliant: errorCompliant.value, ...controllers.value };
  for (const name of SELLERS) {
    proxies[name] = await startRecordingProxy(sellers[name].mcpUrl);
  }
  stack = await startTestStack({
    sellers: registry(SELLERS.map((name) => ({ ...sellers![name].agent, url: proxies[name]!.url }))),
    activities: { env: { [EXAMPLE_SELLER_TOKEN_ENV]: EXAMPLE_SELLER_TOKEN } },
  });
  const app = createGateway({ orchestrator: stack.orchestrator });
  const server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  api = { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}, 300_000);

afterAll(async () => {
  for (const id of startedBuys) {
    await stack?.client.workflow
      .getHandle(id)
      .terminate('interop-errors test done')
      .catch(() => undefined);
  }
  if (api) await new Promise<void>((resolve) => api!.server.close(() => resolve()));
  await stack?.close();
  await Promise.all(Object.values(proxies).map((proxy) => proxy?.close()));
  await stopExampleSellers(sellers);
});

interface Finished {
  state: OperationState;
  /** GET /v1/operations/:id once it ended. */
  view: Row;
  /** The tools/call requests the seller saw for this operation's task while it ran. */
  attempts: { tool: string; args: Row }[];
  /** The idempotency_key the orchestrator derives for the operation's call. */
  idempotencyKey: string;
}

/** Runs one AdCP task as an operation through the product's client, and reads its end back over the HTTP API. */
async function operation(name: ErrorSeller, task: string, params: Row): Promise<Finished> {
  return finish(await begin(name, task, params));
}

interface Begun {
  name: ErrorSeller;
  task: string;
  operationId: string;
  /** How many calls the proxy had recorded before the start. */
  before: number;
}

async function begin(name: ErrorSeller, task: string, params: Row): Promise<Begun> {
  const before = proxies[name]!.calls.length;
  const started = await stack!.orchestrator.start({ sellerId: name, task, params, idempotencyKey: randomUUID() });
  return { name, task, operationId: started.operationId, before };
}

/** GET /v1/operations/:id, as a buyer's backend would read it. */
async function readView(operationId: string): Promise<Row> {
  const response = await fetch(`${api!.url}/v1/operations/${encodeURIComponent(operationId)}`);
  expect(response.status).toBe(200);
  return (await response.json()) as Row;
}

async function finish({ name, task, operationId, before }: Begun): Promise<Finished> {
  const state = await stack!.orchestrator.result(operationId);
  return {
    state,
    view: await readView(operationId),
    attempts: proxies[name]!.calls.slice(before).filter((call) => call.tool === task),
    idempotencyKey: idempotencyKeyFor(operationId, 'call'),
  };
}

describe('the error-compliant example seller (adcpError answers)', () => {
  const name = 'error_compliant' as const;
  const start = new Date(Date.now() + 7 * 86_400_000);
  const end = new Date(start.getTime() + 30 * 86_400_000);
  const buy = (packages: Row[], times: { start_time?: string; end_time?: string } = {}): Row => ({
    account: { brand: { domain: 'acmeoutdoor.example' }, operator: 'acmeoutdoor.example' },
    brand: { domain: 'acmeoutdoor.example' },
    start_time: start.toISOString(),
    end_time: end.toISOString(),
    ...times,
    packages,
  });
  const display = { product_id: 'prod_display_300x250', pricing_option_id: 'po_cpm' };

  test('lists its tools', async () => {
    const tools = await listTools(sellers![name]);
    expect(tools).toEqual(
      expect.arrayContaining(['get_adcp_capabilities', 'get_products', 'create_media_buy', 'get_media_buy_delivery']),
    );
  });

  test.each([
    {
      what: 'an unknown product',
      params: () => buy([{ product_id: 'prod_does_not_exist', pricing_option_id: 'po_cpm', budget: 1_000 }]),
      error: {
        code: 'PRODUCT_NOT_FOUND',
        message: "Product 'prod_does_not_exist' not found",
        field: 'packages[0].product_id',
        suggestion: 'Use get_products to discover available products',
      },
    },
    {
      what: 'a budget below the package minimum',
      params: () => buy([{ ...display, budget: 100 }]),
      error: {
        code: 'BUDGET_TOO_LOW',
        message: 'Budget 100 is below minimum 500 for Display Banner 300x250',
        field: 'packages[0].budget',
        suggestion: 'Increase budget to at least 500',
        details: { minimum_budget: 500, currency: 'USD' },
      },
    },
  ])(
    'create_media_buy with $what fails at once, correctable, with field and suggestion intact',
    async ({ params, error }) => {
      const { state, view, attempts, idempotencyKey } = await operation(name, 'create_media_buy', params());
      const recorded = { ...error, recovery: 'correctable' };
      // The seller's own failure, recorded as it said it (not an orchestrator failure reason).
      expect(operationSummary(state)).toMatchObject({ status: 'failed', errors: [recorded], message: error.message });
      expect(state.failure).toBeUndefined();
      // One call: a correctable error is not retried (the same request would be refused again).
      expect(attempts).toHaveLength(1);
      expect(attempts[0].args.idempotency_key).toBe(idempotencyKey);
      expect(state.transitions.map((transition) => [transition.from, transition.to, transition.source])).toEqual([
        ['pending', 'failed', 'call'],
      ]);
      // The HTTP view carries the same detail, snake_case.
      expect(view).toMatchObject({ status: 'failed', errors: [expect.objectContaining(error)] });
      expect(JSON.stringify(view)).toContain(error.suggestion);
    },
  );

  // A flight that ends before it starts and a negative budget never reach a seller: the orchestrator refuses them as
  // the seller would (field named), before any workflow starts.
  test.each([
    {
      what: 'end_time before start_time',
      params: () =>
        buy([{ ...display, budget: 1_000 }], { end_time: new Date(start.getTime() - 86_400_000).toISOString() }),
      field: 'params.end_time',
    },
    { what: 'a negative budget', params: () => buy([{ ...display, budget: -5 }]), field: 'params.packages.0.budget' },
  ])('create_media_buy with $what is refused before the seller sees it, field named', async ({ params, field }) => {
    const before = proxies[name]!.calls.length;
    const refused = await stack!.orchestrator
      .start({ sellerId: name, task: 'create_media_buy', params: params(), idempotencyKey: randomUUID() })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OperationParamsError);
    expect((refused as OperationParamsError).field).toBe(field);
    expect(proxies[name]!.calls.length).toBe(before);
  });

  test('create_media_buy without the required start_time: the seller’s input schema refuses it, correctable, field named, not retried', async () => {
    const params = buy([{ ...display, budget: 1_000 }]);
    delete params.start_time;
    const { state, view, attempts } = await operation(name, 'create_media_buy', params);
    // McpServer answers this refusal as an isError result with the text "MCP error -32602: Input validation error: ...":
    // the buyer's request is at fault, so correctable, and the failing path is the field.
    const error = {
      code: 'TRANSPORT_RPC_INVALID_PARAMS',
      recovery: 'correctable',
      field: 'start_time',
      message: expect.stringContaining('Invalid input at start_time'),
      suggestion: expect.stringContaining('fix the request'),
    };
    expect(operationSummary(state)).toMatchObject({ status: 'failed', errors: [error] });
    expect(attempts).toHaveLength(1);
    expect(view).toMatchObject({ status: 'failed', errors: [expect.objectContaining({ field: 'start_time' })] });
  });

  test('a valid create_media_buy completes with the seller’s media_buy_id, after one call', async () => {
    const { state, attempts, idempotencyKey } = await operation(
      name,
      'create_media_buy',
      buy([{ ...display, budget: 1_000 }]),
    );
    expect(operationSummary(state)).toMatchObject({ status: 'completed' });
    expect(state.result?.media_buy_id).toMatch(/^mb_/);
    expect(attempts).toHaveLength(1);
    expect(attempts[0].args.idempotency_key).toBe(idempotencyKey);
  });

  test('reads refused by the seller’s input schema (get_products, get_media_buy_delivery) fail at once, correctable, field named', async () => {
    for (const [task, params, field] of [
      ['get_products', { buying_mode: 'not-a-mode', brief: 'display' }, 'buying_mode'],
      ['get_media_buy_delivery', { media_buy_ids: 'mb_1' }, 'media_buy_ids'],
    ] as const) {
      const { state, view, attempts } = await operation(name, task, params);
      expect(operationSummary(state)).toMatchObject({
        status: 'failed',
        errors: [{ code: 'TRANSPORT_RPC_INVALID_PARAMS', recovery: 'correctable', field }],
      });
      expect(attempts).toHaveLength(1);
      expect(view).toMatchObject({ status: 'failed', errors: [expect.objectContaining({ field })] });
    }
    // The same read, well formed, completes.
    const delivery = await operation(name, 'get_media_buy_delivery', { media_buy_ids: ['mb_1'] });
    expect(operationSummary(delivery.state)).toMatchObject({ status: 'completed' });
    expect(delivery.state.result?.media_buy_deliveries).toEqual([expect.objectContaining({ media_buy_id: 'mb_1' })]);
  });

  test('a media buy whose create the seller refuses ends create_failed with the seller’s error whole, after one call', async () => {
    const buys = mediaBuys();
    const proxy = proxies[name]!;
    const before = proxy.calls.length;
    const { mediaBuyWorkflowId } = await buys.create({
      buyKey: `interop-errors-${randomUUID()}`,
      sellerId: name,
      params: buy([{ ...display, budget: 100 }]),
      requestedBy: 'planner@buyer',
    });
    startedBuys.push(mediaBuyWorkflowId);
    const state = await eventually(async () => {
      const current = await buys.state(mediaBuyWorkflowId);
      return current.status !== 'creating' ? current : undefined;
    });
    const error = {
      code: 'BUDGET_TOO_LOW',
      recovery: 'correctable',
      message: 'Budget 100 is below minimum 500 for Display Banner 300x250',
      field: 'packages[0].budget',
      suggestion: 'Increase budget to at least 500',
      details: { minimum_budget: 500, currency: 'USD' },
    };
    expect(state).toMatchObject({ status: 'create_failed', failure: { error } });
    expect(state.mediaBuyId).toBeUndefined();
    expect(proxy.calls.slice(before).map((call) => call.tool)).toEqual(['create_media_buy']);
  });

  test('changes the seller cannot carry out (no update_media_buy, no sync_creatives) fail at once with the error whole; the buy stays as it was', async () => {
    const buys = mediaBuys();
    const proxy = proxies[name]!;
    const { mediaBuyWorkflowId } = await buys.create({
      buyKey: `interop-errors-${randomUUID()}`,
      sellerId: name,
      params: buy([{ ...display, budget: 1_000 }]),
      requestedBy: 'planner@buyer',
    });
    startedBuys.push(mediaBuyWorkflowId);
    const created = await eventually(async () => {
      const current = await buys.state(mediaBuyWorkflowId);
      return current.status !== 'creating' ? current : undefined;
    });
    // The seller's answer names no status: a new buy without creatives is pending_creatives (3.0.6 media-buy-status).
    expect(created).toMatchObject({ status: 'pending_creatives', mediaBuyId: expect.stringMatching(/^mb_/) });

    const before = proxy.calls.length;
    const missingTool = (tool: string) => ({
      code: 'TRANSPORT_RPC_METHOD_NOT_FOUND',
      recovery: 'terminal',
      message: `Tool ${tool} not found`,
      suggestion: expect.stringContaining('does not expose this tool'),
    });
    const paused = await buys.change(mediaBuyWorkflowId, { kind: 'pause', requestedBy: 'planner@buyer' });
    expect(paused).toMatchObject({
      outcome: 'failed',
      status: 'pending_creatives',
      error: missingTool('update_media_buy'),
    });
    const creatives = await buys.attachCreatives(mediaBuyWorkflowId, {
      creatives: [
        {
          creative_id: 'cr-1',
          name: 'Spring',
          format_id: { agent_url: 'https://creatives.adcontextprotocol.org', id: 'display_static' },
        },
      ],
      requestedBy: 'planner@buyer',
    });
    expect(creatives).toMatchObject({
      outcome: 'failed',
      status: 'pending_creatives',
      error: missingTool('sync_creatives'),
    });

    const after = await buys.state(mediaBuyWorkflowId);
    expect(after.status).toBe('pending_creatives');
    expect(after.changes).toEqual([
      expect.objectContaining({
        kind: 'pause',
        outcome: 'failed',
        error: expect.objectContaining(missingTool('update_media_buy')),
      }),
    ]);
    // One call each: a terminal answer is not retried.
    expect(proxy.calls.slice(before).map((call) => call.tool)).toEqual(['update_media_buy', 'sync_creatives']);
  });

  test('RATE_LIMITED is transient: the same create (and a read) is retried after retry_after with the same idempotency_key, and completes once', async () => {
    // The seller limits every tool to 50 requests per 60 s window (module-scoped). Use up the window directly, then
    // start the operation: its first call is refused with retry_after = the seconds left in the window.
    const seller = sellers![name];
    let retryAfter = await exhaustRateLimit(seller.mcpUrl);
    if (retryAfter < 5) {
      // The window is about to turn: let it, and use up the next one, so the refusal below is seen while it waits.
      await new Promise((resolve) => setTimeout(resolve, (retryAfter + 1) * 1000));
      retryAfter = await exhaustRateLimit(seller.mcpUrl);
    }
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    if (retryAfter > RATE_LIMITED_WAIT_S) {
      // Most of the window is left: move the seller's clock forward so that only RATE_LIMITED_WAIT_S of it is, rather
      // than wait it out, and see the seller say so. Its retry_after is then that much, and it really refuses every
      // request until that many seconds have passed.
      seller.advanceClock((retryAfter - RATE_LIMITED_WAIT_S) * 1000);
      retryAfter = await eventually(async () => {
        const left = await exhaustRateLimit(seller.mcpUrl);
        return left <= RATE_LIMITED_WAIT_S ? left : undefined;
      });
    }
    const begun = await begin(name, 'create_media_buy', buy([{ ...display, budget: 2_000 }]));
    // A read in the same window takes the other path: reads are local activities (workflows/operation/activity-options.ts).
    const read = await begin(name, 'get_products', { buying_mode: 'wholesale' });
    // While it waits, the operation's view shows the call waiting for its next attempt, the refusal's code as the last
    // failure, retryable (the activity's transient failure type, no non_retryable flag).
    const waiting = await eventually(async () => {
      const view = await readView(begun.operationId);
      return view.pending_activities?.some((activity: Row) => activity.last_failure) ? view : undefined;
    });
    expect(waiting.status).toBe('pending');
    expect(waiting.pending_activities).toEqual([
      expect.objectContaining({
        attempt: 2,
        last_failure: { message: 'RATE_LIMITED: Request rate exceeded', type: 'SellerTransientError' },
      }),
    ]);
    const { state, view, attempts, idempotencyKey } = await finish(begun);
    expect(operationSummary(state)).toMatchObject({ status: 'completed' });
    expect(state.result?.media_buy_id).toMatch(/^mb_/);
    // Two calls reached the seller: the refused one and the retry, with the same key (never a new one: a new key could
    // create a second buy if the first call had gone through). A retry sooner than retry_after would have landed in the
    // same window and been refused again: two calls and a completion mean the orchestrator waited as asked.
    expect(attempts).toHaveLength(2);
    expect(attempts.map((attempt) => attempt.args.idempotency_key)).toEqual([idempotencyKey, idempotencyKey]);
    expect(view).toMatchObject({ status: 'completed', result: { media_buy_id: state.result?.media_buy_id } });

    const products = await finish(read);
    expect(operationSummary(products.state)).toMatchObject({ status: 'completed' });
    expect(products.state.result?.products).toEqual(
      expect.arrayContaining([expect.objectContaining({ product_id: 'prod_display_300x250' })]),
    );
    expect(products.attempts).toHaveLength(2);
  }, 120_000);

  test('RATE_LIMITED on the last attempt allowed (retry.max_attempts 1, over HTTP): failed, call_failed, the refusal kept with its retry_after; nothing retried', async () => {
    // The window the previous test's retry opened: use it up again. The operation will not wait it out.
    const retryAfter = await exhaustRateLimit(sellers![name].mcpUrl);
    const proxy = proxies[name]!;
    const before = proxy.calls.length;
    const started = await fetch(`${api!.url}/v1/operations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        agent_id: name,
        task: 'create_media_buy',
        params: buy([{ ...display, budget: 3_000 }]),
        idempotency_key: randomUUID(),
        retry: { max_attempts: 1 },
      }),
    });
    expect(started.status).toBe(202);
    const { operation_id: operationId } = (await started.json()) as { operation_id: string };
    const state = await stack!.orchestrator.result(operationId);
    const view = await readView(operationId);
    const error = { code: 'RATE_LIMITED', recovery: 'transient', message: 'Request rate exceeded' };
    // A mutation whose last attempt got no result is looked up at the seller before the operation gives up (here:
    // the seller has no tasks/list, so nothing can be found), then fails with the seller's refusal, never a new key.
    expect(operationSummary(state)).toMatchObject({
      status: 'failed',
      errors: [{ ...error, retryAfterSeconds: expect.any(Number) }],
      failure: { reason: 'call_failed', error: { ...error, retryAfterSeconds: expect.any(Number) } },
    });
    expect(state.errors?.[0]?.retryAfterSeconds).toBeLessThanOrEqual(retryAfter);
    expect(state.reconciliation).toEqual([expect.objectContaining({ outcome: 'unsupported' })]);
    expect(view).toMatchObject({ status: 'failed', errors: [expect.objectContaining(error)] });
    const creates = proxy.calls.slice(before).filter((call) => call.tool === 'create_media_buy');
    expect(creates).toHaveLength(1);
    expect(creates[0].args.idempotency_key).toBe(idempotencyKeyFor(operationId, 'call'));
  });
});

/** Calls get_products directly (not as an operation) until the seller answers RATE_LIMITED; returns its retry_after. */
async function exhaustRateLimit(mcpUrl: string): Promise<number> {
  const client = new Client({ name: 'interop-errors-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl));
  await client.connect(transport);
  try {
    for (let request = 0; request < 100; request += 1) {
      const answer = (await client.callTool({ name: 'get_products', arguments: { buying_mode: 'wholesale' } })) as Row;
      const error = answer.structuredContent?.adcp_error as Row | undefined;
      if (answer.isError && error?.code === 'RATE_LIMITED') return Number(error.retry_after);
    }
    throw new Error('The seller never answered RATE_LIMITED within 100 requests.');
  } finally {
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  }
}

/** The comply_test_controller answers of both controller examples, and what the orchestrator makes of them. */
describe.each([
  {
    name: 'comply_controller' as const,
    scenarios: ['force_creative_status'],
    seed: { scenario: 'seed_creative', params: { creative_id: 'cr-1', fixture: { status: 'pending_review' } } },
    force: (status: string) => ({ scenario: 'force_creative_status', params: { creative_id: 'cr-1', status } }),
    forward: { from: 'pending_review', to: 'approved' },
    backward: 'processing',
    missing: {
      params: { scenario: 'force_creative_status', params: { creative_id: 'cr-missing', status: 'approved' } },
      message: 'Creative cr-missing not found',
    },
    unsupported: { scenario: 'force_media_buy_status', params: { media_buy_id: 'mb-1', status: 'active' } },
  },
  {
    name: 'seller_test_controller' as const,
    scenarios: ['force_media_buy_status', 'force_creative_status'],
    seed: { scenario: 'seed_media_buy', params: { media_buy_id: 'mb-1', fixture: { status: 'pending_creatives' } } },
    force: (status: string) => ({ scenario: 'force_media_buy_status', params: { media_buy_id: 'mb-1', status } }),
    forward: { from: 'pending_creatives', to: 'canceled' },
    backward: 'active',
    missing: {
      params: { scenario: 'force_media_buy_status', params: { media_buy_id: 'mb-missing', status: 'active' } },
      message: 'force_media_buy_status: mb-missing not found — seed it first with seed_media_buy',
    },
    unsupported: { scenario: 'simulate_delivery', params: { media_buy_id: 'mb-1' } },
  },
])('the $name example seller (comply_test_controller only)', (seller) => {
  const { name } = seller;

  test('offers comply_test_controller and no sales tools; a sales task fails at once, terminal, after one call', async () => {
    const tools = await listTools(sellers![name]);
    expect(tools).toContain('comply_test_controller');
    expect(tools).not.toContain('create_media_buy');
    const { state, attempts } = await operation(name, 'create_media_buy', { account: { account_id: 'acc-1' } });
    expect(operationSummary(state)).toMatchObject({
      status: 'failed',
      errors: [
        {
          code: 'TRANSPORT_RPC_METHOD_NOT_FOUND',
          recovery: 'terminal',
          message: 'Tool create_media_buy not found',
        },
      ],
    });
    expect(attempts).toHaveLength(1);
  });

  test('list_scenarios completes with the scenarios it implements', async () => {
    const { state, attempts } = await operation(name, 'comply_test_controller', { scenario: 'list_scenarios' });
    expect(operationSummary(state)).toMatchObject({ status: 'completed' });
    expect(state.outcome).toBe('success');
    expect(state.result).toMatchObject({ success: true, scenarios: seller.scenarios });
    expect(attempts).toHaveLength(1);
  });

  test('forcing an entity it does not have: NOT_FOUND, correctable, with the controller’s detail, not retried', async () => {
    const { state, view, attempts } = await operation(name, 'comply_test_controller', seller.missing.params);
    const error = { code: 'NOT_FOUND', recovery: 'correctable', message: seller.missing.message };
    expect(operationSummary(state)).toMatchObject({
      status: 'failed',
      errors: [error],
      message: seller.missing.message,
    });
    expect(attempts).toHaveLength(1);
    expect(view).toMatchObject({ status: 'failed', errors: [expect.objectContaining(error)] });
  });

  test('seed, a legal forced transition, then an illegal one: INVALID_TRANSITION with the current state', async () => {
    const seeded = await operation(name, 'comply_test_controller', seller.seed);
    expect(operationSummary(seeded.state)).toMatchObject({ status: 'completed' });
    expect(seeded.state.result).toMatchObject({ success: true });

    const forward = await operation(name, 'comply_test_controller', seller.force(seller.forward.to));
    expect(operationSummary(forward.state)).toMatchObject({ status: 'completed' });
    expect(forward.state.result).toMatchObject({
      success: true,
      previous_state: seller.forward.from,
      current_state: seller.forward.to,
    });

    const backward = await operation(name, 'comply_test_controller', seller.force(seller.backward));
    expect(operationSummary(backward.state)).toMatchObject({
      status: 'failed',
      errors: [
        {
          code: 'INVALID_TRANSITION',
          recovery: 'correctable',
          message: expect.stringContaining(`from ${seller.forward.to} to ${seller.backward}`),
          details: { current_state: seller.forward.to },
        },
      ],
    });
    expect(backward.attempts).toHaveLength(1);
  });

  test('a re-seed with a different fixture: INVALID_PARAMS, correctable, not retried', async () => {
    const divergent = {
      ...seller.seed,
      params: { ...seller.seed.params, fixture: { status: seller.forward.to, note: 'different' } },
    };
    const { state, attempts } = await operation(name, 'comply_test_controller', divergent);
    expect(operationSummary(state)).toMatchObject({
      status: 'failed',
      errors: [{ code: 'INVALID_PARAMS', recovery: 'correctable', message: expect.stringContaining('diverges') }],
    });
    expect(attempts).toHaveLength(1);
  });

  test('a scenario it does not implement: UNKNOWN_SCENARIO, terminal, not retried', async () => {
    const { state, attempts } = await operation(name, 'comply_test_controller', seller.unsupported);
    expect(operationSummary(state)).toMatchObject({
      status: 'failed',
      errors: [
        {
          code: 'UNKNOWN_SCENARIO',
          recovery: 'terminal',
          message: `Scenario not supported: ${seller.unsupported.scenario}`,
        },
      ],
    });
    expect(attempts).toHaveLength(1);
  });
});
