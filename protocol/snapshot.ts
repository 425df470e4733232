import { type AdcpError, parseErrors, parseMcpToolRefusal } from './errors';
import { type Progress, normaliseProgress } from './progress';
import { type TaskStatus, normaliseStatus } from './status';
import { asRecord } from './records';

/**
 * What one observation of a task tells us, whatever carried it: a call response, a `tasks/get` poll or a webhook.
 * Every path is normalised into this shape so the workflow has one state machine to feed.
 */
export interface TaskSnapshot {
  status: TaskStatus;
  /** The status string as the seller sent it, when it differs from `status` (aliases, unknown values). */
  rawStatus?: string;
  taskId?: string;
  contextId?: string;
  message?: string;
  /** The task payload (e.g. media_buy_id, packages) without envelope fields. */
  result?: Record<string, unknown>;
  progress?: Progress;
  errors?: AdcpError[];
  /** When the seller says the status last changed (ISO 8601), if it says. */
  updatedAt?: string;
  /** The seller answered from its idempotency cache (3.x `replayed: true`). */
  replayed?: boolean;
  /** What the seller's task record names as made by the task (`associated_objects`): protocol/task-records.ts. */
  objects?: TaskObject[];
}

/** An object a seller's task record names (`{type: 'media_buy', id}`). */
export interface TaskObject {
  type: string;
  id: string;
}

/** The answer broke the protocol: no status we can read, not an object, not JSON. Never retried as-is. */
export class ProtocolViolation extends Error {
  override readonly name = 'ProtocolViolation';
}

/** Envelope fields that are not part of the task payload (adcp-protocol.md §1.3). */
const ENVELOPE_FIELDS = new Set([
  'status',
  'task_id',
  'context_id',
  'message',
  'timestamp',
  'replayed',
  'adcp_version',
  'adcp_major_version',
  'idempotency_key',
  'push_notification_config',
]);

function optionalText(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function statusOf(raw: unknown, fallback: TaskStatus): { status: TaskStatus; rawStatus?: string } {
  if (raw === undefined || raw === null) return { status: fallback };
  const status = normaliseStatus(raw);
  if (status === undefined) return { status: 'unknown', rawStatus: String(raw) };
  return status === raw ? { status } : { status, rawStatus: String(raw) };
}

function compact(snapshot: TaskSnapshot): TaskSnapshot {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(snapshot)) {
    if (value === undefined) continue;
    if (Array.isArray(value) && value.length === 0) continue;
    out[key] = value;
  }
  return out as unknown as TaskSnapshot;
}

/**
 * A flat AdCP response object (MCP structuredContent, an A2A DataPart, a webhook `result`), as in §1.3.
 * With no status field, a payload with errors and nothing else is a failure and anything else is a
 * synchronous completion; the canonical envelope's nested `payload` is unwrapped.
 */
export function snapshotFromFlatResponse(body: Record<string, unknown>): TaskSnapshot {
  const nested = asRecord(body.payload);
  const payloadSource = nested ?? body;
  // A synchronous answer has no task: a `status` that is not a task status is then the resource's own status
  // (a 3.x create_media_buy answers `status: "pending_creatives"`), part of the payload, not of the envelope.
  const domainStatus =
    body.status !== undefined && normaliseStatus(body.status) === undefined && optionalText(body.task_id) === undefined;
  const result: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(payloadSource)) {
    if (!ENVELOPE_FIELDS.has(key) || (domainStatus && key === 'status')) result[key] = value;
  }
  const errors = parseErrors(payloadSource);
  const onlyErrors =
    errors.length > 0 &&
    Object.keys(result).every(
      (k) =>
        ['errors', 'adcp_error', 'error', 'error_code', 'recovery', 'context', 'ext'].includes(k) ||
        // comply_test_controller's ControllerError (protocol/errors.ts parseControllerError).
        (payloadSource.success === false && ['success', 'error_detail', 'current_state'].includes(k)),
    );
  const { status, rawStatus } = statusOf(domainStatus ? undefined : body.status, onlyErrors ? 'failed' : 'completed');
  return compact({
    status,
    rawStatus,
    taskId: optionalText(body.task_id),
    contextId: optionalText(body.context_id),
    message: optionalText(body.message),
    result: Object.keys(result).length > 0 ? result : undefined,
    progress: normaliseProgress(payloadSource),
    errors,
    updatedAt: optionalText(body.timestamp) ?? optionalText(body.updated_at),
    replayed: body.replayed === true ? true : undefined,
  });
}

