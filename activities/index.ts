/**
 * Activities: the operation's I/O. Each makes protocol calls to one seller through @adcp/sdk and turns the answer
 * into a TaskSnapshot, or into an ApplicationFailure whose type and retryability fit the error.
 * They come from a factory so the worker wires real dependencies and tests pass their own.
 *
 * The contract with the workflow is contract/activities.ts (planCall, sendCall, readTask, awaitTaskMoveOnCadence,
 * findLostTask, cancelAtSeller).
 */
import { gzipSync } from 'node:zlib';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { type SellerConfig, type SellerRegistry, ConfigError } from '../config/sellers';
import { type AdcpError, type TaskSnapshot, ProtocolViolation, describeError, taskSpec } from '../protocol';
import { type CircuitTransition, CircuitBreakerRegistry, countsAsCircuitFailure } from './circuit-breaker';
import type {
  AwaitTaskMoveOnCadenceInput,
  AwaitTaskMoveOutcome,
  CallPlan,
  CallTimeouts,
  CancelAtSellerInput,
  CancelAtSellerOutcome,
  FindLostTaskInput,
  FindLostTaskOutcome,
  PlanCallInput,
  ReadTaskInput,
  ReadTaskOutcome,
  SendCallInput,
  SendCallOutcome,
} from '../contract/activities';
import { buyerRefFor, idempotencyKeyFor, withBuyerRefs } from './idempotency';
import { raceSignal } from './mcp-connection';
import {
  type ReadRequest,
  SellerDescriptionCache,
  SellerRefusedReadForNow,
  readTaskWithStrategy,
} from './read-strategy';
import {
  type CallContext,
  type SellerClient,
  type TaskListPage,
  createSdkSellerClient,
  isUnknownToolError,
} from './seller-client';
import { classifyTransportFailure, retryDelayMs } from './transport-errors';
import type { NotificationSigningKey } from '../config/notification-key';
import { createNotificationActivities } from './notifications';
import { type StoredCapabilitiesLookup, withStoredWireVersion } from './capabilities';
import { tracedSellerClient } from '../observability/seller-spans';
import { deadlineSignal } from './linked-signal';

export interface ActivityDependencies {
  sellers: SellerRegistry;
  seller?: SellerClient;
  /** Base URL sellers use to reach the gateway; without it no webhooks are registered and polling carries it all. */
  publicBaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  /** Hard bound of one protocol call (ADCP_CALL_TIMEOUT_MS). */
  callTimeoutMs?: number;
  /** Hard bound of one read; default: the call timeout, at most 2 minutes (see callTimeouts). */
  readTimeoutMs?: number;
  now?: () => number;
  random?: () => number;
  /** Per-seller circuit breakers (one registry per worker process); built from `circuitBreaker` when absent. */
  breakers?: CircuitBreakerRegistry;
  circuitBreaker?: { failureThreshold?: number; coolOffMs?: number };
  /** Largest answer (gzip-compressed, as the payload codec stores it) an activity may return. Default 1.9 MB. */
  maxAnswerBytes?: number;
  /** Our RFC 9421 key for notifications to the buyer's systems (config/notification-key.ts); none: none are sent. */
  notificationKey?: NotificationSigningKey;
  /** The sellers' stored capabilities (activities/capabilities.ts): wire version and read strategy; none: probe. */
  storedCapabilities?: StoredCapabilitiesLookup;
}

export const DEFAULT_CALL_TIMEOUT_MS = 60_000;
/** A read (tasks/get and its fallbacks) is a small query: it gets the call timeout, but never more than this. */
export const MAX_READ_TIMEOUT_MS = 120_000;
/** Temporal refuses payloads over 2 MB; what stays under this after compression is safe to return. */
export const DEFAULT_MAX_ANSWER_BYTES = 1_900_000;
/** Below this, an answer is small enough that no compression estimate is needed. */
const ANSWER_SIZE_CHECK_FROM = 256 * 1024;

