/**
 * The operation workflow's public surface: its input and state types and its message definitions.
 * Imported by the workflow, the worker, the API, the typed client and tests. Message names are stable:
 * renaming one breaks running operations.
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CallPlan, CallTimeouts, ReadMethod } from './activities';
import type { CarriedTaskWatch } from './task-watcher';
import type {
  AdcpError,
  CompletionOutcome,
  MatchedBy,
  Progress,
  RequestShaping,
  TaskRecordAdapterName,
  TaskSnapshot,
  TaskStatus,
} from '../protocol';

export const OPERATION_WORKFLOW_TYPE = 'adcpOperation';

/** Before the first answer from the seller, an operation is `pending`; after it, it has the seller's status. */
export type OperationStatus = TaskStatus | 'pending';

export type TransitionSource = 'call' | 'poll' | 'webhook' | 'orchestrator' | 'reconciliation';

export interface Transition {
  from: OperationStatus;
  to: OperationStatus;
  source: TransitionSource;
  at: string;
  note?: string;
}

export interface InputRequest {
  /** The seller's reason, e.g. APPROVAL_REQUIRED, BUDGET_EXCEEDS_LIMIT, CLARIFICATION_NEEDED. */
  reason?: string;
  message?: string;
  /** What the seller sent along: partial results, suggestions, errors. */
  details?: Record<string, unknown>;
  round: number;
  /** When the operation stops waiting for an answer (ISO 8601). */
  deadline: string;
}

/** Why the orchestrator (not the seller) ended an operation. */
export type OrchestratorFailureReason =
  | 'timed_out'
  | 'call_failed'
  | 'poll_failed'
  | 'input_timed_out'
  | 'input_rounds_exhausted'
  | 'auth_timed_out'
  | 'idempotency_unresolved'
  | 'answer_too_large'
  /** The seller may hold what the call made and no read could tell by the deadline (docs/convergence.md). */
  | 'outcome_unknown';

/**
 * Why a webhook was not applied to this operation although its signature was good: another operation's 3.1
 * `operation_id`, another seller task's `task_id`, or a signature by another seller than the operation's.
 */
export type WebhookRefusal = 'operation_id_mismatch' | 'task_id_mismatch' | 'seller_mismatch';

/** A created resource the operation knows of (create_media_buy), and what became of it on cancel. */
export interface OperationResource {
  /** Absent while the buy is not found (`state` says why). */
  mediaBuyId?: string;
  /**
   * After a cancel: canceled at the seller, still live there, or not known. After a lost answer: `unknown` while the
   * seller's media buys cannot be read, `absent` when a complete listing holds no buy from this operation.
   */
  state?: 'canceled' | 'live' | 'unknown' | 'absent';
  /** How the buy was found: by its id, or what of the create the seller's listing echoed (protocol/resource-match.ts). */
  matchedBy?: MatchedBy;
  /** The buy was read from the seller itself (`get_media_buys`), at `confirmedAt`. */
  confirmedBy?: 'get_media_buys';
  confirmedAt?: string;
  /** The buy's own status as the last read showed it (`active`, `pending_creatives`, ...). */
  status?: string;
  /** Buys that fit what the create sent equally well: none adopted. */
  candidates?: string[];
}

/** What `reconcileOperation` answers: the resource read now, and whether the operation adopted it. */
export interface OperationReconcileAnswer {
  found: boolean;
  media_buy_id?: string;
  matched_by?: MatchedBy;
  candidates?: string[];
  status: OperationStatus;
  note: string;
  /**
   * A create that had ended failed was reopened to read the seller's media buys again (its workflow reset to just
   * before its last read): the run that failed, kept in the workflow's history.
   */
  reopened_from_run_id?: string;
}

/** The reconcile update's argument. */
export interface OperationReconcileRequest {
  requestedBy: string;
  /** The authenticated principal that asked (`tenant/id`). */
  principal?: string;
  /**
   * Only these buys may be adopted (reconciliation offers the buys no operation knows): a buy outside them is never
   * this operation's by a listing match. At most MAX_RECONCILE_AMONG (contract/validators.ts) ids.
   */
  among?: string[];
}

