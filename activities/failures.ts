/**
 * How an error becomes an activity failure: `type` names what went wrong, `nonRetryable` says that no retry can fix
 * it, and `nextRetryDelay` honours a seller's `retry_after` (or backs off when it named no time).
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { AdcpError } from '../protocol';
import { type RetryBackoffPolicy, retryDelayMs } from './transport-errors';

/** An unknown seller, a missing credential, a tenant without access: the configuration must change first. */
export function configFailure(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: 'ConfigError', message, nonRetryable: true });
}

/** `error` as a failure of `type`: for good unless the error is transient, then retried after `nextRetryDelayMs`. */
export function failureFor(error: AdcpError, type: string, nextRetryDelayMs?: number): ApplicationFailure {
  const message = `${error.code}: ${error.message}`;
  if (error.recovery !== 'transient') {
    return ApplicationFailure.create({ type, message, nonRetryable: true, details: [error] });
  }
  return ApplicationFailure.create({
    type,
    message,
    details: [error],
    ...(nextRetryDelayMs !== undefined ? { nextRetryDelay: nextRetryDelayMs } : {}),
  });
}

/**
 * The seller refused for now (rate limit, overload, a key still in flight): retried as late as it asked, or on the
 * worker's backoff when it named no time.
 */
export function sellerTransientFailure(
  error: AdcpError,
  random: () => number,
  backoff: RetryBackoffPolicy,
): ApplicationFailure {
  return failureFor(
    error,
    'SellerTransientError',
    retryDelayMs(error, Context.current().info.attempt, backoff, random),
  );
}
