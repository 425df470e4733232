/**
 * Stored capabilities for the calls. The seller-capabilities workflow keeps each seller's answer and publishes it in
 * its memo. Calls use it to choose the wire version and the read strategy (activities/read-strategy.ts) instead of
 * probing. Reading the memo (describe, no worker needed) once per seller per TTL keeps it cheap; a seller whose
 * capabilities are unknown (workflow not started, no answer yet, Temporal slow) is called with the default wire
 * version and its read methods probed. A lookup never fails a call.
 */
import type { Client } from '@temporalio/client';
import { type SellerCapabilities, sdkAdcpVersionFor, storedCapabilitiesOf } from '../protocol/capabilities';
import { SELLER_CAPABILITIES_MEMO, sellerCapabilitiesWorkflowId } from '../contract/seller-capabilities';
import { type CallContext, type SellerAnswer, type SellerClient, withSellerOverrides } from './seller-client';

/** What calls need of a seller's stored capabilities. */
export interface StoredCapabilitiesLookup {
  get(sellerId: string): Promise<SellerCapabilities | undefined>;
}

export interface StoredCapabilitiesCacheOptions {
  client: Client;
  /** The task queue whose capabilities workflows are read (the worker's own). */
  taskQueue: string;
  /** How long a known answer is reused (default 60 s). */
  ttlMs?: number;
  /** How long "unknown" is reused before asking again (default 15 s). */
  unknownTtlMs?: number;
  /** Bound of one memo read (default 2 s). */
  timeoutMs?: number;
  now?: () => number;
}

/** A per-process TTL cache over the capabilities workflows' memos; concurrent lookups of one seller share one read. */
export class StoredCapabilitiesCache implements StoredCapabilitiesLookup {
  private readonly entries = new Map<string, { at: number; capabilities?: SellerCapabilities }>();
  private readonly inFlight = new Map<string, Promise<SellerCapabilities | undefined>>();
  /** Memo reads made (for tests and the bench: the cache's cost). */
  reads = 0;

  constructor(private readonly options: StoredCapabilitiesCacheOptions) {}

  async get(sellerId: string): Promise<SellerCapabilities | undefined> {
    const now = this.options.now ?? Date.now;
    const cached = this.entries.get(sellerId);
    if (cached) {
      const ttl = cached.capabilities ? (this.options.ttlMs ?? 60_000) : (this.options.unknownTtlMs ?? 15_000);
      if (now() - cached.at < ttl) return cached.capabilities;
    }
    const pending = this.inFlight.get(sellerId);
    if (pending) return pending;
    const read = this.read(sellerId)
      .then((capabilities) => {
        this.entries.set(sellerId, { at: now(), ...(capabilities ? { capabilities } : {}) });
        return capabilities;
      })
      .finally(() => this.inFlight.delete(sellerId));
    this.inFlight.set(sellerId, read);
    return read;
  }

  /** Forget a seller's answer (its stored strategy failed): the next lookup reads the memo again. */
  forget(sellerId: string): void {
    this.entries.delete(sellerId);
  }

  private async read(sellerId: string): Promise<SellerCapabilities | undefined> {
    this.reads += 1;
    const { client, taskQueue } = this.options;
    try {
      const handle = client.workflow.getHandle(sellerCapabilitiesWorkflowId(taskQueue, sellerId));
      const description = await client.withDeadline(Date.now() + (this.options.timeoutMs ?? 2_000), () =>
        handle.describe(),
      );
      const state = description.memo?.[SELLER_CAPABILITIES_MEMO] as { capabilities?: unknown } | undefined;
      return storedCapabilitiesOf(state?.capabilities);
    } catch {
      return undefined; // not started, not found, Temporal slow: the call goes on as if nothing were stored
    }
  }
}

/**
 * A SellerClient whose calls and reads are shaped for the wire version the seller's stored capabilities name: a 3.1
 * seller gets the 3.1 envelope (`adcp_version: "3.1"` beside `adcp_major_version`), a 3.0 seller the SDK's default
 * (`adcp_major_version` only). rc.2 is configured per seller (`adcp_version: "rc.2"` in the agents file: rc.2 sellers
 * predate the capabilities block) and shaped by the call plan. Unknown capabilities change nothing.
 */
export function withStoredWireVersion(
  seller: SellerClient,
  lookup: StoredCapabilitiesLookup | undefined,
): SellerClient {
  if (!lookup) return seller;
  async function shaped<R extends CallContext>(request: R): Promise<R> {
    if (request.adcpVersion) return request;
    const adcpVersion = sdkAdcpVersionFor(await lookup!.get(request.agent.id));
    return adcpVersion ? { ...request, adcpVersion } : request;
  }
  return withSellerOverrides(seller, {
    callTask: async (request): Promise<SellerAnswer> => seller.callTask(await shaped(request)),
    readTask: async (request): Promise<SellerAnswer> => seller.readTask(await shaped(request)),
    listTasks: async (request) => seller.listTasks(await shaped(request)),
  });
}
