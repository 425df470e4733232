/**
 * The typed client for backend code: start an AdCP operation, read its status, await its result, answer the
 * seller's questions, cancel it. The HTTP API is a thin layer over this class.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { SA_AGENT, SA_STATUS, SA_TASK } from '../config/search-attributes';
import type { TaskDefaultsByTask } from '../config/tasks';
import { CALLER_KEY_PATTERN, TASK_NAME_PATTERN, isOperationId, operationIdFor } from '../protocol';
import {
  type CancelRequest,
  type OperationInput,
  type OperationState,
  type ProvidedInput,
  cancelOperationUpdate,
  credentialsRefreshedUpdate,
  provideInputUpdate,
  statusQuery,
} from '../workflows/definitions';
import type { adcpOperation } from '../workflows/operation';
import type { ReconciliationReport, reconcileSeller } from '../workflows/reconciliation';

export interface StartOperationRequest {
  agentId: string;
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

export interface OperationView {
  operationId: string;
  /** Whether the workflow is still running. */
  running: boolean;
  /** How the workflow execution closed, when it did (COMPLETED, FAILED, TERMINATED, TIMED_OUT, CANCELED...). */
  execution: string;
  state?: OperationState;
  /** For executions that ended without an operation state (terminated by an operator, for example). */
  executionError?: string;
}

/** Fields the orchestrator owns in every call; a caller setting them would break idempotency or routing. */
const RESERVED_PARAMS = ['idempotency_key', 'push_notification_config', 'context_id'];

