'use strict';
/**
 * The order Jest starts test files in: the longest first, so no long file starts last and runs alone while the other
 * worker idles. Jest's own sequencer knows durations only from its cache of earlier runs; a clean clone (CI) has none
 * and falls back to file size, which put the slowest integration files anywhere. This one uses, per file:
 *
 *   1. a failure in the last run (those first, as Jest does);
 *   2. the duration Jest cached from an earlier run on this machine, when there is one;
 *   3. otherwise its duration in ./durations.json (seconds, measured on a CI run; only files of 5 s or more);
 *   4. otherwise the file size, as Jest does (all such files after the known ones).
 *
 * The list only orders files: a missing or stale entry costs wall time, never a test.
 */
const path = require('node:path');
const TestSequencer = require('@jest/test-sequencer').default;

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * Seconds per file (5 s or more) from a CI run's results, slowest first. Rewritten with
 * `node scripts/test-durations.mjs tmp/jest-results.json` after a run (CI writes that file).
 */
const KNOWN_SECONDS = require('./durations.json');

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
