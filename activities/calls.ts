/**
 * The operation's calls: `planCall` decides everything a call sends, once, and `sendCall` sends exactly that. The
 * plan is recorded in history, so every retry of a mutation sends the same bytes behind the same idempotency key.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { type SellerConfig, type SellerRegistry, ConfigError } from '../config/sellers';
import type { CallPlan, CallTimeouts, PlanCallInput, SendCallInput, SendCallOutcome } from '../contract/activities';
import { contextWithOperation, taskSpec } from '../protocol';
import type { EnsureStorable } from './answer-size';
import { configFailure, sellerTransientFailure } from './failures';
import { idempotencyKeyFor, withBuyerRefs } from './idempotency';
import { sellerConfig } from './seller-access';
import type { AnswerCheck } from './schema-check';
import { type GuardedCall, earlierAttemptsOf } from './seller-call';
import type { SellerClient } from './seller-client';
import type { RetryBackoffPolicy } from './transport-errors';

export interface CallActivityDependencies {
  sellers: SellerRegistry;
  /** The seller client calls go through (with the stored wire version, the reporting credentials and a span each). */
  seller: SellerClient;
  guarded: GuardedCall;
  ensureStorable: EnsureStorable;
  /** What calls are planned with (recorded in the plan). */
  timeouts: CallTimeouts;
  /** Where webhook credentials are read from at send time. */
  env: NodeJS.ProcessEnv;
  /** When a seller's "not now" without a retry_after is tried again: the worker's backoff, with jitter. */
  random: () => number;
  backoff: RetryBackoffPolicy;
  /** Base URL sellers use to reach the gateway; without it no webhooks are registered and polling carries it all. */
  publicBaseUrl?: string;
  /** Checks an answer against the schemas of the version the seller declares (warn mode); none: unchecked. */
  checkAnswer?: AnswerCheck;
}

const IDEMPOTENCY_REFUSALS = new Set(['IDEMPOTENCY_CONFLICT', 'IDEMPOTENCY_EXPIRED']);

/** The webhook authentication block the seller's configured scheme needs (legacy HMAC or Bearer), without secrets. */
function webhookScheme(agent: SellerConfig): { schemes: string[]; env: string } | undefined {
  const webhooks = agent.webhooks;
  if (webhooks?.scheme === 'hmac-sha256' && webhooks.secret_env)
    return { schemes: ['HMAC-SHA256'], env: webhooks.secret_env };
  if (webhooks?.scheme === 'bearer' && webhooks.token_env) return { schemes: ['Bearer'], env: webhooks.token_env };
  return undefined;
}

