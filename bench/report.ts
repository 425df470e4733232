import { formatBytes, formatMs, formatRate, formatRatio } from './stats';

export type Unit = 'ms' | 'bytes' | 'webhooks/s' | 'ops/s' | 'events' | 's';

/** One line of the table: a value measured in this run, its baseline from the same run, and measured / baseline. */
export interface Measurement {
  metric: string;
  unit: Unit;
  measured: number;
  baseline: number;
  ratio: number;
  /** The goal for this line, as printed (e.g. ">= 1.0x", "<= 12 events"), and whether this run met it. */
  goal?: string;
  met?: boolean;
}

export interface BenchmarkResult {
  id: string;
  title: string;
  /** What the measured side is. */
  measured: string;
  /** What the baseline side is. */
  baseline: string;
  measurements: Measurement[];
  /** Human lines printed under the table (conditions, checks, derived numbers). */
  notes: string[];
  /** Raw numbers for the JSON file. */
  details: Record<string, unknown>;
  durationMs?: number;
}

function format(value: number, unit: Unit): string {
  switch (unit) {
    case 'ms':
      return formatMs(value);
    case 'bytes':
      return formatBytes(value);
    case 'events':
      return Number.isFinite(value) ? `${Math.round(value * 10) / 10} events` : 'n/a';
    case 's':
      return Number.isFinite(value) ? `${value.toFixed(1)} s` : 'n/a';
    default:
      return formatRate(value, unit.replace('/s', ''));
  }
}

/** A plain-text table: one block of rows per benchmark, then its notes. */
export function renderTable(results: readonly BenchmarkResult[]): string {
  const header = ['Benchmark', 'Metric', 'Measured', 'Baseline', 'Ratio', 'Goal'];
  const rows: string[][] = [];
  for (const result of results) {
    result.measurements.forEach((measurement, index) => {
      rows.push([
        index === 0 ? result.title : '',
        measurement.metric,
        format(measurement.measured, measurement.unit),
        format(measurement.baseline, measurement.unit),
        formatRatio(measurement.ratio),
        measurement.goal ? `${measurement.goal} ${measurement.met ? 'met' : 'MISSED'}` : '',
      ]);
    });
  }
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column >= 2 && column <= 4 ? cell.padStart(widths[column]) : cell.padEnd(widths[column])))
      .join('  ')
      .trimEnd();
  const out = [line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)];
  for (const result of results) {
    out.push('', `${result.title}: measured = ${result.measured}; baseline = ${result.baseline}.`);
    for (const note of result.notes) out.push(`  - ${note}`);
  }
  return out.join('\n');
}
