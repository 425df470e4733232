/**
 * Reconciliation of one seller: what the reconcileSeller workflow is started with and the report it answers, as the
 * API, the CLI and the typed client read it.
 */
import type { MatchedBy } from '../protocol/resource-match';

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
  /**
   * Chunks of the seller's buy listing (five of its pages each) the orphan pass reads in this run, 1 to 400 (default
   * 40); a Schedule's next run goes on where this one stopped (ADCP_RECONCILE_ORPHAN_CHUNKS).
   */
  orphanChunksPerRun?: number;
  /** The seller's Schedule that started this run: where the run hands its orphan pass's cursor to the next one. */
  scheduleId?: string;
  /**
   * Where the Schedule's last run stopped its orphan pass before the end of the seller's listing: this run takes it up
   * there (the last run put it in the Schedule's action input). Ignored in a run scoped to a tenant.
   */
  resumeCursor?: string;
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
  /** The orphan pass: the seller's buys against the buys the orchestrator's workflows know (docs/convergence.md). */
  buys?: {
    /** false when the seller's buys could not be listed (`note`): nothing is known about orphans then. */
    listed: boolean;
    note?: string;
    /**
     * Buys the seller listed, and whether the pass stopped before the listing's end (its per-run bound, or a page
     * that could not be read: `note`). The seller's Schedule's next run takes the listing up there (`resumeCursor`),
     * and a run that reaches its end leaves the next to start from the first page again.
     */
    count: number;
    truncated: boolean;
    /** The listing's chunks the pass read (each a few pages, its orphans offered before the next is read). */
    chunks?: number;
    /** Of those, buys a workflow knows (after this pass's adoptions). */
    known: number;
    /** Orphans adopted by the operation that could not know them, and how each matched. */
    adopted: { operationId: string; mediaBuyId: string; matchedBy?: MatchedBy }[];
    /** Buys no workflow knows after the pass (at most 50 named; `orphanCount` counts all). */
    orphans: {
      mediaBuyId: string;
      status?: string;
      createdAt?: string;
      /** The operation the buy's echoed context names, and its execution status. */
      operationId?: string;
      operationStatus?: string;
    }[];
    orphanCount: number;
    /** Buys more than one workflow claims (their workflow IDs; at most 50 named, `claimedTwiceCount` counts all). */
    claimedTwice: { mediaBuyId: string; owners: string[] }[];
    claimedTwiceCount?: number;
    /** Operations offered the orphans that did not answer in time (busy with a call). */
    unanswered?: string[];
    /** This run took the listing up where the Schedule's last run stopped, not at its first page. */
    resumed?: boolean;
    /** The seller's cursor where this run stopped before the listing's end: the Schedule's next run starts there. */
    resumeCursor?: string;
  };
}

/** A buy the seller holds that no workflow knows, as the orphan pass names it. */
export interface OrphanBuy {
  mediaBuyId: string;
  status?: string;
  createdAt?: string;
  /** The operation its echoed context names, and how that operation stands (it could not adopt the buy). */
  operationId?: string;
  operationStatus?: string;
}

/** What the orphan pass's activity asks for one chunk of the seller's listing. */
export interface OrphanChunkRequest {
  sellerId: string;
  tenant?: string;
  alsoUntenanted?: boolean;
  /** The seller's cursor where the previous chunk stopped; absent for the first. */
  cursor?: string;
  /** The chunk's number in this run (names the offers' update IDs, so each chunk asks afresh). */
  chunk: number;
  /** Listing pages per chunk. */
  maxPages: number;
  /** Orphans and claims still to be named in the report (the rest are counted). */
  maxReported: number;
  requestedBy: string;
  /** Operations asked per chunk, and each one's time to answer. */
  maxOperations: number;
  updateTimeoutMs: number;
}

/** One chunk of the orphan pass: its buys compared with the buys workflows know, its orphans offered. */
export interface OrphanChunk {
  /** false when the seller's buys could not be listed (`note` says why). */
  supported: boolean;
  note?: string;
  listed: number;
  /** Of the chunk's buys, those a workflow knows (after the chunk's adoptions). */
  known: number;
  adopted: { operationId: string; mediaBuyId: string; matchedBy?: MatchedBy }[];
  /** Orphans left after the offers, at most `maxReported` named; `orphanCount` counts all. */
  orphans: OrphanBuy[];
  orphanCount: number;
  claimedTwice: { mediaBuyId: string; owners: string[] }[];
  claimedTwiceCount: number;
  /** Operations that did not answer their offer in time. */
  unanswered: string[];
  /** The seller's cursor to the rest of its listing, when this chunk stopped before the end. */
  nextCursor?: string;
}
