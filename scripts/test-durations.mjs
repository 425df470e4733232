#!/usr/bin/env node
/**
 * Rewrites test/harness/durations.json, the seconds per test file the sequencer (test/harness/sequencer.cjs) orders a
 * clean clone's run by, from a Jest results file: `npm test -- --json --outputFile=tmp/jest-results.json` (what CI
 * writes), then `node scripts/test-durations.mjs tmp/jest-results.json`. Files of at least 5 s, slowest first.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const OUT = path.join(ROOT, 'test', 'harness', 'durations.json');
const MIN_SECONDS = 5;

const source = process.argv[2];
if (!source) {
  console.error('usage: node scripts/test-durations.mjs <jest results json>');
  process.exit(2);
}
/** The file's path inside the project that ran it (a run in another clone names its own absolute paths). */
function projectPath(name) {
  const parts = name.split(path.sep);
  const at = parts.lastIndexOf('test');
  return at < 0 ? undefined : parts.slice(at).join('/');
}

const results = JSON.parse(readFileSync(source, 'utf8'));
if (!Array.isArray(results.testResults)) {
  console.error(`${source}: no testResults (not a Jest --json file)`);
  process.exit(2);
}
const rows = results.testResults
  .filter((file) => Number.isFinite(file.startTime) && Number.isFinite(file.endTime))
  .map((file) => [projectPath(file.name), (file.endTime - file.startTime) / 1000])
  .filter(([file]) => file !== undefined)
  .filter(([, seconds]) => seconds >= MIN_SECONDS)
  .sort((a, b) => b[1] - a[1]);
const durations = Object.fromEntries(rows.map(([file, seconds]) => [file, Math.round(seconds)]));
writeFileSync(OUT, `${JSON.stringify(durations, null, 2)}\n`);
console.log(`${path.relative(ROOT, OUT)}: ${rows.length} files of ${MIN_SECONDS} s or more, from ${source}`);
