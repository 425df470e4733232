/**
 * Lists AdCP operations from Temporal visibility: the search attributes every operation carries (AdcpStatus,
 * AdcpAgent, AdcpTask, AdcpTaskId, AdcpInputReason) plus Temporal's own StartTime and CloseTime. The typed client, the
 * HTTP API (`GET /v1/operations`) and the CLI (`adcp-orchestrator list`) all call `listOperations`.
 *
 * Filter values end up inside a visibility query string, so every value is validated against a strict pattern or
 * enum first and then quoted; anything that could close a quote is refused, never escaped into the query.
 */
import { createHash } from 'node:crypto';
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { executionInfoFromRaw } from '@temporalio/client/lib/helpers';
import type { temporal } from '@temporalio/proto';
import { z } from 'zod';
import { sellerSchema } from '../config/sellers';
import { SA_SELLER, SA_INPUT_REASON, SA_STATUS, SA_TASK, SA_TASK_ID, SA_TENANT } from '../config/search-attributes';
import { formatZodIssues } from '../config/zod-format';
import { TASK_NAME_PATTERN, TASK_STATUSES } from '../protocol';
import { TENANT_PATTERN, TENANT_RULE } from '../protocol/tenancy';
import { OPERATION_STATE_MEMO, OPERATION_WORKFLOW_TYPE, type OperationState } from '../contract/operation';
import { OperationRequestError } from './operation-errors';

/** The statuses an operation can have: the AdCP task statuses plus the orchestrator's own `pending`. */
export const OPERATION_STATUSES = ['pending', ...TASK_STATUSES] as const;
export type ListedStatus = (typeof OPERATION_STATUSES)[number];

/** Statuses in which the operation waits for someone on the buyer's side. */
const WAITING_STATUSES: readonly ListedStatus[] = ['input-required', 'auth-required'];

/**
 * Tasks whose `submitted`/`working` is a person reviewing the request: campaign governance's check, which goes to
 * human review at the governance agent (the buy's spend waits on it). Listed as waiting on a person too.
 */
const HUMAN_REVIEW_TASKS: readonly string[] = ['check_governance'];
const REVIEW_STATUSES: readonly ListedStatus[] = ['submitted', 'working'];

function inHumanReview(task: string | null, status: string | null): boolean {
  return (
    task !== null &&
    status !== null &&
    HUMAN_REVIEW_TASKS.includes(task) &&
    (REVIEW_STATUSES as readonly string[]).includes(status)
  );
}

export const DEFAULT_LIST_LIMIT = 20;
export const MAX_LIST_LIMIT = 200;
/** Visibility pages read per request at most when the `updated` range filters rows out (bounds the request's cost). */
const MAX_PAGES_PER_REQUEST = 10;

/** A filter value the list cannot use; `field` names the query parameter (`status`, `created_after`, ...). */
export class OperationListFilterError extends OperationRequestError {}

const timestamp = z.iso
  .datetime({ offset: true, error: 'must be an ISO 8601 date-time with a time zone, e.g. 2026-11-30T09:00:00Z' })
  .transform((value) => new Date(value));

/** The filters, as the typed client passes them. */
export const operationListFiltersSchema = z
  .object({
    /** Any of these statuses. */
    status: z.array(z.enum(OPERATION_STATUSES)).min(1).max(OPERATION_STATUSES.length).optional(),
    /** The seller's agent id (agents.json). */
    sellerId: sellerSchema.shape.id.optional(),
    task: z.string().regex(TASK_NAME_PATTERN, 'must be an AdCP task name such as create_media_buy').optional(),
    /** true: only operations waiting on a person (input-required or auth-required); false: only the others. */
    waiting: z.boolean().optional(),
    createdAfter: z.date().optional(),
    createdBefore: z.date().optional(),
    /** The operation's last status change (the state it last published), at or after / before. */
    updatedAfter: z.date().optional(),
    updatedBefore: z.date().optional(),
    limit: z.number().int().min(1).max(MAX_LIST_LIMIT).default(DEFAULT_LIST_LIMIT),
    /** `next_cursor` of the previous page, with the same filters. */
    cursor: z.string().max(4096).optional(),
    /**
     * Only this tenant's operations. Set from the caller's identity (OrchestratorClient.list, the HTTP API), never
     * from a query parameter.
     */
    tenant: z.string().regex(TENANT_PATTERN, TENANT_RULE).optional(),
  })
  .strict();

