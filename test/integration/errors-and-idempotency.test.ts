/**
 * Errors, safe retries and idempotency through a real Temporal server and the scripted fixture seller: transient
 * failures retried with the same key, correctable errors failing at once with the seller's words, a timeout after the
 * seller accepted, IDEMPOTENCY_CONFLICT / IDEMPOTENCY_EXPIRED resolved by reconciliation rather than a second buy,
 * and answers lost for every retry. Each test uses its own seller so media buys can be counted exactly.
 *
 * Each test has its own seller and its own worker (its own task queue, its own circuit breakers), so the tests share
 * nothing and run side by side (test.concurrent): most of their time is spent waiting on retries, timeouts and polls.
 */
import { randomUUID } from 'node:crypto';
import { createMediaBuyParams, getProductsParams } from '../harness/demo-requests';
import { type ScriptedSeller, type ScriptedSellerOptions, startScriptedSeller } from '../fixtures/scripted-seller';
import { type TestStack, registry, startTestStack } from '../harness/temporal';
import type { ActivityDependencies } from '../../activities';
import { buyerRefFor } from '../../activities/idempotency';
import type { SellerConfig } from '../../config/sellers';
import { operationView } from '../../api/app';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { type CircuitTransition, CircuitBreakerRegistry } from '../../activities/circuit-breaker';

interface Rig {
  seller: ScriptedSeller;
  stack: TestStack;
  sellerId: string;
  close(): Promise<void>;
}

const rigs: Rig[] = [];
afterAll(async () => {
  await Promise.all(rigs.map((rig) => rig.close()));
});

/**
 * A seller of its own and a worker on its own task queue. The seller's default create answers `submitted` and
 * completes on the first read (`pollsToComplete: 1`, the operation's first quick poll) unless `sellerOptions` says
 * otherwise: these tests are about the call, not about how long a task takes.
 */
