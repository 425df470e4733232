/**
 * The orphan pass's decisions (docs/convergence.md), pure: which chunk of the seller's listing to read next, when a
 * run stops (the listing's end, or its per-run bound), and the report and counters the chunks add up to. The
 * workflow runs one activity per chunk (list a few pages, compare, offer the chunk's orphans) and hands each answer
 * here; only counts and capped lists cross into its history.
 */
import type { OrphanChunk, ReconciliationReport } from '../../contract/reconciliation';

export type OrphanPassReport = NonNullable<ReconciliationReport['buys']>;

export interface OrphanPassBounds {
  /** Orphans and buys claimed twice named in the report (all are counted). */
  maxReported: number;
  /** Chunks read per run: a seller's listing past them waits for the next run, `truncated` says so. */
  maxChunks: number;
}

export class OrphanPass {
  private chunks = 0;
  private cursor: string | undefined;
  private ended = false;
  private listed = false;
  private stoppedEarly = false;
  private readonly notes: string[] = [];
  private count = 0;
  private known = 0;
  private orphanCount = 0;
  private claimedTwiceCount = 0;
  private readonly adopted: OrphanPassReport['adopted'] = [];
  private readonly orphans: OrphanPassReport['orphans'] = [];
  private readonly claimedTwice: OrphanPassReport['claimedTwice'] = [];
  private readonly unanswered = new Set<string>();

  constructor(private readonly bounds: OrphanPassBounds) {}

  /** The next chunk to read, or undefined when the pass is done. */
  next(): { chunk: number; cursor?: string; maxReported: number } | undefined {
    if (this.ended) return undefined;
    if (this.chunks >= this.bounds.maxChunks) {
      this.stoppedEarly = true;
      this.notes.push(
        `the pass stopped after ${this.chunks} chunks of the listing (its bound per run); the next run reads from the start`,
      );
      this.ended = true;
      return undefined;
    }
    const named = Math.max(this.orphans.length, this.claimedTwice.length);
    return {
      chunk: this.chunks,
      ...(this.cursor !== undefined ? { cursor: this.cursor } : {}),
      maxReported: Math.max(0, this.bounds.maxReported - named),
    };
  }

  /** A chunk's answer: its figures added, and the cursor to the rest of the listing kept. */
  addChunk(chunk: OrphanChunk): void {
    this.chunks += 1;
    if (!chunk.supported) {
      this.notes.push(chunk.note ?? 'the seller does not list its media buys');
      // A listing refused from the start is no listing; one refused midway is a pass that stopped early.
      if (this.listed) this.stoppedEarly = true;
      this.ended = true;
      return;
    }
    this.listed = true;
    if (chunk.note) this.notes.push(chunk.note);
    this.count += chunk.listed;
    this.known += chunk.known;
    this.orphanCount += chunk.orphanCount;
    this.claimedTwiceCount += chunk.claimedTwiceCount;
    this.adopted.push(...chunk.adopted);
    this.orphans.push(...chunk.orphans.slice(0, this.bounds.maxReported - this.orphans.length));
    this.claimedTwice.push(...chunk.claimedTwice.slice(0, this.bounds.maxReported - this.claimedTwice.length));
    for (const operationId of chunk.unanswered) this.unanswered.add(operationId);
    this.cursor = chunk.nextCursor;
    if (this.cursor === undefined) this.ended = true;
  }

  /** A chunk whose activity failed past its retries: what was read so far stands, the pass stops. */
  failed(note: string): void {
    this.chunks += 1;
    this.notes.push(this.listed ? `the listing stopped after ${this.chunks - 1} chunks: ${note}` : note);
    if (this.listed) this.stoppedEarly = true;
    this.ended = true;
  }

  report(): OrphanPassReport {
    const note = this.notes.join('; ');
    if (!this.listed)
      return {
        listed: false,
        note,
        count: 0,
        truncated: false,
        known: 0,
        adopted: [],
        orphans: [],
        orphanCount: 0,
        claimedTwice: [],
        claimedTwiceCount: 0,
      };
    return {
      listed: true,
      ...(note ? { note } : {}),
      count: this.count,
      truncated: this.stoppedEarly,
      chunks: this.chunks,
      known: this.known,
      adopted: [...this.adopted],
      orphans: [...this.orphans],
      orphanCount: this.orphanCount,
      claimedTwice: [...this.claimedTwice],
      claimedTwiceCount: this.claimedTwiceCount,
      ...(this.unanswered.size > 0 ? { unanswered: [...this.unanswered] } : {}),
    };
  }

  /** What the run adds to adcp_reconciliation_orphan_buys and adcp_reconciliation_buys_claimed_twice. */
  counters(): { orphanBuys: number; buysClaimedTwice: number } {
    return { orphanBuys: this.orphanCount, buysClaimedTwice: this.claimedTwiceCount };
  }
}
