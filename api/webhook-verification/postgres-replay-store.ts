/**
 * The RFC 9421 nonce cache shared by every gateway replica: PostgreSQL through @adcp/sdk's PostgresReplayStore
 * (one row per (keyid, scope, nonce), primary key on the triple, so two gateways inserting the same nonce at the
 * same moment serialise on the index and one of them sees 'replayed').
 *
 * What this wrapper adds to the SDK's store, so the guarantees of the in-memory BoundedReplayStore still hold:
 * - the per-(keyid, target URI) cap (the SDK's `cap`, checked in the same statement as the insert);
 * - a total cap: the SDK's store has none. Counting every row on every insert would cost a scan per webhook, so the
 *   total is counted by the sweeper (which also deletes expired rows, the SDK leaves that to the caller) and this
 *   gateway's own inserts are added between sweeps. Soft across replicas: each adds only what it inserted itself;
 *   it bounds the table, it is not an exact limit;
 * - keys that PostgreSQL can store: the per-seller partition (partitionedBySeller) joins seller and keyid with NUL,
 *   which a PostgreSQL text value cannot hold, so NUL and `%` are percent-escaped (injective, still readable);
 * - the schema created on start, and a start that fails with the URL (password hidden) when the store is unreachable.
 */
import { Pool } from 'pg';
import {
  PostgresReplayStore,
  type ReplayInsertResult,
  type ReplayStore,
  getReplayStoreMigration,
  sweepExpiredReplays,
} from '@adcp/sdk/signing/server';
import { ConfigError } from '../../config/errors';
import { type ReplayStoreConfig, redactUrl } from '../../config/webhook-auth';
import { BoundedReplayStore } from './replay-store';

export interface SharedReplayStoreOptions {
  /** postgres://user:password@host:5432/database */
  url: string;
  tableName?: string;
  /** Live nonces in total (soft across replicas, see above). Default 200,000. */
  maxEntries?: number;
  /** Live nonces per (keyid, scope). Default 10,000. */
  maxEntriesPerScope?: number;
  /** How often expired rows are deleted and the total recounted. Default 60 s. */
  sweepEveryMs?: number;
  /** Connections this gateway holds. Default 10. */
  poolSize?: number;
  /** Sweeper failures (the verifier keeps working; a failing sweep only delays the cleanup). */
  onError?: (error: unknown) => void;
}

/** A webhook replay store with a lifecycle: the gateway closes it on shutdown. */
export interface WebhookReplayStoreHandle {
  store: ReplayStore;
  /** "memory" or the redacted URL, for the start-up log line. */
  description: string;
  close(): Promise<void>;
}

const escapeKey = (value: string): string => value.replaceAll('%', '%25').replaceAll('\u0000', '%00');

export class SharedReplayStore implements ReplayStore {
  private readonly sdkStore: PostgresReplayStore;
  private readonly tableName: string;
  private readonly maxEntries: number;
  private readonly onError: (error: unknown) => void;
  private sweeper?: NodeJS.Timeout;
  /** Rows counted by the last sweep, plus what this gateway inserted since. */
  private countedTotal = 0;
  private insertedSinceCount = 0;
  private lastSweepAt = 0;
  private sweeping?: Promise<void>;

  private constructor(
    private readonly pool: Pool,
    options: SharedReplayStoreOptions,
  ) {
    this.tableName = options.tableName ?? 'adcp_replay_cache';
    this.maxEntries = options.maxEntries ?? 200_000;
    this.onError = options.onError ?? ((error) => console.warn(`replay store: ${String(error)}`));
    this.sdkStore = new PostgresReplayStore(pool, {
      tableName: this.tableName,
      cap: options.maxEntriesPerScope ?? 10_000,
    });
  }

