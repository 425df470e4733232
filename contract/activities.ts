/**
 * What the operation workflow asks of its activities, and what they answer: the contract between the deterministic
 * side (workflows/) and the I/O side (activities/). Types only, so the workflow bundle imports nothing that runs.
 */
import type {
  AdcpError,
  MatchedBy,
  RequestShaping,
  SentCreate,
  ShapingRecord,
  TaskRecordAdapterName,
  TaskSnapshot,
} from '../protocol';

/**
 * How a seller's task can be read. Learned per seller (what its tool list offers, what the first reads showed) and
 * kept in the operation's state, so a retried or continued operation reads the way that worked.
 * - `tasks/get`: the AdCP tool (3.0) · `get_task_status`: its 3.1 name · `get_task`: a name some sellers use
 * - `list_tasks`: a list filtered to the task's ID · `mcp-tasks`: MCP's own Tasks (`tasks/get` at the MCP layer)
 * - `get_media_buys`: the resource read by `media_buy_ids`, for media-buy tasks whose buy is known
 * - `a2a-native`: A2A `tasks/get` · `a2a-skill`: the `tasks/get` skill of an @adcp/sdk A2A adapter
 * - `none`: nothing works; the operation relies on webhooks and reconciliation.
 */
export type ReadMethod =
  | 'tasks/get'
  | 'get_task_status'
  | 'get_task'
  | 'list_tasks'
  | 'mcp-tasks'
  | 'get_media_buys'
  | 'a2a-native'
  | 'a2a-skill'
  | 'none';

/** Timeouts the worker is configured with, decided once per call and recorded in history with the plan. */
export interface CallTimeouts {
  /** Hard bound of one protocol call (ADCP_CALL_TIMEOUT_MS). */
  callMs: number;
  /** Hard bound of one read (tasks/get or its fallbacks), and of one reconciliation lookup. */
  readMs: number;
}

/**
 * Everything one mutating or reading call sends, decided once (by the `planCall` local activity) and recorded in
 * history. Every retry of `sendCall` re-sends exactly these bytes, whatever the worker's environment or version.
 * Holds no secrets: webhook credentials are named by reference and resolved at send time.
 */
export interface CallPlan {
  operationId: string;
  sellerId: string;
  task: string;
  /** The call step ('call', 'input-1', 'call#1' ...): part of the idempotency key. */
  step: string;
  /** The operation's tenant: the activity resolves the seller credentials of (tenant, seller) at call time. */
  tenant?: string;
  protocol: 'mcp' | 'a2a';
  /** The tool arguments as sent, including `idempotency_key`, `push_notification_config` (MCP, without credentials). */
  args: Record<string, unknown>;
  /** The push config as registered (URL, operation_id); for A2A it goes into the JSON-RPC configuration. */
  pushNotificationConfig?: { url: string; operation_id: string; authentication?: { schemes: string[] } };
  /** The environment variable holding the webhook credential sent with the push config, if the scheme has one. */
  webhookCredentialRef?: { env: string };
  contextId?: string;
  taskId?: string;
  timeouts: CallTimeouts;
}

export interface PlanCallInput {
  operationId: string;
  sellerId: string;
  /** The operation's tenant: the activity resolves the seller credentials of (tenant, seller) at call time. */
  tenant?: string;
  task: string;
  step: string;
  params: Record<string, unknown>;
  contextId?: string;
  taskId?: string;
}

export interface SendCallInput {
  /** The plan `planCall` recorded in history: every mutation. */
  plan?: CallPlan;
  /**
   * A read: planned and sent by this one activity. A read carries no idempotency key, so there is nothing to pin in
   * history, and the call costs one local activity instead of two.
   */
  planInput?: PlanCallInput;
}

