/**
 * The HTTP gateway: operations API for backends that are not TypeScript, health, and (webhooks.ts) the seller
 * webhook receiver. It validates, forwards to Temporal and answers; the workflow holds the state.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import {
  IdempotencyConflictError,
  OperationNotFoundError,
  OperationRejectedError,
  OperationRequestError,
  type OperationView,
  type OrchestratorClient,
} from '../client/orchestrator-client';
import { formatZodIssues } from '../config/zod-format';
import { CALLER_KEY_PATTERN, TASK_NAME_PATTERN } from '../protocol';
import type { OperationState } from '../workflows/definitions';

export interface GatewayOptions {
  orchestrator: OrchestratorClient;
  /** Link operators to the workflow in the Temporal Web UI. */
  webUiUrl?: string;
  namespace?: string;
  /** Mounted before the JSON body parser: webhook verification needs the raw bytes. */
  webhookRouter?: express.Router;
}

const JSON_LIMIT = '1mb';

const startSchema = z
  .object({
    agent_id: z.string().min(1, 'agent_id is required'),
    task: z.string().regex(TASK_NAME_PATTERN, 'must be an AdCP task name such as "create_media_buy"'),
    params: z.record(z.string(), z.unknown()),
    idempotency_key: z
      .string()
      .regex(CALLER_KEY_PATTERN, 'must be 1-200 characters of letters, digits, "_", ".", ":" or "-"')
      .optional(),
    budget_seconds: z.number().int().positive().max(30 * 24 * 3600).optional(),
    interaction: z
      .object({
        deadline_seconds: z.number().int().positive().max(30 * 24 * 3600).optional(),
        max_rounds: z.number().int().min(1).max(20).optional(),
      })
      .strict()
      .optional(),
    retry: z
      .object({
        max_attempts: z.number().int().min(1).max(20).optional(),
        initial_interval_seconds: z.number().positive().max(3600).optional(),
        maximum_interval_seconds: z.number().positive().max(3600).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

const reconcileSchema = z.object({ requested_by: z.string().min(1).max(200) }).strict();

const inputSchema = z
  .object({
    input: z.record(z.string(), z.unknown()).refine((value) => Object.keys(value).length > 0, 'must not be empty'),
    provided_by: z.string().min(1).max(200).optional(),
    idempotency_key: z.string().regex(CALLER_KEY_PATTERN, 'must be 1-200 characters of letters, digits, "_", ".", ":" or "-"'),
  })
  .strict();

const cancelSchema = z
  .object({
    requested_by: z.string().min(1).max(200),
    reason: z.string().min(1).max(2000),
  })
  .strict();

const credentialsSchema = z.object({ refreshed_by: z.string().min(1).max(200) }).strict();

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const first = parsed.error.issues[0];
  // An unknown field is reported at its parent's path: name the field itself.
  const unknownKey = first?.code === 'unrecognized_keys' ? first.keys[0] : undefined;
  const field = [...(first?.path ?? []), ...(unknownKey ? [unknownKey] : [])].join('.');
  throw new HttpError(400, 'INVALID_REQUEST', formatZodIssues(parsed.error.issues), field || undefined);
}

/** The operation as HTTP callers see it: snake_case, with the seller's payload passed through untouched. */
export function operationView(view: OperationView, links: { webUi?: string }): Record<string, unknown> {
  const state: OperationState | undefined = view.state;
  const body: Record<string, unknown> = {
    operation_id: view.operationId,
    execution: view.execution,
    running: view.running,
  };
  if (links.webUi) body.web_ui = links.webUi;
  if (view.executionError) body.execution_error = view.executionError;
  if (!state) return body;
  Object.assign(body, {
    agent_id: state.agentId,
    task: state.task,
    status: state.status,
    task_id: state.taskId ?? null,
    context_id: state.contextId ?? null,
    message: state.message ?? null,
    progress: state.progress
      ? {
          percentage: state.progress.percentage,
          current_step: state.progress.currentStep,
          total_steps: state.progress.totalSteps,
          step_number: state.progress.stepNumber,
        }
      : null,
    poll_count: state.pollCount,
    webhooks_applied: state.webhooksApplied,
    webhook_registered: state.webhookRegistered,
    input_request: state.inputRequest ?? null,
    input_rounds: state.inputRounds,
    auth_required: state.authRequired ?? null,
    errors: (state.errors ?? []).map((error) => ({
      code: error.code,
      message: error.message,
      recovery: error.recovery,
      ...(error.field ? { field: error.field } : {}),
      ...(error.suggestion ? { suggestion: error.suggestion } : {}),
      ...(error.retryAfterSeconds !== undefined ? { retry_after: error.retryAfterSeconds } : {}),
      ...(error.details ? { details: error.details } : {}),
    })),
    failure: state.failure ?? null,
    cancellation: state.cancellation ?? null,
    reconciliation: (state.reconciliation ?? []).map((entry) => ({
      at: entry.at,
      trigger: entry.trigger,
      outcome: entry.outcome,
      ...(entry.taskId ? { task_id: entry.taskId } : {}),
      note: entry.note,
    })),
    transitions: state.transitions,
    anomalies: state.anomalies,
    started_at: state.startedAt,
    updated_at: state.updatedAt,
    deadline: state.deadline,
  });
  const ended = !view.running;
  if (ended) {
    body.result = state.result ?? null;
    body.outcome = state.outcome ?? null;
    body.outcome_notes = state.outcomeNotes ?? [];
  }
  return body;
}

export function createGateway(options: GatewayOptions): express.Express {
  const { orchestrator } = options;
  const app = express();
  app.disable('x-powered-by');

  const webUiLink = (operationId: string): string | undefined =>
    options.webUiUrl
      ? `${options.webUiUrl}/namespaces/${encodeURIComponent(options.namespace ?? 'default')}/workflows/${encodeURIComponent(operationId)}`
      : undefined;

  app.get('/healthz', async (_req, res) => {
    try {
      await orchestrator.temporal.withDeadline(Date.now() + 2_000, () =>
        orchestrator.temporal.workflowService.getSystemInfo({}),
      );
      res.json({ status: 'ok', temporal: 'reachable' });
    } catch (error) {
      res.status(503).json({ status: 'unavailable', temporal: 'unreachable', message: (error as Error).message });
    }
  });

  if (options.webhookRouter) app.use(options.webhookRouter);

  const api = express.Router();
  api.use((req, _res, next) => {
    if (req.method === 'POST' && !req.is('application/json')) {
      next(new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as application/json.'));
      return;
    }
    next();
  });
  api.use(express.json({ limit: JSON_LIMIT, strict: true }));

  api.post('/operations', async (req, res) => {
    const body = parseBody(startSchema, req.body);
    const started = await orchestrator.start({
      agentId: body.agent_id,
      task: body.task,
      params: body.params,
      ...(body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {}),
      ...(body.budget_seconds ? { budgetMs: body.budget_seconds * 1000 } : {}),
      ...(body.interaction
        ? {
            interaction: {
              ...(body.interaction.deadline_seconds ? { deadlineMs: body.interaction.deadline_seconds * 1000 } : {}),
              ...(body.interaction.max_rounds ? { maxRounds: body.interaction.max_rounds } : {}),
            },
          }
        : {}),
      ...(body.retry
        ? {
            retry: {
              ...(body.retry.max_attempts ? { maximumAttempts: body.retry.max_attempts } : {}),
              ...(body.retry.initial_interval_seconds ? { initialIntervalMs: body.retry.initial_interval_seconds * 1000 } : {}),
              ...(body.retry.maximum_interval_seconds ? { maximumIntervalMs: body.retry.maximum_interval_seconds * 1000 } : {}),
            },
          }
        : {}),
    });
    res
      .status(started.created ? 202 : 200)
      .location(`/v1/operations/${started.operationId}`)
      .json({
        operation_id: started.operationId,
        created: started.created,
        status: started.state?.status ?? 'pending',
        links: { self: `/v1/operations/${started.operationId}`, web_ui: webUiLink(started.operationId) },
      });
  });

  api.get('/operations/:id', async (req, res) => {
    const view = await orchestrator.status(String(req.params.id));
    res.json(operationView(view, { webUi: webUiLink(view.operationId) }));
  });

  api.post('/operations/:id/input', async (req, res) => {
    const body = parseBody(inputSchema, req.body);
    const answer = await orchestrator.provideInput(String(req.params.id), {
      input: body.input,
      idempotencyKey: body.idempotency_key,
      ...(body.provided_by ? { providedBy: body.provided_by } : {}),
    });
    res.json({ accepted: answer.accepted, round: answer.round });
  });

  api.post('/operations/:id/cancel', async (req, res) => {
    const body = parseBody(cancelSchema, req.body);
    const answer = await orchestrator.cancel(String(req.params.id), { requestedBy: body.requested_by, reason: body.reason });
    res.status(202).json({ accepted: answer.accepted, status_when_requested: answer.status });
  });

  api.post('/operations/:id/credentials-refreshed', async (req, res) => {
    const body = parseBody(credentialsSchema, req.body);
    res.json(await orchestrator.credentialsRefreshed(String(req.params.id), body.refreshed_by));
  });

  api.post('/sellers/:agentId/reconcile', async (req, res) => {
    const body = parseBody(reconcileSchema, req.body);
    res.json(await orchestrator.reconcile(String(req.params.agentId), body.requested_by));
  });

  app.use('/v1', api);

  app.use((_req, _res, next) => next(new HttpError(404, 'NOT_FOUND', 'No such route.')));

  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const answer = toHttpError(error);
    if (answer.status >= 500) console.error(`gateway: ${answer.status} ${(error as Error)?.stack ?? String(error)}`);
    res.status(answer.status).json({
      error: { code: answer.code, message: answer.message, ...(answer.field ? { field: answer.field } : {}) },
    });
  });
  return app;
}

function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof OperationRequestError) return new HttpError(400, 'INVALID_REQUEST', error.message, error.field);
  if (error instanceof OperationNotFoundError) return new HttpError(404, 'OPERATION_NOT_FOUND', error.message);
  if (error instanceof IdempotencyConflictError) return new HttpError(409, 'IDEMPOTENCY_CONFLICT', error.message, 'idempotency_key');
  if (error instanceof OperationRejectedError) return new HttpError(409, 'REJECTED_BY_OPERATION', error.message);
  const bodyError = error as { type?: string; status?: number; message?: string };
  if (bodyError?.type === 'entity.too.large') return new HttpError(413, 'PAYLOAD_TOO_LARGE', `The body is larger than ${JSON_LIMIT}.`);
  if (bodyError?.type === 'entity.parse.failed') {
    return new HttpError(400, 'MALFORMED_JSON', `The body is not valid JSON: ${bodyError.message ?? 'parse error'}.`);
  }
  if (isTemporalUnavailable(error)) {
    return new HttpError(503, 'TEMPORAL_UNAVAILABLE', 'Temporal is not reachable right now; retry shortly.');
  }
  return new HttpError(500, 'INTERNAL', 'Unexpected error; see the gateway log.');
}

function isTemporalUnavailable(error: unknown): boolean {
  const grpcCode = (error as { code?: number })?.code;
  const cause = (error as { cause?: { code?: number } })?.cause?.code;
  // 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED (gRPC status codes)
  return grpcCode === 14 || grpcCode === 4 || cause === 14 || cause === 4 || (error as Error)?.name === 'ServiceError';
}
