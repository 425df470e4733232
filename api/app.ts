/**
 * The HTTP gateway: operations API for backends that are not TypeScript, health, and (webhooks.ts) the seller
 * webhook receiver. It validates, forwards to Temporal and answers; the workflow holds the state.
 */
import express, { type Request } from 'express';
import type { OrchestratorClient } from '../client/orchestrator-client';
import type { TaskRefusal } from '../client/seller-capabilities-client';
import { listOperations, parseOperationListQuery } from '../client/operation-list';
import { retrySettingsFrom } from '../protocol/requests';
import type { CallerIdentity } from '../protocol/tenancy';
import type { AdcpJsonWebKey } from '@adcp/sdk/signing/client';
import { GatewayMetrics, attachGatewayMetrics, countPendingOperations } from '../observability/gateway-metrics';
import { describeOperation } from '../observability/request-logging';
import { jsonBody } from './body';
import { createJwksRouter } from './jwks';
import { openApiDocument } from './openapi';
import { operationView, reconciliationReportView } from './operation-view';
import { Problem, RETRY_AFTER_SECONDS, problemHandler, sendProblem } from './problems';
import { methodsServedAt, servesPost } from './routes';
import {
  cancelSchema,
  credentialsRefreshedSchema,
  parseRequest,
  provideInputSchema,
  reconcileSchema,
  startOperationSchema,
} from './schemas';

export { operationView, reconciliationReportView } from './operation-view';

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
   * Refuses a task the seller's capabilities do not offer (422), or cannot say yet that it does (503), before the
   * operation starts (client/seller-capabilities-client.ts `taskSupportCheck`); undefined lets it start.
   */
  taskSupport?: (sellerId: string, task: string) => Promise<TaskRefusal | undefined>;
  /** Public keys of our notification signing key (config/notification-key.ts), served at /.well-known/jwks.json. */
  notificationJwks?: readonly AdcpJsonWebKey[];
  /** Configuration the gateway runs with but should not (a seller's unset webhook secret), shown in /healthz. */
  warnings?: readonly string[];
}

/** Whether the request carries body bytes (the same test express's body parsers make). */
function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Who asks, from the authentication in front of the gateway (api/auth sets `req.principal`): the tenant that scopes
 * every read and change, and the principal the audit trail records. Undefined without authentication (single-tenant).
 */
