/**
 * One protocol call to a seller as the operation's activities make it: with the (tenant, seller) credential, through
 * the seller's circuit breaker, bounded by the activity's cancellation and a hard timeout, heartbeating, and with
 * whatever goes wrong turned into an ApplicationFailure whose type and retryability fit the error.
 */
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { type SellerRegistry, ConfigError } from '../config/sellers';
import { type AdcpError, ProtocolViolation } from '../protocol';
import { type CircuitBreakerRegistry, type CircuitTransition, countsAsCircuitFailure } from './circuit-breaker';
import { configFailure, failureFor } from './failures';
import { boundAttempt } from './heartbeat';
import { raceSignal } from './mcp-connection';
import { sellerAccess } from './seller-access';
import type { CallContext } from './seller-client';
import { type RetryBackoffPolicy, classifyTransportFailure, retryDelayMs } from './transport-errors';

export interface GuardedCallDependencies {
  sellers: SellerRegistry;
  env: NodeJS.ProcessEnv;
  /** Per-seller circuit breakers, one registry per worker process. */
  breakers: CircuitBreakerRegistry;
  now: () => number;
  random: () => number;
  /** How a failed call's retries back off when the seller names no retry_after (ActivityDependencies.retryBackoff). */
  backoff: RetryBackoffPolicy;
}

/**
 * Runs one call with the activity's cancellation and a HARD timeout: the request is aborted through the call's own
 * signal, and the attempt ends at `timeoutMs` even if a library under it ignores the signal. Heartbeats meanwhile.
 * `tenant` is the operation's: its own credential for this seller is resolved here, never carried in inputs.
 */
export type GuardedCall = <T>(
  sellerId: string,
  timeoutMs: number,
  work: (context: CallContext) => Promise<T>,
  tenant?: string,
) => Promise<T>;

export function createGuardedCall(deps: GuardedCallDependencies): GuardedCall {
  return async (sellerId, timeoutMs, work, tenant) => {
    const context = Context.current();
    const { agent, token } = sellerAccess(deps.sellers, sellerId, deps.env, tenant);
    const breaker = deps.breakers.for(sellerId);
    const permission = breaker.beforeCall();
    if (!permission.allowed) {
      const error: AdcpError = {
        code: 'SERVICE_UNAVAILABLE',
        message: `Calls to seller "${sellerId}" are paused after repeated failures; the next try is in ${Math.ceil(permission.retryAfterMs / 1000)} s.`,
        recovery: 'transient',
        retryAfterSeconds: permission.retryAfterMs / 1000,
        // The seller was not asked: the operation may call again with the same key once the breaker lets it.
        details: { origin: 'circuit-open' },
      };
      throw ApplicationFailure.create({
        type: 'CircuitOpen',
        message: error.message,
        details: [error],
        nextRetryDelay: permission.retryAfterMs,
      });
    }
    const bounds = boundAttempt(timeoutMs, context);
    const { signal } = bounds;
    try {
      const result = await raceSignal(signal, () => work({ agent, token, signal, timeoutMs }));
      breaker.recordSuccess();
      return result;
    } catch (error) {
      if (error instanceof ApplicationFailure) {
        // The seller answered, but with an error: only errors about its own health count against it.
        const detail = error.details?.[0] as AdcpError | undefined;
        if (detail && countsAsCircuitFailure(detail)) breaker.recordFailure();
        else breaker.recordSuccess();
        throw afterEarlierAttempts(error, context.info.attempt);
      }
      if (error instanceof ConfigError) throw configFailure(error.message);
      if (error instanceof ProtocolViolation) {
        breaker.recordSuccess(); // it answered; the answer is the problem
        const adcpError: AdcpError = {
          code: 'PROTOCOL_VIOLATION',
          message: error.message,
          recovery: 'terminal',
          ...earlierAttemptsOf(context.info.attempt),
        };
        throw ApplicationFailure.create({
          type: 'ProtocolViolation',
          message: error.message,
          nonRetryable: true,
          details: [adcpError],
        });
      }
      if (context.cancellationSignal.aborted) throw error; // the activity was cancelled: let the SDK report it
      const classified = classifyTransportFailure(error, deps.now());
      context.metricMeter
        .createCounter('adcp_seller_call_failures', 'failures', 'Failed protocol calls to sellers, by error code')
        .add(1, { seller: sellerId, code: classified.code, recovery: classified.recovery });
      if (countsAsCircuitFailure(classified)) breaker.recordFailure();
      else breaker.recordSuccess();
      throw failureFor(
        classified.recovery === 'transient'
          ? classified
          : { ...classified, ...earlierAttemptsOf(context.info.attempt) },
        'TransportError',
        retryDelayMs(classified, context.info.attempt, deps.backoff, deps.random),
      );
    } finally {
      bounds.end();
    }
  };
}

export function earlierAttemptsOf(attempt: number): { earlierAttempts?: number } {
  return attempt > 1 ? { earlierAttempts: attempt - 1 } : {};
}

/**
 * A failure that ends the call (no retry follows) after earlier attempts names how many came before it: they failed
 * in ways that are retried, so the seller may have acted on one of them, and the operation must look before it
 * says nothing was made (a seller that made a buy, lost our answer, and refuses the same create again as a duplicate).
 */
export function afterEarlierAttempts(failure: ApplicationFailure, attempt: number): ApplicationFailure {
  const [detail, ...rest] = failure.details ?? [];
  const error = detail as AdcpError | undefined;
  if (attempt <= 1 || !error || typeof error.code !== 'string' || error.recovery === 'transient') return failure;
  return ApplicationFailure.create({
    type: failure.type ?? undefined,
    message: failure.message,
    nonRetryable: failure.nonRetryable ?? undefined,
    details: [{ ...error, earlierAttempts: attempt - 1 }, ...rest],
    ...(failure.cause ? { cause: failure.cause } : {}),
  });
}

/** Breaker transitions go to the worker's log (and, through it, to whatever collects the worker's logs). */
export function logCircuitTransition(sellerId: string, transition: CircuitTransition): void {
  Context.current()
    .metricMeter.createCounter(
      'adcp_seller_circuit_transitions',
      'transitions',
      'Per-seller circuit breaker state changes',
    )
    .add(1, { seller: sellerId, from: transition.from, to: transition.to });
  const fields = {
    sellerId,
    from: transition.from,
    to: transition.to,
    reason: transition.reason,
    at: new Date(transition.at).toISOString(),
  };
  if (transition.to === 'open') log.warn('Seller circuit opened: calls fail fast until the cool-off ends', fields);
  else log.info(`Seller circuit ${transition.to}`, fields);
}
