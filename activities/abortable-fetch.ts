import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * @adcp/sdk 6.11 takes no AbortSignal: its MCP and A2A transports call the global `fetch` at request time.
 * We install one wrapper around the global fetch that adds the signal of the call currently running in this
 * async context, so a cancelled activity or an expired call timeout really aborts the HTTP request.
 * Calls made outside `withAbortSignal` are untouched.
 */
const currentSignal = new AsyncLocalStorage<AbortSignal>();
let installed = false;

export function installAbortableFetch(): void {
  if (installed) return;
  installed = true;
  const original = globalThis.fetch;
  globalThis.fetch = function abortableFetch(input: Parameters<typeof fetch>[0], init?: RequestInit) {
    const signal = currentSignal.getStore();
    if (!signal) return original(input, init);
    const combined = init?.signal ? AbortSignal.any([init.signal, signal]) : signal;
    return original(input, { ...init, signal: combined });
  } as typeof fetch;
}

/** Runs `work` so that every fetch it makes is aborted when `signal` fires. */
export function withAbortSignal<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  installAbortableFetch();
  return currentSignal.run(signal, work);
}
