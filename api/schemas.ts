/**
 * The HTTP API's request bodies as zod schemas: the routes validate with them and the OpenAPI document
 * (api/openapi.ts) is generated from them, so what is documented is what is checked. Field rules shared with the
 * typed client and the workflows' validators come from protocol/requests.ts.
 */
import { z } from 'zod';
import { CALLER_KEY_PATTERN, TASK_NAME_PATTERN } from '../protocol';
import {
  actorSchema,
  durationSecondsSchema,
  inputAnswerSchema,
  interactionPolicySchema,
  retryPolicySchema,
} from '../protocol/requests';
import { MAX_LIBRARY_CREATIVES } from '../workflows/campaign/machine';
import { formatZodIssues } from '../config/zod-format';
import { Problem } from './problems';

/** Parses a request body; a refusal is 400 INVALID_REQUEST naming the first field at fault. */
export function parseRequest<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const first = parsed.error.issues[0];
  // An unknown field is reported at its parent's path: name the field itself.
  const unknownKey = first?.code === 'unrecognized_keys' ? first.keys[0] : undefined;
  const field = [...(first?.path ?? []), ...(unknownKey ? [unknownKey] : [])].map(String).join('.');
  throw new Problem(400, 'INVALID_REQUEST', formatZodIssues(parsed.error.issues), field ? { field } : {});
}

export const keySchema = z
  .string()
  .regex(CALLER_KEY_PATTERN, 'must be 1-200 characters of letters, digits, "_", ".", ":" or "-"');
const isoTime = z.string().refine((value) => !Number.isNaN(Date.parse(value)), 'must be an ISO 8601 time');
const agentIdSchema = z.string().min(1, 'agent_id is required').max(200);
const paramsSchema = z.record(z.string(), z.unknown());

// ---- operations ----------------------------------------------------------------------------------------------------

export const startOperationSchema = z
  .object({
    agent_id: agentIdSchema,
    task: z.string().regex(TASK_NAME_PATTERN, 'must be an AdCP task name such as "create_media_buy"'),
    params: paramsSchema,
    idempotency_key: keySchema.optional(),
    budget_seconds: durationSecondsSchema.optional(),
    interaction: interactionPolicySchema.optional(),
    retry: retryPolicySchema.optional(),
  })
  .strict();

export const reconcileSchema = z.object({ requested_by: actorSchema }).strict();

export const provideInputSchema = z
  .object({
    // The refinement (not empty) as JSON Schema says it, so the generated document states it too.
    input: inputAnswerSchema.meta({ minProperties: 1 }),
    provided_by: actorSchema.optional(),
    idempotency_key: keySchema,
  })
  .strict();

export const cancelSchema = z.object({ requested_by: actorSchema, reason: z.string().min(1).max(2000) }).strict();

export const credentialsRefreshedSchema = z.object({ refreshed_by: actorSchema }).strict();

// ---- media buys ----------------------------------------------------------------------------------------------------

const frequencySchema = z.enum(['hourly', 'daily', 'monthly']);

