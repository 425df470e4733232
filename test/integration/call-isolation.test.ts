/**
 * Calls to the same seller are isolated from each other (#9 item 4): cancelling one call, or one call hitting its
 * timeout, never fails another call in flight at the same seller. Observed before: with @adcp/sdk's shared MCP
 * connection, cancelling operation C failed operation D's call at once with "CancelledFailure: NOT_FOUND".
 * Real HTTP on loopback: a socket that accepts and never answers, and a real MCP server with a tool that waits.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import { createSdkSellerClient } from '../../activities/seller-client';
import { withAbortSignal } from '../../activities/abortable-fetch';
import { closeIdleMcpConnections, raceSignal } from '../../activities/mcp-connection';
import { classifyTransportFailure } from '../../activities/transport-errors';

type Settled = { state: 'pending' } | { state: 'fulfilled'; value: unknown } | { state: 'rejected'; error: unknown };

function track(promise: Promise<unknown>): { settled: () => Settled; done: Promise<Settled> } {
  let current: Settled = { state: 'pending' };
  const done = promise.then(
    (value) => (current = { state: 'fulfilled', value }),
    (error: unknown) => (current = { state: 'rejected', error }),
  );
  return { settled: () => current, done };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Accepts TCP connections and never writes a byte. */
async function startSilentSocket(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: TcpServer = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A stateless MCP seller whose `get_products` waits until the test releases it. */
async function startWaitingMcpSeller(): Promise<{
  url: string;
  release: () => void;
  calls: () => number;
  close: () => Promise<void>;
}> {
  let releaseAll!: () => void;
  let released = new Promise<void>((resolve) => (releaseAll = resolve));
  let calls = 0;
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    const mcp = new McpServer({ name: 'waiting-seller', version: '1.0.0' });
    mcp.registerTool('get_products', { inputSchema: { brief: z.string().optional() } }, async () => {
      calls += 1;
      await released;
      const answer = { status: 'completed', products: [{ product_id: 'p1' }] };
      return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => void transport.close());
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    release: () => {
      releaseAll();
      released = Promise.resolve();
    },
    calls: () => calls,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test('cancelling one call to a seller that never answers leaves another call to it in flight until its own timeout', async () => {
  const seller = await startSilentSocket();
  const client = createSdkSellerClient();
  const agent = { id: 'silent', url: seller.url, protocol: 'mcp' as const };
  try {
    const cancelC = new AbortController();
    const callC = track(
      client.callTask({
        agent,
        token: 'shared-token',
        signal: cancelC.signal,
        task: 'get_products',
        args: { brief: 'C' },
      }),
    );
    const callD = track(
      client.callTask({
        agent,
        token: 'shared-token',
        signal: AbortSignal.timeout(3_000),
        task: 'get_products',
        args: { brief: 'D' },
      }),
    );
    await sleep(300);
    cancelC.abort(new Error('operation C canceled'));
    await callC.done;
    expect(callC.settled().state).toBe('rejected');

    await sleep(700);
    expect(callD.settled().state).toBe('pending'); // C's cancel did not reach D

    const outcome = await callD.done;
    expect(outcome.state).toBe('rejected');
    // D ended by its own timeout, classified as a timeout, not by C's cancellation.
    expect(classifyTransportFailure((outcome as { error: unknown }).error).code).toBe('TRANSPORT_TIMEOUT');
  } finally {
    await seller.close();
  }
}, 30_000);

test('cancelling one MCP tool call in flight does not fail another call to the same seller, which gets its answer', async () => {
  const seller = await startWaitingMcpSeller();
  const client = createSdkSellerClient();
  const agent = { id: 'waiting', url: seller.url, protocol: 'mcp' as const };
  try {
    const cancelC = new AbortController();
    const callC = track(
      client.callTask({
        agent,
        token: 'shared-token',
        signal: cancelC.signal,
        task: 'get_products',
        args: { brief: 'C' },
      }),
    );
    const callD = track(
      client.callTask({
        agent,
        token: 'shared-token',
        signal: AbortSignal.timeout(20_000),
        task: 'get_products',
        args: { brief: 'D' },
      }),
    );
    for (let i = 0; i < 100 && seller.calls() < 2; i++) await sleep(50);
    expect(seller.calls()).toBe(2); // both calls are at the seller

    cancelC.abort(new Error('operation C canceled'));
    await callC.done;
    expect(callC.settled().state).toBe('rejected');
    await sleep(300);
    expect(callD.settled().state).toBe('pending');

    seller.release();
    const outcome = await callD.done;
    expect(outcome.state).toBe('fulfilled');
    expect(
      (outcome as { value: { snapshot: { status: string; result?: Record<string, unknown> } } }).value.snapshot,
    ).toMatchObject({
      status: 'completed',
      result: { products: [{ product_id: 'p1' }] },
    });
  } finally {
    seller.release();
    await seller.close();
  }
}, 30_000);

test('a call ends at its hard timeout even when the work under it ignores the signal', async () => {
  const never = new Promise<never>(() => undefined);
  const started = Date.now();
  await expect(raceSignal(AbortSignal.timeout(200), () => never)).rejects.toMatchObject({ name: 'TimeoutError' });
  expect(Date.now() - started).toBeLessThan(5_000);
});

test('an A2A agent card fetch, shared by every caller waiting on it, is not aborted by the call that started it', async () => {
  // @adcp/sdk fetches the card once for all callers of the same seller: one caller's cancel must not fail the others.
  const server = createServer((req, res) => {
    setTimeout(() => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ name: 'seller', url: 'http://127.0.0.1/a2a' }));
    }, 400);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const callA = new AbortController();
    const card = withAbortSignal(callA.signal, async () => fetch(`${base}/.well-known/agent-card.json`));
    const rpc = withAbortSignal(callA.signal, async () => fetch(`${base}/a2a`, { method: 'POST', body: '{}' }));
    await sleep(100);
    callA.abort(new Error('operation A canceled'));
    await expect(rpc).rejects.toThrow(); // A's own request ends with A
    const response = await card; // the shared card fetch does not
    expect(response.status).toBe(200);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

/** A stateful MCP seller (one session per connection) that counts `initialize`s and can forget its sessions. */
async function startStatefulSeller(): Promise<{
  url: string;
  initializes: () => number;
  forgetSessions: () => void;
  close: () => Promise<void>;
}> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  let initializes = 0;
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    const sessionId = req.headers['mcp-session-id'];
    let transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (!transport) {
      if (typeof sessionId === 'string' || body?.method !== 'initialize') {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
        return;
      }
      initializes += 1;
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: true,
        onsessioninitialized: (id) => void sessions.set(id, created),
      });
      const mcp = new McpServer({ name: 'stateful-seller', version: '1.0.0' });
      mcp.registerTool('get_products', { inputSchema: { brief: z.string().optional() } }, async () => {
        const answer = { status: 'completed', products: [{ product_id: 'p1' }] };
        return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer };
      });
      await mcp.connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    initializes: () => initializes,
    forgetSessions: () => sessions.clear(),
    close: async () => {
      closeIdleMcpConnections();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test('a connection that served a call is reused by the next call; one whose call was aborted is never reused', async () => {
  const seller = await startStatefulSeller();
  const client = createSdkSellerClient();
  const agent = { id: 'stateful', url: seller.url, protocol: 'mcp' as const };
  const call = (signal: AbortSignal) =>
    client.callTask({ agent, token: 'reuse-token', signal, task: 'get_products', args: {} });
  try {
    await call(AbortSignal.timeout(10_000));
    await call(AbortSignal.timeout(10_000));
    expect(seller.initializes()).toBe(1); // the second call took the first one's connection over

    const aborted = new AbortController();
    const pending = call(aborted.signal);
    aborted.abort(new Error('canceled'));
    await expect(pending).rejects.toBeDefined();
    await call(AbortSignal.timeout(10_000));
    expect(seller.initializes()).toBe(2); // the aborted call's connection was closed, not handed on
  } finally {
    await seller.close();
  }
});

test('a wave of concurrent calls leaves its connections to the next wave: no new session per call', async () => {
  const seller = await startStatefulSeller();
  const client = createSdkSellerClient();
  const agent = { id: 'stateful', url: seller.url, protocol: 'mcp' as const };
  const wave = () =>
    Promise.all(
      Array.from({ length: 50 }, () =>
        client.callTask({
          agent,
          token: 'wave-token',
          signal: AbortSignal.timeout(20_000),
          task: 'get_products',
          args: {},
        }),
      ),
    );
  try {
    await wave();
    expect(seller.initializes()).toBe(50); // 50 calls at once: 50 connections
    const answers = await wave();
    expect(answers.every((answer) => answer.snapshot.status === 'completed')).toBe(true);
    expect(seller.initializes()).toBe(50); // the second wave took all 50 over (50 <= MAX_IDLE_PER_SELLER)
  } finally {
    await seller.close();
  }
});

test('a pooled connection whose session the seller forgot is replaced transparently: the call succeeds', async () => {
  const seller = await startStatefulSeller();
  const client = createSdkSellerClient();
  const agent = { id: 'stateful', url: seller.url, protocol: 'mcp' as const };
  const call = () =>
    client.callTask({
      agent,
      token: 'stale-token',
      signal: AbortSignal.timeout(10_000),
      task: 'get_products',
      args: {},
    });
  try {
    await call();
    seller.forgetSessions(); // a seller restart
    const answer = await call();
    expect(answer.snapshot.status).toBe('completed');
    expect(seller.initializes()).toBe(2);
  } finally {
    await seller.close();
  }
});