export type OperationListFilters = z.input<typeof operationListFiltersSchema>;
type CheckedFilters = z.output<typeof operationListFiltersSchema>;

/** One value, or a comma-separated list, or the parameter repeated (`?status=a&status=b`). */
const listParameter = z.union([z.string(), z.array(z.string())]).transform((value) =>
  (Array.isArray(value) ? value : [value])
    .flatMap((item) => item.split(','))
    .map((item) => item.trim())
    .filter(Boolean),
);

const singleParameter = z.string({ error: 'must be given once' });

/**
 * The HTTP query string of `GET /v1/operations`, as express parses it. Unknown parameters are refused, so a typo
 * (`?sellr=x`) is an error instead of an unfiltered list.
 */
export const operationListQuerySchema = z
  .object({
    status: listParameter
      .pipe(z.array(z.enum(OPERATION_STATUSES, { error: `must be one of ${OPERATION_STATUSES.join(', ')}` })).min(1))
      .optional(),
    seller: singleParameter.optional(),
    agent_id: singleParameter.optional(),
    task: singleParameter.optional(),
    waiting: z
      .enum(['true', 'false'], { error: 'must be true or false' })
      .transform((value) => value === 'true')
      .optional(),
    created_after: timestamp.optional(),
    created_before: timestamp.optional(),
    updated_after: timestamp.optional(),
    updated_before: timestamp.optional(),
    limit: z
      .string()
      .regex(/^\d{1,4}$/, `must be a whole number from 1 to ${MAX_LIST_LIMIT}`)
      .transform(Number)
      .optional(),
    cursor: singleParameter.optional(),
  })
  .strict()
  .refine((query) => query.seller === undefined || query.agent_id === undefined || query.seller === query.agent_id, {
    message: 'seller and agent_id name the same filter; give one of them',
    path: ['agent_id'],
  })
  .transform((query): OperationListFilters => ({
    ...(query.status ? { status: query.status } : {}),
    ...((query.seller ?? query.agent_id) !== undefined ? { sellerId: query.seller ?? query.agent_id } : {}),
    ...(query.task !== undefined ? { task: query.task } : {}),
    ...(query.waiting !== undefined ? { waiting: query.waiting } : {}),
    ...(query.created_after ? { createdAfter: query.created_after } : {}),
    ...(query.created_before ? { createdBefore: query.created_before } : {}),
    ...(query.updated_after ? { updatedAfter: query.updated_after } : {}),
    ...(query.updated_before ? { updatedBefore: query.updated_before } : {}),
    ...(query.limit !== undefined ? { limit: query.limit } : {}),
    ...(query.cursor !== undefined ? { cursor: query.cursor } : {}),
  }));

/** Names the snake_case query parameter for a camelCase filter field, so errors speak the caller's language. */
const QUERY_NAMES: Record<string, string> = {
  sellerId: 'seller',
  createdAfter: 'created_after',
  createdBefore: 'created_before',
  updatedAfter: 'updated_after',
  updatedBefore: 'updated_before',
};

function filterError(issues: readonly z.core.$ZodIssue[], rename = false): OperationListFilterError {
  const issue = issues[0];
  const field = String(issue?.path[0] ?? 'query');
  const named = rename
    ? issues.map((item) => ({
        ...item,
        path: item.path.map((key, i) => (i === 0 ? (QUERY_NAMES[String(key)] ?? key) : key)),
      }))
    : issues;
  const shown = rename ? (QUERY_NAMES[field] ?? field) : field;
  if (issue?.code === 'unrecognized_keys') {
    return new OperationListFilterError(
      issue.keys[0] ?? 'query',
      `Unknown filter ${issue.keys.map((key) => `"${key}"`).join(', ')}; the list takes status, seller, task, waiting, created_after, created_before, updated_after, updated_before, limit and cursor.`,
    );
  }
  return new OperationListFilterError(shown, `Invalid list filter: ${formatZodIssues(named)}.`);
}