export function createCallActivities(deps: CallActivityDependencies) {
  const { seller, guarded, ensureStorable } = deps;

  function plan(input: PlanCallInput): CallPlan {
    const agent = sellerConfig(deps.sellers, input.sellerId);
    try {
      deps.sellers.checkTenantAccess(input.sellerId, input.tenant, input.params.account);
    } catch (error) {
      throw configFailure((error as Error).message);
    }
    const spec = taskSpec(input.task);
    let args: Record<string, unknown> = { ...input.params };
    if (agent.adcp_version === 'rc.2' && input.task === 'create_media_buy')
      args = withBuyerRefs(args, input.operationId);
    // The seller echoes a create's context on its read surfaces (3.1 requires it): with the operation's ID in it, a
    // listing of the seller's buys says which buy this create made when its answer never came back.
    else if (input.task === 'create_media_buy') args.context = contextWithOperation(args.context, input.operationId);
    if (spec.mutating) args.idempotency_key = idempotencyKeyFor(input.operationId, input.step);
    if (input.contextId && agent.protocol === 'mcp') args.context_id = input.contextId;
    let pushNotificationConfig: CallPlan['pushNotificationConfig'];
    let webhookCredentialRef: CallPlan['webhookCredentialRef'];
    if (spec.pushNotifications && deps.publicBaseUrl) {
      const scheme = webhookScheme(agent);
      pushNotificationConfig = {
        url: `${deps.publicBaseUrl}/webhooks/adcp/${encodeURIComponent(input.sellerId)}/${encodeURIComponent(input.operationId)}`,
        operation_id: input.operationId,
        ...(scheme ? { authentication: { schemes: scheme.schemes } } : {}),
      };
      if (scheme) webhookCredentialRef = { env: scheme.env };
      if (agent.protocol === 'mcp') args.push_notification_config = pushNotificationConfig;
    }
    return {
      operationId: input.operationId,
      sellerId: input.sellerId,
      task: input.task,
      step: input.step,
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      protocol: agent.protocol,
      args,
      ...(pushNotificationConfig ? { pushNotificationConfig } : {}),
      ...(webhookCredentialRef ? { webhookCredentialRef } : {}),
      ...(input.contextId ? { contextId: input.contextId } : {}),
      ...(input.taskId ? { taskId: input.taskId } : {}),
      timeouts: deps.timeouts,
    };
  }

  /** The push config as sent: the plan's, plus the credential read from the environment variable it names. */
  function pushWithCredential(callPlan: CallPlan): Record<string, unknown> | undefined {
    const push = callPlan.pushNotificationConfig;
    if (!push) return undefined;
    const ref = callPlan.webhookCredentialRef;
    if (!ref || !push.authentication) return { ...push };
    const credentials = deps.env[ref.env];
    if (!credentials)
      throw new ConfigError(
        `Seller "${callPlan.sellerId}" needs its webhook credential in ${ref.env}, which is not set.`,
      );
    return { ...push, authentication: { ...push.authentication, credentials } };
  }

  async function send(callPlan: CallPlan): Promise<SendCallOutcome> {
    return guarded(
      callPlan.sellerId,
      callPlan.timeouts.callMs,
      async (context) => {
        const push = pushWithCredential(callPlan);
        const args =
          push && callPlan.protocol === 'mcp' ? { ...callPlan.args, push_notification_config: push } : callPlan.args;
        const answer = await seller.callTask({
          ...context,
          task: callPlan.task,
          args,
          ...(callPlan.contextId ? { contextId: callPlan.contextId } : {}),
          ...(callPlan.taskId ? { taskId: callPlan.taskId } : {}),
          ...(push ? { pushNotificationConfig: push } : {}),
        });
        const firstError = answer.snapshot.errors?.[0];
        if (answer.callError && firstError && IDEMPOTENCY_REFUSALS.has(firstError.code)) {
          // The seller will not replay this key: the workflow reconciles before it uses another one.
          throw ApplicationFailure.create({
            type: 'IdempotencyKeyRefused',
            message: `${firstError.code}: ${firstError.message}`,
            nonRetryable: true,
            details: [firstError],
          });
        }
        if (answer.callError && firstError?.recovery === 'transient') {
          // The seller refused the call for now (rate limit, overload, IDEMPOTENCY_IN_FLIGHT: the first request with
          // this key still runs): the same plan, so the same key, again, as late as it asked.
          throw sellerTransientFailure(firstError, deps.random, deps.backoff);
        }
        const schemaWarnings =
          !answer.callError && deps.checkAnswer
            ? await deps.checkAnswer(callPlan.sellerId, callPlan.task, answer.body)
            : [];
        return ensureStorable(
          {
            snapshot: answer.snapshot,
            webhookRegistered: push !== undefined,
            ...(schemaWarnings.length > 0 ? { schemaWarnings } : {}),
            // A refusal answered after earlier attempts says how many came before it.
            ...(answer.callError ? earlierAttemptsOf(Context.current().info.attempt) : {}),
            ...(answer.mcpTaskId && answer.mcpTaskId === answer.snapshot.taskId ? { mcpTaskId: answer.mcpTaskId } : {}),
          },
          `The ${callPlan.task} answer from ${callPlan.sellerId}`,
        );
      },
      callPlan.tenant,
    );
  }

  return {
    /**
     * Decides everything a call sends, once, as a LOCAL activity: the plan is recorded in history, so every retry of
     * sendCall sends the same bytes whatever the worker's environment (a worker restarted without
     * ADCP_PUBLIC_BASE_URL does not change the body behind an idempotency key). Holds no secret.
     */
    async planCall(input: PlanCallInput): Promise<CallPlan> {
      return plan(input);
    },

    /**
     * Sends exactly the plan's arguments (plus the webhook credential it names) once. A read comes with `planInput`
     * instead: planned here, in the same local activity (it has no idempotency key to pin).
     */
    async sendCall(input: SendCallInput): Promise<SendCallOutcome> {
      if (input.plan) return send(input.plan);
      if (!input.planInput || taskSpec(input.planInput.task).mutating) {
        throw configFailure(
          `sendCall needs the plan recorded by planCall${input.planInput ? ` for a ${input.planInput.task} call (it mutates)` : ''}.`,
        );
      }
      const callPlan = plan(input.planInput);
      return { ...(await send(callPlan)), timeouts: callPlan.timeouts };
    },
  };
}

export type CallActivities = ReturnType<typeof createCallActivities>;
