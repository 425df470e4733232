/**
 * What an observation means: the rules every route a result can take feeds — the call's answer, webhooks, reads
 * (polls), reconciliation, adoption and cancel — applied to one operation state. Deterministic and free of Temporal
 * and I/O. The operation machine (./machine.ts) owns an instance and decides when to call, read and wait; this
 * decides what each answer, webhook and read changes.
 *
 * The rules (AdCP async identity and convergence; 3.1 webhooks page):
 * - Observations are applied whenever they arrive, also while a call is in flight.
 * - The first authenticated terminal result wins; nothing leaves a terminal status. A later, different terminal
 *   result is kept as a conflict and shown; an identical one is a duplicate; a non-terminal one is stale.
 * - A webhook verified by another seller's credential than the operation's seller is refused and shown, never
 *   applied, and its event key is not remembered (it cannot shadow an event of the operation's own seller).
 * - Once bound, the seller's task_id is the operation's: a webhook naming another task, or another operation_id (3.1),
 *   is refused and shown, never applied.
 * - A webhook that arrives before the operation knows its task (it can beat the call's own answer) is held until
 *   the call's answer binds the task, or, if the answer is lost, until a read of the webhook's task confirms it.
 * - A create_media_buy that "completes" without a media_buy_id is not taken as success on that word alone: a read
 *   confirms it, and if none can, the outcome says it is unconfirmed.
 * - A new idempotency key is used only when the seller refused the old one (IDEMPOTENCY_CONFLICT/EXPIRED) and
 *   reconciliation found no task from it.
 */
import {
  type AdcpError,
  type MatchedBy,
  type TaskSnapshot,
  type TaskStatus,
  assessCompletion,
  isTerminal,
  mediaBuyIdOf,
  normaliseStatus,
} from '../../protocol';
import type {
  CancelRequest,
  OperationResource,
  OperationState,
  OperationStatus,
  OrchestratorFailureReason,
  TransitionSource,
  WebhookDelivery,
  WebhookRefusal,
} from '../../contract/operation';

const MAX_TRANSITIONS_KEPT = 100;
const MAX_ANOMALIES_KEPT = 20;
const MAX_CONFLICTS_KEPT = 10;
const MAX_REFUSED_KEPT = 10;
const MAX_HELD = 50;
const MAX_SCHEMA_WARNINGS_KEPT = 10;

/** Codes that say the seller will not replay this key's answer: find out what happened before using a new key. */
export const IDEMPOTENCY_REFUSAL_CODES: ReadonlySet<string> = new Set(['IDEMPOTENCY_CONFLICT', 'IDEMPOTENCY_EXPIRED']);

/** Which statuses normally follow which (orchestrator-design table, widened); anything else is recorded. */
const EXPECTED_EDGES: Readonly<Record<OperationStatus, readonly OperationStatus[]>> = {
  pending: [
    'submitted',
    'working',
    'input-required',
    'completed',
    'failed',
    'rejected',
    'auth-required',
    'unknown',
    'canceled',
  ],
  submitted: ['working', 'input-required', 'completed', 'failed', 'canceled', 'rejected', 'auth-required', 'unknown'],
  working: ['submitted', 'input-required', 'completed', 'failed', 'canceled', 'auth-required', 'unknown'],
  'input-required': ['submitted', 'working', 'completed', 'failed', 'canceled', 'rejected', 'unknown'],
  'auth-required': ['submitted', 'working', 'input-required', 'completed', 'failed', 'canceled', 'rejected', 'unknown'],
  unknown: ['submitted', 'working', 'input-required', 'completed', 'failed', 'canceled', 'rejected', 'auth-required'],
  completed: [],
  failed: [],
  canceled: [],
  rejected: [],
};

/** The result field without which a completed task has not delivered what the buyer asked for. */
const REQUIRED_RESULT_FIELD: Readonly<Record<string, string>> = { create_media_buy: 'media_buy_id' };

/** Tasks whose result is a resource the seller holds, and which a read of that resource can confirm or find. */
export function makesResource(task: string): boolean {
  return REQUIRED_RESULT_FIELD[task] === 'media_buy_id';
}

/** A media buy the seller holds, as a resource read showed it. */
export interface ResourceSeen {
  mediaBuyId: string;
  row: Record<string, unknown>;
  /** How a listing matched it to what the create sent; absent for a read by id. */
  matchedBy?: MatchedBy;
}

