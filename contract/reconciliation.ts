/**
 * Reconciliation of one seller: what the reconcileSeller workflow is started with and the report it answers, as the
 * API, the CLI and the typed client read it.
 */

export interface ReconciliationInput {
  sellerId: string;
  requestedBy: string;
  /**
   * The tenant of the operator who asked: the run counts, polls and refreshes only that tenant's operations and buys,
   * and lists the seller's tasks with that tenant's credentials. Absent (the per-seller Schedule, an operator of the
   * whole installation): every tenant's.
   */
  tenant?: string;
  /** With `tenant`: operations and buys recorded without a tenant belong to it too (ADCP_UNTENANTED_TENANT). */
  alsoUntenanted?: boolean;
}

export interface ReconciliationReport {
  sellerId: string;
  requestedBy: string;
  at: string;
  openOperations: number;
  /** false when the seller has no tasks/list (or could not be asked): only the poll-now part ran. */
  sellerListsTasks: boolean;
  /** Why the seller could not be asked, when it could not. */
  sellerError?: string;
  sellerOpenTasks: number;
  sellerListTruncated: boolean;
  /** Seller tasks found for operations that had lost them, and handed back. */
  adopted: { operationId: string; taskId: string }[];
  /** Seller tasks no open operation tracks or claims (the seller's, or from operations that have ended). */
  unattributed: { taskId: string; taskType?: string; status: string }[];
  /** Open operations whose task the seller no longer lists as open (finished there, or unknown to it). */
  missingFromSeller: string[];
  pollRequested: number;
  /** Running media-buy workflows at this seller. */
  openMediaBuys: number;
  /** Of those, how many were asked to read get_media_buys now (refreshMediaBuy). */
  mediaBuyRefreshRequested: number;
}
