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
