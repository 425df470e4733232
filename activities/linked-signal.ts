/**
 * `AbortSignal.any` and `AbortSignal.timeout` without their cost on Node 20: a signal made by `AbortSignal.any` that
 * has an abort listener (fetch, the MCP SDK and Temporal's `sleep` all add one) is kept in a process-wide set for
 * ever, aborted or not, and with it everything its listeners close over (an activity's context, its logger, its
 * call): 400 parked operations kept 2,528 activity contexts that way (bench/results/2026-11-30-run-F.md). These
 * signals are plain AbortController signals, so they live as long as whoever references them.
 */
import { setMaxListeners } from 'node:events';

export interface LinkedSignal {
  /** Aborts when any source does, with that source's reason. */
  signal: AbortSignal;
  /** Removes the listeners on the sources; the signal then follows none of them. */
  dispose(): void;
}

/**
 * A signal that aborts when any of `sources` does. Its listeners stay on the sources until one aborts or `dispose()`
 * runs: dispose it when a source outlives the work (a pooled connection's signal), or it keeps the link alive.
 */
export function linkSignals(sources: readonly AbortSignal[]): LinkedSignal {
  const controller = new AbortController();
  const already = sources.find((source) => source.aborted);
  if (already) {
    controller.abort(already.reason);
    return { signal: controller.signal, dispose: () => undefined };
  }
  const dispose = () => {
    for (const source of sources) source.removeEventListener('abort', onAbort);
  };
  const onAbort = (event: Event) => {
    dispose();
    controller.abort((event.target as AbortSignal).reason);
  };
  for (const source of sources) {
    // A long call makes many requests, each linked to the call's signal until the call ends: not a leak.
    setMaxListeners(0, source);
    source.addEventListener('abort', onAbort);
  }
  return { signal: controller.signal, dispose };
}

/** `linkSignals(sources).signal`, for sources that live no longer than the work. */
export function anySignal(sources: readonly AbortSignal[]): AbortSignal {
  return linkSignals(sources).signal;
}

export interface DeadlineSignal {
  /** Aborts when `source` does, or with a `TimeoutError` DOMException (as `AbortSignal.timeout`) at the deadline. */
  signal: AbortSignal;
  /** Clears the timer and the listener on `source`; call it when the work ends. */
  dispose(): void;
}

/** `AbortSignal.any([source, AbortSignal.timeout(timeoutMs)])`, disposable. */
export function deadlineSignal(source: AbortSignal, timeoutMs: number): DeadlineSignal {
  const controller = new AbortController();
  const onAbort = () => controller.abort(source.reason);
  const timer = setTimeout(
    () => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
    timeoutMs,
  );
  timer.unref();
  if (source.aborted) controller.abort(source.reason);
  else source.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    dispose() {
      clearTimeout(timer);
      source.removeEventListener('abort', onAbort);
    },
  };
}
