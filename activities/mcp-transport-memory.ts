/**
 * Which sellers refused MCP's Streamable HTTP transport, remembered for a while.
 *
 * A seller that speaks only the legacy HTTP+SSE transport refuses the Streamable HTTP POST (404/405). Without a
 * memory every call pays that refused POST before its SSE stream (activities/mcp-connection.ts); with it, calls
 * within SSE_ONLY_TTL_MS of a refusal go straight to SSE. After the TTL the next call probes Streamable HTTP again,
 * so a seller that upgrades is noticed; a failed SSE connect forgets the refusal at once (the seller may have
 * upgraded and dropped SSE). At most `capacity` sellers are remembered: the oldest refusal, the next to expire,
 * makes room for a new one, and a seller pushed out merely pays one more refused POST.
 */
export const SSE_ONLY_TTL_MS = 10 * 60_000;
export const MAX_SSE_ONLY_SELLERS = 1_024;

export interface SseOnlySellersOptions {
  ttlMs?: number;
  capacity?: number;
  /** Milliseconds since the epoch; tests pass their own clock. */
  now?: () => number;
}

export class SseOnlySellers {
  /** Seller key to the time its refusal is forgotten, oldest refusal first (Map keeps insertion order). */
  private readonly until = new Map<string, number>();
  private readonly ttlMs: number;
  private readonly capacity: number;
  private readonly now: () => number;

  constructor(options: SseOnlySellersOptions = {}) {
    this.ttlMs = options.ttlMs ?? SSE_ONLY_TTL_MS;
    this.capacity = Math.max(1, options.capacity ?? MAX_SSE_ONLY_SELLERS);
    this.now = options.now ?? Date.now;
  }

  /** True while a refusal of Streamable HTTP by this seller is remembered. */
  has(key: string): boolean {
    const until = this.until.get(key);
    if (until === undefined) return false;
    if (this.now() < until) return true;
    this.until.delete(key);
    return false;
  }

  /** The seller refused Streamable HTTP and answered over SSE. */
  remember(key: string): void {
    this.until.delete(key);
    while (this.until.size >= this.capacity) {
      const oldest = this.until.keys().next().value as string;
      this.until.delete(oldest);
    }
    this.until.set(key, this.now() + this.ttlMs);
  }

  forget(key: string): void {
    this.until.delete(key);
  }

  /** Sellers remembered, expired ones included until they are looked up or pushed out. */
  get size(): number {
    return this.until.size;
  }

  clear(): void {
    this.until.clear();
  }
}
