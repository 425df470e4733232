/**
 * End to end against a seller nobody here wrote: @adcp/sdk's example seller and mock ad server on loopback,
 * through a real Temporal dev server and a real worker.
 */
import { randomUUID } from 'node:crypto';
import { DEMO_SELLER_TOKEN, demoOrders } from '../../scripts/lib/demo-seller';
import { createMediaBuyParams, getProductsParams, uniqueBudget } from '../harness/demo-requests';
import { type TestStack, demoSellerConfig, registry, startTestStack } from '../harness/temporal';

let stack: TestStack;
const upstream = () => process.env.DEMO_UPSTREAM_URL!;

beforeAll(async () => {
  stack = await startTestStack({ sellers: registry([demoSellerConfig()]), activities: { env: { DEMO_SELLER_TOKEN } } });
});
afterAll(async () => stack?.close());

test('get_products completes with the seller’s products', async () => {
  const started = await stack.orchestrator.start({
    sellerId: 'demo',
    task: 'get_products',
    params: getProductsParams,
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(started.operationId);
  expect(state.status).toBe('completed');
  const products = state.result?.products as Array<{ product_id: string }>;
  expect(products.map((product) => product.product_id)).toContain('acme_dooh_billboards_q2');
  expect(state.transitions.map((t) => [t.from, t.to, t.source])).toEqual([['pending', 'completed', 'call']]);
});

test('create_media_buy goes submitted → polled → completed with a media_buy_id, one buy at the seller', async () => {
  const budget = uniqueBudget();
  const started = await stack.orchestrator.start({
    sellerId: 'demo',
    task: 'create_media_buy',
    params: createMediaBuyParams(budget),
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(started.operationId);
  expect(state.status).toBe('completed');
  expect(state.taskId).toMatch(/^task_/);
  expect(typeof state.result?.media_buy_id).toBe('string');
  expect(state.pollCount).toBeGreaterThanOrEqual(1);
  const path = state.transitions.map((t) => `${t.to}:${t.source}`);
  expect(path[0]).toBe('submitted:call');
  expect(path[path.length - 1]).toBe('completed:poll');
  const after = await demoOrders(upstream(), budget);
  expect(after.length).toBe(1);
  expect(after.map((order) => order.order_id)).toContain(state.result?.media_buy_id);
});

test('starting the same operation twice gives the same operation back, with no second call', async () => {
  const budget = uniqueBudget();
  const key = randomUUID();
  const request = {
    sellerId: 'demo',
    task: 'create_media_buy',
    params: createMediaBuyParams(budget),
    idempotencyKey: key,
  };
  const first = await stack.orchestrator.start(request);
  const second = await stack.orchestrator.start(request);
  expect(first.created).toBe(true);
  expect(second.created).toBe(false);
  expect(second.operationId).toBe(first.operationId);
  expect(first.operationId).toBe(`adcp-create_media_buy-${key}`);
  const state = await stack.orchestrator.result(first.operationId);
  // Once finished, the same key still names the same operation, and still makes no call.
  const third = await stack.orchestrator.start(request);
  expect(third).toMatchObject({ operationId: first.operationId, created: false });
  expect(third.state?.result?.media_buy_id).toBe(state.result?.media_buy_id);
  expect((await demoOrders(upstream(), budget)).length).toBe(1);
});

test('the same key with a different request is a conflict, not a second operation', async () => {
  const key = randomUUID();
  await stack.orchestrator.start({
    sellerId: 'demo',
    task: 'get_products',
    params: getProductsParams,
    idempotencyKey: key,
  });
  await expect(
    stack.orchestrator.start({
      sellerId: 'demo',
      task: 'get_products',
      params: { ...getProductsParams, brief: 'something else' },
      idempotencyKey: key,
    }),
  ).rejects.toThrow(/different request/);
});
