/**
 * Seller webhook bodies (adcp-protocol.md §3.4, §3.6, §11) normalised into one event: a TaskSnapshot plus
 * the key the operation's workflow deduplicates on. Pure: imported by workflow code, so no I/O and no Node.
 *
 * Two formats share one endpoint and are told apart by `status` (the GA rule, §3.4):
 *   - `status` is a string and `task_id` is present → the MCP webhook payload (`mcp-webhook-payload.json`);
 *   - `status` is an object with `.state`         → an A2A `Task` or `TaskStatusUpdateEvent`.
 */
import { asRecord } from './records';
import { type TaskSnapshot, snapshotFromA2A, snapshotFromFlatResponse } from './snapshot';
import { normaliseProgress } from './progress';
import { parseErrors } from './errors';
import { normaliseStatus } from './status';

export interface WebhookEvent {
  snapshot: TaskSnapshot;
  /**
   * What makes this delivery the same event as another: `notification:<notification_id>` when the seller sends one
   * (3.1: one logical state event across re-emissions under new idempotency keys), else `idem:<idempotency_key>`
   * (3.x requires it), else `tuple:<task_id>|<status>|<timestamp>` (the rc.2 guidance, §3.6).
   */
  eventKey: string;
  sellerIdempotencyKey?: string;
  /** The 3.1 `notification_id`, stable across re-emissions of one state event. */
  notificationId?: string;
  taskType?: string;
  /**
   * The `operation_id` the seller echoed from `push_notification_config.operation_id` (3.1; we send the operation ID).
   * One that differs from the URL's operation is a misrouted webhook, refused before it reaches any workflow.
   */
  operationId?: string;
  /** `protocol` (3.x) or `domain` (rc.2), e.g. "media-buy". */
  domain?: string;
  /** The event time as the seller wrote it. */
  sellerTimestamp?: string;
  format: 'mcp' | 'a2a';
}

/** The body is not a webhook we understand. `field` names the first thing that was wrong (a dotted path). */
export class WebhookPayloadError extends Error {
  override readonly name = 'WebhookPayloadError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return value === '' ? 'an empty string' : 'a string';
  return typeof value;
}

/** An optional string field: absent is fine, present must be a non-empty string. */
function optionalString(body: Record<string, unknown>, field: string, path = field): string | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '') {
    throw new WebhookPayloadError(
      path,
      `Expected "${path}" to be a non-empty string when present, got ${describe(value)}.`,
    );
  }
  return value;
}

const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

function idempotencyKeyOf(body: Record<string, unknown>): string | undefined {
  const key = optionalString(body, 'idempotency_key');
  if (key !== undefined && (key.length > MAX_IDEMPOTENCY_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key))) {
    throw new WebhookPayloadError(
      'idempotency_key',
      `Expected "idempotency_key" to be at most ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters without spaces.`,
    );
  }
  return key;
}

function eventKeyFor(
  keys: { notificationId?: string; idempotencyKey?: string },
  taskId: string,
  status: string,
  timestamp: string,
): string {
  if (keys.notificationId !== undefined) return `notification:${keys.notificationId}`;
  if (keys.idempotencyKey !== undefined) return `idem:${keys.idempotencyKey}`;
  return `tuple:${taskId}|${status}|${timestamp}`;
}

function withoutEmpty(snapshot: TaskSnapshot): TaskSnapshot {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(snapshot)) {
    if (value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    out[key] = value;
  }
  return out as unknown as TaskSnapshot;
}

