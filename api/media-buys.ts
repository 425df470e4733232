/**
 * The media-buy API (mounted by the gateway): create a buy, read it and its delivery, change it, attach creatives.
 * It validates and forwards; the buy's workflow holds the state and decides (see api/openapi-media-buys.yaml).
 *
 *   POST /v1/media-buys                      {buy_key, agent_id, params, reporting?, creative_alert_lead_hours?, requested_by?}
 *   GET  /v1/media-buys/:id                  state, status history, creatives, changes, delivery totals, gaps, anomalies
 *   GET  /v1/media-buys/:id/delivery         totals by package, sequence tracking, gaps, adjustments, reconciliation
 *   POST /v1/media-buys/:id/changes          {kind, requested_by, reason?, budgets?, start_time?, end_time?, packages?, idempotency_key?}
 *   POST /v1/media-buys/:id/creatives        {creatives, assignments?, requested_by, idempotency_key?}
 *   POST /v1/media-buys/:id/refresh          {requested_by}
 *   POST /v1/media-buys/:id/governance/decision {decision: approve|decline, decided_by, note?, values?, idempotency_key?}
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import {
  MediaBuyChangeRefusedError,
  type MediaBuyClient,
  MediaBuyNotFoundError,
  MediaBuyRequestError,
} from '../client/media-buy-client';
import { isTemporalUnavailable } from '../client/temporal-errors';
import { formatZodIssues } from '../config/zod-format';
import { CALLER_KEY_PATTERN } from '../protocol';
import { actorSchema } from '../protocol/requests';
import type { ChangeRequest, MediaBuyState } from '../contract/media-buy';
import { callerOf } from './app';

export interface MediaBuyRouterOptions {
  mediaBuys: MediaBuyClient;
  webUiUrl?: string;
  namespace?: string;
}

const keySchema = z
  .string()
  .regex(CALLER_KEY_PATTERN, 'must be 1-200 characters of letters, digits, "_", ".", ":" or "-"');
const frequencySchema = z.enum(['hourly', 'daily', 'monthly']);

const createSchema = z
  .object({
    buy_key: keySchema,
    agent_id: z.string().min(1, 'agent_id is required'),
    params: z.record(z.string(), z.unknown()),
    reporting: z
      .object({
        frequency: frequencySchema.optional(),
        product_frequencies: z.array(z.array(frequencySchema)).optional(),
        requested_metrics: z.array(z.string().min(1)).optional(),
        expected_delay_minutes: z
          .number()
          .int()
          .min(0)
          .max(7 * 24 * 60)
          .optional(),
      })
      .strict()
      .optional(),
    creative_alert_lead_hours: z
      .number()
      .positive()
      .max(90 * 24)
      .optional(),
    requested_by: actorSchema.optional(),
    governance: z
      .object({
        agent_id: z.string().min(1, 'agent_id is required'),
        plan_id: keySchema,
        caller: z.url({ error: 'must be the URL (or URN) of the buyer agent' }).optional(),
        decision_timeout_hours: z
          .number()
          .positive()
          .max(30 * 24)
          .optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

const governanceDecisionSchema = z
  .object({
    decision: z.enum(['approve', 'decline']),
    decided_by: actorSchema,
    note: z.string().min(1).max(2000).optional(),
    values: z.record(z.string(), z.unknown()).optional(),
    idempotency_key: keySchema.optional(),
  })
  .strict();

const isoTime = z.string().refine((value) => !Number.isNaN(Date.parse(value)), 'must be an ISO 8601 time');

const changeSchema = z
  .object({
    kind: z.enum(['pause', 'resume', 'budget', 'dates', 'packages', 'cancel']),
    requested_by: actorSchema,
    reason: z.string().min(1).max(2000).optional(),
    budgets: z.record(z.string(), z.number().positive()).optional(),
    start_time: isoTime.optional(),
    end_time: isoTime.optional(),
    packages: z.array(z.record(z.string(), z.unknown())).min(1).optional(),
    idempotency_key: keySchema.optional(),
  })
  .strict();

const creativesSchema = z
  .object({
    creatives: z.array(z.object({ creative_id: z.string().min(1) }).passthrough()).min(1),
    assignments: z.record(z.string(), z.array(z.string().min(1))).optional(),
    requested_by: actorSchema,
    idempotency_key: keySchema.optional(),
  })
  .strict();

const refreshSchema = z.object({ requested_by: actorSchema }).strict();

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

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new HttpError(400, 'INVALID_REQUEST', formatZodIssues(parsed.error.issues), issue?.path.join('.') || undefined);
}

/** The delivery part of the view: aggregates, not every report. */
export function deliveryView(state: MediaBuyState): Record<string, unknown> {
  const reporting = state.reporting;
  return {
    media_buy_id: state.mediaBuyId ?? null,
    frequency: reporting.frequency ?? null,
    registered: reporting.registered ?? null,
    totals: reporting.totals,
    by_package: reporting.byPackage,
    periods_counted: reporting.periodsCounted,
    final_periods: reporting.finalPeriods,
    final_report: reporting.finalReport ?? null,
    sequence: {
      highest: reporting.highestSequence,
      contiguous_through: reporting.contiguousThrough,
      missing: reporting.missingSequences,
      gaps: reporting.sequenceGaps,
      duplicates: reporting.duplicates,
      reordered: reporting.reordered,
    },
    gaps: {
      detected: reporting.periodGapsDetected,
      filled: reporting.periodGapsFilled,
      missing_now: Object.keys(reporting.missingPeriods).sort(),
      unfilled: reporting.unfilledPeriods,
    },
    reports: {
      received: reporting.reportsReceived,
      applied: reporting.reportsApplied,
      delayed_notices: reporting.delayedNotices,
      last_at: reporting.lastReportAt ?? null,
      next_expected_at: reporting.nextExpectedAt ?? null,
    },
    pulls: { total: reporting.pulls, late: reporting.latePulls },
    adjustments: {
      count: reporting.adjustmentCount,
      recent: reporting.adjustments,
      on_sealed_periods: reporting.sealedAdjustments,
    },
    reconciliation: reporting.reconciliation ?? null,
  };
}