/** Parses `req.query` of `GET /v1/operations`; throws OperationListFilterError (a 400 naming the parameter). */
export function parseOperationListQuery(query: unknown): OperationListFilters {
  const parsed = operationListQuerySchema.safeParse(query ?? {});
  if (!parsed.success) throw filterError(parsed.error.issues);
  // The ranges (limit 1-200, ...) are the filters' own: check them here too, so the API answers 400 before any call.
  const checked = operationListFiltersSchema.safeParse(parsed.data);
  if (!checked.success) throw filterError(checked.error.issues, true);
  return parsed.data;
}

/** One operation as the list shows it: what visibility indexes, plus the last change the operation published. */
export interface OperationListRow {
  operation_id: string;
  task: string | null;
  agent_id: string | null;
  status: string | null;
  task_id: string | null;
  /** Set while the operation waits for an answer (input-required): the seller's reason. */
  input_reason: string | null;
  started_at: string;
  /** When the operation last changed status (from the state it published), else when it closed or started. */
  updated_at: string;
  closed_at: string | null;
  /** Temporal's view of the workflow: RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, TIMED_OUT, ... */
  execution_status: string;
  /** True while the operation waits on a person (input-required or auth-required). */
  waiting: boolean;
  /** The tenant the operation belongs to (absent for operations started without one). */
  tenant?: string;
  /**
   * True when the state the operation published (its memo) could not be decoded here, e.g. it is encrypted with a
   * payload key this process does not hold. The row then comes from visibility alone: `updated_at` is the start or
   * close time.
   */
  state_unreadable?: true;
}

export interface OperationList {
  operations: OperationListRow[];
  /** Pass as `cursor` (with the same filters) for the next page; null on the last page. */
  next_cursor: string | null;
}

/** A string literal for the visibility query. Values were validated already; this refuses what slipped through. */
export function quoteQueryValue(value: string): string {
  if (!/^[\w.:+@-]*$/.test(value)) {
    throw new OperationListFilterError(
      'query',
      `Refusing the value ${JSON.stringify(value)} in a visibility query: it holds characters that are not allowed.`,
    );
  }
  return `"${value}"`;
}

/** The visibility query for the filters; `updated_*` are narrowed here and checked row by row (see matchesUpdated). */
export function buildVisibilityQuery(filters: CheckedFilters): string {
  const clauses = [`WorkflowType = ${quoteQueryValue(OPERATION_WORKFLOW_TYPE)}`];
  const list = (values: readonly string[]) => values.map(quoteQueryValue).join(', ');
  if (filters.tenant !== undefined) clauses.push(`${SA_TENANT.name} = ${quoteQueryValue(filters.tenant)}`);
  if (filters.status) clauses.push(`${SA_STATUS.name} IN (${list(filters.status)})`);
  if (filters.sellerId !== undefined) clauses.push(`${SA_SELLER.name} = ${quoteQueryValue(filters.sellerId)}`);
  if (filters.task !== undefined) clauses.push(`${SA_TASK.name} = ${quoteQueryValue(filters.task)}`);
  const review = `${SA_TASK.name} IN (${list(HUMAN_REVIEW_TASKS)}) AND ${SA_STATUS.name} IN (${list(REVIEW_STATUSES)})`;
  if (filters.waiting === true) {
    clauses.push(
      `(${SA_INPUT_REASON.name} IS NOT NULL OR ${SA_STATUS.name} IN (${list(WAITING_STATUSES)}) OR (${review}))`,
    );
  } else if (filters.waiting === false) {
    clauses.push(
      `${SA_INPUT_REASON.name} IS NULL AND ${SA_STATUS.name} NOT IN (${list(WAITING_STATUSES)}) AND (${SA_TASK.name} NOT IN (${list(HUMAN_REVIEW_TASKS)}) OR ${SA_STATUS.name} NOT IN (${list(REVIEW_STATUSES)}))`,
    );
  }
  if (filters.createdAfter) clauses.push(`StartTime >= ${quoteQueryValue(filters.createdAfter.toISOString())}`);
  if (filters.createdBefore) clauses.push(`StartTime < ${quoteQueryValue(filters.createdBefore.toISOString())}`);
  // Temporal indexes no "last changed" time. An operation changed at or after T is running or closed at or after T;
  // one changed before T started before T. The exact check uses the state the operation published.
  if (filters.updatedAfter) {
    clauses.push(
      `(ExecutionStatus = "Running" OR CloseTime >= ${quoteQueryValue(filters.updatedAfter.toISOString())})`,
    );
  }
  if (filters.updatedBefore) clauses.push(`StartTime < ${quoteQueryValue(filters.updatedBefore.toISOString())}`);
  return clauses.join(' AND ');
}

