/**
 * The worker's Prometheus settings beyond Temporal's defaults. The operation histograms measure minutes to days
 * (an approval can wait overnight), far past the default buckets that stop at seconds.
 *
 * Keys are the names the workflow records under; the exporter (`unitSuffix`, workers/main.ts) appends the declared
 * unit, so Prometheus sees `adcp_operation_duration_seconds` and `adcp_operation_input_wait_seconds`.
 */
const OPERATION_SECONDS = [1, 5, 15, 60, 300, 900, 1_800, 3_600, 7_200, 14_400, 43_200, 86_400, 259_200];

export const WORKER_HISTOGRAM_BUCKETS: Record<string, number[]> = {
  /** Start to final status (workflows/operation/metrics.ts). */
  adcp_operation_duration: OPERATION_SECONDS,
  /** input-required to the next status: the approval time (workflows/operation/metrics.ts). */
  adcp_operation_input_wait: OPERATION_SECONDS,
};
