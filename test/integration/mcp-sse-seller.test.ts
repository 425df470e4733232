/**
 * Sellers that speak MCP over the legacy HTTP+SSE transport only (protocol 2024-11-05 style, still deployed) are
 * reachable: the Streamable HTTP POST is refused (405), the call falls back to SSE, and the SSE transport's own
 * event-stream GET goes to the seller (before, the per-call fetch answered every event-stream GET with a local 405,
 * so such a seller failed every call with "SSE error: Non-200 status code (405)"). A failed SSE connect leaves
 * nothing behind: no EventSource reconnecting, no socket, no timer (jest runs this file with --detectOpenHandles).
 * The refusal is remembered per seller (activities/mcp-transport-memory.ts): later calls skip the refused POST until
 * the memory's TTL passes or the SSE connect fails, and a seller that answers Streamable HTTP is never marked.
 * Real HTTP on loopback: test/fixtures/sse-seller.ts (an @adcp/sdk agent on the MCP SDK's SSEServerTransport), and
 * a real Temporal dev server and worker for the operation.
 */
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSdkSellerClient } from '../../activities/seller-client';
import { closeIdleMcpConnections, withMcpConnection } from '../../activities/mcp-connection';
import { SSE_ONLY_TTL_MS, SseOnlySellers } from '../../activities/mcp-transport-memory';
import { SSE_SELLER_PRODUCT, type SseSeller, type SseSellerOptions, startSseSeller } from '../fixtures/sse-seller';
import { getProductsParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let seller: SseSeller;
beforeAll(async () => {
  seller = await startSseSeller();
});
afterAll(async () => {
  closeIdleMcpConnections();
  await seller?.close();
});

test('a direct call through the seller client reaches an HTTP+SSE-only seller and gets its products', async () => {
  const before = seller.counts();
  const answer = await createSdkSellerClient().callTask({
    agent: { id: 'legacy-sse', url: seller.url, protocol: 'mcp' },
    token: seller.authToken,
    signal: AbortSignal.timeout(20_000),
    task: 'get_products',
    args: getProductsParams,
  });
  expect(answer.callError).toBe(false);
  expect(answer.snapshot.status).toBe('completed');
  expect(answer.snapshot.result?.products).toEqual([SSE_SELLER_PRODUCT]);
  const after = seller.counts();
  expect(after.refusedPosts - before.refusedPosts).toBe(1); // Streamable HTTP tried first, refused
  expect(after.streams - before.streams).toBe(1); // then one SSE stream, opened at the seller
  expect(after.getProducts - before.getProducts).toBe(1);
  expect(after.unauthorized).toBe(0); // the token went on the stream's GET and on every message
  // The connection is the call's alone and never pooled: its stream closes when the call ends.
  await eventually(async () => (seller.openStreams() === 0 ? true : undefined), 5_000, 50);
});

describe('through the worker', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      sellers: registry([
        { id: 'legacy-sse', name: 'Legacy SSE seller', url: seller.url, protocol: 'mcp', token_env: 'SSE_TOKEN' },
      ]),
      activities: { env: { SSE_TOKEN: seller.authToken } },
    });
  });
  afterAll(async () => stack?.close());

  test('a get_products operation against an HTTP+SSE-only seller completes with its products', async () => {
    const before = seller.counts().getProducts;
    const started = await stack.orchestrator.start({
      sellerId: 'legacy-sse',
      task: 'get_products',
      params: getProductsParams,
      idempotencyKey: randomUUID(),
    });
    const state = await stack.orchestrator.result(started.operationId);
    expect(state.status).toBe('completed');
    expect((state.result?.products as Array<{ product_id: string }>).map((product) => product.product_id)).toEqual([
      SSE_SELLER_PRODUCT.product_id,
    ]);
    expect(state.transitions.map((t) => [t.from, t.to, t.source])).toEqual([['pending', 'completed', 'call']]);
    expect(seller.counts().getProducts - before).toBe(1);
    await eventually(async () => (seller.openStreams() === 0 ? true : undefined), 5_000, 50);
  });
});

