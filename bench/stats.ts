/** Small statistics and formatting helpers for the benchmark report. */

/** The q-quantile (0..1) with linear interpolation between the two nearest ranks (Hyndman & Fan type 7). */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * (position - lower);
}

export const median = (values: readonly number[]): number => quantile(values, 0.5);

export interface Distribution {
  n: number;
  median: number;
  p95: number;
  min: number;
  max: number;
}

export function distribution(values: readonly number[]): Distribution {
  return {
    n: values.length,
    median: median(values),
    p95: quantile(values, 0.95),
    min: Math.min(...values),
    max: Math.max(...values),
  };
}

/**
 * The two-sided 95% quantile of Student's t with `df` degrees of freedom (df rounded down, so the bound is never
 * narrower than the table's): for an interval around a difference of means measured from a few slices.
 */
export function t975(df: number): number {
  const table: Array<[number, number]> = [
    [1, 12.71],
    [2, 4.303],
    [3, 3.182],
    [4, 2.776],
    [5, 2.571],
    [6, 2.447],
    [7, 2.365],
    [8, 2.306],
    [9, 2.262],
    [10, 2.228],
    [12, 2.179],
    [15, 2.131],
    [20, 2.086],
    [30, 2.042],
    [60, 2.0],
    [120, 1.98],
  ];
  // The largest row at or below df (df below 1: no interval).
  const row = [...table].reverse().find(([atLeast]) => df >= atLeast);
  return row ? row[1] : Number.NaN;
}

/** Mean and standard error of the mean of `values` (n - 1 in the variance). */
export function meanAndError(values: readonly number[]): { n: number; mean: number; standardError: number } {
  const n = values.length;
  const mean = values.reduce((sum, value) => sum + value, 0) / n;
  const variance = n > 1 ? values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (n - 1) : Number.NaN;
  return { n, mean, standardError: Math.sqrt(variance / n) };
}

/**
 * The difference of two means (a - b) with its 95% interval, by Welch's t (unequal variances): how much more `a`'s
 * slices cost than `b`'s, and how sure that is.
 */
export function differenceOfMeans(
  a: readonly number[],
  b: readonly number[],
): { difference: number; low: number; high: number; df: number } {
  const x = meanAndError(a);
  const y = meanAndError(b);
  const ex = x.standardError ** 2;
  const ey = y.standardError ** 2;
  const error = Math.sqrt(ex + ey);
  const df = (ex + ey) ** 2 / (ex ** 2 / (x.n - 1) + ey ** 2 / (y.n - 1));
  const difference = x.mean - y.mean;
  // Both slices read the same nothing (error 0): the difference is exact.
  const half = error === 0 ? 0 : t975(df) * error;
  return { difference, low: difference - half, high: difference + half, df };
}

export function ratio(measured: number, baseline: number): number {
  return baseline === 0 ? Number.NaN : measured / baseline;
}

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return 'n/a';
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  return ms >= 1_000 ? `${(ms / 1_000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return 'n/a';
  const sign = bytes < 0 ? '-' : '';
  const value = Math.abs(bytes);
  if (value >= 1024 ** 2) return `${sign}${(value / 1024 ** 2).toFixed(1)} MiB`;
  if (value >= 1024) return `${sign}${(value / 1024).toFixed(1)} KiB`;
  return `${sign}${Math.round(value)} B`;
}

export function formatRate(perSecond: number, unit: string): string {
  return Number.isFinite(perSecond) ? `${perSecond.toFixed(perSecond >= 100 ? 0 : 1)} ${unit}/s` : 'n/a';
}

export function formatRatio(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value >= 10 || value < 0.01 ? `${value.toPrecision(2)}x` : `${value.toFixed(2)}x`;
}