async function rig(
  activities: Partial<ActivityDependencies> = {},
  agent: Partial<SellerConfig> = {},
  sellerOptions: ScriptedSellerOptions = {},
): Promise<Rig> {
  const seller = await startScriptedSeller({ pollsToComplete: 1, ...sellerOptions });
  const sellerId = `fixture-${randomUUID().slice(0, 8)}`;
  const stack = await startTestStack({
    sellers: registry([{ id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN', ...agent }]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken }, ...activities },
  });
  const created: Rig = {
    seller,
    stack,
    sellerId,
    async close() {
      await stack.close();
      await seller.close();
    },
  };
  rigs.push(created);
  return created;
}

function createKeys(seller: ScriptedSeller): string[] {
  return seller.callsTo('create_media_buy').map((call) => String(call.args.idempotency_key));
}

test.concurrent(
  'transient failures are retried with the same idempotency key, then succeed with one media buy',
  async () => {
    const { seller, stack, sellerId } = await rig();
    // Two activity attempts fail (one request each: every call has its own connection, nothing re-sends behind us).
    seller.fault('create_media_buy', { kind: 'http-status', status: 503 }, { times: 2 });
    const { operationId } = await stack.orchestrator.start({
      sellerId,
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(seller.mediaBuys()).toHaveLength(1);
    const keys = createKeys(seller);
    expect(keys.length).toBe(3);
    expect(new Set(keys).size).toBe(1);
  },
);

test.concurrent(
  'a correctable error fails the operation at once with the seller’s message, field and suggestion',
  async () => {
    const { seller, stack, sellerId } = await rig();
    seller.script('create_media_buy', [
      {
        status: 'failed',
        adcpError: {
          code: 'BUDGET_TOO_LOW',
          message: 'Minimum budget is 10000 USD',
          recovery: 'correctable',
          field: 'packages[0].budget',
          suggestion: 'Raise the package budget to at least 10000',
        },
      },
    ]);
    const { operationId } = await stack.orchestrator.start({
      sellerId,
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('failed');
    expect(state.errors?.[0]).toMatchObject({
      code: 'BUDGET_TOO_LOW',
      message: 'Minimum budget is 10000 USD',
      recovery: 'correctable',
      field: 'packages[0].budget',
      suggestion: 'Raise the package budget to at least 10000',
    });
    expect(seller.callsTo('create_media_buy')).toHaveLength(1); // not retried
    expect(seller.mediaBuys()).toHaveLength(0);
  },
);

test.concurrent('a terminal seller error is not retried either', async () => {
  const { seller, stack, sellerId } = await rig();
  seller.script('get_products', [
    { status: 'failed', adcpError: { code: 'ACCOUNT_SUSPENDED', message: 'Account suspended', recovery: 'terminal' } },
  ]);
  const { operationId } = await stack.orchestrator.start({
    sellerId,
    task: 'get_products',
    params: getProductsParams,
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('failed');
  expect(state.errors?.[0]).toMatchObject({ code: 'ACCOUNT_SUSPENDED', recovery: 'terminal' });
  expect(seller.callsTo('get_products')).toHaveLength(1);
});

test.concurrent(
  'a call that times out after the seller accepted it is retried with the same key and resolves to one media buy',
  async () => {
    const { seller, stack, sellerId } = await rig({ callTimeoutMs: 1_500 });
    // The seller creates the task at once but holds the answer past the call timeout, on two attempts.
    seller.fault('create_media_buy', { kind: 'slow-response', ms: 5_000 }, { times: 2 });
    const { operationId } = await stack.orchestrator.start({
      sellerId,
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(seller.mediaBuys()).toHaveLength(1);
    expect(seller.tasks().filter((task) => task.tool === 'create_media_buy')).toHaveLength(1);
    expect(new Set(createKeys(seller)).size).toBe(1);
    expect(seller.callsTo('create_media_buy').some((call) => call.replayed)).toBe(true);
  },
);

test.concurrent(
  'IDEMPOTENCY_CONFLICT after a lost answer: reconciliation finds and adopts the task, no second buy',
  async () => {
    const { seller, stack, sellerId } = await rig({}, {}, { pollsToComplete: 2 });
    // The first two requests create the task but their answers are lost; the next retry is refused.
    seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 2 });
    seller.fault('create_media_buy', {
      kind: 'adcp-error',
      error: { code: 'IDEMPOTENCY_CONFLICT', message: 'Key reused with a different payload', recovery: 'correctable' },
    });
    const { operationId } = await stack.orchestrator.start({
      sellerId,
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(state.reconciliation?.[0]).toMatchObject({ outcome: 'adopted', taskId: seller.tasks()[0].taskId });
    expect(state.reconciliation?.[0].trigger).toContain('IDEMPOTENCY_CONFLICT');
    expect(seller.mediaBuys()).toHaveLength(1);
    expect(new Set(createKeys(seller)).size).toBe(1); // never a new key
    expect(seller.callsTo('tasks/list').length).toBeGreaterThan(0);
  },
);

test.concurrent('IDEMPOTENCY_EXPIRED with no task at the seller: only then is a new key used, once', async () => {
  const { seller, stack, sellerId } = await rig();
  seller.fault('create_media_buy', {
    kind: 'adcp-error',
    error: { code: 'IDEMPOTENCY_EXPIRED', message: 'Key past its replay window', recovery: 'correctable' },
  });
  const { operationId } = await stack.orchestrator.start({
    sellerId,
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(state.reconciliation?.[0]).toMatchObject({ outcome: 'not_found' });
  expect(new Set(createKeys(seller)).size).toBe(2);
  expect(seller.mediaBuys()).toHaveLength(1);
});

test.concurrent(
  'every answer lost until retries run out: the operation reconciles and adopts the task instead of failing',
  async () => {
    const { seller, stack, sellerId } = await rig({}, {}, { pollsToComplete: 2 });
    // Three attempts, each request processed (the first creates the task, the rest are replays) and its answer dropped.
    seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 6 });
    const { operationId } = await stack.orchestrator.start({
      sellerId,
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(state.reconciliation?.[0]).toMatchObject({ outcome: 'adopted' });
    expect(seller.mediaBuys()).toHaveLength(1);
    expect(new Set(createKeys(seller)).size).toBe(1);
  },
);

test.concurrent('the status query and the HTTP view carry the classified error of a failed operation', async () => {
  const { seller, stack, sellerId } = await rig();
  seller.fault('get_products', { kind: 'http-status', status: 502 }, { times: 3 });
  const { operationId } = await stack.orchestrator.start({
    sellerId,
    task: 'get_products',
    params: getProductsParams,
    idempotencyKey: randomUUID(),
    retry: { maximumAttempts: 3, initialIntervalMs: 200, maximumIntervalMs: 200 },
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('failed');
  expect(state.failure?.reason).toBe('call_failed');
  expect(state.failure?.error).toMatchObject({ recovery: 'transient' });
  expect(state.failure?.error?.code).toBe('TRANSPORT_HTTP_502');
  expect(state.failure?.message).toContain('502');
  expect(seller.callsTo('get_products')).toHaveLength(3); // one request per attempt
  const view = operationView(await stack.orchestrator.status(operationId), {});
  expect(view).toMatchObject({ status: 'failed', failure: { reason: 'call_failed' } });
  expect((view.errors as { code: string; recovery: string }[])[0]).toMatchObject({
    code: 'TRANSPORT_HTTP_502',
    recovery: 'transient',
  });
});

test.concurrent(
  'the circuit breaker opens after repeated failures, fails fast without calling the seller, and closes again',
  async () => {
    const transitions: (CircuitTransition & { sellerId: string })[] = [];
    const breakers = new CircuitBreakerRegistry({
      failureThreshold: 3,
      coolOffMs: 3_000,
      now: Date.now,
      onTransition: (sellerId, transition) => transitions.push({ sellerId, ...transition }),
    });
    const { seller, stack, sellerId } = await rig({ breakers });
    // Three attempts fail (one request each); the fourth finds the circuit open; after the cool-off a trial succeeds.
    seller.fault('get_products', { kind: 'http-status', status: 503 }, { times: 3 });
    const { operationId } = await stack.orchestrator.start({
      sellerId,
      task: 'get_products',
      params: getProductsParams,
      idempotencyKey: randomUUID(),
      retry: { maximumAttempts: 8, initialIntervalMs: 200, maximumIntervalMs: 500 },
    });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(transitions.map((transition) => `${transition.from}->${transition.to}`)).toEqual([
      'closed->open',
      'open->half-open',
      'half-open->closed',
    ]);
    expect(transitions.every((transition) => transition.sellerId === sellerId)).toBe(true);
    const [opened, halfOpen] = transitions;
    expect(halfOpen.at - opened.at).toBeGreaterThanOrEqual(3_000);
    // While open, no request reached the seller: 3 failed requests before, the successful trial after.
    const calls = seller.callsTo('get_products');
    expect(calls).toHaveLength(4);
    expect(calls.filter((call) => Date.parse(call.at) > opened.at && Date.parse(call.at) < halfOpen.at)).toHaveLength(
      0,
    );
    expect(breakers.get(sellerId)?.state).toBe('closed');
  },
);

test.concurrent(
  'rc.2 sellers: create_media_buy carries a buyer_ref derived from the operation, the same on every retry',
  async () => {
    const { seller, stack, sellerId } = await rig({}, { adcp_version: 'rc.2' });
    seller.fault('create_media_buy', { kind: 'http-status', status: 503 }, { times: 2 });
    const params = createMediaBuyParams();
    const { operationId } = await stack.orchestrator.start({
      sellerId,
      task: 'create_media_buy',
      params,
      idempotencyKey: randomUUID(),
    });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    const calls = seller.callsTo('create_media_buy');
    expect(calls.length).toBe(3);
    const expected = buyerRefFor(operationId);
    for (const call of calls) {
      expect(call.args.buyer_ref).toBe(expected);
      expect((call.args.packages as { buyer_ref: string }[])[0].buyer_ref).toBe(`${expected}-pkg1`);
    }
    expect(seller.mediaBuys()).toHaveLength(1);
  },
);

test.concurrent(
  'rc.2 sellers: a synchronous create whose answers were all lost is found by buyer_ref (get_media_buys), not repeated',
  async () => {
    const { seller, stack, sellerId } = await rig({}, { adcp_version: 'rc.2' });
    seller.script('create_media_buy', [{ status: 'completed' }]);
    seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 6 });
    const { operationId } = await stack.orchestrator.start({
      sellerId,
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(state.reconciliation?.[0]).toMatchObject({ outcome: 'adopted' });
    expect(state.reconciliation?.[0].note).toContain('buyer_ref');
    expect(state.result?.media_buy_id).toBe(seller.mediaBuys()[0].mediaBuyId);
    expect(seller.mediaBuys()).toHaveLength(1);
    expect(seller.callsTo('get_media_buys')[0].args).toMatchObject({ buyer_refs: [buyerRefFor(operationId)] });
  },
);

test.concurrent(
  "the operator's per-task defaults apply to operations of that task; a caller's own values win",
  async () => {
    const { seller, stack, sellerId } = await rig();
    const orchestrator = new OrchestratorClient({
      client: stack.client,
      taskQueue: stack.taskQueue,
      taskDefaults: { get_products: { retry: { maximumAttempts: 1 } }, create_media_buy: { budgetMs: 3 * 3_600_000 } },
    });
    seller.fault('get_products', { kind: 'http-status', status: 503 }, { times: 1 });
    const once = await orchestrator.result(
      (await orchestrator.start({ sellerId, task: 'get_products', params: getProductsParams })).operationId,
    );
    expect(once.status).toBe('failed');
    expect(seller.callsTo('get_products')).toHaveLength(1); // one attempt, one request

    seller.fault('get_products', { kind: 'http-status', status: 503 }, { times: 1 });
    const retried = await orchestrator.result(
      (
        await orchestrator.start({
          sellerId,
          task: 'get_products',
          params: getProductsParams,
          retry: { maximumAttempts: 2, initialIntervalMs: 100 },
        })
      ).operationId,
    );
    expect(retried.status).toBe('completed');

    seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
    const { operationId } = await orchestrator.start({
      sellerId,
      task: 'create_media_buy',
      params: createMediaBuyParams(),
    });
    const state = (await orchestrator.status(operationId)).state!;
    expect(Date.parse(state.deadline) - Date.parse(state.startedAt)).toBe(3 * 3_600_000);
    await orchestrator.cancel(operationId, { requestedBy: 'test', reason: 'cleanup' });
  },
);