/** The timeouts a worker plans calls with: reads are bounded by the call timeout and by MAX_READ_TIMEOUT_MS. */
export function callTimeouts(callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, readTimeoutMs?: number): CallTimeouts {
  return { callMs: callTimeoutMs, readMs: readTimeoutMs ?? Math.min(callTimeoutMs, MAX_READ_TIMEOUT_MS) };
}

/** Breaker transitions go to the worker's log (and, through it, to whatever collects the worker's logs). */
export function logCircuitTransition(sellerId: string, transition: CircuitTransition): void {
  Context.current()
    .metricMeter.createCounter(
      'adcp_seller_circuit_transitions',
      'transitions',
      'Per-seller circuit breaker state changes',
    )
    .add(1, { seller: sellerId, from: transition.from, to: transition.to });
  const fields = {
    sellerId,
    from: transition.from,
    to: transition.to,
    reason: transition.reason,
    at: new Date(transition.at).toISOString(),
  };
  if (transition.to === 'open') log.warn('Seller circuit opened: calls fail fast until the cool-off ends', fields);
  else log.info(`Seller circuit ${transition.to}`, fields);
}

const HEARTBEAT_EVERY_MS = 2_000;
const IDEMPOTENCY_REFUSALS = new Set(['IDEMPOTENCY_CONFLICT', 'IDEMPOTENCY_EXPIRED']);
const RETRY_POLICY = { initialMs: 1_000, maxMs: 60_000, coefficient: 2, jitter: 0.25 };
/** The list tools sellers use for their tasks: AdCP's, then the name some sellers use. */
const LIST_TOOLS = ['tasks/list', 'list_tasks'] as const;

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

/** The webhook authentication block the seller's configured scheme needs (legacy HMAC or Bearer), without secrets. */
function webhookScheme(agent: SellerConfig): { schemes: string[]; env: string } | undefined {
  const webhooks = agent.webhooks;
  if (webhooks?.scheme === 'hmac-sha256' && webhooks.secret_env)
    return { schemes: ['HMAC-SHA256'], env: webhooks.secret_env };
  if (webhooks?.scheme === 'bearer' && webhooks.token_env) return { schemes: ['Bearer'], env: webhooks.token_env };
  return undefined;
}

/**
 * The answer's size as Temporal would store it through the payload codec (client/payload-codec.ts): JSON, gzipped
 * when large. Returns the compressed size only when it had to be computed.
 */
export function answerTooLarge(
  answer: unknown,
  maxBytes: number,
): { jsonBytes: number; compressedBytes: number } | undefined {
  const json = JSON.stringify(answer) ?? '';
  const jsonBytes = Buffer.byteLength(json, 'utf8');
  if (jsonBytes < ANSWER_SIZE_CHECK_FROM || jsonBytes <= maxBytes) return undefined;
  const compressedBytes = gzipSync(json).byteLength;
  return compressedBytes > maxBytes ? { jsonBytes, compressedBytes } : undefined;
}