/** One entry of the audit trail: who (the authenticated principal, `tenant/id`) did what to the operation, when. */
export interface AuditEntry {
  at: string;
  action: 'started' | 'input_provided' | 'credentials_refreshed' | 'cancel_requested';
  /** The authenticated principal (`tenant/id`), from the request's credentials, never from its body. */
  principal: string;
  /** Free text the caller sent along (provided_by, requested_by, refreshed_by): a note, not an identity. */
  note?: string;
}

export interface OperationState {
  operationId: string;
  sellerId: string;
  task: string;
  /** The tenant that started the operation (absent in single-tenant/dev mode); reads of other tenants see nothing. */
  tenant?: string;
  /** The principal that started it (`tenant/id`). */
  principal?: string;
  /** Who started, answered, cancelled or refreshed credentials, as authenticated (newest last, bounded). */
  audit?: AuditEntry[];
  status: OperationStatus;
  taskId?: string;
  contextId?: string;
  message?: string;
  progress?: Progress;
  result?: Record<string, unknown>;
  errors?: AdcpError[];
  /** For completed operations: success, partial (warnings or failed items) or pending (e.g. not live yet). */
  outcome?: CompletionOutcome;
  outcomeNotes?: string[];
  inputRequest?: InputRequest;
  inputRounds: number;
  authRequired?: { since: string; deadline: string };
  failure?: { reason: OrchestratorFailureReason; message: string; error?: AdcpError };
  cancellation?: {
    requestedBy: string;
    /** The authenticated principal that asked (`tenant/id`), when the request came with credentials. */
    principal?: string;
    reason: string;
    at: string;
    sellerNotified: boolean;
    sellerNote: string;
    /** The resource the operation's call had made before the cancel took effect, and whether it still exists. */
    resource?: OperationResource;
  };
  /** The media buy this operation made or acts on, once known. */
  resource?: OperationResource;
  /** The seller answered a call from its idempotency cache (3.x `replayed: true`). */
  replayed?: boolean;
  /** How this seller's task is read (learned on the first read; see contract/activities.ts). */
  readMethod?: ReadMethod;
  /**
   * The MCP task (MCP Tasks) a call created and answered `working` with: a task of this id is read by MCP `tasks/get`
   * first, whatever the seller's description says (SendCallOutcome.mcpTaskId).
   */
  mcpTaskId?: string;
  /** Whose words the seller's task records use (protocol/task-records.ts), learned like the read method. */
  taskRecordAdapter?: TaskRecordAdapterName;
  /** The seller's own status word, verbatim, when it is not one of AdCP's (`requires_approval`, `approved`). */
  sellerStatus?: string;
  /** Fields this seller's reads leave out because it refused them (protocol/request-shaping.ts), by tool. */
  requestShaping?: RequestShaping;
  /** Where the seller's answers left the schemas of the version it declares (warn mode), newest last, bounded. */
  schemaWarnings?: string[];
  /** The worker's call and read timeouts, as recorded with the first call plan. */
  timeouts?: CallTimeouts;
  /** The call in flight, if one is (step and since when). */
  callInFlight?: { step: string; since: string };
  /**
   * Webhooks that arrived before the operation knew its seller task (a final webhook can beat the call's own
   * answer): held until the call's answer or a read binds them, then applied or refused.
   */
  heldWebhooks?: number;
  /** A final result that needs a read to confirm it (e.g. a create completed without a media_buy_id). */
  provisional?: { source: TransitionSource; status: TaskStatus; taskId?: string; at: string; reason: string };
  /** Final results that arrived after the first one won and differ from it: kept, never applied (newest last). */
  conflicts?: { at: string; source: TransitionSource; status: TaskStatus; taskId?: string; note: string }[];
  /** Signed webhooks refused because they belong to another operation, task or seller (newest last, bounded). */
  refusedWebhooks?: {
    at: string;
    reason: WebhookRefusal;
    status: TaskStatus;
    taskId?: string;
    operationId?: string;
    /** The seller whose signature verified it, when that is not the operation's. */
    sellerId?: string;
    note: string;
  }[];
  webhooksRefused?: number;
  webhookRegistered: boolean;
  /** How the operation's seller task was found again when a call's answer was lost or refused (reconciliation). */
  reconciliation?: {
    at: string;
    trigger: string;
    outcome: 'adopted' | 'not_found' | 'unsupported';
    taskId?: string;
    note: string;
  }[];
  pollCount: number;
  webhooksApplied: number;
  /** The most recent transitions, oldest first (bounded; `transitionCount` counts them all). */
  transitions: Transition[];
  transitionCount: number;
  /** Events that could not be applied as they came (late, out of order, after the end), newest last, bounded. */
  anomalies: { at: string; source: TransitionSource; note: string }[];
  startedAt: string;
  updatedAt: string;
  /** The seller's own time of the last applied change, used to drop out-of-order events. */
  sellerUpdatedAt?: string;
  deadline: string;
}