/** The cursor: Temporal's page token, the rows of that page already returned, and the query it belongs to. */
const cursorSchema = z
  .object({
    v: z.literal(1),
    q: z.string(),
    t: z.string(),
    s: z.number().int().min(0),
    n: z.number().int().min(1).max(MAX_LIST_LIMIT),
  })
  .strict();
type Cursor = z.infer<typeof cursorSchema>;

function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

function decodeCursor(value: string, queryHash: string): Cursor {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    decoded = undefined;
  }
  const parsed = cursorSchema.safeParse(decoded);
  if (!parsed.success) {
    throw new OperationListFilterError(
      'cursor',
      'cursor is not a cursor this list returned: pass next_cursor from the previous page unchanged, or leave it out for the first page.',
    );
  }
  if (parsed.data.q !== queryHash) {
    throw new OperationListFilterError(
      'cursor',
      'cursor belongs to a list with other filters: page with the same filters, or leave the cursor out to start again.',
    );
  }
  return parsed.data;
}

function queryHashOf(query: string, filters: CheckedFilters): string {
  const exact = [filters.updatedAfter?.toISOString() ?? '', filters.updatedBefore?.toISOString() ?? ''];
  return createHash('sha256')
    .update(JSON.stringify([query, ...exact]))
    .digest('base64url')
    .slice(0, 16);
}

function publishedState(memo: Record<string, unknown> | undefined): Partial<OperationState> | undefined {
  const value = memo?.[OPERATION_STATE_MEMO];
  return value && typeof value === 'object' ? (value as Partial<OperationState>) : undefined;
}

/** The row for one execution. Exported for tests and for callers that list with their own query. */
export function operationListRow(
  info: Pick<
    WorkflowExecutionInfo,
    'workflowId' | 'status' | 'startTime' | 'closeTime' | 'memo' | 'typedSearchAttributes'
  >,
): OperationListRow {
  const attributes = info.typedSearchAttributes;
  const published = publishedState(info.memo);
  const status = attributes.get(SA_STATUS) ?? (typeof published?.status === 'string' ? published.status : null);
  const updatedAt =
    typeof published?.updatedAt === 'string' && !Number.isNaN(Date.parse(published.updatedAt))
      ? new Date(published.updatedAt).toISOString()
      : (info.closeTime ?? info.startTime).toISOString();
  const inputReason = attributes.get(SA_INPUT_REASON) ?? null;
  const tenant = attributes.get(SA_TENANT) ?? (typeof published?.tenant === 'string' ? published.tenant : undefined);
  const task = attributes.get(SA_TASK) ?? (typeof published?.task === 'string' ? published.task : null);
  return {
    ...(tenant !== undefined ? { tenant } : {}),
    operation_id: info.workflowId,
    task,
    agent_id: attributes.get(SA_SELLER) ?? (typeof published?.sellerId === 'string' ? published.sellerId : null),
    status,
    task_id: attributes.get(SA_TASK_ID) ?? (typeof published?.taskId === 'string' ? published.taskId : null),
    input_reason: inputReason,
    started_at: info.startTime.toISOString(),
    updated_at: updatedAt,
    closed_at: info.closeTime ? info.closeTime.toISOString() : null,
    execution_status: info.status.name,
    waiting:
      inputReason !== null ||
      (status !== null && (WAITING_STATUSES as readonly string[]).includes(status)) ||
      inHumanReview(task, status),
  };
}

/**
 * The row of one raw execution. A memo this process cannot decode (encrypted with a key it does not hold, or a codec
 * it lacks) costs that row its published state, not the whole page.
 */
