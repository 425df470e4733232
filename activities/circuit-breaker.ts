/**
 * A per-seller circuit breaker (§4.4 "retry logic with circuit breakers"): after N consecutive failures
 * stop calling a seller for a cool-off, then let one trial call through. Pure: the clock is injected and
 * nothing is scheduled, so it runs in activities and tests alike and never holds a timer.
 *
 *   closed ──N consecutive failures──▶ open ──cool-off elapsed, next beforeCall──▶ half-open (one trial)
 *     ▲                                  ▲                                           │
 *     └────────── trial succeeds ────────┼───────────────────────────────────────────┤
 *                                        └──────────────── trial fails ──────────────┘
 *
 * What counts is the caller's decision. Record a failure only when the seller could not do its job:
 * transport failures and transient seller errors (countsAsCircuitFailure). Record a success for any answer
 * that proves the seller is up, including VALIDATION_ERROR or POLICY_VIOLATION: that is the seller working.
 */
import type { CircuitState } from '../contract/seller-capabilities';
import { type AdcpError, isAuthError, isTransportError } from '../protocol/errors';

export interface CircuitTransition {
  from: CircuitState;
  to: CircuitState;
  /** Epoch milliseconds, from the injected clock. */
  at: number;
  reason: string;
}

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit. Default 5. */
  failureThreshold?: number;
  /** How long the circuit stays open before a trial call is allowed. Default 60 s. */
  coolOffMs?: number;
  /**
   * How long the half-open trial may stay unanswered before another caller gets the trial. It covers a
   * trial whose caller died without reporting (a worker crash, a cancelled activity). Default coolOffMs.
   */
  trialTimeoutMs?: number;
  now: () => number;
  onTransition?: (transition: CircuitTransition) => void;
}

export type CallPermission = { allowed: true } | { allowed: false; retryAfterMs: number };

export interface CircuitBreakerSnapshot {
  state: CircuitState;
  consecutiveFailures: number;
  failureThreshold: number;
  coolOffMs: number;
  /** When the circuit last opened, while it is open or half-open. */
  openedAt?: number;
  /** When an open circuit will let the next trial through. */
  retryAt?: number;
  /** When the half-open trial was handed out, while it is in flight. */
  trialStartedAt?: number;
  lastFailureAt?: number;
  lastSuccessAt?: number;
}

export const DEFAULT_FAILURE_THRESHOLD = 5;
export const DEFAULT_COOL_OFF_MS = 60_000;
/** Callers turned away during a half-open trial look again this soon: the trial usually answers in seconds. */
export const HALF_OPEN_RECHECK_MS = 1_000;

