/**
 * How long one seller call and one read may take. The workflow records them with the call plan, so a worker started
 * with other settings does not change the bounds of an operation already running.
 */
import type { CallTimeouts } from '../contract/activities';

export const DEFAULT_CALL_TIMEOUT_MS = 60_000;
/** A read (tasks/get and its fallbacks) is a small query: it gets the call timeout, but never more than this. */
export const MAX_READ_TIMEOUT_MS = 120_000;

/** The timeouts a worker plans calls with: reads are bounded by the call timeout and by MAX_READ_TIMEOUT_MS. */
export function callTimeouts(callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, readTimeoutMs?: number): CallTimeouts {
  return { callMs: callTimeoutMs, readMs: readTimeoutMs ?? Math.min(callTimeoutMs, MAX_READ_TIMEOUT_MS) };
}
