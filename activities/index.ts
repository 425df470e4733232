/**
 * Activities: the operation's I/O. Each makes one protocol call to one seller through @adcp/sdk and turns the
 * answer into a TaskSnapshot, or into an ApplicationFailure whose type and retryability fit the error.
 * They come from a factory so the worker wires real dependencies and tests pass their own.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { type AgentConfig, type AgentRegistry, ConfigError } from '../config/agents';
import {
  type AdcpError,
  type Progress,
  type TaskSnapshot,
  ProtocolViolation,
  classifyTransportFailure,
  retryDelayMs,
  taskSpec,
} from '../protocol';
import { idempotencyKeyFor } from './idempotency';
import { type SellerClient, createSdkSellerClient } from './seller-client';

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

export interface AwaitChangeInput extends LookInput {
  since: { status: string; progress: Progress | null };
  /** The first attempt waits this long before it looks (later attempts are spaced by the retry policy). */
  firstLookAfterMs?: number;
}

const HEARTBEAT_EVERY_MS = 5_000;
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
    const signal = AbortSignal.any([context.cancellationSignal, AbortSignal.timeout(callTimeoutMs)]);
    const ticker = setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
    try {
      return await work({ agent, token, signal });
    } catch (error) {
      if (error instanceof ApplicationFailure) throw error;
      if (error instanceof ConfigError) {
        throw ApplicationFailure.create({ type: 'ConfigError', message: error.message, nonRetryable: true });
      }
      if (error instanceof ProtocolViolation) {
        const adcpError: AdcpError = { code: 'PROTOCOL_VIOLATION', message: error.message, recovery: 'terminal' };
        throw ApplicationFailure.create({ type: 'ProtocolViolation', message: error.message, nonRetryable: true, details: [adcpError] });
      }
      if (context.cancellationSignal.aborted) throw error; // the activity was cancelled: let the SDK report it
      const classified = classifyTransportFailure(error, deps.now?.() ?? Date.now());
      throw failureFor(classified, 'TransportError', retryDelayMs(classified, context.info.attempt, RETRY_POLICY, random));
    } finally {
      clearInterval(ticker);
    }
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
        const args: Record<string, unknown> = { ...input.params };
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
      if (attempt === 1 && input.firstLookAfterMs) await context.sleep(input.firstLookAfterMs); // rejects on cancel
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

    async cancelSellerTask(input: LookInput): Promise<{ notified: boolean; note: string }> {
      return guarded(({ agent, token, signal }) => seller.cancelTask({ agent, token, signal, taskId: input.taskId, contextId: input.contextId }), input.agentId);
    },
  };
}

export type OperationActivities = ReturnType<typeof createActivities>;
