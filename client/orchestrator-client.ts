/**
 * The typed client for backend code: start an AdCP operation, read its status, await its result, answer the
 * seller's questions, cancel it. The HTTP API is a thin layer over this class.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  CancelledFailure,
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { SA_SELLER, SA_PRINCIPAL, SA_STATUS, SA_TASK, SA_TASK_ID, SA_TENANT } from '../config/search-attributes';
import type { TaskDefaultsByTask } from '../config/tasks';
import { CALLER_KEY_PATTERN, TASK_NAME_PATTERN, isOperationId, operationIdFor } from '../protocol';
import {
  checkMediaBuyParams,
  cancelRequestSchema,
  credentialsRefreshSchema,
  providedInputSchema,
  retrySettingsSchema,
} from '../protocol/requests';
import {
  type CallerIdentity,
  TENANT_RULE,
  isTenantName,
  maxCallerKeyLength,
  tenantScopedKey,
} from '../protocol/tenancy';
import {
  type CancelRequest,
  type OperationInput,
  type OperationState,
  type ProvidedInput,
  OPERATION_STATE_MEMO,
  cancelOperationUpdate,
  type OperationReconcileAnswer,
  type OperationReconcileRequest,
  operationStateFromFailure,
  reconcileOperationUpdate,
  credentialsRefreshedUpdate,
  provideInputUpdate,
  statusQuery,
} from '../contract/operation';
import {
  IdempotencyConflictError,
  OperationEndedError,
  OperationNotFoundError,
  OperationParamsError,
  OperationRejectedError,
  OperationRequestError,
  SellerNotFoundError,
} from './operation-errors';
import type { OperationList, OperationListFilters } from './operation-list';
import { type PendingActivityView, pendingActivityView } from './pending-activity';
import { isTemporalUnavailable, isWorkflowClosedRefusal } from './temporal-errors';
import type { adcpOperation } from '../workflows/operation/workflow';
import type { ReconciliationInput, ReconciliationReport } from '../contract/reconciliation';
import type { reconcileSeller } from '../workflows/reconciliation/workflow';

export interface StartOperationRequest {
  sellerId: string;
  task: string;
  params: Record<string, unknown>;
  /** The caller's key for this operation: the same key always means the same operation. */
  idempotencyKey?: string;
  budgetMs?: number;
  interaction?: OperationInput['interaction'];
  authDeadlineMs?: number;
  retry?: OperationInput['retry'];
}

export interface StartedOperation {
  operationId: string;
  /** false when the key named an operation that already existed (running or finished). */
  created: boolean;
  state: OperationState | undefined;
}

/**
 * Where an OperationView's state came from: the running workflow's `status` query (live), its result (ended), or the
 * memo it last published (`adcp_state`) when no worker answered the query in time; `none` when there is no state.
 */
export type StateSource = 'query' | 'result' | 'memo' | 'none';

export interface OperationView {
  operationId: string;
  /** Whether the workflow is still running. */
  running: boolean;
  /** How the workflow execution closed, when it did (COMPLETED, FAILED, TERMINATED, TIMED_OUT, CANCELED...). */
  execution: string;
  state?: OperationState;
  /** For executions that ended without an operation state (terminated by an operator, for example). */
  executionError?: string;
  /** False when the live state could not be read and `state` is the last one the workflow published (or none). */
  live: boolean;
  stateSource: StateSource;
  /** Why the live state could not be read, and what `state` is instead. */
  staleReason?: string;
  /** While running: the calls and reads in flight, with their attempt, last failure and next retry. */
  pendingActivities?: PendingActivityView[];
}

/** Fields the orchestrator owns in every call; a caller setting them would break idempotency or routing. */
const RESERVED_PARAMS = ['idempotency_key', 'push_notification_config', 'context_id'] as const;