function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * An MCP `tools/call` result. The AdCP object is in `structuredContent` (client and reference practice),
 * or JSON in a text content block. `isError` results carry an `adcp_error` or plain text.
 */
export function snapshotFromMcpToolResult(raw: unknown): TaskSnapshot {
  const result = asRecord(raw);
  if (!result) throw new ProtocolViolation(`Expected an MCP tool result object, got ${describe(raw)}.`);
  const texts = Array.isArray(result.content)
    ? result.content
        .map((block) => asRecord(block))
        .filter((block): block is Record<string, unknown> => block?.type === 'text' && typeof block.text === 'string')
        .map((block) => block.text as string)
    : [];
  let body = asRecord(result.structuredContent);
  if (!body) {
    for (const text of texts) {
      const parsed = asRecord(parseJsonText(text));
      if (parsed) {
        body = parsed;
        break;
      }
    }
  }
  if (result.isError === true) {
    const message = texts.join('\n').trim() || 'The seller answered the tool call with an error and no text.';
    const parsed = body ? parseErrors(body) : [];
    const refusal = parsed.length === 0 ? parseMcpToolRefusal(message) : undefined;
    const errors = parsed.length > 0 ? parsed : refusal ? [refusal] : [];
    return compact({
      status: 'failed',
      message: errors[0]?.message ?? message,
      errors: errors.length > 0 ? errors : [{ code: 'TOOL_ERROR', message, recovery: 'terminal' }],
    });
  }
  if (!body) {
    throw new ProtocolViolation(
      `The MCP result has no structuredContent and no JSON text content (text: ${JSON.stringify(texts.join(' ').slice(0, 200))}).`,
    );
  }
  const snapshot = snapshotFromFlatResponse(body);
  if (!snapshot.message && texts.length > 0 && !asRecord(parseJsonText(texts[0]))) snapshot.message = texts[0];
  return snapshot;
}

/**
 * A `tasks/get` response (§1.5, §11.1). The final payload is in `result` on 3.0.6 peers; rc.2 docs leave it
 * open, so top-level task fields and the last history entry are accepted too.
 */
export function snapshotFromTasksGet(body: Record<string, unknown>): TaskSnapshot {
  const { status, rawStatus } = statusOf(body.status, 'unknown');
  let payload = asRecord(body.result);
  if (!payload && Array.isArray(body.history) && body.history.length > 0) {
    payload = asRecord(asRecord(body.history[body.history.length - 1])?.data);
  }
  const errors = [...parseErrors(body), ...(payload ? parseErrors(payload) : [])];
  return compact({
    status,
    rawStatus,
    taskId: optionalText(body.task_id),
    contextId: optionalText(body.context_id),
    message: optionalText(body.message),
    result: payload,
    progress: normaliseProgress(body) ?? (payload ? normaliseProgress(payload) : undefined),
    errors,
    updatedAt: optionalText(body.updated_at) ?? optionalText(body.timestamp),
    replayed: body.replayed === true ? true : undefined,
  });
}

/**
 * A media buy as `get_media_buys` returns it, read as the snapshot of the task that created it: a buy that exists
 * with a media_buy_id means the create completed (whatever its lifecycle status since: pending_creatives, active,
 * paused, canceled ...), except a buy the seller `rejected`. The buy itself is the result, so media_buy_id is kept.
 */
export function snapshotFromMediaBuy(buy: Record<string, unknown>): TaskSnapshot {
  const lifecycle = optionalText(buy.media_buy_status) ?? optionalText(buy.status);
  const rejected = lifecycle?.toLowerCase() === 'rejected';
  return compact({
    status: rejected ? 'rejected' : 'completed',
    result: buy,
    message: lifecycle ? `media buy ${String(buy.media_buy_id)} is ${lifecycle}` : undefined,
    errors: parseErrors(buy),
  });
}

/**
 * @adcp/sdk's A2A adapter (what 6.11 SDK sellers serve) answers with an A2A Task that tracks the *transport call*
 * (state `completed` even for an AdCP `submitted`) and carries the AdCP answer in its artifact: a flat envelope
 * with its own `status` (and `metadata.adcp_task_id`), or a `tasks/get` body. When the data part speaks AdCP
 * task status, it is the truth about the AdCP task.
 */
