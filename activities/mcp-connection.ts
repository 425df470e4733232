/**
 * MCP connections that belong to one call at a time.
 *
 * @adcp/sdk 6.11 shares one cached MCP Client per (agent URL, token) across every call of the process, closes it on
 * any error (failing every other call in flight on it) and evicts it LRU while it may be in use; with an
 * AsyncLocalStorage abort signal, one call's cancellation could reach the shared connection too. Observed: cancelling
 * operation C failed operation D's call at the same seller at once ("CancelledFailure: NOT_FOUND").
 *
 * Here a call leases a connection (our own Client over our own StreamableHTTPClientTransport) for itself alone: every
 * request on it carries that call's AbortSignal and timeout, bound explicitly (no AsyncLocalStorage). A connection that
 * served a call without error goes back to a small idle pool (at most MAX_IDLE_PER_SELLER per seller and token, for
 * IDLE_TTL_MS) and the next call takes it over, which saves the `initialize` round trips; one that saw any error, an
 * abort or a timeout, or whose MCP task stream was cut at its answer window, is closed, never reused. Nothing one
 * call does reaches a connection another call is using.
 * A seller that refuses Streamable HTTP is reached over legacy HTTP+SSE, on a connection of the call's own that is
 * never pooled; the refusal is remembered for a while (activities/mcp-transport-memory.ts), so the next calls skip
 * the refused POST.
 */
import { createHash } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { asRecord } from '../protocol/records';
import { linkSignals } from './linked-signal';
import { SseOnlySellers } from './mcp-transport-memory';

export interface McpCallTarget {
  url: string;
  token?: string;
  /** The call's own signal: cancellation of the activity, or its hard timeout. */
  signal: AbortSignal;
  /** Upper bound for each MCP request of the call (the MCP SDK's own default is 60 s). */
  requestTimeoutMs: number;
  /**
   * Told the id of an MCP task that a task-augmented call of this call created and stopped waiting on before its
   * result (the answer window passed, or the MCP SDK's own timeout): the call's `working` answer names that task.
   */
  onMcpTaskUnfinished?: (taskId: string) => void;
}

/**
 * Idle connections kept per (seller URL, token), and for how long. The cap bounds churn, not use: a worker that runs
 * N calls at once to a seller reuses N connections only if N fit here. Each one past the cap is closed after its call
 * (a DELETE) and the next wave opens a new one (initialize, initialized): three more requests for one call, on both
 * sides. Measured at 8 (B1, 50 concurrent reads: bench/results/2026-11-30-run-I.md): 42 of every 50 calls did that,
 * and a read cost the worker 21.1 ms CPU and the seller's process 8.7 ms, against 18.9 and 5.9 ms at 64. An idle
 * connection holds a few KiB here and one session at the seller, for at most IDLE_TTL_MS.
 */
export const MAX_IDLE_PER_SELLER = 64;
export const IDLE_TTL_MS = 30_000;

/** The headers @adcp/sdk sends (createMCPAuthHeaders): sellers accept either. */
export function mcpAuthHeaders(token: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { Accept: 'application/json, text/event-stream' };
  if (token) {
    headers.Authorization = `Bearer ${token}`;
    headers['x-adcp-auth'] = token;
  }
  return headers;
}

/** Which call a connection works for right now: its requests carry this signal and timeout. */
interface Binding {
  signal: AbortSignal;
  timeoutMs: number;
  /**
   * When a task-augmented call of this binding stops waiting for its MCP task (epoch ms): the answer window counted
   * from the call's start, so connecting and creating the task on a loaded machine spend the window, not the bound.
   */
  answerBy: number;
  /** Told the id of each MCP task this binding's calls stop waiting on before its result (McpCallTarget). */
  onMcpTaskUnfinished?: (taskId: string) => void;
  /** Links between the call's signal and the transport's own, undone when the call releases the connection. */
  links: Array<() => void>;
}