async function rowOf(
  raw: temporal.api.workflow.v1.IWorkflowExecutionInfo,
  dataConverter: Client['options']['loadedDataConverter'],
  namespace: string,
): Promise<OperationListRow> {
  try {
    return operationListRow(await executionInfoFromRaw(raw, dataConverter, undefined, namespace));
  } catch (error) {
    if (!raw.memo?.fields || Object.keys(raw.memo.fields).length === 0) throw error;
    // The same message without its memo. Not a spread: a protobuf message keeps the fields left at their default
    // (a running workflow's history length) on its prototype, and a spread would drop them.
    const withoutMemo = Object.assign(Object.create(raw) as typeof raw, { memo: null });
    const info = await executionInfoFromRaw(withoutMemo, dataConverter, undefined, namespace);
    return { ...operationListRow(info), state_unreadable: true };
  }
}

function matchesUpdated(row: OperationListRow, filters: CheckedFilters): boolean {
  const updated = Date.parse(row.updated_at);
  if (filters.updatedAfter && updated < filters.updatedAfter.getTime()) return false;
  if (filters.updatedBefore && updated >= filters.updatedBefore.getTime()) return false;
  return true;
}

export interface ListOperationsOptions {
  /** The deadline of each visibility call (default 5 s): with Temporal down, the caller hears so within seconds. */
  temporalTimeoutMs?: number;
}

/**
 * One page of operations in Temporal's visibility order (on the dev server's SQL visibility: running ones first, then
 * the most recently closed), and the cursor of the next. Throws
 * OperationListFilterError (an OperationRequestError: HTTP 400 with `field`) for a bad filter or cursor; Temporal
 * errors pass through (unavailable: retry later).
 */
export async function listOperations(
  client: Client,
  filters: OperationListFilters = {},
  options: ListOperationsOptions = {},
): Promise<OperationList> {
  const parsed = operationListFiltersSchema.safeParse(filters);
  if (!parsed.success) throw filterError(parsed.error.issues, true);
  const checked = parsed.data;
  for (const [after, before, name] of [
    [checked.createdAfter, checked.createdBefore, 'created'],
    [checked.updatedAfter, checked.updatedBefore, 'updated'],
  ] as const) {
    if (after && before && after.getTime() >= before.getTime()) {
      throw new OperationListFilterError(
        `${name}_before`,
        `${name}_before (${before.toISOString()}) must be later than ${name}_after (${after.toISOString()}).`,
      );
    }
  }
  const query = buildVisibilityQuery(checked);
  const queryHash = queryHashOf(query, checked);
  let position: Cursor = checked.cursor
    ? decodeCursor(checked.cursor, queryHash)
    : { v: 1, q: queryHash, t: '', s: 0, n: checked.limit };
  const rowFilter = checked.updatedAfter || checked.updatedBefore;
  const rows: OperationListRow[] = [];
  const dataConverter = client.options.loadedDataConverter;
  for (let pages = 0; pages < MAX_PAGES_PER_REQUEST; pages++) {
    const page: temporal.api.workflowservice.v1.IListWorkflowExecutionsResponse = await client.withDeadline(
      Date.now() + (options.temporalTimeoutMs ?? 5_000),
      () =>
        client.workflowService.listWorkflowExecutions({
          namespace: client.options.namespace,
          query,
          pageSize: position.n,
          nextPageToken: Buffer.from(position.t, 'base64url'),
        }),
    );
    const executions = page.executions ?? [];
    const nextToken =
      page.nextPageToken && page.nextPageToken.length > 0
        ? Buffer.from(page.nextPageToken).toString('base64url')
        : undefined;
    for (let index = position.s; index < executions.length; index++) {
      const row = await rowOf(executions[index]!, dataConverter, client.options.namespace);
      if (rowFilter && !matchesUpdated(row, checked)) continue;
      rows.push(row);
      if (rows.length === checked.limit) {
        const next: Cursor | undefined =
          index + 1 < executions.length
            ? { ...position, s: index + 1 }
            : nextToken
              ? { v: 1, q: queryHash, t: nextToken, s: 0, n: position.n }
              : undefined;
        return { operations: rows, next_cursor: next ? encodeCursor(next) : null };
      }
    }
    if (!nextToken) return { operations: rows, next_cursor: null };
    position = { v: 1, q: queryHash, t: nextToken, s: 0, n: position.n };
  }
  // Many rows filtered out: answer what was found and let the caller continue.
  return { operations: rows, next_cursor: encodeCursor(position) };
}