function adcpEnvelopeIn(data: Record<string, unknown>, task: Record<string, unknown>): TaskSnapshot | undefined {
  if (data.status === undefined || normaliseStatus(data.status) === undefined) return undefined;
  let adcpTaskId: string | undefined;
  if (Array.isArray(task.artifacts)) {
    for (const artifact of task.artifacts)
      adcpTaskId = optionalText(asRecord(asRecord(artifact)?.metadata)?.adcp_task_id) ?? adcpTaskId;
  }
  const looksLikeTasksGet =
    'task_type' in data || 'has_webhook' in data || 'created_at' in data || asRecord(data.result) !== undefined;
  const snapshot = looksLikeTasksGet ? snapshotFromTasksGet(data) : snapshotFromFlatResponse(data);
  snapshot.taskId = snapshot.taskId ?? adcpTaskId;
  snapshot.contextId = snapshot.contextId ?? optionalText(task.contextId);
  return compact(snapshot);
}

/** The last DataPart of a parts list is authoritative (A2A response format). */
function lastDataPart(parts: unknown): Record<string, unknown> | undefined {
  if (!Array.isArray(parts)) return undefined;
  let found: Record<string, unknown> | undefined;
  for (const part of parts) {
    const record = asRecord(part);
    if (record && (record.kind === 'data' || record.type === 'data') && asRecord(record.data)) {
      found = asRecord(record.data);
    }
  }
  return found;
}

function textParts(parts: unknown): string | undefined {
  if (!Array.isArray(parts)) return undefined;
  const texts = parts
    .map((part) => asRecord(part))
    .filter((part) => part && (part.kind === 'text' || part.type === 'text') && typeof part.text === 'string')
    .map((part) => (part as Record<string, unknown>).text as string);
  return texts.length > 0 ? texts.join('\n') : undefined;
}

/**
 * An A2A `Task`, `TaskStatusUpdateEvent` or `Message` (as a call result or a push notification).
 * Result data: artifacts first, then status.message.parts; the last DataPart wins (§3.4, §7.2).
 */
export function snapshotFromA2A(raw: unknown): TaskSnapshot {
  let body = asRecord(raw);
  if (body && asRecord(body.result) && body.jsonrpc) body = asRecord(body.result);
  if (body && body.jsonrpc && asRecord(body.error)) {
    const error = asRecord(body.error)!;
    return {
      status: 'failed',
      message: optionalText(error.message) ?? 'A2A JSON-RPC error',
      errors: [
        {
          code: `JSONRPC_${String(error.code ?? 'ERROR')}`,
          message: optionalText(error.message) ?? 'A2A JSON-RPC error',
          recovery: 'terminal',
        },
      ],
    };
  }
  if (!body) throw new ProtocolViolation(`Expected an A2A Task or Message, got ${describe(raw)}.`);

  if (body.kind === 'message' || (Array.isArray(body.parts) && !body.status)) {
    const data = lastDataPart(body.parts);
    const snapshot = data ? snapshotFromFlatResponse(data) : ({ status: 'completed' } as TaskSnapshot);
    snapshot.contextId = optionalText(body.contextId) ?? snapshot.contextId;
    snapshot.message = snapshot.message ?? textParts(body.parts);
    return compact(snapshot);
  }

  const statusObject = asRecord(body.status);
  if (!statusObject) throw new ProtocolViolation('The A2A payload has no status object with a state.');
  const { status, rawStatus } = statusOf(statusObject.state, 'unknown');
  const statusMessage = asRecord(statusObject.message);
  let data: Record<string, unknown> | undefined;
  if (Array.isArray(body.artifacts)) {
    for (const artifact of body.artifacts) data = lastDataPart(asRecord(artifact)?.parts) ?? data;
  }
  data = data ?? lastDataPart(statusMessage?.parts);
  const envelope = data ? adcpEnvelopeIn(data, body) : undefined;
  if (envelope) return envelope;
  const fromData = data ? snapshotFromFlatResponse(data) : undefined;
  return compact({
    status,
    rawStatus,
    taskId: optionalText(body.id) ?? optionalText(body.taskId),
    contextId: optionalText(body.contextId),
    message: textParts(statusMessage?.parts) ?? fromData?.message,
    result: fromData?.result,
    progress: fromData?.progress,
    errors: fromData?.errors,
    updatedAt: optionalText(statusObject.timestamp),
  });
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}
