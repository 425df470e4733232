/**
 * The seller-capabilities workflow's public surface: one long-lived workflow per configured seller keeps its
 * `get_adcp_capabilities` answer, refreshed on a timer and on the `capabilitiesChanged` signal. Imported by the
 * workflow, the sellers API, the typed client and tests. Message names are stable.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { SellerCapabilities } from '../protocol/capabilities';

/** A seller's circuit breaker (activities/circuit-breaker.ts): calls flow, fail fast, or one trial goes through. */
export type CircuitState = 'closed' | 'open' | 'half-open';

/** A worker's circuit breaker for the seller, as the capabilities workflow records it. */
export interface CircuitView {
  state: CircuitState | 'unknown';
  consecutiveFailures?: number;
  retryAt?: string;
  /** The worker-local breaker this view comes from (each worker process keeps its own). */
  observedAt: string;
}

export const SELLER_CAPABILITIES_WORKFLOW_TYPE = 'adcpSellerCapabilities';

/**
 * One workflow per task queue and seller (deployments sharing a namespace on different queues keep their own, as
 * the reconciliation schedules do).
 */
export function sellerCapabilitiesWorkflowId(taskQueue: string, sellerId: string): string {
  return `adcp-seller-capabilities:${taskQueue}:${sellerId}`;
}

/** The memo key under which the workflow publishes its state, so reads answer without a worker. */
export const SELLER_CAPABILITIES_MEMO = 'adcp_seller_capabilities';

export const DEFAULT_CAPABILITIES_REFRESH_MS = 6 * 60 * 60_000;
/** After a failed refresh the seller is asked again sooner than the regular refresh. */
export const DEFAULT_CAPABILITIES_RETRY_MS = 5 * 60_000;

export interface SellerCapabilitiesInput {
  sellerId: string;
  refreshEveryMs?: number;
  retryEveryMs?: number;
  /** Set only by continue-as-new. */
  carried?: SellerCapabilitiesState;
}

export interface CapabilityChangeNotice {
  /** Who or what said the capabilities changed (a seller notification, an operator). */
  requestedBy: string;
  reason?: string;
}

export interface SellerCapabilitiesState {
  sellerId: string;
  /** The last good answer (kept through later failures). */
  capabilities?: SellerCapabilities;
  capabilitiesAt?: string;
  /** Whether the last refresh reached the seller. Undefined before the first refresh. */
  reachable?: boolean;
  lastCheckedAt?: string;
  lastError?: { code: string; message: string; at: string };
  consecutiveFailures: number;
  circuit?: CircuitView;
  latencyMs?: number;
  refreshes: number;
  nextRefreshAt?: string;
  /** Refreshes asked for by signal (newest last, bounded). */
  notices: { at: string; requestedBy: string; reason?: string }[];
  /** Whether the last refresh changed the capabilities (tasks, versions, ...). */
  lastRefreshChanged?: boolean;
}

export const sellerCapabilitiesQuery = defineQuery<SellerCapabilitiesState>('sellerCapabilities');
/** The seller's capabilities may have changed (its notification, an operator): refresh now. */
export const capabilitiesChangedSignal = defineSignal<[CapabilityChangeNotice]>('capabilitiesChanged');
