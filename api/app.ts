/**
 * The HTTP gateway: operations API for backends that are not TypeScript, health, and (webhooks.ts) the seller
 * webhook receiver. It validates, forwards to Temporal and answers; the workflow holds the state.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import {
  IdempotencyConflictError,
  OperationEndedError,
  OperationNotFoundError,
  OperationRejectedError,
  OperationRequestError,
  SellerNotFoundError,
} from '../client/operation-errors';
import { type OrchestratorClient } from '../client/orchestrator-client';
import { listOperations, parseOperationListQuery } from '../client/operation-list';
import { isTemporalUnavailable } from '../client/temporal-errors';
import { formatZodIssues } from '../config/zod-format';
import { CALLER_KEY_PATTERN, TASK_NAME_PATTERN } from '../protocol';
import {
  actorSchema,
  durationSecondsSchema,
  inputAnswerSchema,
  interactionPolicySchema,
  retryPolicySchema,
  retrySettingsFrom,
} from '../protocol/requests';
import type { CallerIdentity } from '../protocol/tenancy';
import type { AdcpJsonWebKey } from '@adcp/sdk/signing/client';
import { createJwksRouter } from './jwks';
import { operationView, reconciliationReportView } from './operation-view';

export { operationView, reconciliationReportView } from './operation-view';
import { GatewayMetrics, attachGatewayMetrics, countPendingOperations } from '../observability/gateway-metrics';
import { errorFields } from '../observability/logger';
import { describeOperation, requestLoggerOf } from '../observability/request-logging';

export interface GatewayOptions {
  orchestrator: OrchestratorClient;
  /** Link operators to the workflow in the Temporal Web UI. */
  webUiUrl?: string;
  namespace?: string;
  /** Mounted before the JSON body parser: webhook verification needs the raw bytes. */
  webhookRouter?: express.Router;
  /** Reporting webhooks of media buys (api/reporting-webhooks.ts), also before any body parser. */
  reportingWebhookRouter?: express.Router;
  /** The media-buy API (api/media-buys.ts): /v1/media-buys... with its own body handling. */
  mediaBuyRouter?: express.Router;
  /** The gateway's Prometheus metrics (observability/gateway-metrics.ts); one of its own when absent. */
  metrics?: GatewayMetrics;
  /** Campaigns (#14): the sellers, discoveries and campaigns routers (api/sellers.ts, discoveries.ts, campaigns.ts). */
  campaignRouters?: express.Router[];
  /**
   * Refuses a task the seller's known capabilities do not offer before the operation starts (api/sellers.ts
   * `taskSupportCheck`): answers why, or undefined to let it start.
   */
  taskSupport?: (sellerId: string, task: string) => Promise<string | undefined>;
  /** Public keys of our notification signing key (config/notification-key.ts), served at /.well-known/jwks.json. */
  notificationJwks?: readonly AdcpJsonWebKey[];
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
    budget_seconds: durationSecondsSchema.optional(),
    interaction: interactionPolicySchema.optional(),
    retry: retryPolicySchema.optional(),
  })
  .strict();

const reconcileSchema = z.object({ requested_by: actorSchema }).strict();

const inputSchema = z
  .object({
    input: inputAnswerSchema,
    provided_by: actorSchema.optional(),
    idempotency_key: z
      .string()
      .regex(CALLER_KEY_PATTERN, 'must be 1-200 characters of letters, digits, "_", ".", ":" or "-"'),
  })
  .strict();

const cancelSchema = z
  .object({
    requested_by: actorSchema,
    reason: z.string().min(1).max(2000),
  })
  .strict();