const RESERVED_PARAMS_HINT: Record<(typeof RESERVED_PARAMS)[number], string> = {
  idempotency_key:
    'params.idempotency_key is set by the orchestrator (derived from the operation and step); pass your key as idempotency_key of the request instead, next to params.',
  push_notification_config:
    "params.push_notification_config is set by the orchestrator: every call carries the gateway's webhook URL for this operation when ADCP_PUBLIC_BASE_URL is set. Remove it; configure the seller's webhook signing in agents.json instead.",
  context_id:
    "params.context_id is set by the orchestrator: it resumes the seller's task with the context_id the seller returned. Remove it; to answer a question from the seller use POST /v1/operations/:id/input (client.provideInput).",
};

export interface OrchestratorClientOptions {
  client: Client;
  taskQueue: string;
  /** Checks agent ids before starting; without it the worker reports an unknown seller as the operation's failure. */
  knownSeller?: (sellerId: string) => boolean;
  /**
   * How long a status query may wait for a worker (default 3 s). After that the view answers from the state the
   * workflow last published in its memo, marked `live: false`.
   */
  queryTimeoutMs?: number;
  /**
   * The deadline of every other call to Temporal (default 4 s): with Temporal down, callers hear so within seconds
   * instead of waiting out the client's reconnects.
   */
  temporalTimeoutMs?: number;
  /** How long `reconcile` waits for the reconciliation's report (default 60 s). */
  reconcileTimeoutMs?: number;
  /**
   * Index operations with the AdCP search attributes (default true). Turn it off only against a namespace where
   * they cannot be registered (the time-skipping test server); the workflow then does not upsert them either.
   */
  searchAttributes?: boolean;
  /** The operator's per-task defaults (config/tasks.ts); a request's own values win. */
  taskDefaults?: TaskDefaultsByTask;
  /**
   * The tenant that owns operations recorded without one (started before tenancy, or by backend code without a
   * caller): the development key's tenant under `npm start`. Undefined: such operations are nobody's (not found for
   * every caller), the same rule as api/auth/tenant-of.ts.
   */
  untenantedTenant?: string;
  /**
   * Checks, at start, that the caller's tenant may use this seller and this account (SellerRegistry.checkTenantAccess);
   * throws to refuse. The worker checks the same before every call; this makes the refusal a 400 instead of a failed
   * operation.
   */
  checkTenantAccess?: (sellerId: string, tenant: string | undefined, account: unknown) => void;
  /**
   * Whether operations of a tenant notify its systems (input-required, completed, failed, rejected, timed out);
   * default: every tenant's do (the delivery activity skips tenants without a notification_url).
   */
  notifies?: (tenant: string) => boolean;
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${stableJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * What makes two start requests "the same request" for one idempotency key: everything the caller chose (seller,
 * task, params, budget, interaction limits, auth deadline, retry policy), not the operator's defaults. Fields the
 * caller left out are left out of the hash, so fingerprints of requests that only set agent, task and params are
 * unchanged from earlier versions.
 */
export function requestFingerprint(
  request: Pick<
    StartOperationRequest,
    'sellerId' | 'task' | 'params' | 'budgetMs' | 'interaction' | 'authDeadlineMs' | 'retry'
  >,
): string {
  const chosen: Record<string, unknown> = { agent: request.sellerId, task: request.task, params: request.params };
  if (request.budgetMs !== undefined) chosen.budgetMs = request.budgetMs;
  if (request.interaction !== undefined) chosen.interaction = request.interaction;
  if (request.authDeadlineMs !== undefined) chosen.authDeadlineMs = request.authDeadlineMs;
  if (request.retry !== undefined) chosen.retry = request.retry;
  return createHash('sha256').update(stableJson(chosen)).digest('hex');
}

export type { CallerIdentity } from '../protocol/tenancy';

/** The tenant an operation records: its AdcpTenant search attribute, else the memo its starter wrote. */
function recordedTenantOf(description: {
  typedSearchAttributes: { get(key: typeof SA_TENANT): string | undefined };
  memo?: Record<string, unknown>;
}): string | undefined {
  const indexed = description.typedSearchAttributes.get(SA_TENANT);
  if (indexed !== undefined) return indexed;
  const memo = description.memo?.tenant;
  if (typeof memo === 'string') return memo;
  const published = publishedState(description.memo)?.tenant;
  return typeof published === 'string' ? published : undefined;
}

function describeError(error: unknown): string {
  return error instanceof Error
    ? `${error.message}${error.cause instanceof Error ? `: ${error.cause.message}` : ''}`
    : String(error);
}

export class OrchestratorClient {
  constructor(private readonly options: OrchestratorClientOptions) {}

  get temporal(): Client {
    return this.options.client;
  }

  get taskQueue(): string {
    return this.options.taskQueue;
  }

  /** Runs Temporal calls under one deadline, so an unreachable Temporal is reported within seconds. */
  private withDeadline<T>(run: () => Promise<T>, ms = this.options.temporalTimeoutMs ?? 4_000): Promise<T> {
    return this.options.client.withDeadline(Date.now() + ms, run);
  }

  /**
   * Whether any worker polls the operations task queue (workflow tasks) right now, per Temporal's task queue
   * description; `pollers` is how many Temporal saw recently.
   */
  async workerPresence(): Promise<{ pollers: number }> {
    const description = await this.withDeadline(
      () =>
        this.options.client.workflowService.describeTaskQueue({
          namespace: this.options.client.options.namespace,
          taskQueue: { name: this.options.taskQueue },
          // TASK_QUEUE_TYPE_WORKFLOW
          taskQueueType: 1,
        }),
      2_000,
    );
    return { pollers: description.pollers?.length ?? 0 };
  }

  private validate(request: StartOperationRequest): void {
    if (!TASK_NAME_PATTERN.test(request.task)) {
      throw new OperationRequestError(
        'task',
        `task must be an AdCP task name such as "create_media_buy", got "${request.task}".`,
      );
    }
    if (this.options.knownSeller && !this.options.knownSeller(request.sellerId)) {
      throw new OperationRequestError('agent_id', `No seller "${request.sellerId}" is configured.`);
    }
    if (!request.params || typeof request.params !== 'object' || Array.isArray(request.params)) {
      throw new OperationRequestError('params', 'params must be a JSON object of the task arguments.');
    }
    for (const reserved of RESERVED_PARAMS) {
      if (reserved in request.params)
        throw new OperationRequestError(`params.${reserved}`, RESERVED_PARAMS_HINT[reserved]);
    }
    const broken = checkMediaBuyParams(request.task, request.params, Date.now());
    if (broken) throw new OperationParamsError(broken.field, broken.message);
    if (request.idempotencyKey !== undefined && !CALLER_KEY_PATTERN.test(request.idempotencyKey)) {
      throw new OperationRequestError(
        'idempotency_key',
        'idempotency_key must be 1-200 characters of letters, digits, "_", ".", ":" or "-".',
      );
    }
    if (request.retry !== undefined) {
      const retry = retrySettingsSchema.safeParse(request.retry);
      if (!retry.success) {
        const issue = retry.error.issues[0];
        throw new OperationRequestError(
          ['retry', ...issue.path].join('.'),
          `retry.${issue.path.join('.')}: ${issue.message}`,
        );
      }
    }
  }

  /**
   * Starts the operation, or returns the existing one for the same idempotency key. With a caller, the operation
   * belongs to the caller's tenant: its ID is scoped by the tenant (two tenants' equal keys name two operations) and
   * it records the tenant and principal in its input, state and search attributes.
   */
  async start(request: StartOperationRequest, caller?: CallerIdentity): Promise<StartedOperation> {
    this.validate(request);
    const tenant = caller?.tenant;
    if (tenant !== undefined && !isTenantName(tenant)) {
      throw new OperationRequestError(
        'tenant',
        `The caller's tenant ${JSON.stringify(tenant)} cannot own operations: ${TENANT_RULE}. Rename the tenant in the key file or the identity provider.`,
      );
    }
    const scopedKey = tenantScopedKey(tenant, request.idempotencyKey ?? randomUUID());
    if (scopedKey === undefined) {
      throw new OperationRequestError(
        'idempotency_key',
        `idempotency_key is too long: for tenant "${tenant}" it may have at most ${maxCallerKeyLength(tenant)} characters.`,
      );
    }
    const operationId = operationIdFor(request.task, scopedKey);
    if (caller && this.options.checkTenantAccess) {
      try {
        this.options.checkTenantAccess(request.sellerId, caller.tenant, request.params.account);
      } catch (error) {
        const field = (error as { field?: unknown }).field;
        throw new OperationRequestError(typeof field === 'string' ? field : 'agent_id', (error as Error).message);
      }
    }
    const fingerprint = requestFingerprint(request);
    const defaults = this.options.taskDefaults?.[request.task] ?? {};
    const budgetMs = request.budgetMs ?? defaults.budgetMs;
    const interaction =
      defaults.interaction || request.interaction ? { ...defaults.interaction, ...request.interaction } : undefined;
    const authDeadlineMs = request.authDeadlineMs ?? defaults.authDeadlineMs;
    const retry = defaults.retry || request.retry ? { ...defaults.retry, ...request.retry } : undefined;
    const input: OperationInput = {
      sellerId: request.sellerId,
      task: request.task,
      params: request.params,
      requestFingerprint: fingerprint,
      ...(budgetMs !== undefined ? { budgetMs } : {}),
      ...(interaction ? { interaction } : {}),
      ...(authDeadlineMs !== undefined ? { authDeadlineMs } : {}),
      ...(retry ? { retry } : {}),
      ...(caller ? { tenant: caller.tenant, principal: caller.principal } : {}),
      ...(caller && (this.options.notifies?.(caller.tenant) ?? true) ? { notify: true } : {}),
    };
    try {
      await this.withDeadline(() =>
        this.options.client.workflow.start<typeof adcpOperation>('adcpOperation', {
          workflowId: operationId,
          taskQueue: this.options.taskQueue,
          args: [input],
          // Same key while running: the running one. Same key after it ended: still that one, never a second call.
          workflowIdConflictPolicy: 'FAIL',
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          memo: { requestFingerprint: fingerprint, ...(caller ? { tenant: caller.tenant } : {}) },
          ...(this.options.searchAttributes === false
            ? {}
            : {
                typedSearchAttributes: [
                  { key: SA_TASK, value: request.task },
                  { key: SA_SELLER, value: request.sellerId },
                  { key: SA_STATUS, value: 'pending' },
                  ...(caller
                    ? [
                        { key: SA_TENANT, value: caller.tenant },
                        { key: SA_PRINCIPAL, value: caller.principal },
                      ]
                    : []),
                ],
              }),
          staticSummary: `${request.task} at ${request.sellerId}`,
        }),
      );
      return { operationId, created: true, state: undefined };
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
    const description = await this.withDeadline(() => this.options.client.workflow.getHandle(operationId).describe());
    if (description.memo?.requestFingerprint !== fingerprint) throw new IdempotencyConflictError(operationId);
    // Only an operation started without a tenant can hold a tenant-scoped ID of someone else: not the caller's.
    if (recordedTenantOf(description) !== tenant) throw new IdempotencyConflictError(operationId);
    const view = await this.status(operationId, caller);
    return { operationId, created: false, state: view.state };
  }

  /**
   * The tenant an operation belongs to (undefined when there is no such operation, or it has no tenant). The
   * secure gateway's `tenantOf` resolver for operations (api/auth/tenant-of.ts).
   */
  async tenantOf(operationId: string): Promise<string | undefined> {
    if (!isOperationId(operationId)) return undefined;
    try {
      const description = await this.withDeadline(() => this.options.client.workflow.getHandle(operationId).describe());
      return this.ownerOf(description);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return undefined;
      throw error;
    }
  }

  private ownerOf(description: Parameters<typeof recordedTenantOf>[0]): string | undefined {
    return recordedTenantOf(description) ?? this.options.untenantedTenant;
  }

  /** Throws OperationNotFoundError unless the operation exists and (with a caller) belongs to the caller's tenant. */
  private async ensureVisible(operationId: string, caller: CallerIdentity | undefined): Promise<void> {
    if (!isOperationId(operationId)) throw new OperationNotFoundError(operationId);
    if (!caller) return;
    if ((await this.tenantOf(operationId)) !== caller.tenant) throw new OperationNotFoundError(operationId);
  }

  /** One page of operations (client/operation-list.ts); with a caller, only the caller's tenant's. */
  async list(filters: OperationListFilters = {}, caller?: CallerIdentity): Promise<OperationList> {
    // Loaded on use: operation-list imports this module's error classes, so a static import would be a cycle.
    const { listOperations } = await import('./operation-list');
    return listOperations(
      this.options.client,
      { ...filters, ...(caller ? { tenant: caller.tenant } : {}) },
      {
        ...(this.options.temporalTimeoutMs ? { temporalTimeoutMs: this.options.temporalTimeoutMs } : {}),
      },
    );
  }

  /**
   * The operation's state: from its query while it runs, from its result once it has ended. When no worker answers
   * the query within `queryTimeoutMs`, from the state the workflow last published in its memo (`live: false`).
   */
  async status(operationId: string, caller?: CallerIdentity): Promise<OperationView> {
    if (!isOperationId(operationId)) throw new OperationNotFoundError(operationId);
    const handle = this.options.client.workflow.getHandle<typeof adcpOperation>(operationId);
    let description: Awaited<ReturnType<typeof handle.describe>>;
    try {
      description = await this.withDeadline(() => handle.describe());
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new OperationNotFoundError(operationId);
      throw error;
    }
    // Another tenant's operation answers exactly like one that does not exist.
    if (caller && this.ownerOf(description) !== caller.tenant) throw new OperationNotFoundError(operationId);
    const execution = description.status.name;
    if (execution === 'RUNNING') {
      try {
        const state = await this.withDeadline(() => handle.query(statusQuery), this.options.queryTimeoutMs ?? 3_000);
        return {
          operationId,
          running: true,
          execution,
          state,
          live: true,
          stateSource: 'query',
          pendingActivities: pendingActivityView(description),
        };
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) throw new OperationNotFoundError(operationId);
        const published = publishedState(description.memo);
        const why = isTemporalUnavailable(error)
          ? `no worker answered the status query within ${((this.options.queryTimeoutMs ?? 3_000) / 1000).toFixed(0)} s (is a worker polling task queue "${this.options.taskQueue}"?)`
          : `the status query failed: ${describeError(error)}`;
        return {
          operationId,
          running: true,
          execution,
          ...(published ? { state: published } : {}),
          live: false,
          stateSource: published ? 'memo' : 'none',
          pendingActivities: pendingActivityView(description),
          staleReason: published
            ? `The live state could not be read: ${why}. This is the state the operation last published (${published.updatedAt}).`
            : `The live state could not be read: ${why}. The operation has not published a state yet.`,
        };
      }
    }
    if (execution === 'COMPLETED') {
      const state = await this.withDeadline(() => handle.result());
      return { operationId, running: false, execution, state, live: true, stateSource: 'result' };
    }
    if (execution === 'CONTINUED_AS_NEW') {
      return this.status(operationId, caller);
    }
    let executionError: string | undefined;
    try {
      await this.withDeadline(() => handle.result());
    } catch (error) {
      if (isTemporalUnavailable(error)) throw error;
      const state = stateFromClosure(error);
      if (state) return { operationId, running: false, execution, state, live: true, stateSource: 'result' };
      executionError = describeError(error);
    }
    const published = publishedState(description.memo);
    return {
      operationId,
      running: false,
      execution,
      executionError,
      ...(published ? { state: published } : {}),
      live: true,
      stateSource: published ? 'memo' : 'none',
    };
  }

  /**
   * The operation's seller task id, once known: from the search attribute the workflow upserts, else the memo.
   * Undefined while the seller has not answered with a task.
   */
  async knownTaskId(operationId: string): Promise<{ taskId?: string; running: boolean; sellerId?: string }> {
    const description = await this.withDeadline(() => this.options.client.workflow.getHandle(operationId).describe());
    const taskId = description.typedSearchAttributes.get(SA_TASK_ID) ?? publishedState(description.memo)?.taskId;
    return {
      ...(taskId ? { taskId } : {}),
      running: description.status.name === 'RUNNING',
      ...(description.typedSearchAttributes.get(SA_SELLER)
        ? { sellerId: description.typedSearchAttributes.get(SA_SELLER) }
        : {}),
    };
  }

  /** Waits for the operation to end and returns its final state. */
  /**
   * The operation's final state, however it ended: a failed or rejected operation ends its workflow Failed and a
   * canceled one Canceled (so the Web UI tells the truth), with the state in the failure's details.
   */
  async result(operationId: string, caller?: CallerIdentity): Promise<OperationState> {
    await this.ensureVisible(operationId, caller);
    try {
      return await this.options.client.workflow.getHandle<typeof adcpOperation>(operationId).result();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new OperationNotFoundError(operationId);
      const state = stateFromClosure(error);
      if (state) return state;
      // Temporal records no details with a cancellation: the operation published its final state in its memo.
      if (error instanceof WorkflowFailedError && error.cause instanceof CancelledFailure) {
        const description = await this.withDeadline(() =>
          this.options.client.workflow.getHandle(operationId).describe(),
        );
        const published = publishedState(description.memo);
        if (published) return published;
      }
      throw error;
    }
  }

  private async update<Ret>(
    operationId: string,
    run: (handle: ReturnType<Client['workflow']['getHandle']>) => Promise<Ret>,
    caller?: CallerIdentity,
    timeoutMs?: number,
  ): Promise<Ret> {
    await this.ensureVisible(operationId, caller);
    const handle = this.options.client.workflow.getHandle(operationId);
    try {
      return await this.withDeadline(() => run(handle), timeoutMs);
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError) {
        // The validator refused. If that is because the operation has just ended, say so with its final status.
        await this.throwIfEnded(operationId, handle);
        throw new OperationRejectedError(error.cause instanceof Error ? error.cause.message : error.message);
      }
      if (error instanceof WorkflowNotFoundError || isWorkflowClosedRefusal(error)) {
        // The workflow closed before (or while) the update reached it: a race with its own end, not an outage.
        await this.throwIfEnded(operationId, handle);
        if (error instanceof WorkflowNotFoundError) throw new OperationNotFoundError(operationId);
      }
      throw error;
    }
  }

  /** Throws OperationEndedError, with the final status, when the workflow has closed. */
  private async throwIfEnded(operationId: string, handle: ReturnType<Client['workflow']['getHandle']>): Promise<void> {
    const description = await this.withDeadline(() => handle.describe()).catch(() => undefined);
    if (!description || description.status.name === 'RUNNING') return;
    let status = publishedState(description.memo)?.status;
    if (description.status.name === 'COMPLETED') {
      const final = (await this.withDeadline(() => handle.result()).catch(() => undefined)) as
        OperationState | undefined;
      status = final?.status ?? status;
    }
    throw new OperationEndedError(operationId, description.status.name, status);
  }

  /** Answers the seller's input-required question. The idempotency key is the update ID: a retry answers once. */
  async provideInput(
    operationId: string,
    answer: ProvidedInput & { idempotencyKey: string },
    caller?: CallerIdentity,
  ): Promise<{ accepted: true; round: number }> {
    const { idempotencyKey, ...rest } = answer;
    // The audit trail names the authenticated caller; `providedBy` stays the caller's free-text note.
    const provided: ProvidedInput = caller ? { ...rest, principal: caller.principal } : rest;
    const checked = providedInputSchema.safeParse(provided);
    if (!checked.success) {
      const issue = checked.error.issues[0];
      throw new OperationRequestError(
        issue.path.join('.') || 'input',
        `${issue.path.join('.') || 'input'}: ${issue.message}`,
      );
    }
    return this.update(
      operationId,
      (handle) => handle.executeUpdate(provideInputUpdate, { args: [provided], updateId: `input-${idempotencyKey}` }),
      caller,
    );
  }

  /** Tells an auth-required operation that the seller's credentials were refreshed. */
  async credentialsRefreshed(
    operationId: string,
    refreshedBy: string,
    caller?: CallerIdentity,
  ): Promise<{ accepted: true }> {
    const refresh = { refreshedBy, ...(caller ? { principal: caller.principal } : {}) };
    const checked = credentialsRefreshSchema.safeParse(refresh);
    if (!checked.success) throw requestErrorFrom(checked.error.issues[0]);
    return this.update(
      operationId,
      (handle) => handle.executeUpdate(credentialsRefreshedUpdate, { args: [refresh] }),
      caller,
    );
  }

  /**
   * Reconciles one seller now (what its schedule does periodically): adopts lost seller tasks, reports the rest and
   * makes every open operation with that seller poll now. Resolves with the run's report. With a caller, only the
   * caller's tenant's operations and buys are counted, polled and refreshed; without one (an operator of the whole
   * installation, as the Schedule), every tenant's.
   */
  async reconcile(sellerId: string, requestedBy: string, caller?: CallerIdentity): Promise<ReconciliationReport> {
    if (this.options.knownSeller && !this.options.knownSeller(sellerId)) throw new SellerNotFoundError(sellerId);
    const input: ReconciliationInput = {
      sellerId,
      requestedBy,
      ...(caller ? { tenant: caller.tenant, alsoUntenanted: caller.tenant === this.options.untenantedTenant } : {}),
    };
    const handle = await this.withDeadline(() =>
      this.options.client.workflow.start<typeof reconcileSeller>('reconcileSeller', {
        workflowId: `reconciliation:${sellerId}:${randomUUID()}`,
        taskQueue: this.options.taskQueue,
        args: [input],
        staticSummary: `reconcile ${sellerId}${caller ? ` for tenant ${caller.tenant}` : ''} (requested by ${requestedBy})`,
      }),
    );
    return this.withDeadline(() => handle.result(), this.options.reconcileTimeoutMs ?? 60_000);
  }

  /**
   * Reads the seller's media buys now for an operation that cannot know what its lost call made, and adopts the buy
   * it finds (docs/convergence.md). The operation's validator refuses it once the operation has ended.
   */
  async reconcileOperation(
    operationId: string,
    requestedBy: string,
    caller?: CallerIdentity,
  ): Promise<OperationReconcileAnswer> {
    const request: OperationReconcileRequest = { requestedBy, ...(caller ? { principal: caller.principal } : {}) };
    const ask = () =>
      this.update(
        operationId,
        (handle) => handle.executeUpdate(reconcileOperationUpdate, { args: [request] }),
        caller,
        this.options.reconcileTimeoutMs ?? 60_000,
      );
    try {
      return await ask();
    } catch (error) {
      if (!(error instanceof OperationEndedError)) throw error;
      const previousRunId = await this.reopenToReadAgain(operationId, error, requestedBy);
      if (!previousRunId) throw error;
      let answer: OperationReconcileAnswer;
      try {
        answer = await ask();
      } catch (reopenedError) {
        // The reopened run read, decided and ended before the request reached it: its final state answers.
        if (!(reopenedError instanceof OperationEndedError)) throw reopenedError;
        const final = await this.finalState(operationId);
        const mediaBuyId = final?.resource?.mediaBuyId;
        answer = {
          found: mediaBuyId !== undefined,
          ...(mediaBuyId ? { media_buy_id: mediaBuyId } : {}),
          ...(final?.resource?.matchedBy ? { matched_by: final.resource.matchedBy } : {}),
          status: final?.status ?? 'failed',
          note: `the reopened operation ended ${final?.status ?? reopenedError.status ?? 'unknown'}`,
        };
      }
      return { ...answer, reopened_from_run_id: previousRunId };
    }
  }

  /**
   * A create that ended failed without knowing a buy (its call's answer lost, the seller's media buys read without
   * one from it) may still have one at the seller: a request the seller processed after that read, say. The operation
   * is reopened to look again: its workflow is reset to the workflow task that scheduled its last read of the
   * seller's media buys, so the new run reads them again and adopts a buy it finds by the same rules (or calls again
   * with the same key), ending completed; finding none, it ends as it did. The failed run stays in the workflow's
   * history. The run that failed, or undefined when the operation is not one to reopen (completed, canceled,
   * rejected, not a create, already knowing its buy, or no read to go back to).
   */
  private async reopenToReadAgain(
    operationId: string,
    ended: OperationEndedError,
    requestedBy: string,
  ): Promise<string | undefined> {
    if (ended.execution !== 'FAILED' || ended.status !== 'failed') return undefined;
    const client = this.options.client;
    const handle = client.workflow.getHandle(operationId);
    const description = await this.withDeadline(() => handle.describe());
    if (description.status.name !== 'FAILED') return undefined;
    const final = await this.finalState(operationId);
    if (!final || final.task !== 'create_media_buy' || final.resource?.mediaBuyId) return undefined;
    if (final.failure?.reason !== 'call_failed' && final.failure?.reason !== 'outcome_unknown') return undefined;
    const history = await this.withDeadline(() => handle.fetchHistory(), 30_000);
    const lastRead = [...(history.events ?? [])]
      .reverse()
      .find((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'readResource')
      ?.activityTaskScheduledEventAttributes?.workflowTaskCompletedEventId;
    if (!lastRead) return undefined;
    await this.withDeadline(() =>
      client.workflowService.resetWorkflowExecution({
        namespace: client.options.namespace,
        workflowExecution: { workflowId: operationId, runId: description.runId },
        reason: `reconcile requested by ${requestedBy}: read the seller's media buys again`,
        workflowTaskFinishEventId: lastRead,
        // One reset per failed run, however often the request is repeated.
        requestId: `reopen:${description.runId}`,
      }),
    );
    return description.runId;
  }

  /** The state an operation ended with (its result, or the details of its failure), if it has ended. */
  private async finalState(operationId: string): Promise<OperationState | undefined> {
    try {
      return (await this.withDeadline(() =>
        this.options.client.workflow.getHandle(operationId).result(),
      )) as OperationState;
    } catch (error) {
      return stateFromClosure(error);
    }
  }

  /** Cancels the operation: the in-flight call is aborted, the seller told where the protocol allows. */
  async cancel(
    operationId: string,
    request: CancelRequest,
    caller?: CallerIdentity,
  ): Promise<{ accepted: true; status: string }> {
    const cancel: CancelRequest = caller ? { ...request, principal: caller.principal } : request;
    const checked = cancelRequestSchema.safeParse(cancel);
    if (!checked.success) throw requestErrorFrom(checked.error.issues[0]);
    const answer = await this.update(
      operationId,
      (handle) => handle.executeUpdate(cancelOperationUpdate, { args: [cancel] }),
      caller,
    );
    // The update recorded who asked and why; Temporal's own cancel makes the workflow end Canceled, not Completed.
    await this.withDeadline(() => this.options.client.workflow.getHandle(operationId).cancel()).catch(() => undefined);
    return answer;
  }
}

function requestErrorFrom(issue: { path: PropertyKey[]; message: string } | undefined): OperationRequestError {
  const field = (issue?.path ?? []).map(String).join('.') || 'request';
  return new OperationRequestError(field, `${field}: ${issue?.message ?? 'invalid'}`);
}

/** The state an operation workflow that ended Failed or Canceled carries in its failure's details. */
export function stateFromClosure(error: unknown): OperationState | undefined {
  return error instanceof WorkflowFailedError ? operationStateFromFailure(error) : undefined;
}

/** The state the workflow last published in its memo (`adcp_state`, the shape of the status query), if any. */
function publishedState(memo: Record<string, unknown> | undefined): OperationState | undefined {
  const value = memo?.[OPERATION_STATE_MEMO];
  return value && typeof value === 'object' && typeof (value as OperationState).status === 'string'
    ? (value as OperationState)
    : undefined;
}
