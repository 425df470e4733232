/**
 * Per-worker versus shared circuit breakers, measured (issue #15, scale-out): how many calls reach a seller that
 * has started failing, with N workers each opening its own breaker on its own evidence, against one breaker whose
 * state all workers share (an idealised shared store: atomic, no latency).
 *
 *   npx tsx scripts/circuit-breaker-spread.ts [--rate 20] [--latency-ms 500] [--outage-s 600]
 *
 * A simulation on a virtual clock with the real CircuitBreaker (activities/circuit-breaker.ts) and its defaults
 * (5 consecutive failures, 60 s cool-off): calls arrive at `rate` per second, each on a worker picked at random
 * (seeded), and each call that is let through fails after `latency-ms`. Deterministic: same arguments, same numbers.
 */
import { CircuitBreaker, DEFAULT_COOL_OFF_MS, DEFAULT_FAILURE_THRESHOLD } from '../activities/circuit-breaker';

interface Outcome {
  /** Calls that reached the failing seller before every worker's breaker was open. */
  callsBeforeAllOpen: number;
  /** Virtual milliseconds from the first failure until every breaker was open. */
  msUntilAllOpen: number;
  /** Calls that reached the failing seller over the whole outage (opening, then the half-open trials). */
  callsOverOutage: number;
  /** Calls turned away without reaching the seller. */
  refused: number;
}

function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

function simulate(options: {
  workers: number;
  shared: boolean;
  rate: number;
  latencyMs: number;
  outageMs: number;
}): Outcome {
  let now = 0;
  const clock = () => now;
  const make = () =>
    new CircuitBreaker({ failureThreshold: DEFAULT_FAILURE_THRESHOLD, coolOffMs: DEFAULT_COOL_OFF_MS, now: clock });
  const shared = make();
  const breakers = Array.from({ length: options.workers }, () => (options.shared ? shared : make()));
  const random = seeded(15);
  // Calls in flight: when each fails, and on which breaker it reports.
  const inFlight: { endsAt: number; breaker: CircuitBreaker }[] = [];
  const interval = 1_000 / options.rate;
  let reached = 0;
  let refused = 0;
  let callsBeforeAllOpen = -1;
  let msUntilAllOpen = -1;
  for (let arrival = 0; arrival < options.outageMs; arrival += interval) {
    // Failures that come back before this arrival are recorded first, in time order.
    inFlight.sort((a, b) => a.endsAt - b.endsAt);
    while (inFlight.length > 0 && inFlight[0].endsAt <= arrival) {
      const done = inFlight.shift()!;
      now = done.endsAt;
      done.breaker.recordFailure();
    }
    now = arrival;
    if (callsBeforeAllOpen < 0 && breakers.every((breaker) => breaker.state === 'open')) {
      callsBeforeAllOpen = reached;
      msUntilAllOpen = Math.round(now);
    }
    const breaker = breakers[Math.floor(random() * breakers.length)];
    if (breaker.beforeCall().allowed) {
      reached += 1;
      inFlight.push({ endsAt: arrival + options.latencyMs, breaker });
    } else {
      refused += 1;
    }
  }
  return { callsBeforeAllOpen, msUntilAllOpen, callsOverOutage: reached, refused };
}

function argument(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
}

const rate = argument('rate', 20);
const latencyMs = argument('latency-ms', 500);
const outageMs = argument('outage-s', 600) * 1_000;
console.log(
  `Seller failing from t=0; ${rate} calls/s spread at random over the workers; each call fails after ${latencyMs} ms; ` +
    `breaker: ${DEFAULT_FAILURE_THRESHOLD} failures, ${DEFAULT_COOL_OFF_MS / 1000} s cool-off; outage ${outageMs / 1000} s.\n`,
);
console.log(
  '| workers | breakers | calls to the failing seller until all open | time until all open | calls over the outage | refused |',
);
console.log('| ---: | --- | ---: | ---: | ---: | ---: |');
for (const workers of [1, 2, 4, 8]) {
  for (const shared of [false, true]) {
    if (workers === 1 && shared) continue;
    const outcome = simulate({ workers, shared, rate, latencyMs, outageMs });
    console.log(
      `| ${workers} | ${shared ? 'shared' : 'per worker'} | ${outcome.callsBeforeAllOpen} | ${(outcome.msUntilAllOpen / 1000).toFixed(2)} s | ${outcome.callsOverOutage} | ${outcome.refused} |`,
    );
  }
}
