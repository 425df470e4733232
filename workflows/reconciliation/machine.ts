/**
 * The orphan pass's decisions (docs/convergence.md), pure: which chunk of the seller's listing to read next, when a
 * run stops (the listing's end, or its per-run bound), where the next run takes the listing up (a listing longer than
 * one run's bound is read to its end over several runs, never only its head), and the report and counters the chunks
 * add up to. The
 * workflow runs one activity per chunk (list a few pages, compare, offer the chunk's orphans) and hands each answer
 * here; only counts and capped lists cross into its history.
 */
import type { OrphanChunk, ReconciliationInput, ReconciliationReport } from '../../contract/reconciliation';

export type OrphanPassReport = NonNullable<ReconciliationReport['buys']>;

export interface OrphanPassBounds {
  /** Orphans and buys claimed twice named in the report (all are counted). */
  maxReported: number;
  /** Chunks read per run: a seller's listing past them waits for the next run, `truncated` says so. */
  maxChunks: number;
}

/** Seller cursors longer than this are not carried to the next run (it reads from the start). */
export const MAX_RESUME_CURSOR_LENGTH = 2_048;
/** Chunks one run reads unless its input names another bound (ADCP_RECONCILE_ORPHAN_CHUNKS), and the most it may. */
export const DEFAULT_ORPHAN_CHUNKS = 40;
const MAX_ORPHAN_CHUNKS = 400;

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
  /** The cursor this run took the listing up at, where the last run stopped (undefined: from the start). */
  private resumedFrom: string | undefined;

  constructor(
    private readonly bounds: OrphanPassBounds,
    resumeCursor?: string,
  ) {
    if (resumeCursor) this.cursor = this.resumedFrom = resumeCursor;
  }

  /**
   * The pass of one reconciliation run: its bound (the input's, within 1 to 400, else 40), and for a run of the
   * seller's Schedule not scoped to a tenant, the cursor where the Schedule's last run stopped (it put it in the
   * Schedule's action input). An operator's run reads from the start.
   */
  static forRun(input: ReconciliationInput, maxReported: number): OrphanPass {
    const asked = input.orphanChunksPerRun;
    const maxChunks =
      asked !== undefined && Number.isInteger(asked) && asked >= 1 && asked <= MAX_ORPHAN_CHUNKS
        ? asked
        : DEFAULT_ORPHAN_CHUNKS;
    const scheduled = input.tenant === undefined && input.scheduleId !== undefined;
    const cursor = scheduled && typeof input.resumeCursor === 'string' ? input.resumeCursor : undefined;
    return new OrphanPass({ maxReported, maxChunks }, cursor || undefined);
  }

  /**
   * What this run hands the Schedule's next run: undefined when there is nothing to change (an operator's run, or
   * the cursor it was given is still right); else the cursor to take up, or null to start from the first page.
   */
  handOver(input: ReconciliationInput): { scheduleId: string; resumeCursor: string | null } | undefined {
    if (input.tenant !== undefined || input.scheduleId === undefined) return undefined;
    const next = this.resumeCursor() ?? null;
    if (next === (input.resumeCursor || null)) return undefined;
    return { scheduleId: input.scheduleId, resumeCursor: next };
  }

  /** The next chunk to read, or undefined when the pass is done. */
  next(): { chunk: number; cursor?: string; maxReported: number } | undefined {
    if (this.ended) return undefined;
    if (this.chunks >= this.bounds.maxChunks) {
      this.stoppedEarly = true;
      this.notes.push(
        `the pass stopped after ${this.chunks} chunks of the listing (its bound per run); the Schedule's next run reads on from there`,
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
    if (!chunk.supported && this.restartsFromTheTop(chunk.note ?? 'refused')) return;
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
    if (this.restartsFromTheTop(note)) return;
    this.notes.push(this.listed ? `the listing stopped after ${this.chunks - 1} chunks: ${note}` : note);
    if (this.listed) this.stoppedEarly = true;
    this.ended = true;
  }

  /**
   * The first chunk, read from where the last run stopped, failed: the seller's cursor may have expired or been
   * for a listing that changed. The pass reads from the start instead (that chunk counts against the bound).
   */
  private restartsFromTheTop(why: string): boolean {
    if (this.listed || this.resumedFrom === undefined || this.cursor !== this.resumedFrom) return false;
    this.notes.push(`the listing could not be taken up where the last run stopped (${why}); read from the start`);
    this.cursor = undefined;
    this.resumedFrom = undefined;
    return true;
  }

  /** Where the next run takes the listing up: where this one stopped before its end, if it did. */
  private resumeCursor(): string | undefined {
    if (!this.stoppedEarly || this.cursor === undefined || this.cursor.length > MAX_RESUME_CURSOR_LENGTH)
      return undefined;
    return this.cursor;
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
      ...(this.resumedFrom !== undefined ? { resumed: true } : {}),
      ...(this.resumeCursor() !== undefined ? { resumeCursor: this.resumeCursor() } : {}),
    };
  }

  /** What the run adds to adcp_reconciliation_orphan_buys and adcp_reconciliation_buys_claimed_twice. */
  counters(): { orphanBuys: number; buysClaimedTwice: number } {
    return { orphanBuys: this.orphanCount, buysClaimedTwice: this.claimedTwiceCount };
  }
}
