import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * @adcp/sdk 6.11 takes no AbortSignal: its MCP and A2A transports call the global `fetch` at request time.
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
}

const currentCall = new AsyncLocalStorage<CallScope>();
let installed = false;

function wantsEventStream(input: Parameters<typeof fetch>[0], init?: RequestInit): boolean {
  const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
  return (headers.get('accept') ?? '').includes('text/event-stream') && (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase() === 'GET';
}

export function installAbortableFetch(): void {
  if (installed) return;
  installed = true;
  const original = globalThis.fetch;
  globalThis.fetch = function abortableFetch(input: Parameters<typeof fetch>[0], init?: RequestInit) {
    const call = currentCall.getStore();
    if (!call) return original(input, init);
    if (call.ended && wantsEventStream(input, init)) {
      return Promise.resolve(new Response(null, { status: 204, statusText: 'No Content: the call that opened this stream has ended' }));
    }
    const combined = init?.signal ? AbortSignal.any([init.signal, call.signal]) : call.signal;
    return original(input, { ...init, signal: combined });
  } as typeof fetch;
}

/** Runs `work` so that every fetch it makes is aborted when `signal` fires, and its event streams end with it. */
export async function withAbortSignal<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  installAbortableFetch();
  const call: CallScope = { signal, ended: false };
  try {
    return await currentCall.run(call, work);
  } finally {
    call.ended = true;
  }
}
