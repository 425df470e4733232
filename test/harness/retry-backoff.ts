/**
 * How failed seller calls back off in tests: 50 ms doubling to 1 s instead of the worker's 1 s to 60 s, so the many
 * tests that make a seller fail on purpose wait fractions of a second per retry, not seconds. The retries, their
 * count, their keys and their order are the same; only the wait between them is shorter. A seller's retry_after (and
 * the 60 s of RATE_LIMITED without one) still wins. In-process workers get it as an activity dependency, worker
 * processes (and anything else a test starts) as the environment the worker reads (config/runtime.ts).
 */
import { DEFAULT_RETRY_BACKOFF, type RetryBackoffPolicy } from '../../activities/transport-errors';

export const TEST_RETRY_BACKOFF: Readonly<RetryBackoffPolicy> = {
  ...DEFAULT_RETRY_BACKOFF,
  initialMs: 50,
  maxMs: 1_000,
};

/** The same, as the worker's environment variables. */
export const TEST_RETRY_ENVIRONMENT: Readonly<Record<string, string>> = {
  ADCP_RETRY_INITIAL_INTERVAL_MS: String(TEST_RETRY_BACKOFF.initialMs),
  ADCP_RETRY_MAX_INTERVAL_MS: String(TEST_RETRY_BACKOFF.maxMs),
};
