/**
 * The seller-capabilities activity: one `get_adcp_capabilities` call (and, for MCP sellers, one tools/list) per
 * refresh, parsed into SellerCapabilities (protocol/capabilities.ts). A seller that does not answer is not an
 * activity failure: the outcome says it was unreachable and why, and the workflow keeps the last good answer.
 * Calls go through the per-seller circuit breaker the operation's calls use when it is shared (activities/index.ts),
 * and the outcome carries that breaker's state as this worker sees it.
 */
import { Context } from '@temporalio/activity';
import { type SellerRegistry, ConfigError } from '../config/sellers';
import { type SellerCapabilities, parseCapabilities } from '../protocol/capabilities';
import type { CircuitView } from '../contract/seller-capabilities';
import { type CircuitBreakerRegistry, countsAsCircuitFailure } from './circuit-breaker';
import { configFailure } from './failures';
import { boundAttempt } from './heartbeat';
import { raceSignal } from './mcp-connection';
import { sellerAccess } from './seller-access';
import { type CallContext, type SellerClient, createSdkSellerClient } from './seller-client';
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
      const base: Omit<CallContext, 'signal'> = { ...sellerAccess(deps.sellers, input.sellerId, env), timeoutMs };
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
      const bounds = boundAttempt(timeoutMs, activity);
      const signal = bounds.signal;
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
        if (error instanceof ConfigError) throw configFailure(error.message);
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
        bounds.end();
      }
    },
  };
}

export type CapabilityActivities = ReturnType<typeof createCapabilityActivities>;
