import {
  type CircuitTransition,
  CircuitBreaker,
  CircuitBreakerRegistry,
  DEFAULT_COOL_OFF_MS,
  DEFAULT_FAILURE_THRESHOLD,
  HALF_OPEN_RECHECK_MS,
  countsAsCircuitFailure,
} from '../../activities/circuit-breaker';
import { parseErrorObject } from '../../protocol/errors';
import { classifyTransportFailure } from '../../activities/transport-errors';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let current = start;
  return { now: () => current, advance: (ms) => (current += ms) };
}

function setup(options: { failureThreshold?: number; coolOffMs?: number; trialTimeoutMs?: number } = {}) {
  const clock = manualClock();
  const transitions: CircuitTransition[] = [];
  const breaker = new CircuitBreaker({ ...options, now: clock.now, onTransition: (t) => transitions.push(t) });
  const fail = (times: number) => {
    for (let i = 0; i < times; i += 1) {
      expect(breaker.beforeCall().allowed).toBe(true);
      breaker.recordFailure();
    }
  };
  return { clock, transitions, breaker, fail };
}

describe('CircuitBreaker', () => {
  test('defaults: opens after 5 consecutive failures, cool-off 60 s', () => {
    expect(DEFAULT_FAILURE_THRESHOLD).toBe(5);
    expect(DEFAULT_COOL_OFF_MS).toBe(60_000);
    const { breaker, fail } = setup();
    fail(4);
    expect(breaker.state).toBe('closed');
    fail(1);
    expect(breaker.state).toBe('open');
  });

  test('a success resets the count: failures must be consecutive', () => {
    const { breaker, fail } = setup();
    fail(4);
    breaker.recordSuccess();
    fail(4);
    expect(breaker.state).toBe('closed');
    expect(breaker.snapshot().consecutiveFailures).toBe(4);
  });

  test('open: calls fail fast with the time left in the cool-off', () => {
    const { breaker, clock, fail } = setup();
    fail(5);
    expect(breaker.beforeCall()).toEqual({ allowed: false, retryAfterMs: 60_000 });
    clock.advance(45_000);
    expect(breaker.beforeCall()).toEqual({ allowed: false, retryAfterMs: 15_000 });
    expect(breaker.state).toBe('open');
  });

  test('after the cool-off exactly one trial call goes through (half-open)', () => {
    const { breaker, clock, fail } = setup();
    fail(5);
    clock.advance(60_000);
    expect(breaker.beforeCall()).toEqual({ allowed: true });
    expect(breaker.state).toBe('half-open');
    const second = breaker.beforeCall();
    expect(second.allowed).toBe(false);
    expect(second).toEqual({ allowed: false, retryAfterMs: HALF_OPEN_RECHECK_MS });
    clock.advance(500);
    expect(breaker.beforeCall().allowed).toBe(false);
  });

  test('a successful trial closes the circuit and calls flow again', () => {
    const { breaker, clock, fail } = setup();
    fail(5);
    clock.advance(60_000);
    breaker.beforeCall();
    breaker.recordSuccess();
    expect(breaker.state).toBe('closed');
    expect(breaker.beforeCall()).toEqual({ allowed: true });
    expect(breaker.snapshot()).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
  });

  test('a failed trial re-opens the circuit for a full cool-off from the failure', () => {
    const { breaker, clock, fail } = setup();
    fail(5);
    clock.advance(60_000);
    breaker.beforeCall();
    clock.advance(2_000);
    breaker.recordFailure();
    expect(breaker.state).toBe('open');
    expect(breaker.beforeCall()).toEqual({ allowed: false, retryAfterMs: 60_000 });
    clock.advance(60_000);
    expect(breaker.beforeCall()).toEqual({ allowed: true });
    expect(breaker.state).toBe('half-open');
  });

  test('a trial nobody reports on (crashed worker) is handed to the next caller after trialTimeoutMs', () => {
    const { breaker, clock, fail } = setup({ coolOffMs: 10_000, trialTimeoutMs: 5_000 });
    fail(5);
    clock.advance(10_000);
    expect(breaker.beforeCall().allowed).toBe(true);
    clock.advance(4_999);
    expect(breaker.beforeCall()).toEqual({ allowed: false, retryAfterMs: 1 });
    clock.advance(1);
    expect(breaker.beforeCall()).toEqual({ allowed: true });
    expect(breaker.state).toBe('half-open');
  });

  test('late failures from calls started before opening do not extend the cool-off', () => {
    const { breaker, clock, fail } = setup();
    fail(5);
    clock.advance(30_000);
    breaker.recordFailure();
    expect(breaker.beforeCall()).toEqual({ allowed: false, retryAfterMs: 30_000 });
  });

  test('a success while open (an in-flight call answered) closes the circuit: the seller is answering', () => {
    const { breaker, clock, fail, transitions } = setup();
    fail(5);
    clock.advance(1_000);
    breaker.recordSuccess();
    expect(breaker.state).toBe('closed');
    expect(transitions[transitions.length - 1]).toMatchObject({ from: 'open', to: 'closed' });
  });

  test('transitions are reported with from, to, time and reason', () => {
    const { breaker, clock, fail, transitions } = setup({ failureThreshold: 3, coolOffMs: 10_000 });
    const start = clock.now();
    fail(3);
    clock.advance(10_000);
    breaker.beforeCall();
    breaker.recordFailure();
    clock.advance(10_000);
    breaker.beforeCall();
    breaker.recordSuccess();
    expect(transitions).toEqual([
      { from: 'closed', to: 'open', at: start, reason: '3 consecutive failures (threshold 3)' },
      {
        from: 'open',
        to: 'half-open',
        at: start + 10_000,
        reason: 'cool-off of 10000 ms elapsed; one trial call allowed',
      },
      { from: 'half-open', to: 'open', at: start + 10_000, reason: 'trial call failed; open for another 10000 ms' },
      {
        from: 'open',
        to: 'half-open',
        at: start + 20_000,
        reason: 'cool-off of 10000 ms elapsed; one trial call allowed',
      },
      { from: 'half-open', to: 'closed', at: start + 20_000, reason: 'trial call succeeded' },
    ]);
  });

  test('no transition is reported while nothing changes', () => {
    const { breaker, transitions, fail } = setup();
    fail(2);
    breaker.recordSuccess();
    breaker.recordSuccess();
    expect(transitions).toEqual([]);
  });

  test('snapshot says when an open circuit will let the next trial through', () => {
    const { breaker, clock, fail } = setup();
    const openedAt = clock.now();
    fail(5);
    expect(breaker.snapshot()).toEqual({
      state: 'open',
      consecutiveFailures: 5,
      failureThreshold: 5,
      coolOffMs: 60_000,
      openedAt,
      retryAt: openedAt + 60_000,
      lastFailureAt: openedAt,
    });
  });

  test('invalid options are refused at construction', () => {
    const now = () => 0;
    expect(() => new CircuitBreaker({ now, failureThreshold: 0 })).toThrow(RangeError);
    expect(() => new CircuitBreaker({ now, coolOffMs: -1 })).toThrow(RangeError);
  });
});