export interface RetrySettings {
  maximumAttempts?: number;
  initialIntervalMs?: number;
  maximumIntervalMs?: number;
}

export interface OperationInput {
  sellerId: string;
  task: string;
  params: Record<string, unknown>;
  /**
   * The tenant that starts the operation (protocol/tenancy.ts): recorded in state and as the AdcpTenant search
   * attribute, and the key for the seller credentials and the buyer's notification URL the activities resolve.
   */
  tenant?: string;
  /** The authenticated principal that starts it (`tenant/id`): an id, never a secret. */
  principal?: string;
  /**
   * Notify the tenant's systems (its notification URL, resolved by the delivery activity) on input-required,
   * completed, failed, rejected and timed out (workflows/notification/workflow.ts). Only with a tenant.
   */
  notify?: boolean;
  /** Overrides the task's default budget (create 24 h, update 12 h, creative review 48 h). */
  budgetMs?: number;
  /** How long one input-required round may wait for an answer, and how many rounds are allowed. */
  interaction?: { deadlineMs?: number; maxRounds?: number };
  /** How long auth-required may wait for refreshed credentials. */
  authDeadlineMs?: number;
  retry?: RetrySettings;
  /** A fingerprint of the caller's request, so a reused idempotency key with other content is detected. */
  requestFingerprint?: string;
  /** Set only by continue-as-new. */
  carried?: CarriedState;
}

export interface CarriedState {
  state: OperationState;
  seenEventKeys: string[];
  inbox: WebhookDelivery[];
  /** Webhooks held until the operation's task is bound (see OperationState.heldWebhooks). */
  held?: WebhookDelivery[];
  /** How many times the call was re-keyed after the seller refused its key and had no task from it. */
  keyGeneration?: number;
  /** The call plans decided so far, by step: a repeated step re-sends the same bytes. */
  plans?: Record<string, CallPlan>;
  pendingInput?: ProvidedInput;
  pendingCredentialsRefresh?: boolean;
  pendingAdoption?: { taskId: string; requestedBy: string };
  /** A poll asked for (pollNow) and not made yet. */
  pollRequested?: boolean;
  /** The notifications started so far, by idempotency key (their child workflow IDs dedupe them too). */
  notified?: string[];
  /** How long the task has been in the status the polls wait on (its working window, its polls). */
  sellerWait?: { status: OperationStatus; polls: number; workingSince: string; quickPollsOver?: boolean };
  /** A lost create's buy being looked for among the seller's media buys: the call step and the call's error. */
  resourceSearch?: { keyStep: string; error: AdcpError };
  /** The operation's side of its seller's task watcher (workflows/operation/watching.ts). */
  watch?: CarriedTaskWatch;
}