export interface ObservationOptions {
  task: string;
  /** The request's params: a completed result is judged against them (sync_creatives answers per creative sent). */
  params?: Record<string, unknown>;
  /** The operation's deadline (ms since epoch): interaction and auth deadlines never pass it. */
  deadlineMs: number;
  interactionDeadlineMs: number;
  authDeadlineMs: number;
  now: () => number;
  /** Told of every status change (metrics). */
  onStatusChange?: (from: OperationStatus, to: OperationStatus, source: TransitionSource) => void;
  /** Told of every anomaly (logs). */
  onAnomaly?: (source: TransitionSource, note: string) => void;
}

/** What happened to one observation. */
export type Verdict = 'applied' | 'held' | 'refused' | 'duplicate' | 'conflict' | 'stale' | 'needs-confirmation';

/** What the workflow should do after a call failed. */
export type CallFailureDecision =
  | { action: 'ignore'; why: string }
  | { action: 'confirm-held' }
  | { action: 'follow-task'; why: string }
  | { action: 'reconcile' }
  | { action: 'fail'; reason: OrchestratorFailureReason; message: string };

/** What the workflow should do after reconciliation of a failed call. */
export type ReconcileDecision =
  | { action: 'adopted' }
  | { action: 'rekey' }
  /** No task route found the call's task: the resource itself (the seller's media buys) is looked for. */
  | { action: 'find-resource' }
  /**
   * The last attempts never left the worker (its own circuit breaker for the seller was open): the same call, with
   * the same key, is made again once the breaker lets calls through (`atMs`).
   */
  | { action: 'call-again'; atMs: number }
  | { action: 'fail'; reason: OrchestratorFailureReason; message: string };