describe('CircuitBreakerRegistry', () => {
  test('one breaker per seller: one seller failing does not stop another', () => {
    const clock = manualClock();
    const registry = new CircuitBreakerRegistry({ now: clock.now, failureThreshold: 2 });
    registry.for('seller-a').recordFailure();
    registry.for('seller-a').recordFailure();
    expect(registry.for('seller-a').beforeCall().allowed).toBe(false);
    expect(registry.for('seller-b').beforeCall()).toEqual({ allowed: true });
    expect(registry.for('seller-a')).toBe(registry.get('seller-a'));
    expect(registry.get('seller-c')).toBeUndefined();
  });

  test('transitions name the seller', () => {
    const clock = manualClock();
    const seen: Array<[string, CircuitTransition]> = [];
    const registry = new CircuitBreakerRegistry({
      now: clock.now,
      failureThreshold: 1,
      onTransition: (sellerId, t) => seen.push([sellerId, t]),
    });
    registry.for('seller-a').recordFailure();
    expect(seen).toEqual([['seller-a', expect.objectContaining({ from: 'closed', to: 'open' })]]);
  });

  test('snapshot covers every seller; delete forgets one', () => {
    const clock = manualClock();
    const registry = new CircuitBreakerRegistry({ now: clock.now });
    registry.for('seller-a').recordSuccess();
    registry.for('seller-b').recordFailure();
    expect(Object.keys(registry.snapshot()).sort()).toEqual(['seller-a', 'seller-b']);
    expect(registry.snapshot()['seller-b']).toMatchObject({ state: 'closed', consecutiveFailures: 1 });
    expect(registry.delete('seller-a')).toBe(true);
    expect(Object.keys(registry.snapshot())).toEqual(['seller-b']);
  });
});

describe('countsAsCircuitFailure', () => {
  test.each([
    [
      'a timeout',
      classifyTransportFailure(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
    ],
    [
      'a refused connection',
      classifyTransportFailure(
        new TypeError('fetch failed', {
          cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
        }),
      ),
    ],
    ['an HTTP 503', classifyTransportFailure({ httpStatus: 503 })],
    ['an HTTP 429', classifyTransportFailure({ httpStatus: 429 })],
    ['SERVICE_UNAVAILABLE from the seller', parseErrorObject({ code: 'SERVICE_UNAVAILABLE', message: 'maintenance' })!],
  ])('counts %s', (_label, error) => {
    expect(countsAsCircuitFailure(error)).toBe(true);
  });

  test.each([
    [
      'VALIDATION_ERROR (the seller working fine)',
      parseErrorObject({ code: 'VALIDATION_ERROR', message: 'bad field' })!,
    ],
    ['CONFLICT (one resource, not the seller)', parseErrorObject({ code: 'CONFLICT', message: 'concurrent write' })!],
    ['an HTTP 401 (a working seller refusing our credentials)', classifyTransportFailure({ httpStatus: 401 })],
    [
      'a protocol violation (terminal; retries will not be made)',
      classifyTransportFailure({ httpStatus: 200, message: 'not AdCP' }),
    ],
    ['an unknown seller code', parseErrorObject({ code: 'GAM_QUOTA', message: 'x' })!],
  ])('does not count %s', (_label, error) => {
    expect(countsAsCircuitFailure(error)).toBe(false);
  });
});