interface Connection {
  key: string;
  url: URL;
  headers: Record<string, string>;
  client: Client;
  /** Absent for a legacy SSE connection, which is never pooled. */
  transport?: StreamableHTTPClientTransport;
  binding: Binding;
  idleSince: number;
  /** A task-augmented call's stream was cut at its answer window: a request of it may still be in flight here. */
  streamCut?: boolean;
}

/** While idle, a connection's requests (none are expected) carry a signal that never fires. */
const IDLE_BINDING: Binding = { signal: new AbortController().signal, timeoutMs: 60_000, answerBy: 0, links: [] };

/** The binding of a call that starts now. */
function bindingOf(target: McpCallTarget): Binding {
  return {
    signal: target.signal,
    timeoutMs: target.requestTimeoutMs,
    answerBy: Date.now() + mcpTaskAnswerWindowMs(target.requestTimeoutMs),
    ...(target.onMcpTaskUnfinished ? { onMcpTaskUnfinished: target.onMcpTaskUnfinished } : {}),
    links: [],
  };
}

/** The request's own signal (the MCP SDK's, which lives as long as the transport) and the call's, both. */
function callSignal(binding: Binding, own: AbortSignal | undefined | null): AbortSignal {
  if (!own || own === binding.signal) return binding.signal;
  if (binding === IDLE_BINDING) return own;
  const link = linkSignals([own, binding.signal]);
  binding.links.push(link.dispose);
  return link.signal;
}

function headerOf(init: RequestInit | undefined, name: string): string | null {
  return new Headers(init?.headers).get(name);
}

/**
 * A transport's fetch, reading the binding at request time. For Streamable HTTP, the standalone GET event stream the
 * transport opens after `initialize` (server-initiated messages, which the orchestrator never uses) is answered 405
 * locally, which the transport reads as "not offered": no stream outlives a call, and none reconnects for ever
 * (resumption GETs, with a Last-Event-ID, still go out). The legacy HTTP+SSE transport gets its own fetch, which
 * sends every request: its first request is itself an event-stream GET, the one that carries every answer, and a
 * local 405 there made HTTP+SSE-only sellers unreachable ("SSE error: Non-200 status code (405)").
 */
function boundFetch(binding: () => Binding, transport: 'streamable-http' | 'sse'): typeof fetch {
  return (input, init) => {
    if (
      transport === 'streamable-http' &&
      (init?.method ?? 'GET').toUpperCase() === 'GET' &&
      !headerOf(init, 'last-event-id')
    ) {
      const accept = headerOf(init, 'accept') ?? '';
      if (accept.includes('text/event-stream')) {
        return Promise.resolve(new Response(null, { status: 405, statusText: 'No standalone event stream needed' }));
      }
    }
    return fetch(input, { ...init, signal: callSignal(binding(), init?.signal) });
  };
}

function newClient(binding: () => Binding, onStreamCut: () => void): Client {
  const client = new Client({ name: 'adcp-orchestrator', version: '1.0.0' });
  // Every request of this client carries the call's signal and timeout, including those @adcp/sdk makes on it.
  const request = client.request.bind(client);
  client.request = ((
    req: Parameters<Client['request']>[0],
    schema: Parameters<Client['request']>[1],
    options?: Parameters<Client['request']>[2],
  ) => {
    const current = binding();
    return request(req, schema, {
      timeout: current.timeoutMs,
      ...options,
      signal: callSignal(current, options?.signal),
    });
  }) as Client['request'];
  // @adcp/sdk reads a task-augmented call (a seller with MCP Tasks) through this stream, which polls MCP tasks/get
  // until the task ends, however long that is: bounded here by the answer window, after which @adcp/sdk answers
  // `working` with the MCP task id ("Stream ended without result") and the operation reads that task durably.
  // The id of an MCP task the stream leaves unfinished goes to the call: its answer names MCP's task for certain.
  const tasks = client.experimental.tasks;
  const callToolStream = tasks.callToolStream.bind(tasks);
  tasks.callToolStream = ((
    params: Parameters<typeof callToolStream>[0],
    resultSchema?: Parameters<typeof callToolStream>[1],
    options?: Parameters<typeof callToolStream>[2],
  ) => {
    const current = binding();
    return withinAnswerWindow(
      (signal) => callToolStream(params, resultSchema, { ...options, signal }),
      options?.signal,
      current.answerBy,
      onStreamCut,
      current.onMcpTaskUnfinished,
    );
  }) as typeof tasks.callToolStream;
  return client;
}