export function createActivities(deps: ActivityDependencies) {
  // Each seller call in its own client span (a no-op unless tracing is on: observability/tracing.ts).
  const seller = tracedSellerClient(
    withStoredWireVersion(deps.seller ?? createSdkSellerClient(), deps.storedCapabilities),
  );
  const env = deps.env ?? process.env;
  const timeouts = callTimeouts(deps.callTimeoutMs, deps.readTimeoutMs);
  const random = deps.random ?? Math.random;
  const now = deps.now ?? Date.now;
  const maxAnswerBytes = deps.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
  const breakers =
    deps.breakers ?? new CircuitBreakerRegistry({ ...deps.circuitBreaker, now, onTransition: logCircuitTransition });
  const descriptions = new SellerDescriptionCache(10 * 60_000, now, deps.storedCapabilities);

  function sellerConfigOf(sellerId: string): SellerConfig {
    try {
      return deps.sellers.get(sellerId);
    } catch (error) {
      throw ApplicationFailure.create({ type: 'ConfigError', message: (error as Error).message, nonRetryable: true });
    }
  }

  /**
   * Runs one call with the activity's cancellation and a HARD timeout: the request is aborted through the call's own
   * signal, and the attempt ends at `timeoutMs` even if a library under it ignores the signal. Heartbeats meanwhile.
   */
  async function guarded<T>(
    sellerId: string,
    timeoutMs: number,
    work: (context: CallContext) => Promise<T>,
    /** The operation's tenant: its own credential for this seller is resolved here, never carried in inputs. */
    tenant?: string,
  ): Promise<T> {
    const context = Context.current();
    let agent: SellerConfig;
    let token: string | undefined;
    try {
      agent = deps.sellers.get(sellerId);
      token = deps.sellers.token(sellerId, env, tenant);
    } catch (error) {
      throw ApplicationFailure.create({ type: 'ConfigError', message: (error as Error).message, nonRetryable: true });
    }
    const breaker = breakers.for(sellerId);
    const permission = breaker.beforeCall();
    if (!permission.allowed) {
      const error: AdcpError = {
        code: 'SERVICE_UNAVAILABLE',
        message: `Calls to seller "${sellerId}" are paused after repeated failures; the next try is in ${Math.ceil(permission.retryAfterMs / 1000)} s.`,
        recovery: 'transient',
        retryAfterSeconds: permission.retryAfterMs / 1000,
      };
      throw ApplicationFailure.create({
        type: 'CircuitOpen',
        message: error.message,
        details: [error],
        nextRetryDelay: permission.retryAfterMs,
      });
    }
    const deadline = deadlineSignal(context.cancellationSignal, timeoutMs);
    const { signal } = deadline;
    // A local activity cannot heartbeat (the core refuses it: "Activity heartbeat failed ... UnknownActivity"); its
    // workflow task is kept alive by the core instead.
    const ticker = context.info.isLocal ? undefined : setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
    try {
      const result = await raceSignal(signal, () => work({ agent, token, signal, timeoutMs }));
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
        throw ApplicationFailure.create({
          type: 'ProtocolViolation',
          message: error.message,
          nonRetryable: true,
          details: [adcpError],
        });
      }
      if (context.cancellationSignal.aborted) throw error; // the activity was cancelled: let the SDK report it
      const classified = classifyTransportFailure(error, now());
      context.metricMeter
        .createCounter('adcp_seller_call_failures', 'failures', 'Failed protocol calls to sellers, by error code')
        .add(1, { seller: sellerId, code: classified.code, recovery: classified.recovery });
      if (countsAsCircuitFailure(classified)) breaker.recordFailure();
      else breaker.recordSuccess();
      throw failureFor(
        classified,
        'TransportError',
        retryDelayMs(classified, context.info.attempt, RETRY_POLICY, random),
      );
    } finally {
      clearInterval(ticker);
      deadline.dispose();
    }
  }

  /** Fails the activity for good when an answer could not be stored in history even compressed. */
  function ensureStorable<T>(answer: T, what: string): T {
    const tooLarge = answerTooLarge(answer, maxAnswerBytes);
    if (!tooLarge) return answer;
    const error: AdcpError = {
      code: 'ANSWER_TOO_LARGE',
      message: `${what} is ${Math.round(tooLarge.jsonBytes / 1024)} KiB of JSON (${Math.round(tooLarge.compressedBytes / 1024)} KiB compressed), over the ${Math.round(maxAnswerBytes / 1024)} KiB an operation can keep.`,
      suggestion:
        'Narrow the request (filters, pagination); asking again returns the same answer, so the seller is not called again for it.',
      recovery: 'terminal',
      details: { jsonBytes: tooLarge.jsonBytes, compressedBytes: tooLarge.compressedBytes, limitBytes: maxAnswerBytes },
    };
    throw ApplicationFailure.create({
      type: 'AnswerTooLarge',
      message: describeError(error),
      nonRetryable: true,
      details: [error],
    });
  }

  function plan(input: PlanCallInput): CallPlan {
    const agent = sellerConfigOf(input.sellerId);
    try {
      deps.sellers.checkTenantAccess(input.sellerId, input.tenant, input.params.account);
    } catch (error) {
      throw ApplicationFailure.create({ type: 'ConfigError', message: (error as Error).message, nonRetryable: true });
    }
    const spec = taskSpec(input.task);
    let args: Record<string, unknown> = { ...input.params };
    if (agent.adcp_version === 'rc.2' && input.task === 'create_media_buy')
      args = withBuyerRefs(args, input.operationId);
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
      timeouts,
    };
  }

  /** The push config as sent: the plan's, plus the credential read from the environment variable it names. */
  function pushWithCredential(callPlan: CallPlan): Record<string, unknown> | undefined {
    const push = callPlan.pushNotificationConfig;
    if (!push) return undefined;
    const ref = callPlan.webhookCredentialRef;
    if (!ref || !push.authentication) return { ...push };
    const credentials = env[ref.env];
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
          // The seller refused the call for now (rate limit, overload, IDEMPOTENCY_IN_FLIGHT: the first request with this
          // key still runs): the same plan, so the same key, again, as late as it asked.
          throw failureFor(
            firstError,
            'SellerTransientError',
            retryDelayMs(firstError, Context.current().info.attempt, RETRY_POLICY, random),
          );
        }
        return ensureStorable(
          { snapshot: answer.snapshot, webhookRegistered: push !== undefined },
          `The ${callPlan.task} answer from ${callPlan.sellerId}`,
        );
      },
      callPlan.tenant,
    );
  }

  async function read(input: Omit<ReadTaskInput, 'timeouts'> & { timeouts?: CallTimeouts }): Promise<ReadTaskOutcome> {
    return guarded(
      input.sellerId,
      (input.timeouts ?? timeouts).readMs,
      async (context) => {
        const outcome = await readWithRetryAfter(context, input);
        return ensureStorable(outcome, `The read of ${input.task} task ${input.taskId} at ${input.sellerId}`);
      },
      input.tenant,
    );
  }

  /** The read strategy, with a seller's "not now" (RATE_LIMITED ...) turned into a retry as late as it asked. */
  async function readWithRetryAfter(context: CallContext, request: ReadRequest): Promise<ReadTaskOutcome> {
    try {
      return await readTaskWithStrategy(seller, context, request, descriptions);
    } catch (error) {
      if (!(error instanceof SellerRefusedReadForNow)) throw error;
      throw failureFor(
        error.error,
        'SellerTransientError',
        retryDelayMs(error.error, Context.current().info.attempt, RETRY_POLICY, random),
      );
    }
  }

  /**
   * A read that fails benignly while the task has not moved: each retry is a poll, and each attempt names the delay
   * of the next one itself (the cadence of AwaitTaskMoveOnCadenceInput).
   */
  async function awaitMove(
    input: Omit<AwaitTaskMoveOnCadenceInput, 'timeouts'> & { timeouts?: CallTimeouts },
  ): Promise<AwaitTaskMoveOutcome> {
    const attempt = Context.current().info.attempt;
    const cadence = input.cadence;
    const waitsFirst = cadence.firstPollAfterMs > 0;
    if (waitsFirst && attempt === 1) {
      // The wait before the first poll, kept by the server as a retry delay: no timer, no worker slot held.
      throw ApplicationFailure.create({
        type: 'TaskPollDue',
        message: `first poll in ${cadence.firstPollAfterMs} ms`,
        category: 'BENIGN',
        details: [{ polls: 0 }],
        nextRetryDelay: cadence.firstPollAfterMs,
      });
    }
    const polls = waitsFirst ? attempt - 1 : attempt;
    // The delay until the next poll: the cadence's interval after poll `polls` (2x each time, capped).
    const nextPollInMs = Math.min(
      cadence.initialIntervalMs * 2 ** Math.min(Math.max(polls - 1, 0), 30),
      cadence.maxIntervalMs,
    );
    let outcome: ReadTaskOutcome;
    try {
      outcome = await read(input);
    } catch (error) {
      if (error instanceof ApplicationFailure && error.nonRetryable) throw error;
      // A seller's "not before" (retry_after, an open circuit) is honoured when it is later than the next poll.
      const askedDelay =
        error instanceof ApplicationFailure && typeof error.nextRetryDelay === 'number' ? error.nextRetryDelay : 0;
      // A failed poll is one more reason to poll again at the same cadence.
      throw ApplicationFailure.create({
        type: 'TaskPollFailed',
        message: (error as Error).message,
        category: 'BENIGN',
        details: [{ polls }],
        nextRetryDelay: Math.max(nextPollInMs, askedDelay),
      });
    }
    const snapshot = outcome.snapshot;
    // A read that cannot see the task is no news: keep polling (webhooks, the deadline and reconciliation decide).
    const unchanged =
      !snapshot ||
      (snapshot.status === input.since.status &&
        JSON.stringify(snapshot.progress ?? null) === JSON.stringify(input.since.progress ?? null));
    if (unchanged) {
      // The attempt count rides along: when the budget ends, this failure is what the workflow sees.
      const why = snapshot
        ? `still ${snapshot.status}`
        : `cannot read the task now (${outcome.unreadable?.code ?? 'unreadable'})`;
      throw ApplicationFailure.create({
        type: 'TaskUnchanged',
        message: why,
        category: 'BENIGN',
        details: [{ polls, readMethod: outcome.readMethod }],
        nextRetryDelay: nextPollInMs,
      });
    }
    return { ...outcome, polls };
  }

  /** One page of the seller's task list, by whichever list tool it has; `supported: false` when it has none. */
  async function listByKey(
    context: CallContext,
    task: string,
    reference: string,
    account: unknown,
  ): Promise<TaskListPage> {
    const description = await descriptions.get(seller, context);
    const tools = description ? LIST_TOOLS.filter((tool) => description.tools.includes(tool)) : [...LIST_TOOLS];
    for (const tool of tools) {
      try {
        const page = await seller.listTasks({
          ...context,
          tool,
          filters: { task_types: [task], context_contains: reference },
          maxResults: 10,
          ...(account !== undefined ? { account } : {}),
        });
        if (page.supported) return page;
      } catch (error) {
        if (context.signal.aborted || !isUnknownToolError(error)) throw error;
      }
    }
    return { tasks: [], supported: false };
  }

  async function findLost(
    input: Omit<FindLostTaskInput, 'timeouts'> & { timeouts?: CallTimeouts },
  ): Promise<FindLostTaskOutcome> {
    const key = idempotencyKeyFor(input.operationId, input.step);
    const bound = input.timeouts ?? timeouts;
    return guarded(
      input.sellerId,
      bound.readMs,
      async (context) => {
        const { agent } = context;
        // rc.2 sellers know the buy by its buyer_ref (3.x removed it: there the idempotency key is the reference).
        const rc2Create = agent.adcp_version === 'rc.2' && input.task === 'create_media_buy';
        const reference = rc2Create ? buyerRefFor(input.operationId) : key;
        const page = await listByKey(context, input.task, reference, input.account);
        const match = page.tasks
          .filter((task) => !task.taskType || task.taskType === input.task)
          .sort((a, b) => (a.createdAt ?? '').localeCompare(b.createdAt ?? ''))[0];
        if (match) {
          const outcome = await readWithRetryAfter(context, {
            task: input.task,
            taskId: match.taskId,
            ...(match.contextId ? { contextId: match.contextId } : {}),
            account: input.account,
          });
          const row = page.rows?.find((entry) => entry.task_id === match.taskId);
          const snapshot: TaskSnapshot = outcome.snapshot ?? {
            status: (row?.status as TaskSnapshot['status']) ?? 'unknown',
            taskId: match.taskId,
          };
          return ensureStorable(
            {
              supported: true,
              snapshot: { ...snapshot, taskId: snapshot.taskId ?? match.taskId },
              note: `found ${match.taskId} (${match.status}) by ${rc2Create ? 'its buyer_ref' : 'its idempotency key'}`,
            },
            `The lost ${input.task} task at ${input.sellerId}`,
          );
        }
        if (rc2Create) {
          // A create answered synchronously leaves no task: look for the buy itself (get_media_buys by buyer_ref).
          const answer = await seller.callTask({
            ...context,
            task: 'get_media_buys',
            args: { buyer_refs: [reference], ...(input.account !== undefined ? { account: input.account } : {}) },
          });
          const buys = answer.snapshot.result?.media_buys;
          // Filter again: a seller that ignores the filter must not make us adopt someone else's buy.
          const buy = Array.isArray(buys)
            ? buys.find(
                (entry): entry is Record<string, unknown> =>
                  !!entry && typeof entry === 'object' && (entry as Record<string, unknown>).buyer_ref === reference,
              )
            : undefined;
          if (buy)
            return {
              supported: true,
              snapshot: { status: 'completed', result: buy },
              note: `found media buy ${String(buy.media_buy_id)} by its buyer_ref`,
            };
          return { supported: true, note: `no task and no media buy at ${agent.id} carries buyer_ref ${reference}` };
        }
        if (!page.supported) return { supported: false, note: `${agent.id} has no tasks/list or list_tasks` };
        return { supported: true, note: `no ${input.task} task at ${agent.id} carries key ${key}` };
      },
      input.tenant,
    );
  }

  async function cancelAt(
    input: Omit<CancelAtSellerInput, 'timeouts'> & { timeouts?: CallTimeouts },
  ): Promise<CancelAtSellerOutcome> {
    const bound = input.timeouts ?? timeouts;
    // Bounded like a read: the workflow runs it in its read group, after the operation was already canceled.
    return guarded(
      input.sellerId,
      bound.readMs,
      async (context) => {
        const { agent } = context;
        if (input.mediaBuyId) {
          const mediaBuyId = input.mediaBuyId;
          const description = agent.protocol === 'mcp' ? await descriptions.get(seller, context) : undefined;
          if (description && !description.tools.includes('update_media_buy')) {
            return {
              notified: false,
              resource: { mediaBuyId, state: 'live' },
              note: `media buy ${mediaBuyId} is live at ${agent.id}: the seller has no update_media_buy, so it cannot be canceled from here; cancel it with the seller`,
            };
          }
          // Its own key: a retried cancel replays, and it never collides with the create's key.
          const args: Record<string, unknown> = {
            media_buy_id: mediaBuyId,
            canceled: true,
            cancellation_reason: 'The buyer canceled the operation.',
            idempotency_key: idempotencyKeyFor(input.operationId, 'cancel'),
          };
          if (input.account !== undefined) args.account = input.account;
          let answer;
          try {
            answer = await seller.callTask({ ...context, task: 'update_media_buy', args });
          } catch (error) {
            if (context.signal.aborted || !isUnknownToolError(error)) throw error;
            return {
              notified: false,
              resource: { mediaBuyId, state: 'live' },
              note: `media buy ${mediaBuyId} is live at ${agent.id}: the seller has no update_media_buy; cancel it with the seller`,
            };
          }
          const firstError = answer.snapshot.errors?.[0];
          if (answer.callError && firstError?.recovery === 'transient') {
            throw failureFor(
              firstError,
              'SellerTransientError',
              retryDelayMs(firstError, Context.current().info.attempt, RETRY_POLICY, random),
            );
          }
          if (answer.callError || answer.snapshot.status === 'failed' || answer.snapshot.status === 'rejected') {
            const why = firstError ? describeError(firstError) : (answer.snapshot.message ?? answer.snapshot.status);
            return {
              notified: true,
              resource: { mediaBuyId, state: 'live' },
              note: `the seller refused to cancel media buy ${mediaBuyId}, which is still live: ${why}`,
            };
          }
          const result = answer.snapshot.result ?? {};
          const lifecycle = String(result.media_buy_status ?? result.status ?? '');
          // A synchronous answer `status: "canceled"` is the buy's status (media-buy and task statuses share the word).
          const buyCanceled =
            (answer.snapshot.status === 'canceled' && !answer.snapshot.taskId) ||
            (answer.snapshot.status === 'completed' && (lifecycle === 'canceled' || lifecycle === ''));
          if (buyCanceled) {
            return {
              notified: true,
              resource: { mediaBuyId, state: 'canceled' },
              note: `media buy ${mediaBuyId} canceled at ${agent.id}`,
            };
          }
          return {
            notified: true,
            resource: { mediaBuyId, state: 'unknown' },
            note: `asked ${agent.id} to cancel media buy ${mediaBuyId}; it answered ${answer.snapshot.status}${lifecycle ? ` (${lifecycle})` : ''}`,
          };
        }
        if (!input.taskId)
          return { notified: false, note: 'no seller task and no media buy to cancel; the seller was not told' };
        return seller.cancelTask({
          ...context,
          taskId: input.taskId,
          ...(input.contextId ? { contextId: input.contextId } : {}),
        });
      },
      input.tenant,
    );
  }

  return {
    // ---- the contract (contract/activities.ts) ----------------------------------------------------------------

    /**
     * Decides everything a call sends, once, as a LOCAL activity: the plan is recorded in history, so every retry of
     * sendCall sends the same bytes whatever the worker's environment (a worker restarted without
     * ADCP_PUBLIC_BASE_URL no longer changes the body behind an idempotency key). Holds no secret.
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
        throw ApplicationFailure.create({
          type: 'ConfigError',
          message: `sendCall needs the plan recorded by planCall${input.planInput ? ` for a ${input.planInput.task} call (it mutates)` : ''}.`,
          nonRetryable: true,
        });
      }
      const callPlan = plan(input.planInput);
      return { ...(await send(callPlan)), timeouts: callPlan.timeouts };
    },

    /** One read of the task, by the method that works for this seller (activities/read-strategy.ts). */
    async readTask(input: ReadTaskInput): Promise<ReadTaskOutcome> {
      return read(input);
    },

    /**
     * The polling twin of readTask: fails benignly while the task has not moved (or cannot be seen), keeping the poll
     * cadence itself (see AwaitTaskMoveOnCadenceInput).
     */
    async awaitTaskMoveOnCadence(input: AwaitTaskMoveOnCadenceInput): Promise<AwaitTaskMoveOutcome> {
      return awaitMove(input);
    },

    /**
     * Reconciliation of one call (§1.7): the seller's task list filtered by type and by the call's idempotency key
     * (`context_contains` searches the request's references), scoped to the account. Found: that task, read. Read-only.
     */
    async findLostTask(input: FindLostTaskInput): Promise<FindLostTaskOutcome> {
      return findLost(input);
    },

    /** Tells the seller what it can be told when an operation is canceled, and says plainly what is still live. */
    async cancelAtSeller(input: CancelAtSellerInput): Promise<CancelAtSellerOutcome> {
      return cancelAt(input);
    },

    // ---- notifications to the buyer's systems, run by the adcpNotification child workflow ---------------------------
    ...createNotificationActivities({
      sellers: deps.sellers,
      ...(deps.notificationKey ? { notificationKey: deps.notificationKey } : {}),
    }),
  };
}

export type OperationActivities = ReturnType<typeof createActivities>;