function parseMcp(body: Record<string, unknown>, rawStatus: string): WebhookEvent {
  const taskId = body.task_id;
  if (typeof taskId !== 'string' || taskId === '') {
    throw new WebhookPayloadError(
      'task_id',
      `Expected "task_id" (a non-empty string) next to a string "status" in an MCP webhook payload, got ${describe(taskId)}${body.taskId !== undefined ? ' (camelCase "taskId" is not the MCP spelling)' : ''}.`,
    );
  }
  const idempotencyKey = idempotencyKeyOf(body);
  const notificationId = optionalString(body, 'notification_id');
  const rawTimestamp = body.timestamp;
  let sellerTimestamp: string | undefined;
  if (typeof rawTimestamp === 'string' && rawTimestamp !== '') sellerTimestamp = rawTimestamp;
  else if (typeof rawTimestamp === 'number' && Number.isFinite(rawTimestamp)) sellerTimestamp = String(rawTimestamp);
  else if (rawTimestamp !== undefined && rawTimestamp !== null) {
    throw new WebhookPayloadError(
      'timestamp',
      `Expected "timestamp" to be an ISO 8601 date-time string, got ${describe(rawTimestamp)}.`,
    );
  }
  if (idempotencyKey === undefined && sellerTimestamp === undefined) {
    throw new WebhookPayloadError(
      'timestamp',
      'Expected "idempotency_key" (AdCP 3.x) or "timestamp" (rc.2): without either the event cannot be deduplicated.',
    );
  }
  const rawResult = body.result;
  if (rawResult !== undefined && rawResult !== null && !asRecord(rawResult)) {
    throw new WebhookPayloadError(
      'result',
      `Expected "result" to be an object (the task's response data), got ${describe(rawResult)}.`,
    );
  }
  const result = asRecord(rawResult) ?? {};
  // The result is the task's own payload, so it keeps fields that share envelope names (a media buy's `status`);
  // snapshotFromFlatResponse still reads its errors, progress and message.
  const fromResult = snapshotFromFlatResponse(result);
  const status = normaliseStatus(rawStatus);
  const errors = [...parseErrors(result), ...parseErrors(body)];
  const snapshot = withoutEmpty({
    status: status ?? 'unknown',
    rawStatus: status === rawStatus ? undefined : rawStatus,
    taskId,
    contextId: optionalString(body, 'context_id') ?? fromResult.contextId,
    message: optionalString(body, 'message') ?? fromResult.message,
    result: Object.keys(result).length > 0 ? result : undefined,
    progress: fromResult.progress ?? normaliseProgress(body),
    errors,
    updatedAt: typeof rawTimestamp === 'string' && rawTimestamp !== '' ? rawTimestamp : undefined,
  });
  return dropUndefined({
    snapshot,
    eventKey: eventKeyFor({ notificationId, idempotencyKey }, taskId, rawStatus, sellerTimestamp ?? ''),
    sellerIdempotencyKey: idempotencyKey,
    notificationId,
    taskType: optionalString(body, 'task_type'),
    operationId: optionalString(body, 'operation_id'),
    domain: optionalString(body, 'protocol') ?? optionalString(body, 'domain'),
    sellerTimestamp,
    format: 'mcp',
  });
}

function parseA2a(body: Record<string, unknown>, status: Record<string, unknown>): WebhookEvent {
  const rawState = status.state as string;
  const taskId = body.id ?? body.taskId;
  if (typeof taskId !== 'string' || taskId === '') {
    throw new WebhookPayloadError(
      'id',
      `Expected an A2A Task "id" or TaskStatusUpdateEvent "taskId" (a non-empty string), got ${describe(taskId)}.`,
    );
  }
  const sellerTimestamp = optionalString(status, 'timestamp', 'status.timestamp');
  return dropUndefined({
    snapshot: snapshotFromA2A(body),
    // A2A carries no event id and makes status.timestamp optional, so (task, state) is the weakest key we accept.
    eventKey: eventKeyFor({}, taskId, rawState, sellerTimestamp ?? ''),
    sellerTimestamp,
    format: 'a2a',
  });
}

function dropUndefined(event: WebhookEvent): WebhookEvent {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(event)) if (value !== undefined) out[key] = value;
  return out as unknown as WebhookEvent;
}

/**
 * Reads a parsed JSON webhook body. Throws WebhookPayloadError when it is neither an MCP webhook payload nor
 * an A2A Task / TaskStatusUpdateEvent, or when a field the event depends on has the wrong type.
 */
export function parseWebhookPayload(body: unknown): WebhookEvent {
  const record = asRecord(body);
  if (!record) {
    throw new WebhookPayloadError('body', `Expected the webhook body to be a JSON object, got ${describe(body)}.`);
  }
  const status = record.status;
  if (typeof status === 'string' && status !== '') return parseMcp(record, status);
  const statusObject = asRecord(status);
  if (statusObject) {
    if (typeof statusObject.state === 'string' && statusObject.state !== '') return parseA2a(record, statusObject);
    throw new WebhookPayloadError(
      'status.state',
      `Expected an A2A status object with a non-empty string "state", got ${describe(statusObject.state)}.`,
    );
  }
  throw new WebhookPayloadError(
    'status',
    `Expected "status" to be a task status string (MCP webhook payload, with "task_id") or an object with "state" (A2A Task or TaskStatusUpdateEvent), got ${describe(status)}.`,
  );
}
