/**
 * The RFC 9421 nonce cache (step 12 of the AdCP verifier checklist) and the per-seller partition of any store.
 */
import type { ReplayInsertResult, ReplayStore } from '@adcp/sdk/signing/server';

export interface BoundedReplayStoreOptions {
  /** Nonces kept across all keys and endpoints; when full (after dropping expired ones) inserts fail closed. */
  maxEntries?: number;
  /** Nonces kept per (keyid, @target-uri): the per-key cap behind `webhook_signature_rate_abuse` (step 9a). */
  maxEntriesPerScope?: number;
}

interface ReplayEntry {
  expiresAt: number;
  scopeKey: string;
}

/**
 * The RFC 9421 nonce cache for one gateway process: TTL-based and bounded in total, unlike the SDK's
 * InMemoryReplayStore, which keeps a bucket per (keyid, target URI) forever; every operation has its own URL.
 * Implements the SDK's ReplayStore, so a store shared between gateway replicas replaces it without other changes:
 * SharedReplayStore (postgres-replay-store.ts, PostgreSQL), selected by ADCP_REPLAY_STORE_URL.
 */
export class BoundedReplayStore implements ReplayStore {
  private readonly entries = new Map<string, ReplayEntry>();
  private readonly perScope = new Map<string, number>();
  private readonly maxEntries: number;
  private readonly maxEntriesPerScope: number;

  constructor(options: BoundedReplayStoreOptions = {}) {
    this.maxEntries = options.maxEntries ?? 200_000;
    this.maxEntriesPerScope = options.maxEntriesPerScope ?? 10_000;
  }

  get size(): number {
    return this.entries.size;
  }

  async has(keyid: string, scope: string, nonce: string, now: number): Promise<boolean> {
    const entry = this.entries.get(entryKey(keyid, scope, nonce));
    return entry !== undefined && entry.expiresAt > now;
  }

  async isCapHit(keyid: string, scope: string, now: number): Promise<boolean> {
    this.sweep(now, false);
    return (this.perScope.get(scopeKey(keyid, scope)) ?? 0) >= this.maxEntriesPerScope;
  }

  async insert(
    keyid: string,
    scope: string,
    nonce: string,
    ttlSeconds: number,
    now: number,
  ): Promise<ReplayInsertResult> {
    this.sweep(now, false);
    const key = entryKey(keyid, scope, nonce);
    const existing = this.entries.get(key);
    if (existing && existing.expiresAt > now) return 'replayed';
    if (existing) this.remove(key, existing);
    const scoped = scopeKey(keyid, scope);
    if ((this.perScope.get(scoped) ?? 0) >= this.maxEntriesPerScope) return 'rate_abuse';
    if (this.entries.size >= this.maxEntries) {
      this.sweep(now, true);
      // Evicting a live nonce would reopen a replay window, so a full cache refuses instead.
      if (this.entries.size >= this.maxEntries) return 'rate_abuse';
    }
    this.entries.set(key, { expiresAt: now + ttlSeconds, scopeKey: scoped });
    this.perScope.set(scoped, (this.perScope.get(scoped) ?? 0) + 1);
    return 'ok';
  }

  /** Entries are in insertion order and TTLs are near-equal, so the cheap sweep stops at the first live entry. */
  private sweep(now: number, full: boolean): void {
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt <= now) this.remove(key, entry);
      else if (!full) break;
    }
  }

  private remove(key: string, entry: ReplayEntry): void {
    this.entries.delete(key);
    const remaining = (this.perScope.get(entry.scopeKey) ?? 1) - 1;
    if (remaining > 0) this.perScope.set(entry.scopeKey, remaining);
    else this.perScope.delete(entry.scopeKey);
  }
}

// NUL never occurs in a JWK kid, a URL or an sf-string nonce, so joining with it is unambiguous.
function scopeKey(keyid: string, scope: string): string {
  return `${keyid}\u0000${scope}`;
}

function entryKey(keyid: string, scope: string, nonce: string): string {
  return `${keyid}\u0000${scope}\u0000${nonce}`;
}

/** Two sellers may publish the same kid; their nonces must not collide in a shared store. */
export function partitionedBySeller(store: ReplayStore, sellerId: string): ReplayStore {
  const keyFor = (keyid: string) => `${sellerId}\u0000${keyid}`;
  return {
    has: (keyid, scope, nonce, now) => store.has(keyFor(keyid), scope, nonce, now),
    isCapHit: (keyid, scope, now) => store.isCapHit(keyFor(keyid), scope, now),
    insert: (keyid, scope, nonce, ttl, now) => store.insert(keyFor(keyid), scope, nonce, ttl, now),
  };
}