/**
 * The most a task-augmented call waits for its MCP task to end before it comes back `working` with the task id.
 * Waiting longer buys nothing: the operation's reads, webhooks and reconciliation follow a task id it holds in its
 * history, whereas one held only in the call's memory is lost with the attempt (a worker restart, the call's bound).
 */
export const MAX_MCP_TASK_ANSWER_WINDOW_MS = 20_000;

/**
 * A task-augmented call's answer window: half its per-request timeout (the call's bound), so the task's creation
 * before it and the answer after it fit well inside that bound, and never more than MAX_MCP_TASK_ANSWER_WINDOW_MS.
 * A task that ends within it is answered as before; one still pending after it is the operation's to track.
 */
export function mcpTaskAnswerWindowMs(requestTimeoutMs: number): number {
  return Math.max(0, Math.min(Math.floor(requestTimeoutMs / 2), MAX_MCP_TASK_ANSWER_WINDOW_MS));
}

const WINDOW_PASSED = Symbol('answer window passed');

/**
 * `open`'s messages until the answer window has passed (`deadline`, epoch ms) with the task created; then
 * the stream ends after its `taskCreated`, without a result. The inner stream is told to stop (its signal aborts the
 * request in flight and its next poll), and `onCut` marks the connection as not to be pooled. `onUnfinished` is told
 * the MCP task's id when the stream ends after its `taskCreated` without its result (cut here, or an error such as
 * the MCP SDK's own timeout, on which @adcp/sdk answers `working` with that id too).
 */
async function* withinAnswerWindow<M extends { type: string }>(
  open: (signal: AbortSignal) => AsyncGenerator<M, void, void>,
  callerSignal: AbortSignal | undefined,
  deadline: number,
  onCut: () => void,
  onUnfinished?: (taskId: string) => void,
): AsyncGenerator<M, void, void> {
  const stop = new AbortController();
  const link = callerSignal ? linkSignals([callerSignal, stop.signal]) : undefined;
  const stream = open(link?.signal ?? stop.signal);
  let created = false;
  /** The MCP task the stream created, and whether its result came: one without a result is left to the operation. */
  let mcpTaskId: string | undefined;
  let resulted = false;
  try {
    for (;;) {
      const next = stream.next();
      const step = created ? await beforeDeadline(next, deadline) : await next;
      if (step === WINDOW_PASSED) break;
      if (step.done) return;
      if (step.value.type === 'taskCreated') {
        created = true;
        mcpTaskId = createdTaskId(step.value);
      }
      if (step.value.type === 'result') resulted = true;
      yield step.value;
      if (created && Date.now() >= deadline) break;
    }
    onCut();
    stop.abort(new Error('The MCP task answer window passed: the operation reads the task from here.'));
  } finally {
    if (mcpTaskId !== undefined && !resulted) onUnfinished?.(mcpTaskId);
    // Ends the inner stream: at once where it waits at a yield, else once the poll in flight (aborted) settles.
    void stream.return(undefined).catch(() => undefined);
    link?.dispose();
  }
}

/** The MCP task id a `taskCreated` message carries (`{ type: 'taskCreated', task: { taskId } }`). */
function createdTaskId(message: { type: string }): string | undefined {
  const taskId = asRecord(asRecord(message)?.task)?.taskId;
  return typeof taskId === 'string' && taskId !== '' ? taskId : undefined;
}

