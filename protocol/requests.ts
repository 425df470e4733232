/**
 * The rules for what callers send into an operation, as zod schemas shared by the HTTP API, the typed client, the
 * operator's task defaults (config/tasks.ts) and the workflow's update validators. Pure and deterministic, so workflow
 * code may import it. Each rule is written once; the snake_case (HTTP, files) and camelCase (workflow input) shapes are
 * built from the same field schemas.
 */
import { z } from 'zod';

const MAX_INTERVAL_SECONDS = 3600;

/** A budget or deadline in whole seconds: at most 30 days. */
export const durationSecondsSchema = z
  .number()
  .int()
  .positive()
  .max(30 * 24 * 3600);

/** How long one input-required round may wait, and how many rounds there may be (HTTP, ADCP_TASKS_FILE). */
export const interactionPolicySchema = z
  .object({
    deadline_seconds: durationSecondsSchema.optional(),
    max_rounds: z.number().int().min(1).max(20).optional(),
  })
  .strict();

// ---- retry policy --------------------------------------------------------------------------------------------------

export const maxAttemptsSchema = z.number().int().min(1).max(20);
const intervalSecondsSchema = z.number().positive().max(MAX_INTERVAL_SECONDS);
const intervalMsSchema = z
  .number()
  .positive()
  .max(MAX_INTERVAL_SECONDS * 1000);

/** A retry policy as callers write it over HTTP and in ADCP_TASKS_FILE. */
export const retryPolicySchema = z
  .object({
    max_attempts: maxAttemptsSchema.optional(),
    initial_interval_seconds: intervalSecondsSchema.optional(),
    maximum_interval_seconds: intervalSecondsSchema.optional(),
  })
  .strict();
export type RetryPolicy = z.infer<typeof retryPolicySchema>;

/** The same policy as the workflow input carries it (`OperationInput.retry`). */
export const retrySettingsSchema = z
  .object({
    maximumAttempts: maxAttemptsSchema.optional(),
    initialIntervalMs: intervalMsSchema.optional(),
    maximumIntervalMs: intervalMsSchema.optional(),
  })
  .strict();
export type RetrySettingsInput = z.infer<typeof retrySettingsSchema>;

/** snake_case seconds → the workflow's milliseconds; absent fields stay absent (the task's default applies). */
export function retrySettingsFrom(policy: RetryPolicy): RetrySettingsInput {
  const ms = (seconds: number | undefined) => (seconds === undefined ? undefined : Math.round(seconds * 1000));
  const settings: RetrySettingsInput = {};
  if (policy.max_attempts !== undefined) settings.maximumAttempts = policy.max_attempts;
  const initial = ms(policy.initial_interval_seconds);
  if (initial !== undefined) settings.initialIntervalMs = initial;
  const maximum = ms(policy.maximum_interval_seconds);
  if (maximum !== undefined) settings.maximumIntervalMs = maximum;
  return settings;
}

// ---- the answer to an input-required question ----------------------------------------------------------------------

/** Who did something (an answer, a cancel, a credentials refresh): a person or a system, for the record. */
export const actorSchema = z.string().min(1).max(200);

/** The authenticated principal as the audit trail records it (`tenant/id`), set from credentials, never a body. */
export const principalSchema = z.string().min(1).max(400);

/** The fields merged into the resumed task call: a non-empty JSON object. */
export const inputAnswerSchema = z
  .record(z.string(), z.unknown())
  .refine((value) => Object.keys(value).length > 0, 'must not be empty: send the fields the seller asked for');

/** The answer as the workflow's `provideInput` update carries it (`ProvidedInput`). */
export const providedInputSchema = z
  .object({
    input: inputAnswerSchema,
    providedBy: actorSchema.optional(),
    /** Set by the workflow from the update ID. */
    requestId: z.string().optional(),
    principal: principalSchema.optional(),
  })
  .strict();

/** The cancel request as the workflow's `cancelOperation` update carries it (`CancelRequest`). */
export const cancelRequestSchema = z
  .object({
    requestedBy: actorSchema,
    reason: z.string().min(1).max(2000),
    principal: principalSchema.optional(),
  })
  .strict();

/** The `credentialsRefreshed` update's argument (`CredentialsRefresh`). */
export const credentialsRefreshSchema = z
  .object({
    refreshedBy: actorSchema,
    principal: principalSchema.optional(),
  })
  .strict();

// ---- what no seller should get in a media buy's params -------------------------------------------------------------

/** The tasks whose params carry a flight and budgets, checked by checkMediaBuyParams. */
export const MEDIA_BUY_PARAMS_TASKS: readonly string[] = ['create_media_buy', 'update_media_buy'];

/** A budget as AdCP writes it: a number, or `{total, currency}`; undefined for anything else (the seller judges). */
function budgetAmount(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (value && typeof value === 'object' && typeof (value as { total?: unknown }).total === 'number')
    return (value as { total: number }).total;
  return undefined;
}

/** An explicit time, or `asap` (the moment of the request); undefined when the value is neither. */
function flightTime(value: unknown, now: number): number | undefined {
  if (value === 'asap') return now;
  if (typeof value !== 'string') return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : at;
}

const amountSchema = z.unknown().superRefine((value, ctx) => {
  const amount = budgetAmount(value);
  if (amount !== undefined && amount < 0)
    ctx.addIssue({ code: 'custom', message: `must not be negative (got ${amount}): a budget is an amount to spend` });
});

/**
 * The rules on create_media_buy and update_media_buy params that a seller must never be asked to judge: a flight that
 * ends before (or when) it starts, and a negative budget (the buy's, a package's, or a proposal's total). Everything
 * else in params is the seller's. Shared by the typed clients and the HTTP API, which refuse with 422 before any
 * workflow starts. `now` stands for `asap`.
 */
export function mediaBuyParamsSchema(now: number) {
  return z
    .looseObject({
      start_time: z.unknown().optional(),
      end_time: z.unknown().optional(),
      budget: amountSchema.optional(),
      total_budget: amountSchema.optional(),
      packages: z.array(z.looseObject({ budget: amountSchema.optional() })).optional(),
    })
    .superRefine((params, ctx) => {
      const start = flightTime(params.start_time, now);
      const end = flightTime(params.end_time, now);
      if (start !== undefined && end !== undefined && end <= start)
        ctx.addIssue({
          code: 'custom',
          path: ['end_time'],
          message: `must be after start_time (${String(params.start_time)}); got ${String(params.end_time)}`,
        });
    });
}

/** The first rule the params break, named by its field (`params.end_time`), or undefined when they break none. */
export function checkMediaBuyParams(
  task: string,
  params: Record<string, unknown>,
  now: number,
): { field: string; message: string } | undefined {
  if (!MEDIA_BUY_PARAMS_TASKS.includes(task)) return undefined;
  const parsed = mediaBuyParamsSchema(now).safeParse(params);
  if (parsed.success) return undefined;
  const issue = parsed.error.issues[0]!;
  const field = ['params', ...issue.path.map(String)].join('.');
  return { field, message: `${field} ${issue.message}.` };
}