/** A verified webhook, normalised by the gateway, as the signal carries it. */
export interface WebhookDelivery {
  /**
   * The dedupe key: the 3.1 `notification_id` when present (one logical notification across re-emissions), else the
   * seller's `idempotency_key` (3.x), else (task_id, status, timestamp) (rc.2).
   */
  eventKey: string;
  snapshot: TaskSnapshot;
  receivedAt: string;
  /** The 3.1 `operation_id` the seller echoed from our push config: one that is not this operation's is refused. */
  operationId?: string;
  /** The 3.1 `notification_id`, when the event type defines one. */
  notificationId?: string;
  /** The scheme that authenticated the sender (rfc9421, hmac-sha256, bearer), for the record. */
  verifiedBy?: string;
  /**
   * The seller whose credential verified it (the seller the webhook URL names). The gateway signals without knowing
   * whose operation this is; the workflow refuses a delivery verified by another seller than its own.
   */
  sellerId?: string;
}

/**
 * The memo key under which the workflow publishes its last state (the same object `statusQuery` answers, with a large
 * `result` replaced by a note), written only when status, task or failure change. Reads answer from it when no worker
 * can answer the query.
 */
export const OPERATION_STATE_MEMO = 'adcp_state';

/** Failure types of an operation workflow that ended failed or rejected; the failure's details[0] is its state. */
export const OPERATION_FAILED = 'AdcpOperationFailed';
export const OPERATION_REJECTED = 'AdcpOperationRejected';

/**
 * The state of an operation workflow that ended Failed (failed/rejected) or Canceled, read from its failure's
 * details, through any wrapping (WorkflowFailedError, ChildWorkflowFailure). Undefined for other failures.
 */
export function operationStateFromFailure(failure: unknown): OperationState | undefined {
  let cause: unknown = failure;
  for (let depth = 0; cause && depth < 5; depth += 1) {
    if (cause instanceof ApplicationFailure || cause instanceof CancelledFailure) {
      const detail = cause.details?.[0];
      if (
        detail &&
        typeof detail === 'object' &&
        typeof (detail as OperationState).status === 'string' &&
        typeof (detail as OperationState).operationId === 'string'
      ) {
        return detail as OperationState;
      }
    }
    cause = (cause as { cause?: unknown }).cause;
  }
  return undefined;
}

export interface ProvidedInput {
  /** The answer: fields merged into the resumed task call (e.g. `{ approved: true }` or a changed budget). */
  input: Record<string, unknown>;
  providedBy?: string;
  /** The authenticated principal that answered (`tenant/id`), set by the client from the credentials. */
  principal?: string;
  /** Set by the workflow from the update ID, so a retried update never answers twice. */
  requestId?: string;
  /** Set by the workflow: the round the answer was given in (an answer is never sent to a later question). */
  round?: number;
}

export interface CancelRequest {
  requestedBy: string;
  reason: string;
  /** The authenticated principal that asked (`tenant/id`), set by the client from the credentials. */
  principal?: string;
}

/** The credentials-refreshed update's argument. */
export interface CredentialsRefresh {
  refreshedBy: string;
  /** The authenticated principal that refreshed them (`tenant/id`). */
  principal?: string;
}

export const statusQuery = defineQuery<OperationState>('status');
export const webhookReceivedSignal = defineSignal<[WebhookDelivery]>('webhookReceived');
/**
 * Reconciliation found the seller task this operation's call created (the answer was lost): track it instead of
 * calling again. Ignored once the operation knows its task.
 */
export const adoptTaskSignal = defineSignal<[{ taskId: string; requestedBy: string }]>('adoptTask');
/** Ask an operation to poll the seller now (reconciliation, operators). */
export const pollNowSignal = defineSignal<[{ requestedBy: string }]>('pollNow');
export const provideInputUpdate = defineUpdate<{ accepted: true; round: number }, [ProvidedInput]>('provideInput');
export const credentialsRefreshedUpdate = defineUpdate<{ accepted: true }, [CredentialsRefresh]>(
  'credentialsRefreshed',
);
/**
 * Read the seller's media buys now and adopt the buy this operation made (an operation that cannot know what its lost
 * call made). Refused once the operation has ended.
 */
export const reconcileOperationUpdate = defineUpdate<OperationReconcileAnswer, [OperationReconcileRequest]>(
  'reconcileOperation',
);
export const cancelOperationUpdate = defineUpdate<{ accepted: true; status: OperationStatus }, [CancelRequest]>(
  'cancelOperation',
);