/** A call the worker's own circuit breaker for the seller refused: the seller was never asked. */
export function isOwnCircuitRefusal(error: AdcpError): boolean {
  return error.details?.origin === 'circuit-open';
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** RFC 8785-style canonical JSON (sorted keys), enough to tell two terminal results apart. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

function terminalStatus(status: OperationStatus): boolean {
  return status !== 'pending' && isTerminal(status);
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * A webhook that repeats `statusWaitedOn` for this operation's bound task, and whose application can change nothing a
 * wait or the published search attributes and memo depend on: no new status, no final or provisional result, no
 * question, no media buy, no refusal and no holding. Applying it changes only the record (message, progress, counts)
 * and issues no workflow command, so the machine may apply it as it arrives, without waking the step that waits.
 */
export function isQuietRepeat(
  state: OperationState,
  terminal: boolean,
  statusWaitedOn: OperationStatus,
  delivery: WebhookDelivery,
): boolean {
  const snapshot = delivery.snapshot;
  return (
    !terminal &&
    state.provisional === undefined &&
    state.taskId !== undefined &&
    state.status === statusWaitedOn &&
    snapshot.status === statusWaitedOn &&
    !terminalStatus(snapshot.status) &&
    snapshot.status !== 'input-required' &&
    snapshot.status !== 'auth-required' &&
    (delivery.operationId === undefined || delivery.operationId === state.operationId) &&
    (!snapshot.taskId || snapshot.taskId === state.taskId) &&
    text(snapshot.result?.media_buy_id) === undefined
  );
}

/**
 * A seller that wraps a task envelope in a `completed` one (`{status: completed, result: {status: submitted,
 * task_id}}`) has not completed anything: read the inner envelope for what it is.
 */
export function unwrapNestedEnvelope(snapshot: TaskSnapshot): { snapshot: TaskSnapshot; note?: string } {
  if (snapshot.status !== 'completed' || !snapshot.result) return { snapshot };
  const inner = normaliseStatus(snapshot.result.status);
  if (!inner || isTerminal(inner)) return { snapshot };
  const innerTaskId = text(snapshot.result.task_id);
  if (!innerTaskId) return { snapshot };
  const { status: _status, task_id: _taskId, ...rest } = snapshot.result;
  const unwrapped: TaskSnapshot = {
    ...snapshot,
    status: inner,
    rawStatus: `completed wrapping ${String(snapshot.result.status)}`,
    taskId: snapshot.taskId ?? innerTaskId,
    ...(Object.keys(rest).length > 0 ? { result: rest } : {}),
  };
  if (Object.keys(rest).length === 0) delete unwrapped.result;
  return { snapshot: unwrapped, note: `seller said completed around a ${inner} task ${innerTaskId}: read as ${inner}` };
}

export class Observations {
  /** Webhooks held until the operation's task is bound; carried across continue-as-new. */
  readonly held: WebhookDelivery[];
  /**
   * A cancel accepted before any final result: the buyer decided first, so the operation ends canceled. What the
   * seller reports meanwhile (a buy made by the call in flight) is recorded, and acted on, but settles nothing.
   */
  private cancelPending: CancelRequest | undefined;

  constructor(
    readonly state: OperationState,
    private readonly options: ObservationOptions,
    held: WebhookDelivery[] = [],
  ) {
    this.held = held;
    this.state.heldWebhooks = held.length;
  }

  get terminal(): boolean {
    return terminalStatus(this.state.status);
  }

  private now(): number {
    return this.options.now();
  }

  note(source: TransitionSource, note: string): void {
    this.state.anomalies.push({ at: iso(this.now()), source, note });
    if (this.state.anomalies.length > MAX_ANOMALIES_KEPT) this.state.anomalies.shift();
    this.options.onAnomaly?.(source, note);
  }

  private setStatus(to: OperationStatus, source: TransitionSource, note?: string): void {
    const from = this.state.status;
    if (from === to) return;
    if (terminalStatus(from)) throw new Error(`invariant: ${from} is terminal and cannot become ${to}`);
    if (!EXPECTED_EDGES[from].includes(to)) this.note(source, `unexpected transition ${from} -> ${to}`);
    this.state.status = to;
    this.state.transitionCount += 1;
    this.state.transitions.push({ from, to, source, at: iso(this.now()), ...(note ? { note } : {}) });
    if (this.state.transitions.length > MAX_TRANSITIONS_KEPT) this.state.transitions.shift();
    if (terminalStatus(to)) this.state.callInFlight = undefined;
    this.options.onStatusChange?.(from, to, source);
  }

  /** A cancel was accepted (before any final result): from now on final results are recorded, not settled. */
  beginCancel(request: CancelRequest): void {
    if (this.terminal || this.cancelPending) return;
    this.cancelPending = request;
    this.record(`cancel requested by ${request.requestedBy}: ${request.reason}`);
  }

  /** Records a step that changes no status (an answer sent, a cancel noted) in the transition log. */
  record(note: string): void {
    this.state.transitions.push({
      from: this.state.status,
      to: this.state.status,
      source: 'orchestrator',
      at: iso(this.now()),
      note,
    });
    this.state.transitionCount += 1;
    if (this.state.transitions.length > MAX_TRANSITIONS_KEPT) this.state.transitions.shift();
  }

  // ---- routes ------------------------------------------------------------------------------------------------

  /** The call's own answer. Binds the task it names, then settles the webhooks that were held for it. */
  applyCallAnswer(snapshot: TaskSnapshot, extras: { schemaWarnings?: string[] } = {}): Verdict {
    this.state.callInFlight = undefined;
    if (snapshot.replayed) this.state.replayed = true;
    const verdict = this.observe(snapshot, 'call', extras.schemaWarnings);
    this.settleHeld();
    return verdict;
  }

  /** A read of the task (poll, reconciliation, confirmation read). */
  applyRead(snapshot: TaskSnapshot, source: 'poll' | 'reconciliation' = 'poll', schemaWarnings?: string[]): Verdict {
    const verdict = this.observe(snapshot, source, schemaWarnings);
    if (this.state.taskId) this.settleHeld();
    return verdict;
  }

  /**
   * A verified webhook. Refused when it names another operation or task; held while the operation's task is not
   * bound yet (unless its 3.1 operation_id binds it to this operation); applied otherwise.
   */
  receiveWebhook(delivery: WebhookDelivery): Verdict {
    return this.take(delivery, true);
  }

  /**
   * Refuses (and records) a delivery verified by another seller than the operation's. Asked before the event key is
   * remembered: the gateway signals whatever operation the URL names, so only this tells one seller's events from
   * another's. A delivery that names no seller (signalled by other code than the gateway) is not refused here.
   */
  refusesSender(delivery: WebhookDelivery): boolean {
    if (delivery.sellerId === undefined || delivery.sellerId === this.state.sellerId) return false;
    this.refuse(
      delivery,
      'seller_mismatch',
      `webhook verified as seller ${delivery.sellerId} posted to an operation of seller ${this.state.sellerId}`,
    );
    return true;
  }

  private take(delivery: WebhookDelivery, mayHold: boolean): Verdict {
    const snapshot = delivery.snapshot;
    if (delivery.operationId !== undefined && delivery.operationId !== this.state.operationId) {
      return this.refuse(
        delivery,
        'operation_id_mismatch',
        `webhook for operation ${delivery.operationId} posted to ${this.state.operationId}`,
      );
    }
    if (this.state.taskId && snapshot.taskId && snapshot.taskId !== this.state.taskId) {
      return this.refuse(
        delivery,
        'task_id_mismatch',
        `webhook for task ${snapshot.taskId}; this operation's task is ${this.state.taskId}`,
      );
    }
    const boundByOperationId = delivery.operationId === this.state.operationId;
    if (mayHold && !this.state.taskId && !boundByOperationId && !this.terminal) {
      if (this.held.length >= MAX_HELD) this.held.shift();
      this.held.push(delivery);
      this.state.heldWebhooks = this.held.length;
      return 'held';
    }
    this.state.webhooksApplied += 1;
    return this.observe(snapshot, 'webhook');
  }

  /** Reconciliation or a signal found the seller task this operation's call made: track it. */
  adopt(taskId: string, why: string): void {
    if (this.state.taskId) return;
    this.state.taskId = taskId;
    this.state.reconciliation = [
      ...(this.state.reconciliation ?? []),
      {
        at: iso(this.now()),
        trigger: why,
        outcome: 'adopted' as const,
        taskId,
        note: 'seller task adopted; the call was not repeated',
      },
    ].slice(-10);
    this.touch();
    this.settleHeld();
  }

  /** The task ID a read should use to confirm held webhooks (the first one that names a task). */
  heldTaskId(): string | undefined {
    return this.held.find((delivery) => delivery.snapshot.taskId)?.snapshot.taskId;
  }

  /**
   * Held webhooks could not be bound by the call's answer (it was lost) and no read can see their task: they are
   * authenticated deliveries to this operation's URL, so apply them, saying they were not confirmed.
   */
  acceptHeldUnconfirmed(why: string): void {
    if (this.held.length === 0) return;
    this.note('webhook', `applied ${this.held.length} held webhook(s) without confirmation: ${why}`);
    const taskId = this.heldTaskId();
    if (taskId && !this.state.taskId && !this.terminal) this.state.taskId = taskId;
    // Applied, not held again: with no task to bind them they would be held for ever.
    this.drainHeld(false);
  }

  /** Applies held webhooks that belong to the bound task and refuses the rest. */
  private settleHeld(): void {
    if (this.held.length === 0) return;
    if (!this.state.taskId && !this.terminal) return;
    this.drainHeld();
  }

  private drainHeld(mayHold = true): void {
    const deliveries = this.held.splice(0, this.held.length);
    this.state.heldWebhooks = 0;
    for (const delivery of deliveries) this.take(delivery, mayHold);
  }

  private refuse(delivery: WebhookDelivery, reason: WebhookRefusal, note: string): Verdict {
    this.recordRefusal({
      reason,
      status: delivery.snapshot.status,
      ...(delivery.snapshot.taskId ? { taskId: delivery.snapshot.taskId } : {}),
      ...(delivery.operationId ? { operationId: delivery.operationId } : {}),
      ...(delivery.sellerId !== undefined && delivery.sellerId !== this.state.sellerId
        ? { sellerId: delivery.sellerId }
        : {}),
      note,
    });
    return 'refused';
  }

  private recordRefusal(refusal: {
    reason: WebhookRefusal;
    status: TaskStatus;
    taskId?: string;
    operationId?: string;
    sellerId?: string;
    note: string;
  }): void {
    this.state.webhooksRefused = (this.state.webhooksRefused ?? 0) + 1;
    this.state.refusedWebhooks = [...(this.state.refusedWebhooks ?? []), { at: iso(this.now()), ...refusal }].slice(
      -MAX_REFUSED_KEPT,
    );
    this.note('webhook', `refused: ${refusal.note}`);
  }

  // ---- the one place an observation changes state -----------------------------------------------------------

  private observe(raw: TaskSnapshot, source: TransitionSource, schemaWarnings?: string[]): Verdict {
    const { snapshot, note: unwrapNote } = unwrapNestedEnvelope(raw);
    if (unwrapNote) this.note(source, unwrapNote);
    const state = this.state;

    if (this.terminal) return this.compareWithSettled(snapshot, source);

    if (snapshot.updatedAt && state.sellerUpdatedAt && snapshot.updatedAt < state.sellerUpdatedAt) {
      this.note(
        source,
        `ignored out-of-order ${snapshot.status} from ${snapshot.updatedAt} (last applied ${state.sellerUpdatedAt})`,
      );
      return 'stale';
    }
    if (snapshot.taskId) {
      if (state.taskId && state.taskId !== snapshot.taskId) {
        // A different explicit task_id for the same operation is a protocol conflict: never rebind.
        this.note(source, `seller sent task_id ${snapshot.taskId}, keeping ${state.taskId}`);
        if (isTerminal(snapshot.status)) {
          this.addConflict(
            source,
            snapshot,
            `final ${snapshot.status} for task ${snapshot.taskId}, not this operation's task ${state.taskId}`,
          );
          return 'conflict';
        }
      } else {
        state.taskId = snapshot.taskId;
      }
    }
    if (snapshot.contextId) state.contextId = snapshot.contextId;
    // The seller's own word is kept verbatim (its task records speak their own vocabulary).
    if (snapshot.rawStatus) state.sellerStatus = snapshot.rawStatus;
    else if (snapshot.status !== 'unknown') delete state.sellerStatus;
    if (schemaWarnings?.length)
      state.schemaWarnings = [...(state.schemaWarnings ?? []), ...schemaWarnings].slice(-MAX_SCHEMA_WARNINGS_KEPT);

    // A create that completes without its buy is confirmed by a read before it is taken as done: a read of the buy
    // its record names, when it names one, else a read of the task.
    const required = REQUIRED_RESULT_FIELD[state.task];
    if (
      snapshot.status === 'completed' &&
      required !== undefined &&
      snapshot.result?.[required] === undefined &&
      state.provisional === undefined &&
      source !== 'reconciliation'
    ) {
      const named = mediaBuyIdOf(snapshot.objects);
      if (named) state.resource = { ...state.resource, mediaBuyId: named, matchedBy: 'media_buy_id' };
      state.provisional = {
        source,
        status: snapshot.status,
        ...(state.taskId ? { taskId: state.taskId } : {}),
        at: iso(this.now()),
        reason: `${state.task} completed without ${required}${named ? ` (its record names media buy ${named})` : ''}`,
      };
      if (snapshot.result) state.result = snapshot.result;
      if (snapshot.message) state.message = snapshot.message;
      this.note(
        source,
        `${state.task} said completed without ${required}: waiting for a read of ${named ? `media buy ${named}` : 'the task'} to confirm it`,
      );
      this.touch();
      return 'needs-confirmation';
    }

    if (this.cancelPending && isTerminal(snapshot.status)) {
      // Keep what the seller says happened (the buy it made, its errors); the cancel decides the ending.
      if (snapshot.result) state.result = snapshot.result;
      if (snapshot.errors?.length) state.errors = snapshot.errors;
      const madeBuy = text(snapshot.result?.media_buy_id);
      if (madeBuy) state.resource = { ...state.resource, mediaBuyId: madeBuy };
      this.note(
        source,
        `seller reports ${snapshot.status}${madeBuy ? ` (media buy ${madeBuy})` : ''} after the cancel was requested`,
      );
      this.touch();
      return 'applied';
    }
    if (snapshot.message) state.message = snapshot.message;
    else if (snapshot.status !== state.status) state.message = undefined;
    if (snapshot.progress) state.progress = snapshot.progress;
    if (snapshot.result) state.result = snapshot.result;
    if (snapshot.errors?.length) state.errors = snapshot.errors;
    if (snapshot.updatedAt) state.sellerUpdatedAt = snapshot.updatedAt;
    if (snapshot.replayed) state.replayed = true;
    if (snapshot.status === 'unknown' && snapshot.rawStatus)
      this.note(source, `seller sent unrecognised status "${snapshot.rawStatus}"`);
    const mediaBuyId = text(snapshot.result?.media_buy_id);
    if (mediaBuyId) state.resource = { ...state.resource, mediaBuyId };

    const previous = state.status;
    this.setStatus(snapshot.status, source, snapshot.rawStatus ? `seller said "${snapshot.rawStatus}"` : undefined);
    this.afterStatus(snapshot, previous);
    if (snapshot.status === 'completed') {
      const assessment = assessCompletion(state.result, { task: this.options.task, params: this.options.params });
      const notes = [...assessment.notes, ...(schemaWarnings ?? []).map((warning) => `schema: ${warning}`)];
      if (state.provisional) {
        notes.push(
          `${state.provisional.reason}; ${required && state.result?.[required] !== undefined ? 'a read confirmed it' : 'no read could confirm it'}`,
        );
      }
      const unconfirmed = required !== undefined && state.result?.[required] === undefined;
      state.outcome = unconfirmed || (schemaWarnings?.length ?? 0) > 0 ? 'partial' : assessment.outcome;
      if (notes.length > 0) state.outcomeNotes = notes;
      state.provisional = undefined;
    }
    this.touch();
    return 'applied';
  }

  /**
   * The provisional completion could not be confirmed by a read (none is possible, or the read says the same):
   * settle it as completed, marked unconfirmed in the outcome.
   */
  settleProvisional(why: string, snapshot?: TaskSnapshot): void {
    const provisional = this.state.provisional;
    if (!provisional || this.terminal) return;
    this.note('orchestrator', `${provisional.reason}; settled without confirmation: ${why}`);
    this.observe({ ...(snapshot ?? {}), status: 'completed' }, 'reconciliation');
  }

  /**
   * A media buy the seller holds, read from the seller itself (get_media_buys): the resource, not a task observation,
   * so it is never compared with a settled task result by its shape. The same buy confirms what the operation knows;
   * another buy, where the operation knows one, is a conflict. A create that has not ended is done once its buy exists:
   * the buy's row (over what the task said) is its result.
   */
  applyResource(buy: ResourceSeen, source: TransitionSource): Verdict {
    const state = this.state;
    const known = state.resource?.mediaBuyId;
    if (known !== undefined && known !== buy.mediaBuyId) {
      const note = `the seller's media buy ${buy.mediaBuyId} is not this operation's media buy ${known}`;
      if (!this.terminal) {
        this.note(source, note);
        return 'refused';
      }
      this.addConflict(source, { status: 'completed' }, note);
      return 'conflict';
    }
    const status = text(buy.row.status) ?? text(buy.row.media_buy_status);
    const { state: _lookedFor, candidates: _candidates, ...kept } = state.resource ?? {};
    state.resource = {
      ...kept,
      mediaBuyId: buy.mediaBuyId,
      matchedBy: kept.matchedBy ?? buy.matchedBy ?? 'media_buy_id',
      confirmedBy: 'get_media_buys',
      confirmedAt: iso(this.now()),
      ...(status ? { status } : {}),
    };
    if (this.terminal || !makesResource(state.task)) {
      this.touch();
      return 'duplicate';
    }
    return this.observe(
      {
        status: 'completed',
        ...(state.taskId ? { taskId: state.taskId } : {}),
        result: { ...(state.result ?? {}), ...buy.row, media_buy_id: buy.mediaBuyId },
      },
      source === 'poll' ? 'reconciliation' : source,
    );
  }

  /**
   * The seller may hold what the call made and nothing can tell yet (its media buys cannot be read, or several fit):
   * the operation says so, as `unknown`, with the route that reads them now.
   */
  lookForResource(message: string, candidates: string[] = []): void {
    if (this.terminal) return;
    const state = this.state;
    state.resource = {
      ...(state.resource?.mediaBuyId ? { mediaBuyId: state.resource.mediaBuyId } : {}),
      state: 'unknown',
      ...(candidates.length > 0 ? { candidates } : {}),
    };
    state.message = message;
    this.setStatus('unknown', 'orchestrator', 'the seller may hold what the call made');
    this.touch();
  }

  private afterStatus(snapshot: TaskSnapshot, previous: OperationStatus): void {
    const state = this.state;
    const now = this.now();
    if (snapshot.status === 'input-required' && (previous !== 'input-required' || !state.inputRequest)) {
      state.inputRounds += 1;
      const reason = typeof snapshot.result?.reason === 'string' ? snapshot.result.reason : undefined;
      const details = snapshot.result ? { ...snapshot.result } : undefined;
      if (details) delete details.reason;
      state.inputRequest = {
        ...(reason ? { reason } : {}),
        ...(snapshot.message ? { message: snapshot.message } : {}),
        ...(details && Object.keys(details).length > 0 ? { details } : {}),
        round: state.inputRounds,
        deadline: iso(Math.min(now + this.options.interactionDeadlineMs, this.options.deadlineMs)),
      };
    } else if (snapshot.status !== 'input-required') {
      state.inputRequest = undefined;
    }
    if (snapshot.status === 'auth-required') {
      state.authRequired ??= {
        since: iso(now),
        deadline: iso(Math.min(now + this.options.authDeadlineMs, this.options.deadlineMs)),
      };
    } else {
      state.authRequired = undefined;
    }
  }

  /** After the first terminal result: duplicates are acknowledged, different results kept as conflicts. */
  private compareWithSettled(snapshot: TaskSnapshot, source: TransitionSource): Verdict {
    const state = this.state;
    if (!isTerminal(snapshot.status)) {
      if (snapshot.status !== state.status)
        this.note(source, `ignored ${snapshot.status}: the operation already ended ${state.status}`);
      return 'stale';
    }
    if (state.taskId && snapshot.taskId && snapshot.taskId !== state.taskId) {
      this.addConflict(
        source,
        snapshot,
        `final ${snapshot.status} for task ${snapshot.taskId}, not this operation's task ${state.taskId}`,
      );
      return 'conflict';
    }
    const same =
      snapshot.status === state.status &&
      (snapshot.result === undefined ||
        state.result === undefined ||
        canonicalJson(snapshot.result) === canonicalJson(state.result));
    if (same) return 'duplicate';
    // The orchestrator's own ending (timed out, canceled) can be overtaken by what the seller says happened: kept
    // visible as a conflict, never replacing the first result.
    this.addConflict(source, snapshot, `final ${snapshot.status} differs from the settled ${state.status}`);
    return 'conflict';
  }

  private addConflict(source: TransitionSource, snapshot: TaskSnapshot, note: string): void {
    this.state.conflicts = [
      ...(this.state.conflicts ?? []),
      {
        at: iso(this.now()),
        source,
        status: snapshot.status,
        ...(snapshot.taskId ? { taskId: snapshot.taskId } : {}),
        note,
      },
    ].slice(-MAX_CONFLICTS_KEPT);
    this.note(source, `conflict: ${note}`);
  }

  // ---- the orchestrator's own decisions ------------------------------------------------------------------------

  /** What to do when a call ended without an answer (its retries ran out, or it was refused). */
  decideAfterCallFailure(error: AdcpError, mutating: boolean, taskBoundDuringCall: boolean): CallFailureDecision {
    this.state.callInFlight = undefined;
    if (this.terminal) return { action: 'ignore', why: `the operation already ended ${this.state.status}` };
    if (this.held.length > 0) return { action: 'confirm-held' };
    // The call's answer was lost, but a webhook bound the task it made: follow that task.
    if (this.state.taskId && taskBoundDuringCall)
      return { action: 'follow-task', why: `the seller's task ${this.state.taskId} is known` };
    // Lost on the way, or refused after attempts that were: the seller may have acted on one of them.
    const lost = mutating && !this.state.taskId && (error.recovery === 'transient' || mayHaveReachedSeller(error));
    if (IDEMPOTENCY_REFUSAL_CODES.has(error.code) || lost) return { action: 'reconcile' };
    return { action: 'fail', reason: 'call_failed', message: this.callFailedMessage(error) };
  }

  /**
   * A failed create says where a buy it may have made shows up: an earlier attempt may have reached the seller, and
   * the ended operation can no longer adopt it, so the seller's reconciliation names it (never a new create: that
   * could buy twice).
   */
  private callFailedMessage(error: AdcpError): string {
    const failed = `The ${this.state.task} call to ${this.state.sellerId} failed: ${error.message}`;
    if (!makesResource(this.state.task)) return failed;
    return `${failed}. If an earlier attempt reached the seller, it may hold a buy from this operation: POST /v1/sellers/${this.state.sellerId}/reconcile lists the buys no operation knows and names this operation for one that echoes it; a new operation could buy twice.`;
  }

  /** What to do after reconciliation looked for the failed call's task. */
  decideAfterReconciliation(
    error: AdcpError,
    found: 'adopted' | 'not_found' | 'unsupported',
    keyGeneration: number,
  ): ReconcileDecision {
    if (found === 'adopted' || this.state.taskId || this.terminal) return { action: 'adopted' };
    const refused = IDEMPOTENCY_REFUSAL_CODES.has(error.code);
    // A refusal after attempts that may have reached the seller: the buy one of them made is looked for first.
    if (mayHaveReachedSeller(error) && makesResource(this.state.task)) return { action: 'find-resource' };
    // The seller refused the old key and has no task from it: nothing happened there, so a new key duplicates nothing.
    if (refused && found === 'not_found' && keyGeneration === 0) return { action: 'rekey' };
    // No task route, and the answer was lost on the way (not a refusal the seller answered, such as RATE_LIMITED):
    // the seller may have made the buy, so it is looked for among the seller's media buys.
    // Our own breaker refused the last attempts: the seller was not asked then, and an earlier attempt's buy is replayed
    // by the same key. Calling again after the cool-off is safe; giving up would fail an operation nobody refused.
    if (!refused && isOwnCircuitRefusal(error))
      return { action: 'call-again', atMs: this.now() + Math.max(1, error.retryAfterSeconds ?? 60) * 1000 };
    const lostInTransport = error.code === 'TIMEOUT' || error.code.startsWith('TRANSPORT_');
    if (!refused && lostInTransport && makesResource(this.state.task)) return { action: 'find-resource' };
    if (refused) {
      return {
        action: 'fail',
        reason: 'idempotency_unresolved',
        message: `The ${this.state.task} call to ${this.state.sellerId} was refused with ${error.code} and the seller's task could not be found; not retried with a new key to avoid a duplicate: ${error.message}`,
      };
    }
    return { action: 'fail', reason: 'call_failed', message: this.callFailedMessage(error) };
  }

  recordReconciliation(entry: {
    trigger: string;
    outcome: 'adopted' | 'not_found' | 'unsupported';
    taskId?: string;
    note: string;
  }): void {
    this.state.reconciliation = [...(this.state.reconciliation ?? []), { at: iso(this.now()), ...entry }].slice(-10);
  }

  fail(reason: OrchestratorFailureReason, message: string, error?: AdcpError): void {
    if (this.terminal) return;
    this.state.failure = { reason, message, ...(error ? { error } : {}) };
    if (error) this.state.errors = [error];
    this.state.message = message;
    this.setStatus('failed', 'orchestrator', reason);
    this.touch();
  }

  /**
   * Ends the operation for a cancel. A cancel that comes after the first terminal result changes no status: it
   * records what was done about the resource the operation had made.
   */
  cancel(request: CancelRequest, atSeller: { notified: boolean; note: string; resource?: OperationResource }): void {
    const state = this.state;
    state.cancellation = {
      requestedBy: request.requestedBy,
      reason: request.reason,
      at: iso(this.now()),
      sellerNotified: atSeller.notified,
      sellerNote: atSeller.note,
      ...(atSeller.resource ? { resource: atSeller.resource } : {}),
    };
    if (atSeller.resource) state.resource = { ...atSeller.resource };
    if (this.terminal) {
      this.note(
        'orchestrator',
        `cancel requested by ${request.requestedBy} after the operation ended ${state.status}: ${atSeller.note}`,
      );
      this.touch();
      return;
    }
    state.message = `Canceled by ${request.requestedBy}: ${request.reason}`;
    this.setStatus('canceled', 'orchestrator', `requested by ${request.requestedBy}`);
    this.touch();
  }

  private touch(): void {
    this.state.updatedAt = iso(this.now());
  }
}

/**
 * A call that ended with a refusal after earlier attempts that failed in ways that are retried (lost in transport, a
 * 5xx): one of them may have made the resource at the seller, which then refuses the same request again (a duplicate
 * order number, a conflict). Only a read of the seller's resources can say that nothing was made.
 */
export function mayHaveReachedSeller(error: AdcpError): boolean {
  return error.recovery !== 'transient' && (error.earlierAttempts ?? 0) > 0;
}

/** The status a terminal snapshot settles on, for tests and views. */
export function isTerminalStatus(status: TaskStatus | 'pending'): boolean {
  return terminalStatus(status);
}
