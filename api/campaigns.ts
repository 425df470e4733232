/**
 * The campaigns API (mounted by the gateway). It validates and forwards; the campaign's workflow holds the state,
 * runs its discovery, waits for the selection and the approval, starts the buys and guards the budget.
 *
 *   POST /v1/campaigns                   {campaign_key, brief, total_budget, currency?, flight, agent_ids?, time_budget_seconds,
 *                                         discovery_params?, preferences?, allocation?, buy_params?, requested_by}
 *   GET  /v1/campaigns/:id               phase, discovery summary, selection, approval, buys (live status), budget, changes, alerts
 *   POST /v1/campaigns/:id/selection     {lines: [{agent_id, product_id, pricing_option_id?, budget}], selected_by, idempotency_key?}
 *   POST /v1/campaigns/:id/approval      {approved_by, note?, idempotency_key?}
 *   POST /v1/campaigns/:id/changes       {kind: pause|resume|cancel|budget, requested_by, reason?, agent_id?, budget?, idempotency_key?}
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import {
  type CampaignClient,
  CampaignNotFoundError,
  CampaignRefusedError,
  CampaignRequestError,
  type CampaignView,
} from '../client/campaign-client';
import { isTemporalUnavailable } from '../client/temporal-errors';
import { formatZodIssues } from '../config/zod-format';
import { CALLER_KEY_PATTERN } from '../protocol';
import { actorSchema } from '../protocol/requests';
import { callerOf } from './app';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  throw new ApiError(
    400,
    'INVALID_REQUEST',
    formatZodIssues(parsed.error.issues),
    parsed.error.issues[0]?.path.join('.') || undefined,
  );
}

export const keySchema = z
  .string()
  .regex(CALLER_KEY_PATTERN, 'must be 1-200 characters of letters, digits, "_", ".", ":" or "-"');
const isoTime = z.string().refine((value) => !Number.isNaN(Date.parse(value)), 'must be an ISO 8601 time');
export const timeBudgetSchema = z
  .number()
  .positive()
  .max(60 * 60);
export const preferencesSchema = z
  .object({
    preferred_delivery_types: z.array(z.string().min(1)).optional(),
    channels: z.array(z.string().min(1)).optional(),
    max_cpm: z.number().positive().optional(),
  })
  .strict();

export function preferencesFrom(body: z.infer<typeof preferencesSchema> | undefined) {
  if (!body) return undefined;
  return {
    ...(body.preferred_delivery_types ? { preferredDeliveryTypes: body.preferred_delivery_types } : {}),
    ...(body.channels ? { channels: body.channels } : {}),
    ...(body.max_cpm !== undefined ? { maxCpm: body.max_cpm } : {}),
  };
}

const createSchema = z
  .object({
    campaign_key: keySchema,
    brief: z.string().min(1).max(10_000),
    total_budget: z.number().positive(),
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as "USD"')
      .optional(),
    flight: z.object({ start_time: isoTime, end_time: isoTime }).strict(),
    agent_ids: z.array(z.string().min(1)).min(1).optional(),
    time_budget_seconds: timeBudgetSchema,
    discovery_params: z.record(z.string(), z.unknown()).optional(),
    preferences: preferencesSchema.optional(),
    allocation: z
      .object({ kind: z.literal('top_ranked'), max_sellers: z.number().int().positive().optional() })
      .strict()
      .optional(),
    buy_params: z.record(z.string(), z.unknown()).optional(),
    requested_by: actorSchema,
  })
  .strict();

const selectionSchema = z
  .object({
    lines: z
      .array(
        z
          .object({
            agent_id: z.string().min(1),
            product_id: z.string().min(1),
            pricing_option_id: z.string().min(1).optional(),
            budget: z.number().positive(),
            format_ids: z.array(z.record(z.string(), z.unknown())).optional(),
          })
          .strict(),
      )
      .min(1),
    selected_by: actorSchema,
    idempotency_key: keySchema.optional(),
  })
  .strict();

const approvalSchema = z
  .object({
    approved_by: actorSchema,
    note: z.string().min(1).max(2000).optional(),
    idempotency_key: keySchema.optional(),
  })
  .strict();

const changeSchema = z
  .object({
    kind: z.enum(['pause', 'resume', 'cancel', 'budget']),
    requested_by: actorSchema,
    reason: z.string().min(1).max(2000).optional(),
    agent_id: z.string().min(1).optional(),
    budget: z.number().positive().optional(),
    idempotency_key: keySchema.optional(),
  })
  .strict()
  .refine((body) => body.kind !== 'budget' || (body.agent_id !== undefined && body.budget !== undefined), {
    message: 'a budget change needs agent_id and budget',
    path: ['budget'],
  });

export function campaignView(view: CampaignView): Record<string, unknown> {
  const { state } = view;
  return {
    id: view.campaignId,
    running: view.running,
    campaign_key: state.campaignKey,
    // Whose campaign it is (#12): null for campaigns started without an authenticated caller.
    tenant: state.tenant ?? null,
    principal: state.principal ?? null,
    phase: state.phase,
    brief: state.brief,
    total_budget: state.totalBudget,
    currency: state.currency ?? null,
    committed_budget: state.committedBudget,
    flight: { start_time: state.flight.startTime, end_time: state.flight.endTime },
    discovery_id: state.discoveryId,
    discovery: state.discovery
      ? {
          status: state.discovery.status,
          partial: state.discovery.partial,
          products: state.discovery.products,
          sellers: Object.values(state.discovery.sellers).map((seller) => ({
            agent_id: seller.agentId,
            status: seller.status,
            products: seller.productCount ?? null,
            error: seller.error ?? null,
          })),
          incomplete: state.discovery.incomplete.map((entry) => ({ agent_id: entry.agentId, entries: entry.entries })),
        }
      : null,
    selection: state.selection
      ? {
          selected_by: state.selection.selectedBy,
          at: state.selection.at,
          by_policy: state.selection.byPolicy ?? false,
          lines: state.selection.lines.map((line) => ({
            agent_id: line.agentId,
            product_id: line.productId,
            pricing_option_id: line.pricingOptionId ?? null,
            budget: line.budget,
          })),
        }
      : null,
    approval: state.approval
      ? { approved_by: state.approval.approvedBy, at: state.approval.at, note: state.approval.note ?? null }
      : null,
    buys: view.buys.map((buy) => ({
      agent_id: buy.agentId,
      id: buy.workflowId,
      status: buy.status ?? null,
      media_buy_id: buy.mediaBuyId ?? null,
      committed_budget: buy.committedBudget,
      failure: buy.failure ?? null,
    })),
    changes: state.changes.map((change) => ({
      sequence: change.sequence,
      kind: change.kind,
      requested_by: change.requestedBy,
      agent_id: change.agentId ?? null,
      budget: change.budget ?? null,
      outcome: change.outcome,
      buys: change.buys,
      requested_at: change.requestedAt,
      finished_at: change.finishedAt ?? null,
    })),
    alerts: state.alerts.map((entry) => ({
      at: entry.at,
      kind: entry.kind,
      agent_id: entry.agentId,
      note: entry.note,
    })),
    started_at: state.startedAt,
    updated_at: state.updatedAt,
  };
}

/** Errors of the campaign and discovery routes as the gateway's error body. */
export function campaignErrorHandler(error: unknown, _req: Request, res: Response, next: NextFunction): void {
  let answer: ApiError;
  if (error instanceof ApiError) answer = error;
  else if (error instanceof CampaignRequestError)
    answer = new ApiError(400, 'INVALID_REQUEST', error.message, error.field);
  else if (error instanceof CampaignNotFoundError) answer = new ApiError(404, 'NOT_FOUND', error.message);
  else if (error instanceof CampaignRefusedError)
    answer = new ApiError(error.code === 'INVALID_REQUEST' ? 400 : 409, error.code, error.message);
  else if (isTemporalUnavailable(error)) {
    res.setHeader('Retry-After', '5');
    answer = new ApiError(503, 'TEMPORAL_UNAVAILABLE', 'Temporal is not reachable right now; retry in 5 s.');
  } else if ((error as { type?: string })?.type === 'entity.parse.failed')
    answer = new ApiError(400, 'MALFORMED_JSON', 'The body is not valid JSON.');
  else {
    next(error);
    return;
  }
  res.status(answer.status).json({
    error: { code: answer.code, message: answer.message, ...(answer.field ? { field: answer.field } : {}) },
  });
}

