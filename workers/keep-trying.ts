/**
 * Start-up chores the worker does beside polling (ensuring the sellers' capabilities workflows): tried until they
 * succeed or the worker stops, with a growing pause between attempts and each failure logged. A slow or absent
 * Temporal or seller delays only the chore, never the polling.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { errorFields } from '../observability/logger';

export interface KeepTryingOptions {
  /** What the chore is, for the log lines. */
  what: string;
  /** The worker's pino logger (only `warn` is used). */
  logger: { warn(fields: object, message: string): void };
  /** Aborted when the worker stops: no further attempt is made. */
  signal: AbortSignal;
  /** Pause after the first failure (default 1 s), doubled after each further one up to `maxDelayMs` (default 60 s). */
  initialDelayMs?: number;
  maxDelayMs?: number;
}

/** Resolves with the chore's result, or with undefined once `signal` is aborted; never rejects. */
export async function keepTrying<T>(attempt: () => Promise<T>, options: KeepTryingOptions): Promise<T | undefined> {
  const maxDelayMs = options.maxDelayMs ?? 60_000;
  let delayMs = options.initialDelayMs ?? 1_000;
  for (let attempts = 1; !options.signal.aborted; attempts++) {
    try {
      return await attempt();
    } catch (error) {
      if (options.signal.aborted) return undefined;
      options.logger.warn(
        { ...errorFields(error), attempts, retryInMs: delayMs },
        `${options.what} failed; trying again (the worker polls meanwhile)`,
      );
    }
    try {
      await sleep(delayMs, undefined, { signal: options.signal, ref: false });
    } catch {
      return undefined; // aborted while waiting
    }
    delayMs = Math.min(delayMs * 2, maxDelayMs);
  }
  return undefined;
}