/** `next`, or WINDOW_PASSED once `deadline` (epoch ms) is reached first. */
function beforeDeadline<T>(next: Promise<T>, deadline: number): Promise<T | typeof WINDOW_PASSED> {
  const remaining = deadline - Date.now();
  if (remaining <= 0) {
    next.catch(() => undefined);
    return Promise.resolve(WINDOW_PASSED);
  }
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<typeof WINDOW_PASSED>((resolve) => {
    timer = setTimeout(() => resolve(WINDOW_PASSED), remaining);
  });
  return Promise.race([next, passed]).finally(() => clearTimeout(timer));
}

/** Legacy HTTP+SSE servers refuse the Streamable HTTP POST with 404/405: only then try SSE. */
function wantsSseFallback(error: unknown): boolean {
  return error instanceof StreamableHTTPError && (error.code === 404 || error.code === 405);
}

/** A pooled connection whose session the server no longer knows: nothing was processed, a fresh one may retry. */
function staleSession(error: unknown): boolean {
  return error instanceof StreamableHTTPError && error.code === 404;
}

function keyOf(target: McpCallTarget): string {
  const token = target.token ? createHash('sha256').update(target.token).digest('hex').slice(0, 32) : '';
  return `${target.url}\u0000${token}`;
}

const idle = new Map<string, Connection[]>();
/** Sellers (URL and token, as the pool) that refused Streamable HTTP lately: see activities/mcp-transport-memory.ts. */
export const sseOnlySellers = new SseOnlySellers();
let sweeper: NodeJS.Timeout | undefined;

async function open(target: McpCallTarget, key: string, sseOnly: SseOnlySellers): Promise<Connection> {
  const url = new URL(target.url);
  const requestInit = { headers: mcpAuthHeaders(target.token) };
  const connection = {
    key,
    url,
    headers: requestInit.headers,
    binding: bindingOf(target),
    idleSince: 0,
  } as Connection;
  const binding = () => connection.binding;
  let sseFailure: { error: unknown } | undefined;
  if (sseOnly.has(key)) {
    // This seller refused Streamable HTTP a moment ago: no refused POST, straight to its SSE stream.
    try {
      await connectSse(connection, target, requestInit);
      return connection;
    } catch (error) {
      sseOnly.forget(key);
      if (target.signal.aborted) throw error;
      // It may have moved to Streamable HTTP (and dropped SSE): this call probes it before giving up.
      sseFailure = { error };
    }
  }
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit,
    fetch: boundFetch(binding, 'streamable-http'),
  });
  connection.client = newClient(binding, () => (connection.streamCut = true));
  try {
    await connection.client.connect(transport);
    connection.transport = transport;
    return connection;
  } catch (error) {
    await connection.client.close().catch(() => undefined);
    if (!wantsSseFallback(error) || target.signal.aborted) throw error;
    // Refused again, and SSE failed just now: one SSE attempt per call is enough.
    if (sseFailure) throw sseFailure.error;
  }
  await connectSse(connection, target, requestInit);
  sseOnly.remember(key);
  return connection;
}

/** Connects `connection` over the legacy HTTP+SSE transport; on failure nothing of it is left open. */
async function connectSse(
  connection: Connection,
  target: McpCallTarget,
  requestInit: { headers: Record<string, string> },
): Promise<void> {
  const binding = () => connection.binding;
  connection.client = newClient(binding, () => (connection.streamCut = true));
  const sseFetch = boundFetch(binding, 'sse');
  const sse = new SSEClientTransport(connection.url, {
    requestInit,
    eventSourceInit: { fetch: sseFetch },
    fetch: sseFetch,
  });
  try {
    // Raced: the EventSource swallows an AbortError from its fetch (no error event), which would leave connect pending.
    await raceSignal(target.signal, () => connection.client.connect(sse));
  } catch (error) {
    // A failed connect leaves the EventSource reconnecting every few seconds for ever unless it is closed.
    await connection.client.close().catch(() => undefined);
    throw error;
  }
  // Closed when the call ends (never pooled), so its EventSource never outlives the call.
}

