import { AsyncLocalStorage } from 'node:async_hooks';
import { linkSignals } from './linked-signal';

/**
 * @adcp/sdk 6.11 takes no AbortSignal: its A2A transport calls the global `fetch` at request time. (MCP calls no
 * longer go through here: they run on a connection of their own, bound to the call's signal; mcp-connection.ts.)
 * We install one wrapper around the global fetch that adds the signal of the call currently running in this
 * async context, so a cancelled activity or an expired call timeout really aborts the HTTP request.
 * Calls made outside `withAbortSignal` are untouched.
 *
 * It also ends what a call leaves behind. When a seller cannot be reached, the MCP client falls back to an SSE
 * transport whose EventSource is never closed and reconnects for ever (found in tests: the process never exits, and a
 * worker would keep a reconnect loop per failed call). An EventSource stops for good when a (re)connect is answered
 * 204 No Content, so once the call is over, event-stream requests from its async context get exactly that, locally.
 */
interface CallScope {
  signal: AbortSignal;
  ended: boolean;
  /** Links between a request's own signal and the call's, undone when the call ends. */
  links: Array<() => void>;
  /** The A2A push notification config this call registers, put in place of the one @adcp/sdk builds. */
  a2aPushNotificationConfig?: Record<string, unknown>;
}

export interface CallScopeOptions {
  /**
   * @adcp/sdk 6.11 builds A2A's `configuration.pushNotificationConfig` itself and always adds a legacy HMAC
   * `authentication` block (with a placeholder secret when it has none). AdCP makes that block a switch: its presence
   * opts the seller out of RFC 9421 signatures. So the call's own config replaces the SDK's in the JSON-RPC body.
   */
  a2aPushNotificationConfig?: Record<string, unknown>;
}

/** A JSON-RPC message/send (or message/stream) body with the call's own push config, or undefined to leave it. */
function withOwnPushConfig(body: unknown, config: Record<string, unknown>): string | undefined {
  if (typeof body !== 'string') return undefined;
  let request: { method?: unknown; params?: { configuration?: Record<string, unknown> } };
  try {
    request = JSON.parse(body) as typeof request;
  } catch {
    return undefined;
  }
  if ((request.method !== 'message/send' && request.method !== 'message/stream') || !request.params) return undefined;
  request.params.configuration = { ...request.params.configuration, pushNotificationConfig: config };
  return JSON.stringify(request);
}

const currentCall = new AsyncLocalStorage<CallScope>();
/** Bound of an agent card fetch, which runs on no call's signal (see below). */
const AGENT_CARD_TIMEOUT_MS = 30_000;

/**
 * @adcp/sdk fetches an A2A seller's agent card once for every caller waiting on the same (URL, token): that fetch is
 * shared, so it must not carry the signal of whichever call happened to start it, or cancelling that call would fail
 * the others. It gets its own timeout instead. (Only the card: every later request is made by one call.)
 */
function isAgentCardRequest(input: Parameters<typeof fetch>[0]): boolean {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  return /\/\.well-known\/agent(-card)?\.json(\?|$)/.test(url);
}
let installed = false;

function wantsEventStream(input: Parameters<typeof fetch>[0], init?: RequestInit): boolean {
  const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
  return (
    (headers.get('accept') ?? '').includes('text/event-stream') &&
    (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase() === 'GET'
  );
}

export function installAbortableFetch(): void {
  if (installed) return;
  installed = true;
  const original = globalThis.fetch;
  globalThis.fetch = function abortableFetch(input: Parameters<typeof fetch>[0], init?: RequestInit) {
    const call = currentCall.getStore();
    if (!call) return original(input, init);
    if (call.ended && wantsEventStream(input, init)) {
      return Promise.resolve(
        new Response(null, { status: 204, statusText: 'No Content: the call that opened this stream has ended' }),
      );
    }
    // A lone timeout signal is let go when it fires (only composites of AbortSignal.any are kept for ever).
    // eslint-disable-next-line no-restricted-properties
    const own = isAgentCardRequest(input) ? AbortSignal.timeout(AGENT_CARD_TIMEOUT_MS) : call.signal;
    let combined = own;
    if (init?.signal && init.signal !== own) {
      const link = linkSignals([init.signal, own]);
      call.links.push(link.dispose);
      combined = link.signal;
    }
    const body = call.a2aPushNotificationConfig
      ? withOwnPushConfig(init?.body, call.a2aPushNotificationConfig)
      : undefined;
    return original(input, { ...init, signal: combined, ...(body !== undefined ? { body } : {}) });
  } as typeof fetch;
}

/** Runs `work` so that every fetch it makes is aborted when `signal` fires, and its event streams end with it. */
export async function withAbortSignal<T>(
  signal: AbortSignal,
  work: () => Promise<T>,
  options: CallScopeOptions = {},
): Promise<T> {
  installAbortableFetch();
  const call: CallScope = { signal, ended: false, links: [], ...options };
  try {
    return await currentCall.run(call, work);
  } finally {
    call.ended = true;
    for (const unlink of call.links) unlink();
  }
}