export function requireJson(req: Request, _res: Response, next: NextFunction): void {
  if (!req.is('application/json')) {
    next(new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the body as application/json.'));
    return;
  }
  next();
}

export interface CampaignRouterOptions {
  campaigns: CampaignClient;
}

export function createCampaignRouter(options: CampaignRouterOptions): express.Router {
  const { campaigns } = options;
  const router = express.Router();
  const json = express.json({ limit: '1mb' });

  router.post('/v1/campaigns', requireJson, json, async (req, res) => {
    const body = parseBody(createSchema, req.body);
    const preferences = preferencesFrom(body.preferences);
    const created = await campaigns.create(
      {
        campaignKey: body.campaign_key,
        brief: body.brief,
        totalBudget: body.total_budget,
        ...(body.currency ? { currency: body.currency } : {}),
        flight: { startTime: body.flight.start_time, endTime: body.flight.end_time },
        ...(body.agent_ids ? { agentIds: body.agent_ids } : {}),
        timeBudgetMs: body.time_budget_seconds * 1000,
        ...(body.discovery_params ? { discoveryParams: body.discovery_params } : {}),
        ...(preferences ? { preferences } : {}),
        ...(body.allocation
          ? {
              allocation: {
                kind: body.allocation.kind,
                ...(body.allocation.max_sellers ? { maxSellers: body.allocation.max_sellers } : {}),
              },
            }
          : {}),
        ...(body.buy_params ? { buyParams: body.buy_params } : {}),
        requestedBy: body.requested_by,
      },
      callerOf(req),
    );
    res
      .status(created.created ? 202 : 200)
      .location(`/v1/campaigns/${created.campaignId}`)
      .json({ id: created.campaignId, created: created.created });
  });

  router.get('/v1/campaigns/:id', async (req, res) => {
    res.json(campaignView(await campaigns.view(String(req.params.id), callerOf(req))));
  });

  router.post('/v1/campaigns/:id/selection', requireJson, json, async (req, res) => {
    const body = parseBody(selectionSchema, req.body);
    const answer = await campaigns.select(
      String(req.params.id),
      {
        selectedBy: body.selected_by,
        lines: body.lines.map((line) => ({
          agentId: line.agent_id,
          productId: line.product_id,
          ...(line.pricing_option_id ? { pricingOptionId: line.pricing_option_id } : {}),
          budget: line.budget,
          ...(line.format_ids ? { formatIds: line.format_ids } : {}),
        })),
      },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.json({ accepted: answer.accepted, committed_budget: answer.committedBudget });
  });

  router.post('/v1/campaigns/:id/approval', requireJson, json, async (req, res) => {
    const body = parseBody(approvalSchema, req.body);
    const answer = await campaigns.approve(
      String(req.params.id),
      { approvedBy: body.approved_by, ...(body.note ? { note: body.note } : {}) },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.json({ accepted: answer.accepted, buys: answer.buys });
  });

  router.post('/v1/campaigns/:id/changes', requireJson, json, async (req, res) => {
    const body = parseBody(changeSchema, req.body);
    const answer = await campaigns.change(
      String(req.params.id),
      {
        kind: body.kind,
        requestedBy: body.requested_by,
        ...(body.reason ? { reason: body.reason } : {}),
        ...(body.agent_id ? { agentId: body.agent_id } : {}),
        ...(body.budget !== undefined ? { budget: body.budget } : {}),
      },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.status(answer.outcome === 'failed' ? 409 : 200).json({
      sequence: answer.sequence,
      outcome: answer.outcome,
      committed_budget: answer.committedBudget,
      buys: answer.buys,
    });
  });

  router.use('/v1/campaigns', campaignErrorHandler);
  return router;
}