export interface SendCallOutcome {
  snapshot: TaskSnapshot;
  webhookRegistered: boolean;
  /** Where the seller's answer did not match the schema the orchestrator knows: kept, and shown as warnings. */
  schemaWarnings?: string[];
  /** The timeouts the call was planned with, when `sendCall` planned it itself (`planInput`). */
  timeouts?: CallTimeouts;
  /**
   * The answer is the seller's refusal of the call, and this many attempts came before it: they failed in ways that
   * are retried (lost in transport, a 5xx), so one of them may have made what the refusal says cannot be made.
   */
  earlierAttempts?: number;
  /**
   * The answer's task id (`snapshot.taskId`) is this MCP task's (MCP Tasks): the call created it and stopped waiting
   * on it before its result (the answer window passed). Certain, so MCP `tasks/get` (`mcp-tasks`) reads it whatever
   * the seller's description says.
   */
  mcpTaskId?: string;
}

/** One read of a seller task, by whatever method works for this seller. */
export interface ReadTaskInput {
  operationId: string;
  sellerId: string;
  /** The operation's tenant: the activity resolves the seller credentials of (tenant, seller) at call time. */
  tenant?: string;
  task: string;
  taskId: string;
  contextId?: string;
  /** The request's `account`, passed on reads: some sellers scope tasks by account. */
  account?: unknown;
  /** For media-buy tasks whose buy is known: the resource read falls back to `get_media_buys`. */
  mediaBuyId?: string;
  /** The method that worked last time; absent on the first read. */
  readMethod?: ReadMethod;
  /**
   * `taskId` is an MCP task's, as the call that created it said (SendCallOutcome.mcpTaskId): MCP `tasks/get`
   * (`mcp-tasks`) is tried first, even where the seller's description does not (or cannot) say it serves MCP Tasks.
   */
  mcpTask?: boolean;
  /** How this seller's task records speak, as learned by an earlier read (protocol/task-records.ts). */
  taskRecordAdapter?: TaskRecordAdapterName;
  /** Fields this seller's reads leave out (request shaping, protocol/request-shaping.ts), by tool. */
  requestShaping?: RequestShaping;
  timeouts: CallTimeouts;
}

/**
 * A read that could not see the task is not the task failing: `unreadable` says why (no read tool, not found for
 * now, access), and the operation keeps its deadline, webhooks and reconciliation.
 */
export interface ReadTaskOutcome {
  snapshot?: TaskSnapshot;
  readMethod: ReadMethod;
  unreadable?: AdcpError;
  /** The adapter the task record was read with, when the read learned or used one other than AdCP's. */
  taskRecordAdapter?: TaskRecordAdapterName;
  /**
   * A read by `get_media_buys` (the seller has no task read): what the buy is, not a task observation. A buy that
   * exists says its create completed; it never settles or contradicts a task's result by its shape.
   */
  resource?: { mediaBuyId: string; row: Record<string, unknown> };
  /** Fields left out of this read because the seller refused them (to record: request shaping). */
  shaping?: ShapingRecord[];
  /** Where the seller's answer left the schema of the version it declares (warn mode). */
  schemaWarnings?: string[];
}

/**
 * A read of the resource itself (`get_media_buys`): by id to confirm a buy a task record or a webhook named, or by
 * listing (every status, every page) matched against what the create sent, when no id is known.
 */
export interface ReadResourceInput {
  operationId: string;
  sellerId: string;
  /** The operation's tenant: the activity resolves the seller credentials of (tenant, seller) at call time. */
  tenant?: string;
  mediaBuyId?: string;
  /** What the create sent (protocol/resource-match.ts sentCreateFrom), for a listing. */
  sent?: SentCreate;
  account?: unknown;
  /** Buys other operations already know: never adopted from a listing. */
  exclude?: string[];
  /** Only these buys may be adopted from a listing (the orphans reconciliation offers): the rest are not candidates. */
  among?: string[];
  requestShaping?: RequestShaping;
  timeouts: CallTimeouts;
}

export interface ReadResourceOutcome {
  found: boolean;
  mediaBuyId?: string;
  /** The buy as the seller has it now. */
  row?: Record<string, unknown>;
  matchedBy?: MatchedBy;
  /** Buys that fit the same evidence equally: none adopted. */
  candidates?: string[];
  /** Not found for certain: by id the seller does not have it, or the listing was read to its end. */
  absent?: boolean;
  /** The read failed or was refused: not found then says nothing about the buy. */
  unreadable?: AdcpError;
  shaping: ShapingRecord[];
  schemaWarnings?: string[];
  note: string;
}

