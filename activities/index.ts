/**
 * Activities: the operation's I/O. Each makes one protocol call to one seller through @adcp/sdk and turns the
 * answer into a TaskSnapshot, or into an ApplicationFailure whose type and retryability fit the error.
 * They come from a factory so the worker wires real dependencies and tests pass their own.
 */
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { type AgentConfig, type AgentRegistry, ConfigError } from '../config/agents';
import {
  type AdcpError,
  type CircuitTransition,
  type Progress,
  type TaskSnapshot,
  CircuitBreakerRegistry,
  ProtocolViolation,
  classifyTransportFailure,
  countsAsCircuitFailure,
  retryDelayMs,
  taskSpec,
} from '../protocol';
import { buyerRefFor, idempotencyKeyFor, withBuyerRefs } from './idempotency';
import { type SellerClient, createSdkSellerClient, isUnknownToolError } from './seller-client';

export interface ActivityDependencies {
  agents: AgentRegistry;
  seller?: SellerClient;
  /** Base URL sellers use to reach the gateway; without it no webhooks are registered and polling carries it all. */
  publicBaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  /** Upper bound for one protocol call. */
  callTimeoutMs?: number;
  now?: () => number;
  random?: () => number;
  /** Per-seller circuit breakers (one registry per worker process); built from `circuitBreaker` when absent. */
  breakers?: CircuitBreakerRegistry;
  circuitBreaker?: { failureThreshold?: number; coolOffMs?: number };
}

/** Breaker transitions go to the worker's log (and, through it, to whatever collects the worker's logs). */
function logCircuitTransition(sellerId: string, transition: CircuitTransition): void {
  Context.current()
    .metricMeter.createCounter('adcp_seller_circuit_transitions', 'transitions', 'Per-seller circuit breaker state changes')
    .add(1, { seller: sellerId, from: transition.from, to: transition.to });
  const fields = { sellerId, from: transition.from, to: transition.to, reason: transition.reason, at: new Date(transition.at).toISOString() };
  if (transition.to === 'open') log.warn('Seller circuit opened: calls fail fast until the cool-off ends', fields);
  else log.info(`Seller circuit ${transition.to}`, fields);
}

export interface CallTaskInput {
  operationId: string;
  agentId: string;
  task: string;
  params: Record<string, unknown>;
  /** Which step of the operation this call is ('call', 'input-1', ...): part of the idempotency key. */
  step: string;
  contextId?: string;
  taskId?: string;
}

export interface CallTaskOutcome {
  snapshot: TaskSnapshot;
  webhookRegistered: boolean;
}

export interface LookInput {
  operationId: string;
  agentId: string;
  taskId: string;
  contextId?: string;
}

export interface FindTaskInput {
  operationId: string;
  agentId: string;
  task: string;
  /** The call step whose idempotency key the seller task would carry. */
  step: string;
}

export interface FoundTask {
  /** false when the seller has no tasks/list. */
  supported: boolean;
  snapshot?: TaskSnapshot;
  note: string;
}

export interface AwaitChangeInput extends LookInput {
  since: { status: string; progress: Progress | null };
}

const HEARTBEAT_EVERY_MS = 5_000;
const IDEMPOTENCY_REFUSALS = new Set(['IDEMPOTENCY_CONFLICT', 'IDEMPOTENCY_EXPIRED']);
const RETRY_POLICY = { initialMs: 1_000, maxMs: 60_000, coefficient: 2, jitter: 0.25 };

function failureFor(error: AdcpError, type: string, nextRetryDelayMs?: number): ApplicationFailure {
  const message = `${error.code}: ${error.message}`;
  if (error.recovery !== 'transient') {
    return ApplicationFailure.create({ type, message, nonRetryable: true, details: [error] });
  }
  return ApplicationFailure.create({
    type,
    message,
    details: [error],
    ...(nextRetryDelayMs !== undefined ? { nextRetryDelay: nextRetryDelayMs } : {}),
  });
}