export const createMediaBuySchema = z
  .object({
    buy_key: keySchema,
    agent_id: agentIdSchema,
    params: paramsSchema,
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
        agent_id: agentIdSchema,
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

export const governanceDecisionSchema = z
  .object({
    decision: z.enum(['approve', 'decline']),
    decided_by: actorSchema,
    note: z.string().min(1).max(2000).optional(),
    values: z.record(z.string(), z.unknown()).optional(),
    idempotency_key: keySchema.optional(),
  })
  .strict();

export const mediaBuyChangeSchema = z
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

export const mediaBuyCreativesSchema = z
  .object({
    creatives: z.array(z.looseObject({ creative_id: z.string().min(1) })).min(1),
    assignments: z.record(z.string(), z.array(z.string().min(1))).optional(),
    requested_by: actorSchema,
    idempotency_key: keySchema.optional(),
  })
  .strict();

export const mediaBuyRefreshSchema = z.object({ requested_by: actorSchema }).strict();

// ---- sellers -------------------------------------------------------------------------------------------------------

export const capabilitiesChangedSchema = z
  .object({ requested_by: actorSchema, reason: z.string().min(1).max(2000).optional() })
  .strict();

// ---- discoveries and campaigns -------------------------------------------------------------------------------------

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

export const createDiscoverySchema = z
  .object({
    discovery_key: keySchema,
    brief: z.string().min(1).max(10_000),
    agent_ids: z.array(z.string().min(1)).min(1).optional(),
    time_budget_seconds: timeBudgetSchema,
    params: paramsSchema.optional(),
    preferences: preferencesSchema.optional(),
    requested_by: actorSchema.optional(),
  })
  .strict();

/** A sync_creatives `creatives[]` entry: creative_id and format_id are checked, the rest goes to the seller as sent. */
const creativeSchema = z.looseObject({
  creative_id: z.string().regex(/^[A-Za-z0-9_.:-]{1,200}$/, 'must be 1-200 letters, digits, "_", ".", ":" or "-"'),
  name: z.string().min(1).max(500).optional(),
  format_id: z.looseObject({ agent_url: z.url().optional(), id: z.string().min(1).max(200) }),
});

const uniqueCreatives = (creatives: { creative_id: string }[]) =>
  new Set(creatives.map((creative) => creative.creative_id)).size === creatives.length;

export const campaignCreativesSchema = z
  .object({
    creatives: z.array(creativeSchema).max(MAX_LIBRARY_CREATIVES),
    mode: z.enum(['add', 'replace']).default('add'),
    requested_by: actorSchema,
    idempotency_key: keySchema.optional(),
  })
  .strict()
  .refine((body) => uniqueCreatives(body.creatives), {
    message: 'creatives repeat a creative_id',
    path: ['creatives'],
  })
  .refine((body) => body.mode === 'replace' || body.creatives.length > 0, {
    message: 'add needs at least one creative',
    path: ['creatives'],
  });

/** The budget allocation policy on the wire (snake_case; durations in hours). docs/campaigns.md explains each. */
export const budgetAllocationSchema = z
  .object({
    mode: z.enum(['off', 'propose', 'auto']).optional(),
    approval_timeout_hours: z.number().positive().optional(),
    min_share: z.number().optional(),
    max_share: z.number().optional(),
    agents: z
      .record(
        z.string().min(1),
        z.object({ min_share: z.number().optional(), max_share: z.number().optional() }).strict(),
      )
      .optional(),
    min_move_amount: z.number().optional(),
    min_periods_between_moves: z.number().optional(),
    freeze_before_end_hours: z.number().optional(),
    signals: z.array(z.enum(['pacing', 'delivery_vs_plan', 'seller_down', 'buy_rejected'])).optional(),
    under_delivery_threshold: z.number().optional(),
    delivering_threshold: z.number().optional(),
    under_delivery_grace_hours: z.number().optional(),
    reporting_period_hours: z.number().optional(),
  })
  .strict();

export const budgetAllocationChangeSchema = z
  .object({
    policy: budgetAllocationSchema,
    requested_by: actorSchema,
    reason: z.string().min(1).max(2000).optional(),
    idempotency_key: keySchema.optional(),
  })
  .strict();

export const budgetMovesDecisionSchema = z
  .object({
    plan: z.number().int().positive(),
    decision: z.enum(['approve', 'reject']),
    decided_by: actorSchema,
    note: z.string().min(1).max(2000).optional(),
    idempotency_key: keySchema.optional(),
  })
  .strict();

export const createCampaignSchema = z
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
    discovery_params: paramsSchema.optional(),
    preferences: preferencesSchema.optional(),
    allocation: z
      .object({ kind: z.literal('top_ranked'), max_sellers: z.number().int().positive().optional() })
      .strict()
      .optional(),
    buy_params: paramsSchema.optional(),
    requested_by: actorSchema,
    creatives: z.array(creativeSchema).max(MAX_LIBRARY_CREATIVES).optional(),
    budget_allocation: budgetAllocationSchema.optional(),
    monitoring: z
      .object({
        interval_seconds: z.number().min(2).max(86_400).optional(),
        under_delivery_threshold: z.number().positive().max(1).optional(),
        under_delivery_grace_hours: z
          .number()
          .min(0)
          .max(24 * 90)
          .optional(),
      })
      .strict()
      .optional(),
    governance: z
      .object({
        agent_id: agentIdSchema,
        plan_id: keySchema.optional(),
        caller: z.url({ error: 'must be the URL (or URN) of the buyer agent' }).optional(),
        decision_timeout_hours: z
          .number()
          .positive()
          .max(30 * 24)
          .optional(),
        plan: paramsSchema.optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

export const campaignSelectionSchema = z
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
      .max(200)
      .default([]),
    /** Accepted proposals (one per seller): the seller's buy is create_media_buy with proposal_id + total_budget. */
    proposals: z
      .array(
        z
          .object({
            agent_id: z.string().min(1),
            proposal_id: z.string().min(1).max(255),
            budget: z.number().positive(),
          })
          .strict(),
      )
      .max(50)
      .optional(),
    selected_by: actorSchema,
    idempotency_key: keySchema.optional(),
  })
  .strict()
  .refine((body) => body.lines.length > 0 || (body.proposals?.length ?? 0) > 0, {
    message: 'A selection names at least one product line or one proposal.',
    path: ['lines'],
  });

export const campaignApprovalSchema = z
  .object({
    approved_by: actorSchema,
    note: z.string().min(1).max(2000).optional(),
    idempotency_key: keySchema.optional(),
  })
  .strict();

export const campaignChangeSchema = z
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

// ---- the codec server ----------------------------------------------------------------------------------------------

const base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');

/** Temporal's codec server protocol: `{"payloads": [{"metadata": {k: base64}, "data": base64}]}`. */
export const codecPayloadsSchema = z.object({
  payloads: z.array(
    z.object({
      metadata: z.record(z.string(), base64).nullish(),
      data: base64.nullish(),
    }),
  ),
});