function positive(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${what} must be a positive number, got ${value}.`);
  return value;
}

export class CircuitBreaker {
  private readonly failureThreshold: number;
  private readonly coolOffMs: number;
  private readonly trialTimeoutMs: number;
  private readonly now: () => number;
  private readonly onTransition?: (transition: CircuitTransition) => void;

  private current: CircuitState = 'closed';
  private consecutiveFailures = 0;
  private openedAt?: number;
  private trialStartedAt?: number;
  private lastFailureAt?: number;
  private lastSuccessAt?: number;

  constructor(options: CircuitBreakerOptions) {
    this.failureThreshold = Math.floor(
      positive(options.failureThreshold, DEFAULT_FAILURE_THRESHOLD, 'failureThreshold'),
    );
    this.coolOffMs = positive(options.coolOffMs, DEFAULT_COOL_OFF_MS, 'coolOffMs');
    this.trialTimeoutMs = positive(options.trialTimeoutMs, this.coolOffMs, 'trialTimeoutMs');
    this.now = options.now;
    this.onTransition = options.onTransition;
  }

  get state(): CircuitState {
    return this.current;
  }

  /** Ask before each call. A refused call should fail fast (retryable, with retryAfterMs as its delay). */
  beforeCall(): CallPermission {
    const now = this.now();
    if (this.current === 'closed') return { allowed: true };
    if (this.current === 'open') {
      const retryAt = (this.openedAt ?? now) + this.coolOffMs;
      if (now < retryAt) return { allowed: false, retryAfterMs: retryAt - now };
      this.trialStartedAt = now;
      this.transition('half-open', now, `cool-off of ${this.coolOffMs} ms elapsed; one trial call allowed`);
      return { allowed: true };
    }
    // Half-open: one trial at a time. A trial nobody reported on is given to the next caller.
    const trialDeadline = (this.trialStartedAt ?? now) + this.trialTimeoutMs;
    if (now >= trialDeadline) {
      this.trialStartedAt = now;
      return { allowed: true };
    }
    return { allowed: false, retryAfterMs: Math.min(trialDeadline - now, HALF_OPEN_RECHECK_MS) };
  }

  /** The seller answered (any AdCP answer, errors included). Closes the circuit from any state. */
  recordSuccess(): void {
    const now = this.now();
    this.lastSuccessAt = now;
    this.consecutiveFailures = 0;
    if (this.current === 'closed') return;
    const reason =
      this.current === 'half-open' ? 'trial call succeeded' : 'a call that was already in flight succeeded';
    this.openedAt = undefined;
    this.trialStartedAt = undefined;
    this.transition('closed', now, reason);
  }

  /** The seller could not do its job (transport failure or transient seller error). */
  recordFailure(): void {
    const now = this.now();
    this.lastFailureAt = now;
    this.consecutiveFailures += 1;
    if (this.current === 'half-open') {
      this.openedAt = now;
      this.trialStartedAt = undefined;
      this.transition('open', now, `trial call failed; open for another ${this.coolOffMs} ms`);
      return;
    }
    // Late failures from calls started before the circuit opened do not extend the cool-off.
    if (this.current === 'open') return;
    if (this.consecutiveFailures >= this.failureThreshold) {
      this.openedAt = now;
      this.transition(
        'open',
        now,
        `${this.consecutiveFailures} consecutive failures (threshold ${this.failureThreshold})`,
      );
    }
  }

  snapshot(): CircuitBreakerSnapshot {
    const snapshot: CircuitBreakerSnapshot = {
      state: this.current,
      consecutiveFailures: this.consecutiveFailures,
      failureThreshold: this.failureThreshold,
      coolOffMs: this.coolOffMs,
    };
    if (this.openedAt !== undefined) snapshot.openedAt = this.openedAt;
    if (this.current === 'open' && this.openedAt !== undefined) snapshot.retryAt = this.openedAt + this.coolOffMs;
    if (this.current === 'half-open' && this.trialStartedAt !== undefined)
      snapshot.trialStartedAt = this.trialStartedAt;
    if (this.lastFailureAt !== undefined) snapshot.lastFailureAt = this.lastFailureAt;
    if (this.lastSuccessAt !== undefined) snapshot.lastSuccessAt = this.lastSuccessAt;
    return snapshot;
  }

  private transition(to: CircuitState, at: number, reason: string): void {
    const from = this.current;
    this.current = to;
    this.onTransition?.({ from, to, at, reason });
  }
}

export interface CircuitBreakerRegistryOptions extends Omit<CircuitBreakerOptions, 'onTransition'> {
  onTransition?: (sellerId: string, transition: CircuitTransition) => void;
}

/**
 * One breaker per seller id, created on first use with the registry's options. Holds state per process: each worker
 * opens its breakers on its own evidence, by design (docs/deployment.md, "Circuit breakers across workers", has the
 * measured cost of not sharing).
 */
export class CircuitBreakerRegistry {
  private readonly breakers = new Map<string, CircuitBreaker>();

  constructor(private readonly options: CircuitBreakerRegistryOptions) {}

  /** The breaker for a seller, created closed on first use. */
  for(sellerId: string): CircuitBreaker {
    let breaker = this.breakers.get(sellerId);
    if (!breaker) {
      const { onTransition, ...rest } = this.options;
      breaker = new CircuitBreaker({
        ...rest,
        onTransition: onTransition ? (transition) => onTransition(sellerId, transition) : undefined,
      });
      this.breakers.set(sellerId, breaker);
    }
    return breaker;
  }

  /** The breaker for a seller if one was ever used. */
  get(sellerId: string): CircuitBreaker | undefined {
    return this.breakers.get(sellerId);
  }

  /** Forget a seller (removed from configuration, or reset by an operator). */
  delete(sellerId: string): boolean {
    return this.breakers.delete(sellerId);
  }

  /** Every seller's breaker state, for a health endpoint or a log line. */
  snapshot(): Record<string, CircuitBreakerSnapshot> {
    const out: Record<string, CircuitBreakerSnapshot> = {};
    for (const [sellerId, breaker] of this.breakers) out[sellerId] = breaker.snapshot();
    return out;
  }
}

/** Seller codes that say the seller itself is struggling (not the request, not one resource). */
const SELLER_HEALTH_CODES: ReadonlySet<string> = new Set([
  'SERVICE_UNAVAILABLE',
  'RATE_LIMITED',
  'INTERNAL_SERVER_ERROR',
  'INTERNAL_ERROR',
  'TIMEOUT',
]);

/**
 * A default for callers: does this error say the seller is unavailable? True for transient transport
 * failures (timeouts, unreachable, 5xx, 429) and seller codes about its own health. False for credential
 * problems (a 401 is a working seller refusing us), for anything correctable or terminal, and for transient
 * codes about one resource or plan (CONFLICT, CAMPAIGN_SUSPENDED, GOVERNANCE_UNAVAILABLE).
 */
export function countsAsCircuitFailure(error: Pick<AdcpError, 'code' | 'recovery' | 'details'>): boolean {
  if (error.recovery !== 'transient' || isAuthError(error.code)) return false;
  return isTransportError(error) || SELLER_HEALTH_CODES.has(error.code);
}