describe('remembering that a seller refused Streamable HTTP', () => {
  const sellers: SseSeller[] = [];
  const startSeller = async (options?: SseSellerOptions) => {
    const started = await startSseSeller(options);
    sellers.push(started);
    return started;
  };
  afterAll(async () => {
    closeIdleMcpConnections();
    await Promise.all(sellers.map((started) => started.close()));
  });

  /** A clock the test moves, and a memory that reads it. */
  const clocked = () => {
    const clock = { now: 1_000_000 };
    return { clock, memory: new SseOnlySellers({ now: () => clock.now }) };
  };

  /** One get_products call on a per-call connection, through the given memory. */
  const getProducts = async (target: SseSeller, memory: SseOnlySellers) => {
    const result = await withMcpConnection(
      { url: target.url, token: target.authToken, signal: AbortSignal.timeout(20_000), requestTimeoutMs: 20_000 },
      (client) => client.callTool({ name: 'get_products', arguments: getProductsParams }),
      memory,
    );
    expect(result.isError).toBeFalsy();
  };

  test('several calls through the seller client pay one refused POST, not one per call', async () => {
    const legacy = await startSeller();
    for (let call = 0; call < 4; call += 1) {
      const answer = await createSdkSellerClient().callTask({
        agent: { id: 'legacy-sse-remembered', url: legacy.url, protocol: 'mcp' },
        token: legacy.authToken,
        signal: AbortSignal.timeout(20_000),
        task: 'get_products',
        args: getProductsParams,
      });
      expect(answer.snapshot.result?.products).toEqual([SSE_SELLER_PRODUCT]);
    }
    const counts = legacy.counts();
    expect(counts.refusedPosts).toBe(1); // the first call's probe; the other three went straight to SSE
    expect(counts.streams).toBe(4); // still one stream of its own per call, closed when the call ends
    expect(counts.getProducts).toBe(4);
    await eventually(async () => (legacy.openStreams() === 0 ? true : undefined), 5_000, 50);
  });

  test('after the TTL the next call probes Streamable HTTP again', async () => {
    const legacy = await startSeller();
    const { clock, memory } = clocked();
    await getProducts(legacy, memory);
    expect(memory.size).toBe(1);
    clock.now += SSE_ONLY_TTL_MS - 1;
    await getProducts(legacy, memory);
    expect(legacy.counts().refusedPosts).toBe(1); // still remembered
    clock.now += 1;
    await getProducts(legacy, memory);
    expect(legacy.counts().refusedPosts).toBe(2); // forgotten at the TTL: probed, refused, remembered again
    await getProducts(legacy, memory);
    expect(legacy.counts()).toMatchObject({ refusedPosts: 2, streams: 4, getProducts: 4 });
  });

  test('a seller that answers Streamable HTTP is never marked', async () => {
    const modern = await startSeller({ transports: { sse: true, streamableHttp: true } });
    const { memory } = clocked();
    for (let call = 0; call < 3; call += 1) await getProducts(modern, memory);
    expect(memory.size).toBe(0);
    expect(modern.counts()).toMatchObject({ refusedPosts: 0, streams: 0, getProducts: 3 });
    expect(modern.counts().streamableHttpRequests).toBeGreaterThanOrEqual(3);
  });

  test('a remembered seller that upgrades (and drops SSE) is reached in the same call, and forgotten', async () => {
    const upgrading = await startSeller();
    const { memory } = clocked();
    await getProducts(upgrading, memory);
    expect(memory.size).toBe(1);
    upgrading.speak({ sse: false, streamableHttp: true });
    await getProducts(upgrading, memory); // the SSE connect fails (405), the call probes Streamable HTTP
    expect(memory.size).toBe(0);
    expect(upgrading.counts()).toMatchObject({ refusedStreams: 1, refusedPosts: 1, streams: 1, getProducts: 2 });
    await getProducts(upgrading, memory); // and from now on goes there first
    expect(upgrading.counts()).toMatchObject({ refusedStreams: 1, refusedPosts: 1, streams: 1, getProducts: 3 });
  });

  test('a remembered seller whose SSE connect fails is forgotten, with one SSE attempt in the failing call', async () => {
    const failing = await startSeller();
    const { memory } = clocked();
    await getProducts(failing, memory);
    failing.speak({ sse: false, streamableHttp: false });
    await expect(getProducts(failing, memory)).rejects.toThrow(/SSE error/);
    expect(memory.size).toBe(0);
    // Straight to SSE (refused), then the Streamable HTTP probe (refused): no second SSE attempt.
    expect(failing.counts()).toMatchObject({ refusedStreams: 1, refusedPosts: 2 });
    failing.speak({ sse: true, streamableHttp: false });
    await getProducts(failing, memory); // forgotten: probes first, refused, back on SSE and remembered
    expect(failing.counts()).toMatchObject({ refusedStreams: 1, refusedPosts: 3, getProducts: 2 });
    expect(memory.size).toBe(1);
  });

  test('the memory holds at most its capacity, oldest refusal out first', () => {
    const memory = new SseOnlySellers({ capacity: 2 });
    memory.remember('a');
    memory.remember('b');
    memory.remember('c');
    expect(memory.size).toBe(2);
    expect([memory.has('a'), memory.has('b'), memory.has('c')]).toEqual([false, true, true]);
  });
});

