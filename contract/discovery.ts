/**
 * The discovery workflow's public surface: one brief sent as `get_products` to N sellers in parallel (each its own
 * `adcpOperation` child), within a time budget; the answers normalised into one ranked catalogue. Imported by the
 * workflow, the campaign workflow, the discoveries API, the typed client and tests. Message names are stable.
 */
import { defineQuery } from '@temporalio/workflow';
import type { CatalogueProposal, RankedEntry, RankingPreferences, SellerIncomplete } from '../protocol/catalogue';

export const DISCOVERY_WORKFLOW_TYPE = 'adcpDiscovery';

export function discoveryWorkflowId(discoveryKey: string): string {
  return `adcp-discovery-${discoveryKey}`;
}

export const DISCOVERY_ID_PATTERN = /^adcp-discovery-[A-Za-z0-9_.:-]{1,200}$/;

/** How long past the time budget the workflow waits for answers already on their way before it reports. */
export const DEFAULT_DISCOVERY_GRACE_MS = 2_000;

export interface DiscoveryInput {
  discoveryKey: string;
  brief: string;
  /** The sellers to ask (already checked: configured, and offering get_products as far as known). */
  sellerIds: string[];
  /** Sellers left out before any call, and why (their capabilities say they have no get_products). */
  skipped?: { sellerId: string; reason: string }[];
  /** The buyer's time budget: sent to sellers as `time_budget`, and the operations' own budget. */
  timeBudgetMs: number;
  /** Our own deadline after the time budget (default DEFAULT_DISCOVERY_GRACE_MS). */
  graceMs?: number;
  /** More get_products arguments (brand, filters, account, preferred_delivery_types, ...). */
  params?: Record<string, unknown>;
  preferences?: RankingPreferences;
  requestedBy?: string;
  /** Index the child operations (false on servers without the AdCP search attributes). */
  indexed?: boolean;
  /** The tenant that owns the discovery (absent in single-tenant/dev mode): its operations act for it. */
  tenant?: string;
  /** The authenticated principal that started it (`tenant/id`). */
  principal?: string;
}

export type DiscoverySellerStatus = 'asking' | 'answered' | 'failed' | 'timed_out' | 'skipped';

export interface DiscoverySellerResult {
  sellerId: string;
  status: DiscoverySellerStatus;
  /** The get_products operation (child workflow). */
  operationId?: string;
  productCount?: number;
  proposalCount?: number;
  /** The seller's own `incomplete[]` entries were present. */
  incomplete?: boolean;
  error?: { code: string; message: string };
  /** How long the seller took (answered/failed), or was given (timed_out). */
  durationMs?: number;
}

export interface DiscoveryState {
  discoveryKey: string;
  brief: string;
  status: 'running' | 'completed';
  /** True when at least one seller did not answer in time, failed, or said its answer is incomplete. */
  partial: boolean;
  startedAt: string;
  /** When the workflow stops waiting (time budget + grace). */
  deadline: string;
  finishedAt?: string;
  sellers: Record<string, DiscoverySellerResult>;
  catalogue: RankedEntry[];
  proposals: CatalogueProposal[];
  incomplete: SellerIncomplete[];
  /** The tenant that owns the discovery (absent in single-tenant/dev mode). */
  tenant?: string;
  /** The principal that started it (`tenant/id`). */
  principal?: string;
}

export const discoveryStateQuery = defineQuery<DiscoveryState>('discoveryState');