  /** Connects, creates the table if missing, counts what is there, and starts the sweeper. */
  static async open(options: SharedReplayStoreOptions): Promise<SharedReplayStore> {
    const pool = new Pool({
      connectionString: options.url,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: 10_000,
      idleTimeoutMillis: 30_000,
    });
    // An idle connection that breaks (a database restart) must not crash the gateway: the next query reconnects.
    pool.on('error', (error) => (options.onError ?? (() => undefined))(error));
    const store = new SharedReplayStore(pool, options);
    try {
      await pool.query(getReplayStoreMigration(store.tableName));
      await store.sweep();
    } catch (error) {
      await pool.end().catch(() => undefined);
      const detail = error instanceof Error ? error.message : String(error);
      throw new ConfigError(
        `Could not open the webhook replay store at ${redactUrl(options.url)} (ADCP_REPLAY_STORE_URL): ${detail}. Check that PostgreSQL is reachable and the user may create tables, or unset ADCP_REPLAY_STORE_URL to keep nonces in this gateway's memory (one gateway only).`,
      );
    }
    const every = options.sweepEveryMs ?? 60_000;
    store.sweeper = setInterval(() => void store.sweep().catch(store.onError), every);
    store.sweeper.unref();
    return store;
  }

  /** Rows as of the last sweep plus this gateway's inserts since (an estimate across replicas). */
  get estimatedSize(): number {
    return this.countedTotal + this.insertedSinceCount;
  }

  has(keyid: string, scope: string, nonce: string, now: number): Promise<boolean> {
    return this.sdkStore.has(escapeKey(keyid), escapeKey(scope), escapeKey(nonce), now);
  }

  isCapHit(keyid: string, scope: string, now: number): Promise<boolean> {
    return this.sdkStore.isCapHit(escapeKey(keyid), escapeKey(scope), now);
  }

  async insert(
    keyid: string,
    scope: string,
    nonce: string,
    ttlSeconds: number,
    now: number,
  ): Promise<ReplayInsertResult> {
    if (this.estimatedSize >= this.maxEntries) {
      // Full by our estimate: recount (at most once a second) before refusing; expired rows may have gone.
      if (Date.now() - this.lastSweepAt >= 1_000) await this.sweep();
      // A full cache refuses rather than evicting live nonces, which would reopen a replay window.
      if (this.estimatedSize >= this.maxEntries) return 'rate_abuse';
    }
    const result = await this.sdkStore.insert(escapeKey(keyid), escapeKey(scope), escapeKey(nonce), ttlSeconds, now);
    if (result === 'ok') this.insertedSinceCount += 1;
    return result;
  }

  /** Deletes expired nonces and recounts the live ones. One sweep at a time per gateway. */
  sweep(): Promise<void> {
    this.sweeping ??= (async () => {
      try {
        await sweepExpiredReplays(this.pool, { tableName: this.tableName });
        const counted = await this.pool.query<{ total: string }>(
          `SELECT count(*)::bigint AS total FROM ${this.tableName}`,
        );
        this.countedTotal = Number(counted.rows[0]?.total ?? 0);
        this.insertedSinceCount = 0;
        this.lastSweepAt = Date.now();
      } finally {
        this.sweeping = undefined;
      }
    })();
    return this.sweeping;
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    await this.sweeping?.catch(() => undefined);
    await this.pool.end();
  }
}

/** The replay store the config names: this gateway's memory, or the shared PostgreSQL store. */
export async function openWebhookReplayStore(
  config: ReplayStoreConfig,
  options: Pick<SharedReplayStoreOptions, 'onError' | 'sweepEveryMs' | 'poolSize'> = {},
): Promise<WebhookReplayStoreHandle> {
  if (config.kind === 'memory') {
    const store = new BoundedReplayStore({
      maxEntries: config.maxEntries,
      maxEntriesPerScope: config.maxEntriesPerScope,
    });
    return { store, description: 'memory (this gateway only)', close: async () => undefined };
  }
  const store = await SharedReplayStore.open({
    url: config.url,
    tableName: config.tableName,
    maxEntries: config.maxEntries,
    maxEntriesPerScope: config.maxEntriesPerScope,
    ...options,
  });
  return { store, description: `PostgreSQL ${config.redactedUrl}`, close: () => store.close() };
}
