'use strict';
/**
 * The order Jest starts test files in: the longest first, so no long file starts last and runs alone while the other
 * worker idles. Jest's own sequencer knows durations only from its cache of earlier runs; a clean clone (CI) has none
 * and falls back to file size, which put the slowest integration files anywhere. This one uses, per file:
 *
 *   1. a failure in the last run (those first, as Jest does);
 *   2. the duration Jest cached from an earlier run on this machine, when there is one;
 *   3. otherwise the approximate duration below (seconds, measured on a CI run; only files of 15 s or more);
 *   4. otherwise the file size, as Jest does (all such files after the known ones).
 *
 * The list only orders files: a missing or stale entry costs wall time, never a test.
 */
const path = require('node:path');
const TestSequencer = require('@jest/test-sequencer').default;

const ROOT = path.resolve(__dirname, '..', '..');

/** Approximate seconds per file, slowest first. */
const KNOWN_SECONDS = {
  'test/integration/media-buy-flight.test.ts': 175,
  'test/integration/cli.test.ts': 165,
  'test/workflow/campaign-lifecycle.test.ts': 145,
  'test/integration/errors-and-idempotency.test.ts': 140,
  'test/integration/convergence.test.ts': 125,
  'test/integration/packed-client.test.ts': 117,
  'test/integration/campaign-30-days.test.ts': 95,
  'test/integration/scale-out.test.ts': 98,
  'test/integration/demo-media-buy.test.ts': 98,
  'test/integration/media-buy-restarts.test.ts': 96,
  'test/integration/interop-decisioning.test.ts': 86,
  'test/integration/stored-capabilities.test.ts': 79,
  'test/integration/interop-errors.test.ts': 75,
  'test/integration/metrics.test.ts': 71,
  'test/integration/observability.test.ts': 68,
  'test/integration/worker-upgrade.test.ts': 62,
  'test/integration/gateway.test.ts': 61,
  'test/integration/reconciliation.test.ts': 61,
  'test/integration/web-ui.test.ts': 59,
  'test/integration/campaign-cancel-finalize.test.ts': 58,
  'test/integration/campaign-creatives.test.ts': 52,
  'test/integration/capabilities.test.ts': 50,
  'test/integration/notifications.test.ts': 46,
  'test/workflow/campaign-moves.test.ts': 46,
  'test/integration/statuses.test.ts': 46,
  'test/integration/interop-media-buy.test.ts': 46,
  'test/unit/run-compiled.test.ts': 46,
  'test/integration/mcp-sse-seller.test.ts': 44,
  'test/integration/campaign.test.ts': 43,
  'test/integration/gateway-temporal-transport.test.ts': 41,
  'test/integration/media-buy-example-seller.test.ts': 40,
  'test/integration/campaign-delivery.test.ts': 40,
  'test/integration/operation-list.test.ts': 39,
  'test/integration/tenancy.test.ts': 36,
  'test/integration/bundle-preload.test.ts': 35,
  'test/workflow/governance-spend.test.ts': 32,
  'test/integration/secure-gateway.test.ts': 30,
  'test/integration/governance.test.ts': 30,
  'test/integration/campaign-proposals.test.ts': 30,
  'test/integration/gateway-edge.test.ts': 29,
  'test/integration/dev-server.test.ts': 28,
  'test/integration/webhooks.test.ts': 25,
  'test/integration/media-buy-api.test.ts': 24,
  'test/integration/webhook-delivery.test.ts': 23,
  'test/integration/webhook-routing.test.ts': 23,
  'test/integration/campaign-tenancy.test.ts': 22,
  'test/workflow/operation-lifecycle.test.ts': 21,
  'test/integration/access-control.test.ts': 20,
  'test/integration/tenant-keys.test.ts': 20,
  'test/integration/encryption.test.ts': 18,
  'test/integration/interop-creative.test.ts': 17,
  'test/integration/media-buy-credentials.test.ts': 17,
  // Files missing from that run's list, measured one at a time on a busy 2-core machine (Jest's time for the file): a
  // CI run takes longer, but each is well over 15 s and, unlisted, would start among the last by its small size.
  'test/integration/campaign-moves-restarts.test.ts': 60,
  'test/integration/restarts.test.ts': 58,
  'test/integration/campaign-restarts.test.ts': 46,
  'test/integration/fault-tolerance.test.ts': 40,
  'test/integration/worker-start.test.ts': 34,
  'test/integration/resource-lost-answer-without-route.test.ts': 21,
  'test/integration/replay.test.ts': 19,
  'test/integration/reconciliation-orphan-pass.test.ts': 16,
};

class SlowestFirstSequencer extends TestSequencer {
  sort(tests) {
    const estimate = (test) => {
      const cached = this.time(test);
      test.duration = cached; // as Jest's own sort does (its scheduler reads it)
      if (cached != null) return { known: true, ms: cached };
      const seconds = KNOWN_SECONDS[path.relative(ROOT, test.path).split(path.sep).join('/')];
      if (seconds != null) return { known: true, ms: seconds * 1_000 };
      return { known: false, ms: test.context.hasteFS.getSize(test.path) ?? 0 };
    };
    const keyed = tests.map((test) => ({ test, failed: this.hasFailed(test), ...estimate(test) }));
    keyed.sort((a, b) => {
      if (a.failed !== b.failed) return a.failed ? -1 : 1;
      if (a.known !== b.known) return a.known ? -1 : 1;
      return b.ms - a.ms;
    });
    return keyed.map(({ test }) => test);
  }
}

module.exports = SlowestFirstSequencer;
module.exports.KNOWN_SECONDS = KNOWN_SECONDS;