const credentialsSchema = z.object({ refreshed_by: actorSchema }).strict();

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    /** More members of the error object (e.g. the final `status` of an ended operation). */
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** Whether the request carries body bytes (the same test express's body parsers make). */
function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Seconds a client should wait before retrying a 503. */
const RETRY_AFTER_SECONDS = 5;

/** The routes the gateway serves, for 405 (a known path, another method) versus 404 (no such path). */
const ROUTES: { pattern: RegExp; methods: string[] }[] = [
  { pattern: /^\/healthz$/, methods: ['GET'] },
  { pattern: /^\/metrics$/, methods: ['GET'] },
  { pattern: /^\/\.well-known\/jwks\.json$/, methods: ['GET'] },
  { pattern: /^\/v1\/operations$/, methods: ['GET', 'POST'] },
  { pattern: /^\/v1\/operations\/[^/]+$/, methods: ['GET'] },
  { pattern: /^\/v1\/operations\/[^/]+\/(input|cancel|credentials-refreshed|reconcile)$/, methods: ['POST'] },
  { pattern: /^\/v1\/sellers\/[^/]+\/reconcile$/, methods: ['POST'] },
  { pattern: /^\/webhooks\/adcp\/[^/]+$/, methods: ['POST'] },
  { pattern: /^\/v1\/media-buys$/, methods: ['POST'] },
  { pattern: /^\/v1\/media-buys\/[^/]+$/, methods: ['GET'] },
  { pattern: /^\/v1\/media-buys\/[^/]+\/delivery$/, methods: ['GET'] },
  { pattern: /^\/v1\/media-buys\/[^/]+\/(changes|creatives|refresh)$/, methods: ['POST'] },
  { pattern: /^\/webhooks\/adcp-reporting\/[^/]+$/, methods: ['POST'] },
  { pattern: /^\/v1\/sellers$/, methods: ['GET'] },
  { pattern: /^\/v1\/sellers\/[^/]+$/, methods: ['GET'] },
  { pattern: /^\/v1\/sellers\/[^/]+\/capabilities-changed$/, methods: ['POST'] },
  { pattern: /^\/v1\/discoveries$/, methods: ['POST'] },
  { pattern: /^\/v1\/discoveries\/[^/]+$/, methods: ['GET'] },
  { pattern: /^\/v1\/campaigns$/, methods: ['POST'] },
  { pattern: /^\/v1\/campaigns\/[^/]+$/, methods: ['GET'] },
  { pattern: /^\/v1\/campaigns\/[^/]+\/(selection|approval|changes)$/, methods: ['POST'] },
  { pattern: /^\/v1\/campaigns\/[^/]+\/creatives$/, methods: ['GET', 'POST'] },
];

/** Whether POST is served on this path: elsewhere a POST answers 405 (or 404), not a complaint about its body. */
function servesPost(path: string): boolean {
  // Express matches routes case-insensitively; so does this.
  return ROUTES.some((route) => route.methods.includes('POST') && route.pattern.test(path.toLowerCase()));
}

/**
 * Who asks, from the authentication in front of the gateway (api/auth sets `req.principal`): the tenant that scopes
 * every read and change, and the principal the audit trail records. Undefined without authentication (single-tenant).
 */
export function callerOf(req: Request): CallerIdentity | undefined {
  const principal = req.principal;
  return principal ? { tenant: principal.tenant, principal: `${principal.tenant}/${principal.id}` } : undefined;
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

export function createGateway(options: GatewayOptions): express.Express {
  const { orchestrator } = options;
  const app = express();
  app.disable('x-powered-by');
  // Requests by route and code, latency, webhook verification failures, pending operations (Prometheus, GET /metrics).
  const metrics =
    options.metrics ?? new GatewayMetrics({ pendingOperations: () => countPendingOperations(orchestrator.temporal) });
  app.use(metrics.middleware());
  attachGatewayMetrics(app, metrics);
  app.get('/metrics', async (_req, res) => {
    const { contentType, body } = await metrics.exposition();
    res.type(contentType).send(body);
  });

  const webUiLink = (operationId: string): string | undefined =>
    options.webUiUrl
      ? `${options.webUiUrl}/namespaces/${encodeURIComponent(options.namespace ?? 'default')}/workflows/${encodeURIComponent(operationId)}`
      : undefined;

  // 200 while Temporal answers (the gateway can take starts and webhooks durably); `workers` says whether anything
  // polls the task queue, without which operations do not move and reads answer from published state.
  app.get('/healthz', async (_req, res) => {
    try {
      await orchestrator.temporal.withDeadline(Date.now() + 2_000, () =>
        orchestrator.temporal.workflowService.getSystemInfo({}),
      );
    } catch (error) {
      res
        .status(503)
        .set('Retry-After', String(RETRY_AFTER_SECONDS))
        .json({ status: 'unavailable', temporal: 'unreachable', message: (error as Error).message });
      return;
    }
    let pollers: number | undefined;
    try {
      pollers = (await orchestrator.workerPresence()).pollers;
    } catch {
      pollers = undefined;
    }
    const workers = pollers === undefined ? 'unknown' : pollers > 0 ? 'polling' : 'none';
    res.json({
      status: workers === 'polling' ? 'ok' : 'degraded',
      temporal: 'reachable',
      workers,
      task_queue: orchestrator.taskQueue,
      ...(pollers !== undefined ? { pollers } : {}),
      ...(workers === 'polling'
        ? {}
        : {
            message:
              workers === 'none'
                ? `No worker polls task queue "${orchestrator.taskQueue}": operations wait, and reads answer from the state each operation last published. Start one with \`npm run worker\`.`
                : 'Could not ask Temporal whether a worker polls the task queue.',
          }),
    });
  });

  if (options.notificationJwks) app.use(createJwksRouter(options.notificationJwks));
  if (options.webhookRouter) app.use(options.webhookRouter);
  if (options.reportingWebhookRouter) app.use(options.reportingWebhookRouter);
  if (options.mediaBuyRouter) app.use(options.mediaBuyRouter);
  for (const router of options.campaignRouters ?? []) app.use(router);

  const api = express.Router();
  api.use((req, _res, next) => {
    if (req.method !== 'POST' || !servesPost(`${req.baseUrl}${req.path}`)) return next();
    // No body at all is a missing body (400), not a wrong media type: only a body that is there has a type.
    if (!hasBody(req)) {
      next(
        new HttpError(
          400,
          'INVALID_REQUEST',
          'The request has no body: send a JSON object with Content-Type: application/json.',
        ),
      );
      return;
    }
    if (!req.is('application/json')) {
      next(
        new HttpError(
          415,
          'UNSUPPORTED_MEDIA_TYPE',
          `The body is ${req.get('content-type') ? `"${req.get('content-type')}"` : 'of no declared type'}; send it as application/json.`,
        ),
      );
      return;
    }
    next();
  });
  api.use(express.json({ limit: JSON_LIMIT, strict: false }));
  api.use((req, _res, next) => {
    if (
      req.method === 'POST' &&
      servesPost(`${req.baseUrl}${req.path}`) &&
      (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body))
    ) {
      const got = req.body === null ? 'null' : Array.isArray(req.body) ? 'an array' : typeof req.body;
      next(new HttpError(400, 'INVALID_REQUEST', `The body is valid JSON but ${got}; send a JSON object.`));
      return;
    }
    next();
  });

  api.post('/operations', async (req, res) => {
    const body = parseBody(startSchema, req.body);
    describeOperation(res, { seller: body.agent_id, task: body.task });
    const unsupported = await options.taskSupport?.(body.agent_id, body.task);
    if (unsupported) throw new HttpError(422, 'UNSUPPORTED_TASK', unsupported, 'task');
    const started = await orchestrator.start(
      {
        sellerId: body.agent_id,
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
        ...(body.retry ? { retry: retrySettingsFrom(body.retry) } : {}),
      },
      callerOf(req),
    );
    describeOperation(res, { operationId: started.operationId });
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

  // Visibility-backed list with filters and an opaque cursor (client/operation-list.ts).
  api.get('/operations', async (req, res) => {
    const caller = callerOf(req);
    res.json(
      await listOperations(orchestrator.temporal, {
        ...parseOperationListQuery(req.query),
        ...(caller ? { tenant: caller.tenant } : {}),
      }),
    );
  });

  api.get('/operations/:id', async (req, res) => {
    const view = await orchestrator.status(String(req.params.id), callerOf(req));
    describeOperation(res, { operationId: view.operationId, seller: view.state?.sellerId, task: view.state?.task });
    res.json(operationView(view, { webUi: webUiLink(view.operationId) }));
  });

  api.post('/operations/:id/input', async (req, res) => {
    const body = parseBody(inputSchema, req.body);
    const answer = await orchestrator.provideInput(
      String(req.params.id),
      {
        input: body.input,
        idempotencyKey: body.idempotency_key,
        ...(body.provided_by ? { providedBy: body.provided_by } : {}),
      },
      callerOf(req),
    );
    res.json({ accepted: answer.accepted, round: answer.round });
  });

  api.post('/operations/:id/cancel', async (req, res) => {
    const body = parseBody(cancelSchema, req.body);
    const answer = await orchestrator.cancel(
      String(req.params.id),
      {
        requestedBy: body.requested_by,
        reason: body.reason,
      },
      callerOf(req),
    );
    res.status(202).json({ accepted: answer.accepted, status_when_requested: answer.status });
  });

  api.post('/operations/:id/credentials-refreshed', async (req, res) => {
    const body = parseBody(credentialsSchema, req.body);
    res.json(await orchestrator.credentialsRefreshed(String(req.params.id), body.refreshed_by, callerOf(req)));
  });

  api.post('/operations/:id/reconcile', async (req, res) => {
    const body = parseBody(reconcileSchema, req.body);
    res.json(await orchestrator.reconcileOperation(String(req.params.id), body.requested_by, callerOf(req)));
  });

  api.post('/sellers/:sellerId/reconcile', async (req, res) => {
    const body = parseBody(reconcileSchema, req.body);
    res.json(reconciliationReportView(await orchestrator.reconcile(String(req.params.sellerId), body.requested_by)));
  });

  app.use('/v1', api);

  app.use((req, _res, next) => {
    const route = ROUTES.find((candidate) => candidate.pattern.test(req.path));
    if (route) {
      next(
        new HttpError(
          405,
          'METHOD_NOT_ALLOWED',
          `${req.method} is not served on ${req.path}; use ${route.methods.join(' or ')}.`,
          undefined,
          {},
          {
            Allow: route.methods.join(', '),
          },
        ),
      );
      return;
    }
    next(new HttpError(404, 'NOT_FOUND', `No route ${req.method} ${req.path}; see api/openapi.yaml.`));
  });

  app.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
    const answer = toHttpError(error);
    if (answer.status >= 500 && answer.status !== 503)
      requestLoggerOf(res).error(
        { ...errorFields(error), status: answer.status, path: req.path.slice(0, 200) },
        'unexpected error',
      );
    res
      .status(answer.status)
      .set(answer.headers)
      .json({
        error: {
          code: answer.code,
          message: answer.message,
          ...(answer.field ? { field: answer.field } : {}),
          ...answer.extra,
        },
      });
  });
  return app;
}

function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof OperationRequestError) return new HttpError(400, 'INVALID_REQUEST', error.message, error.field);
  if (error instanceof OperationNotFoundError) return new HttpError(404, 'OPERATION_NOT_FOUND', error.message);
  if (error instanceof SellerNotFoundError) return new HttpError(404, 'SELLER_NOT_FOUND', error.message);
  if (error instanceof IdempotencyConflictError)
    return new HttpError(409, 'IDEMPOTENCY_CONFLICT', error.message, 'idempotency_key');
  if (error instanceof OperationEndedError) {
    return new HttpError(409, 'OPERATION_ENDED', error.message, undefined, {
      execution: error.execution,
      ...(error.status ? { status: error.status } : {}),
    });
  }
  if (error instanceof OperationRejectedError) return new HttpError(409, 'REJECTED_BY_OPERATION', error.message);
  const bodyError = error as { type?: string; status?: number; message?: string; expose?: boolean };
  if (bodyError?.type === 'entity.too.large')
    return new HttpError(413, 'PAYLOAD_TOO_LARGE', `The body is larger than ${JSON_LIMIT}.`);
  if (bodyError?.type === 'entity.parse.failed') {
    return new HttpError(400, 'MALFORMED_JSON', `The body is not valid JSON: ${bodyError.message ?? 'parse error'}.`);
  }
  // Any other refusal of a body parser (garbage gzip, unknown charset or encoding, an aborted body) is the caller's.
  if (
    typeof bodyError?.status === 'number' &&
    bodyError.status >= 400 &&
    bodyError.status < 500 &&
    (bodyError.type !== undefined || bodyError.expose === true)
  ) {
    return new HttpError(bodyError.status, 'MALFORMED_BODY', `The body could not be read: ${bodyError.message ?? ''}.`);
  }
  if (isTemporalUnavailable(error)) {
    return new HttpError(
      503,
      'TEMPORAL_UNAVAILABLE',
      `Temporal (or a worker, for requests an operation must answer) did not answer in time; retry in ${RETRY_AFTER_SECONDS} s.`,
      undefined,
      {},
      { 'Retry-After': String(RETRY_AFTER_SECONDS) },
    );
  }
  return new HttpError(500, 'INTERNAL', 'Unexpected error; see the gateway log.');
}
