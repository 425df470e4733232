#!/usr/bin/env node
/**
 * Sums the CPU a test run spent per file, from the lines test/harness/cpu-environment.cjs wrote:
 * `ADCP_TEST_CPU_FILE=tmp/test-cpu.jsonl npm test`, then `node scripts/test-cpu.mjs tmp/test-cpu.jsonl [top]`.
 * Prints the totals by layer (unit, workflow, integration) and the files that cost most, in core-seconds.
 */
import { readFileSync } from 'node:fs';

const [source, topArg] = process.argv.slice(2);
if (!source) {
  console.error('usage: node scripts/test-cpu.mjs <cpu jsonl> [how many files to list]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const rows = readFileSync(source, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((line) => JSON.parse(line))
  .map((row) => ({ ...row, totalMs: row.loadMs + row.runMs + row.childMs }));

const seconds = (ms) => (ms / 1000).toFixed(1).padStart(7);
const sum = (list, key) => list.reduce((total, row) => total + row[key], 0);
const layers = new Map();
for (const row of rows) {
  const layer = row.file.split('/')[1] ?? 'other';
  layers.set(layer, [...(layers.get(layer) ?? []), row]);
}
console.log('layer        files    load     run   child   total  (core-seconds)');
for (const [layer, list] of [...layers].sort()) {
  const cells = ['loadMs', 'runMs', 'childMs', 'totalMs'].map((key) => seconds(sum(list, key))).join(' ');
  console.log(`${layer.padEnd(12)} ${String(list.length).padStart(5)} ${cells}`);
}
const all = ['loadMs', 'runMs', 'childMs', 'totalMs'].map((key) => seconds(sum(rows, key))).join(' ');
console.log(`${'all'.padEnd(12)} ${String(rows.length).padStart(5)} ${all}`);
console.log(`\nthe ${top} files that cost most`);
console.log('   load     run   child   total    wall  file');
for (const row of [...rows].sort((a, b) => b.totalMs - a.totalMs).slice(0, top)) {
  const cells = ['loadMs', 'runMs', 'childMs', 'totalMs', 'wallMs'].map((key) => seconds(row[key])).join(' ');
  console.log(`${cells}  ${row.file}`);
}