export function createActivities(deps: ActivityDependencies) {
  const seller = deps.seller ?? createSdkSellerClient();
  const env = deps.env ?? process.env;
  const callTimeoutMs = deps.callTimeoutMs ?? 60_000;
  const random = deps.random ?? Math.random;
  const now = deps.now ?? Date.now;
  const breakers =
    deps.breakers ??
    new CircuitBreakerRegistry({ ...deps.circuitBreaker, now, onTransition: logCircuitTransition });

  /** Runs one call with the activity's cancellation and a timeout wired into the HTTP request, heartbeating. */
  async function guarded<T>(work: (context: { agent: AgentConfig; token?: string; signal: AbortSignal }) => Promise<T>, agentId: string): Promise<T> {
    const context = Context.current();
    let agent: AgentConfig;
    let token: string | undefined;
    try {
      agent = deps.agents.get(agentId);
      token = deps.agents.token(agentId, env);
    } catch (error) {
      throw ApplicationFailure.create({ type: 'ConfigError', message: (error as Error).message, nonRetryable: true });
    }
    const breaker = breakers.for(agentId);
    const permission = breaker.beforeCall();
    if (!permission.allowed) {
      const error: AdcpError = {
        code: 'SERVICE_UNAVAILABLE',
        message: `Calls to seller "${agentId}" are paused after repeated failures; the next try is in ${Math.ceil(permission.retryAfterMs / 1000)} s.`,
        recovery: 'transient',
        retryAfterSeconds: permission.retryAfterMs / 1000,
      };
      throw ApplicationFailure.create({ type: 'CircuitOpen', message: error.message, details: [error], nextRetryDelay: permission.retryAfterMs });
    }
    const signal = AbortSignal.any([context.cancellationSignal, AbortSignal.timeout(callTimeoutMs)]);
    const ticker = setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
    try {
      const result = await work({ agent, token, signal });
      breaker.recordSuccess();
      return result;
    } catch (error) {
      if (error instanceof ApplicationFailure) {
        // The seller answered, but with an error: only errors about its own health count against it.
        const detail = error.details?.[0] as AdcpError | undefined;
        if (detail && countsAsCircuitFailure(detail)) breaker.recordFailure();
        else breaker.recordSuccess();
        throw error;
      }
      if (error instanceof ConfigError) {
        throw ApplicationFailure.create({ type: 'ConfigError', message: error.message, nonRetryable: true });
      }
      if (error instanceof ProtocolViolation) {
        breaker.recordSuccess(); // it answered; the answer is the problem
        const adcpError: AdcpError = { code: 'PROTOCOL_VIOLATION', message: error.message, recovery: 'terminal' };
        throw ApplicationFailure.create({ type: 'ProtocolViolation', message: error.message, nonRetryable: true, details: [adcpError] });
      }
      if (context.cancellationSignal.aborted) throw error; // the activity was cancelled: let the SDK report it
      const classified = classifyTransportFailure(error, now());
      context.metricMeter
        .createCounter('adcp_seller_call_failures', 'failures', 'Failed protocol calls to sellers, by error code')
        .add(1, { seller: agentId, code: classified.code, recovery: classified.recovery });
      if (countsAsCircuitFailure(classified)) breaker.recordFailure();
      else breaker.recordSuccess();
      throw failureFor(classified, 'TransportError', retryDelayMs(classified, context.info.attempt, RETRY_POLICY, random));
    } finally {
      clearInterval(ticker);
    }
  }

  async function findMediaBuyByBuyerRef(agent: AgentConfig, token: string | undefined, signal: AbortSignal, buyerRef: string): Promise<Record<string, unknown> | undefined> {
    const answer = await seller.callTask({ agent, token, signal, task: 'get_media_buys', args: { buyer_refs: [buyerRef] } });
    const buys = answer.snapshot.result?.media_buys;
    if (!Array.isArray(buys)) return undefined;
    // Filter again: a seller that ignores the filter must not make us adopt someone else's buy.
    return buys.find((buy): buy is Record<string, unknown> => !!buy && typeof buy === 'object' && (buy as Record<string, unknown>).buyer_ref === buyerRef);
  }

  function pushNotificationConfig(agent: AgentConfig, operationId: string): Record<string, unknown> | undefined {
    if (!deps.publicBaseUrl) return undefined;
    const config: Record<string, unknown> = { url: `${deps.publicBaseUrl}/webhooks/adcp/${encodeURIComponent(operationId)}` };
    const webhooks = agent.webhooks;
    if (webhooks?.scheme === 'hmac-sha256' && webhooks.secret_env) {
      const secret = env[webhooks.secret_env];
      if (!secret) throw new ConfigError(`Seller "${agent.id}" needs its webhook secret in ${webhooks.secret_env}, which is not set.`);
      config.authentication = { schemes: ['HMAC-SHA256'], credentials: secret };
    } else if (webhooks?.scheme === 'bearer' && webhooks.token_env) {
      const bearer = env[webhooks.token_env];
      if (!bearer) throw new ConfigError(`Seller "${agent.id}" needs its webhook token in ${webhooks.token_env}, which is not set.`);
      config.authentication = { schemes: ['Bearer'], credentials: bearer };
    }
    return config;
  }

  async function look(input: LookInput): Promise<TaskSnapshot> {
    return guarded(({ agent, token, signal }) => seller.getTask({ agent, token, signal, taskId: input.taskId, contextId: input.contextId }), input.agentId);
  }

  return {
    /** Calls the task (or resumes it on its context) once. Mutations carry a key derived from operation and step. */
    async callTask(input: CallTaskInput): Promise<CallTaskOutcome> {
      const spec = taskSpec(input.task);
      return guarded(async ({ agent, token, signal }) => {
        let args: Record<string, unknown> = { ...input.params };
        if (agent.adcp_version === 'rc.2' && input.task === 'create_media_buy') args = withBuyerRefs(args, input.operationId);
        if (spec.mutating) args.idempotency_key = idempotencyKeyFor(input.operationId, input.step);
        if (input.contextId && agent.protocol === 'mcp') args.context_id = input.contextId;
        const push = spec.pushNotifications ? pushNotificationConfig(agent, input.operationId) : undefined;
        if (push && agent.protocol === 'mcp') args.push_notification_config = push;
        const answer = await seller.callTask({
          agent,
          token,
          signal,
          task: input.task,
          args,
          ...(input.contextId ? { contextId: input.contextId } : {}),
          ...(input.taskId ? { taskId: input.taskId } : {}),
          ...(push ? { pushNotificationConfig: push } : {}),
        });
        const firstError = answer.snapshot.errors?.[0];
        if (answer.callError && firstError && IDEMPOTENCY_REFUSALS.has(firstError.code)) {
          // The seller will not replay this key: the workflow reconciles before it uses another one.
          throw ApplicationFailure.create({ type: 'IdempotencyKeyRefused', message: `${firstError.code}: ${firstError.message}`, nonRetryable: true, details: [firstError] });
        }
        if (answer.callError && firstError?.recovery === 'transient') {
          // The seller refused the call for now (rate limit, overload): try again, as late as it asked.
          const attempt = Context.current().info.attempt;
          throw failureFor(firstError, 'SellerTransientError', retryDelayMs(firstError, attempt, RETRY_POLICY, random));
        }
        return { snapshot: answer.snapshot, webhookRegistered: push !== undefined };
      }, input.agentId);
    },

    /** One `tasks/get`. */
    async pollTask(input: LookInput): Promise<TaskSnapshot> {
      return look(input);
    },

    /**
     * One `tasks/get` that fails (benignly, to be retried by the retry policy at the polling interval) while the
     * task has not moved. Retries write no history, so a day of polling costs the same few events as one poll.
     */
    async awaitTaskChange(input: AwaitChangeInput): Promise<{ snapshot: TaskSnapshot; polls: number }> {
      const context = Context.current();
      const attempt = context.info.attempt;
      let snapshot: TaskSnapshot;
      try {
        snapshot = await look(input);
      } catch (error) {
        if (error instanceof ApplicationFailure && error.nonRetryable) throw error;
        // A failed look is one more reason to look again at the same cadence.
        throw ApplicationFailure.create({ type: 'TaskLookFailed', message: (error as Error).message, category: 'BENIGN', details: [{ polls: attempt }] });
      }
      const unchanged =
        snapshot.status === input.since.status &&
        JSON.stringify(snapshot.progress ?? null) === JSON.stringify(input.since.progress);
      if (unchanged) {
        // The attempt count rides along: when the budget ends, this failure is what the workflow sees.
        throw ApplicationFailure.create({ type: 'TaskUnchanged', message: `still ${snapshot.status}`, category: 'BENIGN', details: [{ polls: attempt }] });
      }
      return { snapshot, polls: attempt };
    },

    /**
     * Reconciliation of one call (§1.7): the seller's tasks/list filtered by type and by the call's idempotency key
     * (`context_contains` searches the request's references). Found: that task, read with tasks/get. Read-only.
     */
    async findSellerTask(input: FindTaskInput): Promise<FoundTask> {
      const key = idempotencyKeyFor(input.operationId, input.step);
      return guarded(async ({ agent, token, signal }) => {
        // rc.2 sellers know the buy by its buyer_ref (3.x removed it: there the idempotency key is the reference).
        const rc2Create = agent.adcp_version === 'rc.2' && input.task === 'create_media_buy';
        const reference = rc2Create ? buyerRefFor(input.operationId) : key;
        let page;
        try {
          page = await seller.listTasks({ agent, token, signal, filters: { task_types: [input.task], context_contains: reference }, maxResults: 10 });
        } catch (error) {
          if (!isUnknownToolError(error)) throw error;
          page = { tasks: [], supported: false };
        }
        const match = page.tasks.filter((task) => !task.taskType || task.taskType === input.task).sort((a, b) => (a.createdAt ?? '').localeCompare(b.createdAt ?? ''))[0];
        if (match) {
          const snapshot = await seller.getTask({ agent, token, signal, taskId: match.taskId, ...(match.contextId ? { contextId: match.contextId } : {}) });
          return { supported: true, snapshot: { ...snapshot, taskId: snapshot.taskId ?? match.taskId }, note: `found ${match.taskId} (${match.status}) by ${rc2Create ? 'its buyer_ref' : 'its idempotency key'}` };
        }
        if (rc2Create) {
          // A create answered synchronously leaves no task: look for the buy itself (get_media_buys by buyer_ref).
          const buy = await findMediaBuyByBuyerRef(agent, token, signal, reference);
          if (buy) return { supported: true, snapshot: { status: 'completed', result: buy }, note: `found media buy ${String(buy.media_buy_id)} by its buyer_ref` };
          return { supported: true, note: `no task and no media buy at ${agent.id} carries buyer_ref ${reference}` };
        }
        if (!page.supported) return { supported: false, note: `${agent.id} has no tasks/list` };
        return { supported: true, note: `no ${input.task} task at ${agent.id} carries key ${key}` };
      }, input.agentId);
    },

    async cancelSellerTask(input: LookInput): Promise<{ notified: boolean; note: string }> {
      return guarded(({ agent, token, signal }) => seller.cancelTask({ agent, token, signal, taskId: input.taskId, contextId: input.contextId }), input.agentId);
    },
  };
}

export type OperationActivities = ReturnType<typeof createActivities>;