/**
 * `awaitTaskMoveOnCadence`: polls until the task moves from `since`, keeping the poll cadence itself. Its first
 * attempt only asks to be retried after `firstPollAfterMs` (no durable timer, no workflow task), and each unchanged
 * poll asks for the next interval (`initialIntervalMs`, doubling up to `maxIntervalMs`) through `nextRetryDelay`.
 * The retry policy's own interval is then short: it only applies to an attempt that was lost (a killed worker), so a
 * lost poll is made again seconds after its heartbeat times out, not a backoff interval later.
 */
/**
 * The failure type of a polling activity's attempt that Temporal scheduled after the activity's budget
 * (schedule-to-close) had ended: it ends the activity as the timeout would have (the workflow reads it as the budget
 * running out). A server that enforces the timeout across retries never schedules such an attempt.
 */
export const POLL_BUDGET_SPENT = 'TaskPollBudgetSpent';

export interface AwaitTaskMoveOnCadenceInput extends ReadTaskInput {
  /**
   * What the last observation showed. `sellerStatus`: the seller's own word (`rawStatus`, null when it used AdCP's);
   * when given, a new word is a move even if it maps to the same status.
   */
  since: { status: string; progress: unknown; sellerStatus?: string | null };
  cadence: PollCadence;
}

/** When the polls of one wait are due: the first after `firstPollAfterMs`, then intervals doubling to a cap. */
export interface PollCadence {
  firstPollAfterMs: number;
  initialIntervalMs: number;
  maxIntervalMs: number;
  /**
   * After `afterPolls` polls, the next is `intervalMs` later and each later gap doubles up to `maxIntervalMs` (absent:
   * every gap `intervalMs`): a wait the seller's task watcher covers, keeping only its safety poll.
   */
  settle?: { afterPolls: number; intervalMs: number; maxIntervalMs?: number };
}

/**
 * The delay until the poll after poll `polls` of a wait: the cadence's interval (2x each time, capped); past a settle
 * point, the settled interval, doubling from there to its own cap when it has one.
 */
export function nextPollDelayMs(cadence: PollCadence, polls: number): number {
  const doubled = (from: number, times: number, cap: number) =>
    Math.min(from * 2 ** Math.min(Math.max(times, 0), 30), cap);
  const settle = cadence.settle;
  if (settle && polls >= settle.afterPolls)
    return doubled(settle.intervalMs, polls - settle.afterPolls, settle.maxIntervalMs ?? settle.intervalMs);
  return doubled(cadence.initialIntervalMs, polls - 1, cadence.maxIntervalMs);
}

export interface AwaitTaskMoveOutcome extends ReadTaskOutcome {
  polls: number;
}

export interface FindLostTaskInput {
  operationId: string;
  sellerId: string;
  /** The operation's tenant: the activity resolves the seller credentials of (tenant, seller) at call time. */
  tenant?: string;
  task: string;
  /** The call step whose idempotency key the seller task would carry. */
  step: string;
  account?: unknown;
  /** Absent (reconciliation, which has no call plan): the worker's own. */
  timeouts?: CallTimeouts;
}

export interface FindLostTaskOutcome {
  /** false when the seller offers no way to look the call up. */
  supported: boolean;
  snapshot?: TaskSnapshot;
  note: string;
}

/** What the orchestrator does at the seller when an operation is canceled. */
export interface CancelAtSellerInput {
  operationId: string;
  sellerId: string;
  /** The operation's tenant: the activity resolves the seller credentials of (tenant, seller) at call time. */
  tenant?: string;
  task: string;
  taskId?: string;
  contextId?: string;
  /** A resource the operation made (create_media_buy): canceled where the seller allows it. */
  mediaBuyId?: string;
  account?: unknown;
  timeouts: CallTimeouts;
}

export interface CancelAtSellerOutcome {
  /** The seller was told (A2A tasks/cancel, update_media_buy canceled: true). */
  notified: boolean;
  /** For a created resource: whether it still exists at the seller after what was done. */
  resource?: { mediaBuyId: string; state: 'canceled' | 'live' | 'unknown' };
  note: string;
}