export function callerOf(req: Request): CallerIdentity | undefined {
  const principal = req.principal;
  return principal ? { tenant: principal.tenant, principal: `${principal.tenant}/${principal.id}` } : undefined;
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
  const document = JSON.stringify(openApiDocument());
  app.get('/openapi.json', (_req, res) => {
    res.type('application/json').set('Cache-Control', 'public, max-age=300').send(document);
  });

  const webUiLink = (operationId: string): string | undefined =>
    options.webUiUrl
      ? `${options.webUiUrl}/namespaces/${encodeURIComponent(options.namespace ?? 'default')}/workflows/${encodeURIComponent(operationId)}`
      : undefined;

  const warnings = options.warnings ?? [];
  // 200 while Temporal answers (the gateway can take starts and webhooks durably); `workers` says whether anything
  // polls the task queue, without which operations do not move and reads answer from published state.
  app.get('/healthz', async (_req, res) => {
    try {
      await orchestrator.temporal.withDeadline(Date.now() + 2_000, () =>
        orchestrator.temporal.workflowService.getSystemInfo({}),
      );
    } catch (error) {
      sendProblem(
        res,
        new Problem(503, 'TEMPORAL_UNAVAILABLE', `Temporal is not reachable: ${(error as Error).message}`, {
          extra: { status: 'unavailable', temporal: 'unreachable' },
          members: { temporal: 'unreachable' },
          headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
        }),
      );
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
      ...(warnings.length > 0 ? { warnings } : {}),
    });
  });

  if (options.notificationJwks) app.use(createJwksRouter(options.notificationJwks));
  else
    app.get('/.well-known/jwks.json', (_req, res) => {
      sendProblem(
        res,
        new Problem(
          404,
          'NOT_FOUND',
          'This gateway signs no notifications, so it publishes no keys: set ADCP_NOTIFICATION_KEY_FILE to sign notifications to buyers and serve their public keys here.',
        ),
      );
    });
  if (options.webhookRouter) app.use(options.webhookRouter);
  if (options.reportingWebhookRouter) app.use(options.reportingWebhookRouter);

  // One body parser for every /v1 route (api/body.ts); the webhook receivers read their raw bytes themselves.
  app.use('/v1', (req, _res, next) => {
    if (req.method !== 'POST' || !servesPost(`${req.baseUrl}${req.path}`)) return next();
    // No body at all is a missing body (400), not a wrong media type: only a body that is there has a type.
    if (!hasBody(req)) {
      next(
        new Problem(
          400,
          'INVALID_REQUEST',
          'The request has no body: send a JSON object with Content-Type: application/json.',
        ),
      );
      return;
    }
    if (!req.is(['application/json', 'application/*+json'])) {
      next(
        new Problem(
          415,
          'UNSUPPORTED_MEDIA_TYPE',
          `The body is ${req.get('content-type') ? `"${req.get('content-type')!.slice(0, 100)}"` : 'of no declared type'}; send it as application/json.`,
        ),
      );
      return;
    }
    next();
  });
  app.use('/v1', jsonBody());
  app.use('/v1', (req, _res, next) => {
    if (
      req.method === 'POST' &&
      servesPost(`${req.baseUrl}${req.path}`) &&
      (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body))
    ) {
      const got = req.body === null ? 'null' : Array.isArray(req.body) ? 'an array' : typeof req.body;
      next(new Problem(400, 'INVALID_REQUEST', `The body is valid JSON but ${got}; send a JSON object.`));
      return;
    }
    next();
  });

  if (options.mediaBuyRouter) app.use(options.mediaBuyRouter);
  for (const router of options.campaignRouters ?? []) app.use(router);

  const api = express.Router();

  api.post('/v1/operations', async (req, res) => {
    const body = parseRequest(startOperationSchema, req.body);
    describeOperation(res, { seller: body.agent_id, task: body.task });
    const refused = await options.taskSupport?.(body.agent_id, body.task);
    if (refused?.status === 422) throw new Problem(422, 'UNSUPPORTED_TASK', refused.message, { field: 'task' });
    if (refused)
      throw new Problem(503, 'SELLER_CAPABILITIES_UNKNOWN', refused.message, {
        field: 'task',
        headers: { 'Retry-After': String(refused.retryAfterSeconds ?? RETRY_AFTER_SECONDS) },
      });
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
  api.get('/v1/operations', async (req, res) => {
    const caller = callerOf(req);
    res.json(
      await listOperations(orchestrator.temporal, {
        ...parseOperationListQuery(req.query),
        ...(caller ? { tenant: caller.tenant } : {}),
      }),
    );
  });

  api.get('/v1/operations/:id', async (req, res) => {
    const view = await orchestrator.status(String(req.params.id), callerOf(req));
    describeOperation(res, { operationId: view.operationId, seller: view.state?.sellerId, task: view.state?.task });
    res.json(operationView(view, { webUi: webUiLink(view.operationId) }));
  });

  api.post('/v1/operations/:id/input', async (req, res) => {
    const body = parseRequest(provideInputSchema, req.body);
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

  api.post('/v1/operations/:id/cancel', async (req, res) => {
    const body = parseRequest(cancelSchema, req.body);
    const answer = await orchestrator.cancel(
      String(req.params.id),
      { requestedBy: body.requested_by, reason: body.reason },
      callerOf(req),
    );
    res.status(202).json({ accepted: answer.accepted, status_when_requested: answer.status });
  });

  api.post('/v1/operations/:id/credentials-refreshed', async (req, res) => {
    const body = parseRequest(credentialsRefreshedSchema, req.body);
    res.json(await orchestrator.credentialsRefreshed(String(req.params.id), body.refreshed_by, callerOf(req)));
  });

  api.post('/v1/operations/:id/reconcile', async (req, res) => {
    const body = parseRequest(reconcileSchema, req.body);
    res.json(await orchestrator.reconcileOperation(String(req.params.id), body.requested_by, callerOf(req)));
  });

  api.post('/v1/sellers/:sellerId/reconcile', async (req, res) => {
    const body = parseRequest(reconcileSchema, req.body);
    res.json(
      reconciliationReportView(
        await orchestrator.reconcile(String(req.params.sellerId), body.requested_by, callerOf(req)),
      ),
    );
  });

  app.use(api);

  app.use((req, _res, next) => {
    const methods = methodsServedAt(req.path);
    if (methods.length > 0 && !methods.includes(req.method)) {
      next(
        new Problem(
          405,
          'METHOD_NOT_ALLOWED',
          `${req.method} is not served on ${req.path.slice(0, 200)}; use ${methods.join(' or ')}.`,
          {
            headers: { Allow: methods.join(', ') },
          },
        ),
      );
      return;
    }
    next(new Problem(404, 'NOT_FOUND', `No route ${req.method} ${req.path.slice(0, 200)}; see GET /openapi.json.`));
  });

  app.use(problemHandler());
  return app;
}