export class OperationRequestError extends Error {
  override readonly name = 'OperationRequestError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

export class OperationNotFoundError extends Error {
  override readonly name = 'OperationNotFoundError';
  constructor(readonly operationId: string) {
    super(`No operation ${operationId}.`);
  }
}

export class IdempotencyConflictError extends Error {
  override readonly name = 'IdempotencyConflictError';
  constructor(readonly operationId: string) {
    super(
      `Operation ${operationId} exists with a different request. An idempotency key names one request; use a new key for a new one.`,
    );
  }
}

/** The workflow refused a request (its validator said why), e.g. input for an operation that asked for none. */
export class OperationRejectedError extends Error {
  override readonly name = 'OperationRejectedError';
}

export interface OrchestratorClientOptions {
  client: Client;
  taskQueue: string;
  /** Checks agent ids before starting; without it the worker reports an unknown seller as the operation's failure. */
  knownAgent?: (agentId: string) => boolean;
  /** How long a status query may wait for a worker. */
  queryTimeoutMs?: number;
  /**
   * Index operations with the AdCP search attributes (default true). Turn it off only against a namespace where
   * they cannot be registered (the time-skipping test server); the workflow then does not upsert them either.
   */
  searchAttributes?: boolean;
  /** The operator's per-task defaults (config/tasks.ts); a request's own values win. */
  taskDefaults?: TaskDefaultsByTask;
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${stableJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function requestFingerprint(request: Pick<StartOperationRequest, 'agentId' | 'task' | 'params'>): string {
  return createHash('sha256').update(stableJson({ agent: request.agentId, task: request.task, params: request.params })).digest('hex');
}

export class OrchestratorClient {
  constructor(private readonly options: OrchestratorClientOptions) {}

  get temporal(): Client {
    return this.options.client;
  }

  private validate(request: StartOperationRequest): void {
    if (!TASK_NAME_PATTERN.test(request.task)) {
      throw new OperationRequestError('task', `task must be an AdCP task name such as "create_media_buy", got "${request.task}".`);
    }
    if (this.options.knownAgent && !this.options.knownAgent(request.agentId)) {
      throw new OperationRequestError('agent_id', `No seller "${request.agentId}" is configured.`);
    }
    if (!request.params || typeof request.params !== 'object' || Array.isArray(request.params)) {
      throw new OperationRequestError('params', 'params must be a JSON object of the task arguments.');
    }
    for (const reserved of RESERVED_PARAMS) {
      if (reserved in request.params) {
        throw new OperationRequestError(
          `params.${reserved}`,
          `params.${reserved} is set by the orchestrator (derived from the operation); pass your key as idempotency_key of the request instead.`,
        );
      }
    }
    if (request.idempotencyKey !== undefined && !CALLER_KEY_PATTERN.test(request.idempotencyKey)) {
      throw new OperationRequestError('idempotency_key', 'idempotency_key must be 1-200 characters of letters, digits, "_", ".", ":" or "-".');
    }
  }

  /** Starts the operation, or returns the existing one for the same idempotency key. */
  async start(request: StartOperationRequest): Promise<StartedOperation> {
    this.validate(request);
    const operationId = operationIdFor(request.task, request.idempotencyKey ?? randomUUID());
    const fingerprint = requestFingerprint(request);
    const defaults = this.options.taskDefaults?.[request.task] ?? {};
    const budgetMs = request.budgetMs ?? defaults.budgetMs;
    const interaction = defaults.interaction || request.interaction ? { ...defaults.interaction, ...request.interaction } : undefined;
    const authDeadlineMs = request.authDeadlineMs ?? defaults.authDeadlineMs;
    const retry = defaults.retry || request.retry ? { ...defaults.retry, ...request.retry } : undefined;
    const input: OperationInput = {
      agentId: request.agentId,
      task: request.task,
      params: request.params,
      requestFingerprint: fingerprint,
      ...(budgetMs !== undefined ? { budgetMs } : {}),
      ...(interaction ? { interaction } : {}),
      ...(authDeadlineMs !== undefined ? { authDeadlineMs } : {}),
      ...(retry ? { retry } : {}),
    };
    try {
      await this.options.client.workflow.start<typeof adcpOperation>('adcpOperation', {
        workflowId: operationId,
        taskQueue: this.options.taskQueue,
        args: [input],
        // Same key while running: the running one. Same key after it ended: still that one, never a second call.
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        memo: { requestFingerprint: fingerprint },
        ...(this.options.searchAttributes === false
          ? {}
          : {
              typedSearchAttributes: [
                { key: SA_TASK, value: request.task },
                { key: SA_AGENT, value: request.agentId },
                { key: SA_STATUS, value: 'pending' },
              ],
            }),
        staticSummary: `${request.task} at ${request.agentId}`,
      });
      return { operationId, created: true, state: undefined };
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
    const description = await this.options.client.workflow.getHandle(operationId).describe();
    if (description.memo?.requestFingerprint !== fingerprint) throw new IdempotencyConflictError(operationId);
    const view = await this.status(operationId);
    return { operationId, created: false, state: view.state };
  }

  /** The operation's state: from its query while it runs, from its result once it has ended. */
  async status(operationId: string): Promise<OperationView> {
    if (!isOperationId(operationId)) throw new OperationNotFoundError(operationId);
    const handle = this.options.client.workflow.getHandle<typeof adcpOperation>(operationId);
    let execution: string;
    try {
      execution = (await handle.describe()).status.name;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new OperationNotFoundError(operationId);
      throw error;
    }
    if (execution === 'RUNNING') {
      const state = await this.options.client.withDeadline(Date.now() + (this.options.queryTimeoutMs ?? 10_000), () =>
        handle.query(statusQuery),
      );
      return { operationId, running: true, execution, state };
    }
    if (execution === 'COMPLETED') {
      return { operationId, running: false, execution, state: await handle.result() };
    }
    if (execution === 'CONTINUED_AS_NEW') {
      return this.status(operationId);
    }
    let executionError: string | undefined;
    try {
      await handle.result();
    } catch (error) {
      executionError = error instanceof Error ? `${error.message}${error.cause instanceof Error ? `: ${error.cause.message}` : ''}` : String(error);
    }
    return { operationId, running: false, execution, executionError };
  }

  /** Waits for the operation to end and returns its final state. */
  async result(operationId: string): Promise<OperationState> {
    try {
      return await this.options.client.workflow.getHandle<typeof adcpOperation>(operationId).result();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new OperationNotFoundError(operationId);
      throw error;
    }
  }

  private async update<Ret>(
    operationId: string,
    run: (handle: ReturnType<Client['workflow']['getHandle']>) => Promise<Ret>,
  ): Promise<Ret> {
    if (!isOperationId(operationId)) throw new OperationNotFoundError(operationId);
    const handle = this.options.client.workflow.getHandle(operationId);
    try {
      return await run(handle);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        // Updates cannot reach a closed workflow: say it ended rather than that it does not exist.
        const ended = await handle.describe().then(
          (description) => description.status.name,
          () => undefined,
        );
        if (ended) throw new OperationRejectedError(`Operation ${operationId} has ended (${ended}); it takes no more requests.`);
        throw new OperationNotFoundError(operationId);
      }
      if (error instanceof WorkflowUpdateFailedError) {
        throw new OperationRejectedError(error.cause instanceof Error ? error.cause.message : error.message);
      }
      throw error;
    }
  }

  /** Answers the seller's input-required question. The idempotency key is the update ID: a retry answers once. */
  async provideInput(operationId: string, answer: ProvidedInput & { idempotencyKey: string }): Promise<{ accepted: true; round: number }> {
    const { idempotencyKey, ...provided } = answer;
    return this.update(operationId, (handle) =>
      handle.executeUpdate(provideInputUpdate, { args: [provided], updateId: `input-${idempotencyKey}` }),
    );
  }

  /** Tells an auth-required operation that the seller's credentials were refreshed. */
  async credentialsRefreshed(operationId: string, refreshedBy: string): Promise<{ accepted: true }> {
    return this.update(operationId, (handle) => handle.executeUpdate(credentialsRefreshedUpdate, { args: [{ refreshedBy }] }));
  }

  /**
   * Reconciles one seller now (what its schedule does periodically): adopts lost seller tasks, reports the rest and
   * makes every open operation with that seller look now. Resolves with the run's report.
   */
  async reconcile(agentId: string, requestedBy: string): Promise<ReconciliationReport> {
    if (this.options.knownAgent && !this.options.knownAgent(agentId)) {
      throw new OperationRequestError('agent_id', `No seller "${agentId}" is configured.`);
    }
    return this.options.client.workflow.execute<typeof reconcileSeller>('reconcileSeller', {
      workflowId: `reconciliation:${agentId}:${randomUUID()}`,
      taskQueue: this.options.taskQueue,
      args: [{ agentId, requestedBy }],
      staticSummary: `reconcile ${agentId} (requested by ${requestedBy})`,
    });
  }

  /** Cancels the operation: the in-flight call is aborted, the seller told where the protocol allows. */
  async cancel(operationId: string, request: CancelRequest): Promise<{ accepted: true; status: string }> {
    return this.update(operationId, (handle) => handle.executeUpdate(cancelOperationUpdate, { args: [request] }));
  }
}