/** A legacy seller gone bad: refuses the Streamable HTTP POST, so the client falls back, then drops every GET. */
async function startDroppingSseSeller(
  onGet: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ url: string; gets: () => number; close: () => Promise<void> }> {
  let gets = 0;
  const server = http.createServer((req, res) => {
    if (req.method === 'GET') {
      gets += 1;
      onGet(req, res);
      return;
    }
    res.writeHead(405, { allow: 'GET' }).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    gets: () => gets,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test('a failed SSE connect leaves no EventSource behind: no reconnect reaches the seller after the call failed', async () => {
  // The EventSource reconnects 3 s after a dropped stream, for ever, unless the transport is closed.
  const dropping = await startDroppingSseSeller((req) => req.socket.destroy());
  try {
    const call = createSdkSellerClient().callTask({
      agent: { id: 'dropping', url: dropping.url, protocol: 'mcp' },
      token: 'dropping-token',
      signal: AbortSignal.timeout(20_000),
      task: 'get_products',
      args: getProductsParams,
    });
    await expect(call).rejects.toThrow(/SSE error/);
    const atFailure = dropping.gets();
    expect(atFailure).toBe(1); // the SSE transport's GET reached the seller (no local 405)
    await sleep(4_000);
    expect(dropping.gets()).toBe(atFailure);
  } finally {
    await dropping.close();
  }
}, 30_000);

test('a call aborted while the SSE stream never names its endpoint ends, and closes the stream at the seller', async () => {
  // The stream opens (200, text/event-stream) but the `endpoint` event never comes: connect waits for it.
  const streamClosed: Array<Promise<void>> = [];
  const silent = await startDroppingSseSeller((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(': waiting\n\n');
    streamClosed.push(new Promise<void>((resolve) => res.on('close', () => resolve())));
  });
  try {
    const controller = new AbortController();
    const call = createSdkSellerClient().callTask({
      agent: { id: 'silent', url: silent.url, protocol: 'mcp' },
      token: 'silent-token',
      signal: controller.signal,
      task: 'get_products',
      args: getProductsParams,
    });
    await eventually(async () => (silent.gets() === 1 ? true : undefined), 10_000, 20);
    controller.abort(); // a plain AbortError, which the EventSource swallows without an error event
    await expect(call).rejects.toBeDefined();
    await streamClosed[0]; // the seller saw the stream end: nothing holds it open
    await sleep(3_500);
    expect(silent.gets()).toBe(1); // and nothing reconnected
  } finally {
    await silent.close();
  }
}, 30_000);