/** The buy's governance, without the signed governance_context itself (it is for the seller, not for readers). */
export function governanceView(state: MediaBuyState): Record<string, unknown> | null {
  if (!state.governance) return null;
  const { governanceContext, sellerId, ...rest } = state.governance;
  return { agentId: sellerId, ...rest, hasGovernanceContext: governanceContext !== undefined };
}

export function mediaBuyView(
  id: string,
  running: boolean,
  state: MediaBuyState,
  links: { webUi?: string },
): Record<string, unknown> {
  return {
    id,
    buy_key: state.buyKey,
    agent_id: state.sellerId,
    media_buy_id: state.mediaBuyId ?? null,
    status: state.status,
    running,
    done: state.done,
    revision: state.revision ?? null,
    available_actions: state.availableActions ?? null,
    health: state.health ?? null,
    impairments: state.impairments ?? [],
    flight: { start_time: state.startTime ?? null, end_time: state.endTime ?? null },
    creative_deadline: state.creativeDeadline ?? null,
    packages: Object.values(state.packages),
    status_history: state.statusHistory,
    status_changes: state.statusChangeCount,
    changes: state.changes,
    creatives: Object.values(state.creatives),
    creative_alerts: state.creativeAlerts,
    delivery: deliveryView(state),
    anomalies: state.anomalies,
    anomaly_count: state.anomalyCount,
    failure: state.failure ?? null,
    governance: governanceView(state),
    create_operation_id: state.createOperationId,
    reads: state.reads,
    run: state.run,
    started_at: state.startedAt,
    updated_at: state.updatedAt,
    ...(links.webUi ? { links: { web_ui: links.webUi } } : {}),
  };
}

/**
 * A change's or a creatives attachment's answer: 200 when applied, 202 when sent and not confirmed yet, 409 when the
 * buy or the seller refused it, or the seller's buy shows it did not take effect.
 */
function sendChangeAnswer(res: Response, answer: Awaited<ReturnType<MediaBuyClient['change']>>): void {
  res.status(answer.outcome === 'applied' ? 200 : answer.outcome === 'sent' ? 202 : 409).json({
    sequence: answer.sequence,
    outcome: answer.outcome,
    status: answer.status,
    operation_id: answer.operationId ?? null,
    ...(answer.error ? { error: answer.error } : {}),
  });
}

