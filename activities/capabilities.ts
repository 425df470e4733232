/**
 * The seller-capabilities activity: one `get_adcp_capabilities` call (and, for MCP sellers, one tools/list) per
 * refresh, parsed into SellerCapabilities (protocol/capabilities.ts). A seller that does not answer is not an
 * activity failure: the outcome says it was unreachable and why, and the workflow keeps the last good answer.
 * Calls go through the worker's per-seller circuit breaker when the worker shares one (workers/worker.ts), and the
 * outcome carries that breaker's state as this worker sees it.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { type SellerRegistry, ConfigError } from '../config/sellers';
import {
  type SellerCapabilities,
  parseCapabilities,
  sdkAdcpVersionFor,
  storedCapabilitiesOf,
} from '../protocol/capabilities';
import {
  type CircuitView,
  SELLER_CAPABILITIES_MEMO,
  sellerCapabilitiesWorkflowId,
} from '../contract/seller-capabilities';
import { type CircuitBreakerRegistry, countsAsCircuitFailure } from './circuit-breaker';
import { deadlineSignal } from './linked-signal';
import { raceSignal } from './mcp-connection';
import { type CallContext, type SellerAnswer, type SellerClient, createSdkSellerClient } from './seller-client';
import { classifyTransportFailure } from './transport-errors';

export interface CapabilityActivityDependencies {
  sellers: SellerRegistry;
  seller?: SellerClient;
  env?: NodeJS.ProcessEnv;
  breakers?: CircuitBreakerRegistry;
  /** Hard bound of each of the two calls (default 30 s). */
  timeoutMs?: number;
  now?: () => number;
}

export interface FetchCapabilitiesInput {
  sellerId: string;
}

export interface FetchCapabilitiesOutcome {
  sellerId: string;
  at: string;
  reachable: boolean;
  capabilities?: SellerCapabilities;
  /** Why the seller could not be asked or did not answer (code: message). */
  error?: { code: string; message: string };
  circuit: CircuitView;
  /** How long the get_adcp_capabilities call took. */
  latencyMs?: number;
}

const HEARTBEAT_EVERY_MS = 2_000;

export function createCapabilityActivities(deps: CapabilityActivityDependencies) {
  const seller = deps.seller ?? createSdkSellerClient();
  const env = deps.env ?? process.env;
  const timeoutMs = deps.timeoutMs ?? 30_000;
  const now = deps.now ?? Date.now;

  function circuitView(sellerId: string): CircuitView {
    const snapshot = deps.breakers?.get(sellerId)?.snapshot();
    return {
      state: snapshot?.state ?? (deps.breakers ? 'closed' : 'unknown'),
      ...(snapshot ? { consecutiveFailures: snapshot.consecutiveFailures } : {}),
      ...(snapshot?.retryAt !== undefined ? { retryAt: new Date(snapshot.retryAt).toISOString() } : {}),
      observedAt: new Date(now()).toISOString(),
    };
  }

  return {
    /** get_adcp_capabilities (+ tools/list for MCP): what the seller says it can do, or why it did not say. */
    async fetchSellerCapabilities(input: FetchCapabilitiesInput): Promise<FetchCapabilitiesOutcome> {
      const activity = Context.current();
      const at = new Date(now()).toISOString();
      let base: Omit<CallContext, 'signal'>;
      try {
        base = {
          agent: deps.sellers.get(input.sellerId),
          token: deps.sellers.token(input.sellerId, env),
          timeoutMs,
        };
      } catch (error) {
        throw ApplicationFailure.create({ type: 'ConfigError', message: (error as Error).message, nonRetryable: true });
      }
      const breaker = deps.breakers?.for(input.sellerId);
      const permission = breaker?.beforeCall();
      if (permission && !permission.allowed) {
        return {
          sellerId: input.sellerId,
          at,
          reachable: false,
          error: {
            code: 'CIRCUIT_OPEN',
            message: `Calls to seller "${input.sellerId}" are paused after repeated failures; not asked.`,
          },
          circuit: circuitView(input.sellerId),
        };
      }
      const deadline = deadlineSignal(activity.cancellationSignal, timeoutMs);
      const signal = deadline.signal;
      const ticker = setInterval(() => activity.heartbeat(), HEARTBEAT_EVERY_MS);
      const startedAt = now();
      try {
        const context: CallContext = { ...base, signal };
        const answer = await raceSignal(signal, () =>
          seller.callTask({ ...context, task: 'get_adcp_capabilities', args: {} }),
        );
        const latencyMs = now() - startedAt;
        const error = answer.snapshot.errors?.[0];
        if (answer.callError || answer.snapshot.status === 'failed') {
          if (error && countsAsCircuitFailure(error)) breaker?.recordFailure();
          else breaker?.recordSuccess();
          return {
            sellerId: input.sellerId,
            at,
            reachable: true,
            error: {
              code: error?.code ?? 'CAPABILITIES_UNAVAILABLE',
              message: error?.message ?? 'get_adcp_capabilities failed',
            },
            circuit: circuitView(input.sellerId),
            latencyMs,
          };
        }
        breaker?.recordSuccess();
        let description: Awaited<ReturnType<SellerClient['describe']>>;
        try {
          description = await raceSignal(signal, () => seller.describe(context));
        } catch {
          description = undefined; // a seller that will not list its tools is described by its protocols
        }
        const capabilities = parseCapabilities(answer.snapshot.result, {
          ...(description ? { tools: description.tools, mcpTasks: description.mcpTasks } : {}),
          ...(base.agent.adcp_version ? { configuredVersion: base.agent.adcp_version } : {}),
        });
        return {
          sellerId: input.sellerId,
          at,
          reachable: true,
          capabilities,
          circuit: circuitView(input.sellerId),
          latencyMs,
        };
      } catch (error) {
        if (activity.cancellationSignal.aborted) throw error;
        if (error instanceof ConfigError)
          throw ApplicationFailure.create({ type: 'ConfigError', message: error.message, nonRetryable: true });
        const classified = classifyTransportFailure(error, now());
        if (countsAsCircuitFailure(classified)) breaker?.recordFailure();
        return {
          sellerId: input.sellerId,
          at,
          reachable: false,
          error: { code: classified.code, message: classified.message },
          circuit: circuitView(input.sellerId),
        };
      } finally {
        clearInterval(ticker);
        deadline.dispose();
      }
    },
  };
}

export type CapabilityActivities = ReturnType<typeof createCapabilityActivities>;

// ---- stored capabilities for the calls ----------------------------------------------------------------------------
//
// The seller-capabilities workflow keeps each seller's answer and publishes it in its memo. Calls use it to choose the
// wire version and the read strategy (activities/read-strategy.ts) instead of probing. Reading the memo (describe,
// no worker needed) once per seller per TTL keeps it cheap; a seller whose capabilities are unknown (workflow not
// started, no answer yet, Temporal slow) is called as before: default wire version, read methods probed. A lookup
// never fails a call.

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
  const overrides: Partial<SellerClient> = {
    callTask: async (request): Promise<SellerAnswer> => seller.callTask(await shaped(request)),
    readTask: async (request): Promise<SellerAnswer> => seller.readTask(await shaped(request)),
    listTasks: async (request) => seller.listTasks(await shaped(request)),
  };
  return new Proxy(seller, {
    get(target, property) {
      if (typeof property === 'string' && property in overrides) return overrides[property as keyof SellerClient];
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