function close(connection: Connection): void {
  const sessionId = connection.transport?.sessionId;
  const protocolVersion = connection.transport?.protocolVersion;
  void connection.client.close().catch(() => undefined);
  // Stateful servers keep a session per connection: end ours (best effort, awaited by no call).
  if (sessionId) {
    const headers: Record<string, string> = {
      ...connection.headers,
      'mcp-session-id': sessionId,
      ...(protocolVersion ? { 'mcp-protocol-version': protocolVersion } : {}),
    };
    // A lone timeout signal is let go when it fires (only composites of AbortSignal.any are kept for ever).
    // eslint-disable-next-line no-restricted-properties
    void fetch(connection.url, { method: 'DELETE', headers, signal: AbortSignal.timeout(5_000) })
      .then((response) => response.body?.cancel())
      .catch(() => undefined);
  }
}

function sweep(now = Date.now()): void {
  for (const [key, connections] of idle) {
    const fresh = connections.filter((connection) => {
      if (now - connection.idleSince < IDLE_TTL_MS) return true;
      close(connection);
      return false;
    });
    if (fresh.length > 0) idle.set(key, fresh);
    else idle.delete(key);
  }
  if (idle.size === 0 && sweeper) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

/** An idle connection of this seller and token, taken out of the pool: from now on it is this call's alone. */
function take(key: string): Connection | undefined {
  sweep();
  const connection = idle.get(key)?.pop();
  if (idle.get(key)?.length === 0) idle.delete(key);
  return connection;
}

function giveBack(connection: Connection): void {
  for (const unlink of connection.binding.links) unlink();
  connection.binding = IDLE_BINDING;
  connection.idleSince = Date.now();
  const connections = idle.get(connection.key) ?? [];
  if (connections.length >= MAX_IDLE_PER_SELLER) {
    close(connection);
    return;
  }
  connections.push(connection);
  idle.set(connection.key, connections);
  sweeper ??= setInterval(() => sweep(), IDLE_TTL_MS).unref();
}

/** Closes every idle connection (worker shutdown, tests). Connections in use close when their call ends. */
export function closeIdleMcpConnections(): void {
  for (const connections of idle.values()) for (const connection of connections) close(connection);
  idle.clear();
  if (sweeper) clearInterval(sweeper);
  sweeper = undefined;
}

/**
 * Runs `work` on a connection leased to this call alone, bound to its signal and timeout. The connection goes back
 * to the pool only when the call succeeded and was neither aborted nor timed out; otherwise it is closed. `sseOnly`
 * remembers sellers that refused Streamable HTTP (the process-wide memory unless a test passes its own clock).
 */
export async function withMcpConnection<T>(
  target: McpCallTarget,
  work: (client: Client) => Promise<T>,
  sseOnly: SseOnlySellers = sseOnlySellers,
): Promise<T> {
  target.signal.throwIfAborted();
  const key = keyOf(target);
  const pooled = take(key);
  if (pooled) {
    pooled.binding = bindingOf(target);
    try {
      const result = await work(pooled.client);
      release(pooled, target);
      return result;
    } catch (error) {
      close(pooled);
      if (!staleSession(error) || target.signal.aborted) throw error;
      // The server forgot the pooled session (restarted, expired): it processed nothing, so a fresh connection may try.
    }
  }
  const connection = await open(target, key, sseOnly);
  try {
    const result = await work(connection.client);
    release(connection, target);
    return result;
  } catch (error) {
    close(connection);
    throw error;
  }
}

function release(connection: Connection, target: McpCallTarget): void {
  if (connection.transport && !target.signal.aborted && !connection.streamCut) giveBack(connection);
  else close(connection);
}

/**
 * Races `work` against the call's signal: the attempt ends when the signal fires, even if a library under it does
 * not honour the signal. The abort reason is thrown (a TimeoutError for a timeout, the cancellation otherwise).
 */
export function raceSignal<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work().then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