export function createMediaBuyRouter(options: MediaBuyRouterOptions): express.Router {
  const { mediaBuys } = options;
  const router = express.Router();
  const webUi = (id: string) =>
    options.webUiUrl
      ? `${options.webUiUrl}/namespaces/${encodeURIComponent(options.namespace ?? 'default')}/workflows/${encodeURIComponent(id)}`
      : undefined;
  const json = express.json({ limit: '1mb' });
  const requireJson = (req: Request, _res: Response, next: NextFunction) => {
    if (!req.is('application/json')) {
      next(new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as application/json.'));
      return;
    }
    next();
  };
  const route =
    (handler: (req: Request, res: Response) => Promise<void>) => (req: Request, res: Response, next: NextFunction) => {
      handler(req, res).catch(next);
    };

  router.post(
    '/v1/media-buys',
    requireJson,
    json,
    route(async (req, res) => {
      const body = parse(createSchema, req.body);
      const created = await mediaBuys.create(
        {
          buyKey: body.buy_key,
          sellerId: body.agent_id,
          params: body.params,
          ...(body.reporting
            ? {
                reporting: {
                  ...(body.reporting.frequency ? { frequency: body.reporting.frequency } : {}),
                  ...(body.reporting.product_frequencies
                    ? { productFrequencies: body.reporting.product_frequencies }
                    : {}),
                  ...(body.reporting.requested_metrics ? { requestedMetrics: body.reporting.requested_metrics } : {}),
                  ...(body.reporting.expected_delay_minutes !== undefined
                    ? { expectedDelayMinutes: body.reporting.expected_delay_minutes }
                    : {}),
                },
              }
            : {}),
          ...(body.creative_alert_lead_hours !== undefined
            ? { creativeAlertLeadMs: body.creative_alert_lead_hours * 3_600_000 }
            : {}),
          ...(body.requested_by ? { requestedBy: body.requested_by } : {}),
          ...(body.governance
            ? {
                governance: {
                  sellerId: body.governance.agent_id,
                  planId: body.governance.plan_id,
                  ...(body.governance.caller ? { caller: body.governance.caller } : {}),
                  ...(body.governance.decision_timeout_hours !== undefined
                    ? { decisionTimeoutMs: body.governance.decision_timeout_hours * 3_600_000 }
                    : {}),
                },
              }
            : {}),
        },
        callerOf(req),
      );
      const link = webUi(created.mediaBuyWorkflowId);
      res.status(created.created ? 202 : 200).json({
        id: created.mediaBuyWorkflowId,
        created: created.created,
        ...(link ? { links: { web_ui: link } } : {}),
      });
    }),
  );

  router.get(
    '/v1/media-buys/:id',
    route(async (req, res) => {
      const id = String(req.params.id);
      const view = await mediaBuys.view(id, callerOf(req));
      const link = webUi(id);
      res.json(mediaBuyView(id, view.running, view.state, link ? { webUi: link } : {}));
    }),
  );

  router.get(
    '/v1/media-buys/:id/delivery',
    route(async (req, res) => {
      res.json(deliveryView(await mediaBuys.state(String(req.params.id), callerOf(req))));
    }),
  );

  router.post(
    '/v1/media-buys/:id/changes',
    requireJson,
    json,
    route(async (req, res) => {
      const body = parse(changeSchema, req.body);
      const request: ChangeRequest = {
        kind: body.kind,
        requestedBy: body.requested_by,
        ...(body.reason ? { reason: body.reason } : {}),
        ...(body.budgets ? { budgets: body.budgets } : {}),
        ...(body.start_time ? { startTime: body.start_time } : {}),
        ...(body.end_time ? { endTime: body.end_time } : {}),
        ...(body.packages ? { packages: body.packages } : {}),
      };
      const answer = await mediaBuys.change(
        String(req.params.id),
        request,
        body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
        callerOf(req),
      );
      sendChangeAnswer(res, answer);
    }),
  );

  router.post(
    '/v1/media-buys/:id/creatives',
    requireJson,
    json,
    route(async (req, res) => {
      const body = parse(creativesSchema, req.body);
      const answer = await mediaBuys.attachCreatives(
        String(req.params.id),
        {
          creatives: body.creatives,
          ...(body.assignments ? { assignments: body.assignments } : {}),
          requestedBy: body.requested_by,
        },
        body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
        callerOf(req),
      );
      sendChangeAnswer(res, answer);
    }),
  );

  router.post(
    '/v1/media-buys/:id/refresh',
    requireJson,
    json,
    route(async (req, res) => {
      const body = parse(refreshSchema, req.body);
      await mediaBuys.refresh(String(req.params.id), body.requested_by);
      res.status(202).json({ status: 'accepted' });
    }),
  );

  router.post(
    '/v1/media-buys/:id/governance/decision',
    requireJson,
    json,
    route(async (req, res) => {
      const body = parse(governanceDecisionSchema, req.body);
      const answer = await mediaBuys.decideGovernance(
        String(req.params.id),
        {
          decision: body.decision,
          decidedBy: body.decided_by,
          ...(body.note ? { note: body.note } : {}),
          ...(body.values ? { values: body.values } : {}),
        },
        body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
        callerOf(req),
      );
      res.json({ accepted: answer.accepted, action: answer.action, decision: answer.decision });
    }),
  );

  router.use('/v1/media-buys', (error: unknown, _req: Request, res: Response, next: NextFunction) => {
    let answer: HttpError;
    if (error instanceof HttpError) answer = error;
    else if (error instanceof MediaBuyRequestError)
      answer = new HttpError(400, 'INVALID_REQUEST', error.message, error.field);
    else if (error instanceof MediaBuyNotFoundError) answer = new HttpError(404, 'MEDIA_BUY_NOT_FOUND', error.message);
    else if (error instanceof MediaBuyChangeRefusedError) answer = new HttpError(409, error.code, error.message);
    else if (isTemporalUnavailable(error)) {
      res.setHeader('Retry-After', '5');
      answer = new HttpError(503, 'TEMPORAL_UNAVAILABLE', 'Temporal is not reachable right now; retry in 5 s.');
    } else if ((error as { type?: string })?.type === 'entity.parse.failed')
      answer = new HttpError(400, 'MALFORMED_JSON', 'The body is not valid JSON.');
    else {
      next(error);
      return;
    }
    res.status(answer.status).json({
      error: { code: answer.code, message: answer.message, ...(answer.field ? { field: answer.field } : {}) },
    });
  });
  return router;
}
