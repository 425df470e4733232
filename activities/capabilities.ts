/**
 * The seller-capabilities activity: one `get_adcp_capabilities` call (and, for MCP sellers, one tools/list) per
 * refresh, parsed into SellerCapabilities (protocol/capabilities.ts). A seller that does not answer is not an
 * activity failure: the outcome says it was unreachable and why, and the workflow keeps the last good answer.
 * Calls go through the worker's per-seller circuit breaker when the worker shares one (workers/worker.ts), and the
 * outcome carries that breaker's state as this worker sees it.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { type AgentRegistry, ConfigError } from '../config/agents';
import { type SellerCapabilities, parseCapabilities } from '../protocol/capabilities';
import { type CircuitBreakerRegistry, type CircuitBreakerSnapshot, countsAsCircuitFailure } from './circuit-breaker';
import { deadlineSignal } from './linked-signal';
import { raceSignal } from './mcp-connection';
import { type CallContext, type SellerClient, createSdkSellerClient } from './seller-client';
import { classifyTransportFailure } from './transport-errors';

export interface CapabilityActivityDependencies {
  agents: AgentRegistry;
  seller?: SellerClient;
  env?: NodeJS.ProcessEnv;
  breakers?: CircuitBreakerRegistry;
  /** Hard bound of each of the two calls (default 30 s). */
  timeoutMs?: number;
  now?: () => number;
}

export interface FetchCapabilitiesInput {
  agentId: string;
}

export interface CircuitView {
  state: CircuitBreakerSnapshot['state'] | 'unknown';
  consecutiveFailures?: number;
  retryAt?: string;
  /** The worker-local breaker this view comes from (each worker process keeps its own). */
  observedAt: string;
}

export interface FetchCapabilitiesOutcome {
  agentId: string;
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

  function circuitView(agentId: string): CircuitView {
    const snapshot = deps.breakers?.get(agentId)?.snapshot();
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
          agent: deps.agents.get(input.agentId),
          token: deps.agents.token(input.agentId, env),
          timeoutMs,
        };
      } catch (error) {
        throw ApplicationFailure.create({ type: 'ConfigError', message: (error as Error).message, nonRetryable: true });
      }
      const breaker = deps.breakers?.for(input.agentId);
      const permission = breaker?.beforeCall();
      if (permission && !permission.allowed) {
        return {
          agentId: input.agentId,
          at,
          reachable: false,
          error: {
            code: 'CIRCUIT_OPEN',
            message: `Calls to seller "${input.agentId}" are paused after repeated failures; not asked.`,
          },
          circuit: circuitView(input.agentId),
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
            agentId: input.agentId,
            at,
            reachable: true,
            error: {
              code: error?.code ?? 'CAPABILITIES_UNAVAILABLE',
              message: error?.message ?? 'get_adcp_capabilities failed',
            },
            circuit: circuitView(input.agentId),
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
          agentId: input.agentId,
          at,
          reachable: true,
          capabilities,
          circuit: circuitView(input.agentId),
          latencyMs,
        };
      } catch (error) {
        if (activity.cancellationSignal.aborted) throw error;
        if (error instanceof ConfigError)
          throw ApplicationFailure.create({ type: 'ConfigError', message: error.message, nonRetryable: true });
        const classified = classifyTransportFailure(error, now());
        if (countsAsCircuitFailure(classified)) breaker?.recordFailure();
        return {
          agentId: input.agentId,
          at,
          reachable: false,
          error: { code: classified.code, message: classified.message },
          circuit: circuitView(input.agentId),
        };
      } finally {
        clearInterval(ticker);
        deadline.dispose();
      }
    },
  };
}

export type CapabilityActivities = ReturnType<typeof createCapabilityActivities>;
