/**
 * The operation machine: everything one AdCP operation decides, deterministic and free of Temporal and I/O, so it
 * runs in the workflow and in millisecond unit tests alike (the shape of temporalio/samples-typescript
 * `message-passing/safe-message-handlers`).
 *
 * - It owns all state: the operation's record (./observations.ts applies what every answer, webhook and read means),
 *   the webhooks not applied yet, the answer, credentials, adoption, poll and cancel asked for, the call plans and key
 *   generation, the dedupe set, and the status the polls wait on.
 * - Handlers hand it facts (`receiveWebhook`, `provideInput`, `requestCancel`, ...); update validators ask it.
 * - The workflow asks it for the next step (`next()`), executes the step with an activity, a timer or a child
 *   workflow, and hands the result back (`resolve()`). While a step runs, `wakes()` says whether something arrived
 *   that the step must see, and `woken()` applies it and says whether the step should stop.
 *
 * The machine decides deadlines, input rounds and timeouts, what a failed call leads to, when a cancel reaches the
 * seller, which notification goes out and when the run continues as new. A new kind of step (a read of the resource
 * after a lost answer, say) is a new member of `Step`, a case in `resolve()` and an executor in the workflow.
 */
import { type AdcpError, sentCreateFrom, taskSpec, withShaping } from '../../protocol';
import type {
  AwaitTaskMoveOnCadenceInput,
  AwaitTaskMoveOutcome,
  CallPlan,
  CallTimeouts,
  CancelAtSellerInput,
  CancelAtSellerOutcome,
  FindLostTaskInput,
  FindLostTaskOutcome,
  PlanCallInput,
  ReadResourceInput,
  ReadResourceOutcome,
  ReadTaskInput,
  ReadTaskOutcome,
  SendCallInput,
  SendCallOutcome,
} from '../../contract/activities';
import type {
  AuditEntry,
  CancelRequest,
  CarriedState,
  CredentialsRefresh,
  OperationInput,
  OperationReconcileAnswer,
  OperationReconcileRequest,
  OperationResource,
  OperationState,
  OperationStatus,
  ProvidedInput,
  TransitionSource,
  WebhookDelivery,
} from '../../contract/operation';
import type { BuyerNotification, NotificationEvent } from '../../contract/notification';
import type { RegisterWithWatcherOutcome } from '../../contract/task-watcher';
import {
  MAX_RECONCILE_AMONG,
  actorProblem,
  cancelRequestProblem,
  credentialsRefreshProblem,
  providedInputProblem,
} from '../../contract/validators';
import { type WaitPlan, WORKING_WINDOW_MS, planWait } from './cadence';
import {
  Observations,
  isQuietRepeat,
  isTerminalStatus,
  iso,
  makesResource,
  mayHaveReachedSeller,
} from './observations';
import { buyerNotification } from './publication';
import { TaskWatch, type WatchFacts, type WatchStep } from './watching';

const MAX_SEEN_EVENT_KEYS = 1_000;
/** Audit entries kept in state (history keeps every update's arguments, so none is lost beyond this). */
const MAX_AUDIT_ENTRIES = 50;
const DEFAULT_INTERACTION_DEADLINE_MS = 60 * 60_000;
const DEFAULT_MAX_INPUT_ROUNDS = 3;
const DEFAULT_AUTH_DEADLINE_MS = 60 * 60_000;
/** Until a call records the worker's timeouts. */
const DEFAULT_TIMEOUTS: CallTimeouts = { callMs: 60_000, readMs: 60_000 };
/**
 * A read planned inside its one call records no plan, so its timeouts are not known before it; the local activity
 * gets room for the longest call a worker may be configured with (the activity bounds the call itself).
 */
const UNPLANNED_READ_TIMEOUTS: CallTimeouts = { callMs: 5 * 60_000, readMs: 2 * 60_000 };
const TEMPORAL_CANCEL: CancelRequest = {
  requestedBy: 'temporal',
  reason: 'workflow cancellation requested through Temporal',
};

/** Why a single read of the task is made. */
export type PollPurpose =
  | 'unknown-status'
  | 'requested'
  | 'adopted'
  | 'credentials'
  | 'confirm-held'
  | 'confirm-provisional'
  | 'last-before-deadline';

/**
 * Why the resource (the seller's media buys) is read: to confirm the buy a completed task record names, to find the
 * buy a lost call may have made (no task route found it), because the buyer asked (`reconcileOperation`), or because
 * a cancel arrived while the buy was looked for (`before-cancel`: what exists is read before the cancel settles).
 */
export type ResourcePurpose = 'confirm-provisional' | 'find-lost' | 'requested' | 'before-cancel';

/** What a wait waits for; each has its own deadline and its own wake rule (`wakes()`). */
export type WaitFor = 'seller' | 'input' | 'credentials';

/**
 * What the workflow does next. `shielded` steps run even though the workflow is being canceled (the rest of what a
 * call in flight started, telling the seller, notifying the buyer).
 */
export type Step = { shielded?: true } &
  /** Plans a mutation's call. A plan the worker refuses to make (configuration, tenant access) fails the workflow. */
  (
    | { kind: 'planCall'; input: PlanCallInput }
    /** The call to the seller; a read is a local activity (`local`), a mutation an ordinary one. */
    | { kind: 'call'; step: string; send: SendCallInput; local: boolean; timeouts: CallTimeouts }
    | { kind: 'poll'; purpose: PollPurpose; input: ReadTaskInput }
    /**
     * The parked wait: the polls of one wait as one activity keeping the cadence planned by ./cadence.ts, within
     * `budgetMs` (to the deadline, or to the end of the working window), interrupted by what `wakes()` says.
     */
    | {
        kind: 'pollOnCadence';
        plan: WaitPlan;
        budgetMs: number;
        until: 'deadline' | 'working-window' | 'quick-polls';
        input: AwaitTaskMoveOnCadenceInput;
      }
    /** A wait with nothing to poll: until `untilMs` (ms since epoch), or until `wakes()`. */
    | { kind: 'wait'; for: WaitFor; untilMs: number }
    | { kind: 'reconcile'; input: FindLostTaskInput & { timeouts: CallTimeouts } }
    /** A read of the resource itself (get_media_buys): by id, or the listing matched by what the create sent. */
    | { kind: 'readResource'; purpose: ResourcePurpose; input: ReadResourceInput }
    | { kind: 'cancelAtSeller'; input: CancelAtSellerInput }
    | { kind: 'notify'; notification: BuyerNotification; summary: string }
    /** Continue as new with `carried()` (after the workflow's handlers have finished). */
    | { kind: 'continueAsNew' }
    /** Return the state, fail the workflow with it (failed, rejected) or end it canceled (canceled through Temporal). */
    | { kind: 'end'; how: 'return' | 'fail' | 'cancel'; message: string }
    /** Join or leave the seller's task watcher (local activities). */
    | WatchStep
  );

/** What came of a step, handed back with `resolve()`. */
export type StepResult =
  | { kind: 'planned'; plan: CallPlan }
  | { kind: 'answered'; answer: SendCallOutcome }
  | { kind: 'read'; outcome: ReadTaskOutcome }
  | { kind: 'moved'; outcome: AwaitTaskMoveOutcome }
  /** The polls' budget ran out (the deadline or the working window) after `polls` polls. */
  | { kind: 'budgetRanOut'; polls: number }
  /** A call or the polls were stopped because `woken()` said so. */
  | { kind: 'stopped' }
  | { kind: 'woke' }
  | { kind: 'timedOut' }
  | { kind: 'found'; outcome: FindLostTaskOutcome }
  | { kind: 'resource'; outcome: ReadResourceOutcome }
  | { kind: 'toldSeller'; outcome: CancelAtSellerOutcome }
  | { kind: 'notified' }
  | { kind: 'watchAnswered'; outcome: RegisterWithWatcherOutcome }
  | { kind: 'watchLeft' }
  /** The step's activity failed (after its retries). */
  | { kind: 'failed'; error: AdcpError }
  /** The workflow was canceled through Temporal while the step ran. */
  | { kind: 'interrupted' };

export interface MachineContext {
  /** The workflow ID, which is the operation ID. */
  operationId: string;
  now: () => number;
  /** History is long enough that Temporal suggests continuing as new. */
  historyIsLong: () => boolean;
  /** Told of every status change (metrics). */
  onStatusChange?: (from: OperationStatus, to: OperationStatus, source: TransitionSource) => void;
  /** Told of every anomaly (logs). */
  onAnomaly?: (source: TransitionSource, note: string) => void;
}

/** What must follow the step just done before anything else is decided: the rest of one decision. */
type FollowUp =
  | { kind: 'call'; step: string; params: Record<string, unknown> }
  | { kind: 'reconcile'; keyStep: string; step: string; params: Record<string, unknown>; error: AdcpError }
  | { kind: 'poll'; purpose: PollPurpose; taskId: string }
  /** The polls stopped before the deadline: wait until `untilMs` (still interruptible), then decide again. */
  | { kind: 'pause'; untilMs: number }
  /** A read did not confirm a provisional completion: wait at the submitted cadence, then read again. */
  | { kind: 'provisionalWait' }
  /** The call again, with the same key, once the worker's circuit breaker for the seller lets calls through. */
  | { kind: 'callAgain'; untilMs: number; step: string; params: Record<string, unknown> };

/** Rounds of "call again after the breaker's cool-off" before the operation gives up (about an hour at 60 s). */
const MAX_CALL_AGAIN_ROUNDS = 20;
/**
 * Calls again with the same key after a transport failure whose buy the seller's listing, read to its end, does not
 * hold (5 s, 10 s, 20 s apart): a busy worker's breaker can spend a call's attempts before the seller is asked.
 */
const MAX_CALLS_AFTER_NOTHING_BOUGHT = 3;
const CALL_AFTER_NOTHING_BOUGHT_MS = 5_000;

interface CallInFlight {
  step: string;
  keyStep: string;
  params: Record<string, unknown>;
  taskKnownBefore: boolean;
  stop?: 'settled' | 'adoption';
}

function accountOf(params: Record<string, unknown>): { account?: unknown } {
  return params.account !== undefined ? { account: params.account } : {};
}

export class OperationMachine {
  readonly state: OperationState;
  private readonly record: Observations;
  private readonly input: OperationInput;
  private readonly context: MachineContext;
  private readonly mutating: boolean;
  private readonly deadlineMs: number;
  private readonly notifies: boolean;

  // Facts recorded by handlers, acted on by steps.
  private readonly seenEventKeys: Set<string>;
  private readonly inbox: WebhookDelivery[];
  private pendingInput: ProvidedInput | undefined;
  private credentialsRefreshed: boolean;
  private pendingAdoption: { taskId: string; requestedBy: string } | undefined;
  private pollRequested: boolean;
  private cancelUpdate: CancelRequest | undefined;
  /** A cancel through Temporal arrived (ends the workflow Canceled when the operation ends canceled). */
  private temporalCancel = false;
  /** ...and arrived while the operation was still running, so it cancels the operation. */
  private cancelsByTemporal = false;

  // What the steps decided so far.
  private keyGeneration: number;
  private readonly plans: Map<string, CallPlan>;
  private readonly notified: Set<string>;
  private readonly sellerWait: {
    status: OperationStatus;
    polls: number;
    workingSinceMs: number;
    /** The quick polls of a `submitted` wait were made (./watching.ts quickWindow): it may join the watcher. */
    quickPollsOver?: boolean;
  };
  private current: Step | undefined;
  private followUp: FollowUp | undefined;
  private calling: CallInFlight | undefined;
  private reconciling: Extract<FollowUp, { kind: 'reconcile' }> | undefined;
  /** The status the running polls wait on: a webhook repeating it is applied without waking them. */
  private pollsWaitingOn: OperationStatus | undefined;
  /** The pending answer is being sent (its call, and what a failure of that call leads to). */
  private sendingAnswer = false;
  private cancelSettled = false;
  /** A lost create's buy is looked for among the seller's media buys (no task route found it). */
  private resourceSearch:
    | { keyStep: string; error: AdcpError; nextReadAtMs: number; step?: string; params?: Record<string, unknown> }
    | undefined;
  private callsAfterNothingBought = 0;
  /** What the read a cancel made while the buy was looked for could tell, when it could not find the buy. */
  private cancelLookup: { note: string; resource: OperationResource } | undefined;
  private callAgainRounds = 0;
  /** Reconcile requests (`reconcileOperation`) waiting for a read of the resource, and the answers given. */
  private readonly reconcileRequests: { ticket: number; request: OperationReconcileRequest }[] = [];
  private readonly reconcileAnswers = new Map<number, OperationReconcileAnswer>();
  private nextTicket = 0;
  private continuing = false;
  /** The read that confirms held final webhooks beside the call in flight: the task it reads, and what came of it. */
  private beside: { taskId: string; result?: StepResult } | undefined;
  private readonly besideTried = new Set<string>();
  /** The operation's side of its seller's task watcher. */
  private readonly watch: TaskWatch;

  constructor(input: OperationInput, context: MachineContext) {
    this.input = input;
    this.context = context;
    const spec = taskSpec(input.task);
    this.mutating = spec.mutating;
    const startedAtMs = context.now();
    const carried = input.carried;
    this.state = carried?.state ?? {
      operationId: context.operationId,
      sellerId: input.sellerId,
      task: input.task,
      // Only operations started with a tenant carry these fields.
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
      ...(input.principal !== undefined
        ? { audit: [{ at: iso(startedAtMs), action: 'started' as const, principal: input.principal }] }
        : {}),
      status: 'pending',
      inputRounds: 0,
      webhookRegistered: false,
      pollCount: 0,
      webhooksApplied: 0,
      transitions: [],
      transitionCount: 0,
      anomalies: [],
      startedAt: iso(startedAtMs),
      updatedAt: iso(startedAtMs),
      deadline: iso(startedAtMs + (input.budgetMs ?? spec.defaultBudgetMs)),
    };
    this.deadlineMs = Date.parse(this.state.deadline);
    this.notifies = input.tenant !== undefined && input.notify === true;
    this.record = new Observations(
      this.state,
      {
        task: input.task,
        params: input.params,
        deadlineMs: this.deadlineMs,
        interactionDeadlineMs: input.interaction?.deadlineMs ?? DEFAULT_INTERACTION_DEADLINE_MS,
        authDeadlineMs: input.authDeadlineMs ?? DEFAULT_AUTH_DEADLINE_MS,
        now: context.now,
        ...(context.onStatusChange ? { onStatusChange: context.onStatusChange } : {}),
        ...(context.onAnomaly ? { onAnomaly: context.onAnomaly } : {}),
      },
      [...(carried?.held ?? [])],
    );
    this.seenEventKeys = new Set(carried?.seenEventKeys ?? []);
    this.inbox = [...(carried?.inbox ?? [])];
    this.pendingInput = carried?.pendingInput;
    this.credentialsRefreshed = carried?.pendingCredentialsRefresh ?? false;
    this.pendingAdoption = carried?.pendingAdoption;
    this.pollRequested = carried?.pollRequested ?? false;
    this.keyGeneration = carried?.keyGeneration ?? 0;
    this.plans = new Map(Object.entries(carried?.plans ?? {}));
    this.notified = new Set(carried?.notified ?? []);
    if (carried?.resourceSearch) this.resourceSearch = { ...carried.resourceSearch, nextReadAtMs: startedAtMs };
    this.sellerWait = carried?.sellerWait
      ? {
          status: carried.sellerWait.status,
          polls: carried.sellerWait.polls,
          workingSinceMs: Date.parse(carried.sellerWait.workingSince),
          ...(carried.sellerWait.quickPollsOver ? { quickPollsOver: true } : {}),
        }
      : { status: this.state.status, polls: 0, workingSinceMs: startedAtMs };
    this.watch = new TaskWatch(carried?.watch);
    if (this.state.status === 'pending' && !this.state.taskId)
      this.followUp = { kind: 'call', step: 'call', params: input.params };
  }

  get terminal(): boolean {
    return this.record.terminal;
  }

  /** The cancel that ends this operation, if one was asked for while it ran. */
  get cancelRequest(): CancelRequest | undefined {
    return this.cancelUpdate ?? (this.cancelsByTemporal ? TEMPORAL_CANCEL : undefined);
  }

  private now(): number {
    return this.context.now();
  }

  // ---- facts, from the workflow's handlers -----------------------------------------------------------------------

  /**
   * A verified webhook. Deduplicated by its event key; a repeat of the status the polls wait on that can change
   * nothing they depend on is applied at once ('applied': the workflow publishes), anything else waits in the inbox
   * for the step that runs to see it ('queued'). Waking the polls for a quiet repeat would cost a condition round, an
   * activity cancel and a new schedule per webhook: most of the worker's CPU per webhook. One verified by another
   * seller than the operation's is refused before its key is remembered (observations.ts, refusesSender).
   */
  receiveWebhook(delivery: WebhookDelivery): 'applied' | 'queued' | 'duplicate' | 'refused' {
    if (this.record.refusesSender(delivery)) return 'refused';
    if (this.seenEventKeys.has(delivery.eventKey)) return 'duplicate';
    this.seenEventKeys.add(delivery.eventKey);
    if (this.seenEventKeys.size > MAX_SEEN_EVENT_KEYS) {
      const oldest = this.seenEventKeys.values().next().value;
      if (oldest !== undefined) this.seenEventKeys.delete(oldest);
    }
    if (this.appliesWithoutWaking(delivery)) {
      this.record.receiveWebhook(delivery);
      return 'applied';
    }
    this.inbox.push(delivery);
    return 'queued';
  }

  private appliesWithoutWaking(delivery: WebhookDelivery): boolean {
    return (
      this.pollsWaitingOn !== undefined &&
      this.inbox.length === 0 &&
      this.pendingAdoption === undefined &&
      !this.pollRequested &&
      this.cancelRequest === undefined &&
      // History is long enough: wake the polls, which then end so the run continues as new.
      !this.context.historyIsLong() &&
      isQuietRepeat(this.state, this.terminal, this.pollsWaitingOn, delivery)
    );
  }

  /** Reconciliation found the seller task the call made; ignored once the task is known. */
  requestAdoption(adoption: { taskId: string; requestedBy: string }): void {
    if (this.state.taskId || this.terminal || this.pendingAdoption) return;
    if (typeof adoption?.taskId !== 'string' || adoption.taskId === '') return;
    this.pendingAdoption = adoption;
  }

  requestPoll(): void {
    this.pollRequested = true;
  }

  /** The seller's task watcher saw the task move (or handed it back). */
  receiveTaskNotice(notice: unknown): void {
    this.watch.receive(notice);
  }

  validateInput(provided: unknown): void {
    if (this.state.status !== 'input-required')
      throw new Error(`Operation is ${this.state.status}, not input-required: there is no question to answer.`);
    if (this.pendingInput) throw new Error('An answer for this round is already being sent to the seller.');
    // The same rule the API and the typed client apply, so a caller that skips them is refused the same way.
    const problem = providedInputProblem(provided);
    if (problem) throw new Error(problem);
  }

  /** An answer to the seller's question; `requestId` (the update ID) makes a retried update answer once. */
  provideInput(provided: ProvidedInput, requestId?: string): { accepted: true; round: number } {
    const round = this.state.inputRequest?.round ?? this.state.inputRounds;
    this.pendingInput = { ...provided, ...(requestId !== undefined ? { requestId } : {}), round };
    if (provided.principal !== undefined)
      this.audit({
        action: 'input_provided',
        principal: provided.principal,
        ...(provided.providedBy !== undefined ? { note: provided.providedBy } : {}),
      });
    return { accepted: true, round: this.state.inputRounds };
  }

  validateReconcile(request: unknown): void {
    if (this.terminal)
      throw new Error(
        `Operation already ended ${this.state.status}; POST /v1/sellers/${this.state.sellerId}/reconcile lists the seller's buys and the operations that know them.`,
      );
    if (!makesResource(this.state.task))
      throw new Error(`Reconcile reads the media buy a create made; this operation is ${this.state.task}.`);
    const asked = request as Partial<OperationReconcileRequest> | undefined;
    if (!asked || typeof asked.requestedBy !== 'string' || actorProblem(asked.requestedBy) !== undefined)
      throw new Error('requestedBy must say who asked for the reconciliation.');
    const among: unknown = asked.among;
    if (
      among !== undefined &&
      (!Array.isArray(among) ||
        among.length > MAX_RECONCILE_AMONG ||
        among.some((id) => typeof id !== 'string' || id === '' || id.length > 200))
    )
      throw new Error(`among must list at most ${MAX_RECONCILE_AMONG} media_buy_ids.`);
  }

  /** A reconcile request: answered (`reconcileAnswer`) once a read of the resource, or the operation's end, tells. */
  requestReconcile(request: OperationReconcileRequest): number {
    const ticket = this.nextTicket++;
    if (this.continuing) {
      this.reconcileAnswers.set(ticket, {
        found: false,
        status: this.state.status,
        note: 'the operation is continuing as new: ask again in a moment',
      });
      return ticket;
    }
    this.reconcileRequests.push({ ticket, request });
    this.record.record(`reconcile requested by ${request.requestedBy}`);
    return ticket;
  }

  reconcileAnswer(ticket: number): OperationReconcileAnswer | undefined {
    const answer = this.reconcileAnswers.get(ticket);
    if (answer) this.reconcileAnswers.delete(ticket);
    return answer;
  }

  hasReconcileAnswer(ticket: number): boolean {
    return this.reconcileAnswers.has(ticket);
  }

  /**
   * A read to run beside the call in flight: a final webhook arrived before the call's answer and names a task (the
   * call's answer may be lost). The read confirms the webhook, so the operation ends on it without waiting for the
   * call's attempts; one such read at a time, once per task.
   */
  besideCall(): Extract<Step, { kind: 'poll' }> | undefined {
    if (this.current?.kind !== 'call' || !this.mutating || this.beside || this.state.taskId || this.terminal)
      return undefined;
    const held = this.record.held.find(
      (delivery) =>
        delivery.snapshot.taskId !== undefined &&
        isTerminalStatus(delivery.snapshot.status) &&
        !this.besideTried.has(delivery.snapshot.taskId),
    );
    const taskId = held?.snapshot.taskId;
    if (!held || !taskId) return undefined;
    this.besideTried.add(taskId);
    this.beside = { taskId };
    const mediaBuyId = held.snapshot.result?.media_buy_id;
    return {
      kind: 'poll',
      purpose: 'confirm-held',
      input: { ...this.readInput(taskId), ...(typeof mediaBuyId === 'string' ? { mediaBuyId } : {}) },
    };
  }

  /** What came of the read beside the call (applied by `woken()`). */
  resolveBesideCall(result: StepResult): void {
    if (this.beside && this.beside.result === undefined) this.beside.result = result;
  }

  private applyBeside(): void {
    const beside = this.beside;
    if (!beside?.result) return;
    this.beside = undefined;
    const result = beside.result;
    const state = this.state;
    if (result.kind !== 'read') {
      if (result.kind === 'failed')
        this.record.note(
          'poll',
          `the read of task ${beside.taskId} beside the call failed (${result.error.code}); the webhooks stay held`,
        );
      return;
    }
    const outcome = result.outcome;
    state.pollCount += 1;
    if (state.readMethod !== outcome.readMethod) state.readMethod = outcome.readMethod;
    this.learnFromRead(outcome);
    const sawTask =
      outcome.snapshot !== undefined &&
      outcome.resource === undefined &&
      (outcome.snapshot.taskId === undefined || outcome.snapshot.taskId === beside.taskId);
    if ((!sawTask && !outcome.resource) || state.taskId || this.terminal) {
      this.record.note('poll', `no read beside the call could confirm task ${beside.taskId}; the webhooks stay held`);
      return;
    }
    this.record.adopt(beside.taskId, 'named by a final webhook and confirmed by a read beside the call');
    if (outcome.resource) this.record.applyResource(outcome.resource, 'poll');
  }

  validateCredentialsRefresh(request: unknown): void {
    if (this.state.status !== 'auth-required') throw new Error(`Operation is ${this.state.status}, not auth-required.`);
    const problem = credentialsRefreshProblem(request);
    if (problem) throw new Error(problem);
  }

  refreshCredentials(request: CredentialsRefresh): { accepted: true } {
    this.credentialsRefreshed = true;
    if (request?.principal !== undefined)
      this.audit({ action: 'credentials_refreshed', principal: request.principal, note: request.refreshedBy });
    return { accepted: true };
  }

  validateCancel(request: unknown): void {
    if (this.terminal) throw new Error(`Operation already ended ${this.state.status}; nothing to cancel.`);
    const asked = request as Partial<CancelRequest> | undefined;
    if (!asked || actorProblem(asked.requestedBy) !== undefined || asked.requestedBy!.trim() === '')
      throw new Error('requestedBy must say who asked for the cancellation.');
    if (typeof asked.reason !== 'string' || asked.reason.trim() === '')
      throw new Error('reason must say why the operation is canceled.');
    const problem = cancelRequestProblem(request);
    if (problem) throw new Error(problem);
  }

  /** A cancel accepted before any final result: the buyer decided first, so the operation ends canceled. */
  requestCancel(request: CancelRequest): { accepted: true; status: OperationStatus } {
    if (!this.cancelUpdate) {
      this.cancelUpdate = request;
      this.record.beginCancel(request);
      if (request.principal !== undefined)
        this.audit({ action: 'cancel_requested', principal: request.principal, note: request.requestedBy });
    }
    return { accepted: true, status: this.state.status };
  }

  /** Temporal was asked to cancel the workflow (the typed client asks after its cancel update is accepted). */
  cancelledThroughTemporal(): void {
    if (this.temporalCancel) return;
    this.temporalCancel = true;
    if (this.terminal || this.cancelUpdate) return;
    this.cancelsByTemporal = true;
    this.record.beginCancel(TEMPORAL_CANCEL);
  }

  private audit(entry: Omit<AuditEntry, 'at'>): void {
    const trail = (this.state.audit ??= []);
    trail.push({ at: iso(this.now()), ...entry });
    if (trail.length > MAX_AUDIT_ENTRIES) trail.shift();
  }

  // ---- while a step runs ---------------------------------------------------------------------------------------

  /** Whether something arrived that the running step must see (the one predicate every wait's condition uses). */
  wakes(): boolean {
    const step = this.current;
    if (!step) return false;
    const arrived = this.inbox.length > 0;
    if (step.kind === 'call')
      return arrived || (this.pendingAdoption !== undefined && !this.state.taskId) || this.beside?.result !== undefined;
    const asked =
      this.cancelRequest !== undefined || this.pollRequested || this.reconcileRequests.length > 0 || this.watch.hasNews;
    if (step.kind === 'wait' && step.for === 'input') return arrived || asked || this.pendingInput !== undefined;
    if (step.kind === 'wait' && step.for === 'credentials') return arrived || asked || this.credentialsRefreshed;
    if (step.kind === 'wait' || step.kind === 'pollOnCadence')
      return arrived || asked || this.pendingAdoption !== undefined;
    return false;
  }

  /**
   * The running call or polls woke: applies what arrived and says whether the step should stop. A call stops when a
   * final result bound to this operation arrived first (its answer adds nothing) or an adoption names the task;
   * never for a cancel (what the seller made must be known first). The polls go on through progress reports and
   * repeats of the status they wait on; anything else (a new status, a final or provisional one, an adoption, a
   * poll request, a cancel, a history long enough to continue as new) stops them so the machine decides again.
   */
  woken(): boolean {
    const step = this.current;
    if (step?.kind === 'call' && this.calling) {
      this.drainInbox();
      this.applyBeside();
      if (this.terminal && !this.state.provisional) this.calling.stop = 'settled';
      else if (this.pendingAdoption && !this.state.taskId) this.calling.stop = 'adoption';
      return this.calling.stop !== undefined;
    }
    if (step?.kind === 'pollOnCadence') {
      const onlyWebhooks =
        this.inbox.length > 0 &&
        !this.pendingAdoption &&
        !this.pollRequested &&
        !this.watch.hasNews &&
        this.cancelRequest === undefined;
      if (onlyWebhooks) {
        this.drainInbox();
        const unchanged = !this.terminal && !this.state.provisional && this.state.status === this.pollsWaitingOn;
        if (unchanged && !this.context.historyIsLong()) return false;
      }
      this.pollsWaitingOn = undefined;
      return true;
    }
    return false;
  }

  // ---- what next -----------------------------------------------------------------------------------------------

  /** The next step. Call it again only after the step's result was handed back (`end` needs no result). */
  next(): Step {
    if (this.current) throw new Error(`invariant: the ${this.current.kind} step has not been resolved`);
    const step = this.decide();
    if (step.kind !== 'end') this.current = step;
    return step;
  }

  private decide(): Step {
    const followed = this.followUpStep();
    if (followed) return followed;
    if (this.sendingAnswer) {
      // The answer's call and what it led to are done: a later question needs a new answer.
      this.sendingAnswer = false;
      this.pendingInput = undefined;
    }
    if (!this.terminal && this.cancelRequest === undefined) {
      const step = this.whileRunning();
      if (step) return step;
    }
    if (this.cancelRequest && !this.cancelSettled) {
      const step = this.cancelStep(this.cancelRequest);
      if (step) return step;
    }
    this.answerReconcileRequests(undefined);
    const leave = this.watchStep(true);
    if (leave) return leave;
    const event = this.endEvent();
    if (event) {
      const step = this.notifyStep(event, '');
      if (step) return step;
    }
    return this.endStep();
  }

  /** The rest of the step just done. A cancel drops what would start something new; reads and lookups go on. */
  private followUpStep(): Step | undefined {
    const followUp = this.followUp;
    if (!followUp) return undefined;
    switch (followUp.kind) {
      case 'call':
        return this.callStep(followUp.step, followUp.params);
      case 'reconcile':
        this.followUp = undefined;
        this.reconciling = followUp;
        return {
          kind: 'reconcile',
          ...this.shield(),
          input: {
            operationId: this.state.operationId,
            sellerId: this.state.sellerId,
            task: this.state.task,
            step: followUp.keyStep,
            ...accountOf(this.input.params),
            ...this.tenant(),
            timeouts: this.timeouts(),
          },
        };
      case 'poll':
        this.followUp = undefined;
        if (this.terminal) return undefined;
        return this.pollStep(followUp.purpose, followUp.taskId);
      case 'pause':
        this.followUp = undefined;
        if (this.cancelRequest || this.terminal) return undefined;
        return { kind: 'wait', for: 'seller', untilMs: Math.min(followUp.untilMs, this.deadlineMs) };
      case 'callAgain': {
        // A cancel, an end, or a task learned meanwhile (an adoption, a webhook) makes the call unnecessary.
        if (this.cancelRequest || this.terminal || this.state.taskId || this.pendingAdoption) {
          this.followUp = undefined;
          return undefined;
        }
        // Without a task there is nothing to poll; a reconcile request reads the buys while the call waits.
        this.pollRequested = false;
        const requested = this.reconcileRequests.length > 0 ? this.requestedResourceStep() : undefined;
        if (requested) return requested;
        if (this.now() < followUp.untilMs) return { kind: 'wait', for: 'seller', untilMs: followUp.untilMs };
        return this.callStep(followUp.step, followUp.params);
      }
      case 'provisionalWait':
        this.followUp = undefined;
        if (this.cancelRequest || this.terminal || !this.state.provisional) return undefined;
        return this.pollsOnCadence(this.submittedPlan());
    }
  }

  /** One round of the operation's loop: what it waits for, or undefined when it has ended (terminal). */
  private whileRunning(): Step | undefined {
    const state = this.state;
    for (;;) {
      this.drainInbox();
      this.applyWatchNews();
      if (this.terminal) return undefined;
      this.dropStaleAnswer();
      if (this.record.held.length > 0 && !state.taskId) {
        const taskId = this.record.heldTaskId();
        if (taskId) return this.confirmHeld(taskId);
        this.record.acceptHeldUnconfirmed('the webhooks name no task to read');
        continue;
      }
      if (state.provisional) {
        // A completion that needs a read to be believed (a create without its media_buy_id): the buy its record
        // names is read from the seller, else the task is read again.
        const named = state.resource?.mediaBuyId;
        if (named) return this.resourceStep('confirm-provisional', { mediaBuyId: named });
        if (state.taskId) return this.pollStep('confirm-provisional', state.taskId);
        this.record.settleProvisional('the seller named no task to read');
        if (state.provisional && !this.terminal) {
          const wait = this.pollsOnCadence(this.submittedPlan());
          if (wait) return wait;
        }
        continue;
      }
      if (this.pendingAdoption && !state.taskId) {
        const adoption = this.pendingAdoption;
        this.pendingAdoption = undefined;
        this.record.adopt(adoption.taskId, `signalled by ${adoption.requestedBy}`);
        return this.pollStep('adopted', adoption.taskId);
      }
      if (this.pollRequested) {
        this.pollRequested = false;
        if (state.taskId) return this.pollStep('requested', state.taskId);
        continue;
      }
      if (this.reconcileRequests.length > 0) {
        const step = this.requestedResourceStep();
        if (step) return step;
        continue;
      }
      if (this.resourceSearch && !state.taskId) {
        const search = this.resourceSearch;
        if (this.now() >= this.deadlineMs) {
          this.failOutcomeUnknown();
          return undefined;
        }
        if (this.now() >= search.nextReadAtMs) return this.resourceStep('find-lost', this.lostCreate(search.keyStep));
        return { kind: 'wait', for: 'seller', untilMs: Math.min(search.nextReadAtMs, this.deadlineMs) };
      }
      this.trackSellerWait();
      if (this.now() >= this.deadlineMs) {
        // One last poll before giving up.
        if (state.taskId) return this.pollStep('last-before-deadline', state.taskId);
        this.timeOut();
        return undefined;
      }
      if (this.context.historyIsLong()) {
        // The run waits for its handlers before it continues: a reconcile request arriving now is answered at once.
        this.continuing = true;
        return { kind: 'continueAsNew' };
      }
      if (state.status === 'input-required' && state.inputRequest) return this.answerOrWait();
      if (state.status === 'auth-required' && state.authRequired) {
        if (!this.credentialsRefreshed)
          return { kind: 'wait', for: 'credentials', untilMs: Date.parse(state.authRequired.deadline) };
        this.credentialsRefreshed = false;
        // With a task the seller tracks, ask it where it stands; without one, repeat the call with the same key.
        if (state.taskId) return this.pollStep('credentials', state.taskId);
        this.followUp = { kind: 'call', step: 'call', params: this.input.params };
        const step = this.followUpStep();
        if (step) return step;
        continue;
      }
      const step = this.watchStep(false) ?? this.waitForSeller();
      if (step) return step;
    }
  }

  private answerOrWait(): Step | undefined {
    const request = this.state.inputRequest!;
    const maxRounds = this.input.interaction?.maxRounds ?? DEFAULT_MAX_INPUT_ROUNDS;
    if (request.round > maxRounds) {
      this.record.fail(
        'input_rounds_exhausted',
        `The seller asked for input ${request.round} times; the limit is ${maxRounds}.`,
      );
      return undefined;
    }
    const notify = this.notifyStep('input_required', `:${request.round}`);
    if (notify) return notify;
    const answer = this.pendingInput;
    if (!answer)
      return (
        this.watchStep(false) ?? {
          kind: 'wait',
          for: 'input',
          untilMs: Date.parse(request.deadline),
        }
      );
    this.record.record(
      `input provided by ${answer.principal ?? answer.providedBy ?? 'caller'} (round ${request.round})`,
    );
    // The question is answered: if the seller asks again, that is a new round.
    this.state.inputRequest = undefined;
    this.sendingAnswer = true;
    // Resume on the same context with the original arguments plus the answer (§2.4: re-sending is the safe choice).
    this.followUp = { kind: 'call', step: `input-${request.round}`, params: { ...this.input.params, ...answer.input } };
    return this.followUpStep();
  }

  /** An answer accepted for a question the seller no longer asks is never sent to a later one. */
  private dropStaleAnswer(): void {
    const answer = this.pendingInput;
    if (!answer || this.sendingAnswer) return;
    const asking = this.state.status === 'input-required' ? this.state.inputRequest : undefined;
    if (asking && (answer.round === undefined || answer.round === asking.round)) return;
    this.record.note(
      'orchestrator',
      `the answer to round ${answer.round ?? '?'} was not sent: the seller moved on (${this.state.status})`,
    );
    this.pendingInput = undefined;
  }

  /**
   * Waiting on the seller: a poll at once for an unknown status, else the parked wait. The one place the parked wait
   * is planned (./cadence.ts), so a change of how parked operations wait (a watcher that signals them when their task
   * moves, leaving them a long safety poll) is a change of this plan.
   */
  private waitForSeller(): Step | undefined {
    const state = this.state;
    const wait = this.sellerWait;
    if (state.status === 'unknown' && wait.polls === 0 && state.taskId) {
      wait.polls += 1;
      return this.pollStep('unknown-status', state.taskId);
    }
    wait.polls += 1;
    const plan = planWait({
      status: state.status,
      workingForMs: state.status === 'working' ? this.now() - wait.workingSinceMs : 0,
      webhookRegistered: state.webhookRegistered,
    });
    const facts = this.watchFacts();
    // Before it may join the watcher, a submitted wait makes only its quick polls (most tasks finish within them).
    const quick = this.watch.quickWait(plan, facts);
    if (quick) return this.pollsOnCadence(plan, { budgetMs: quick.budgetMs, until: 'quick-polls' });
    return this.pollsOnCadence(this.watch.parkedWait(plan, facts));
  }

  /** Whether the quick polls of the wait on the current status are over (./watching.ts WatchFacts). */
  private quickPollsOver(): boolean {
    const status = this.state.status;
    const wait = this.sellerWait;
    if (status === 'submitted') return wait.status === 'submitted' && wait.quickPollsOver === true;
    if (status === 'working') return wait.status === 'working' && this.now() - wait.workingSinceMs >= WORKING_WINDOW_MS;
    return true;
  }

  /**
   * Joining or leaving the watcher, as ./watching.ts decides. Shielded: a local activity canceled halfway would be
   * resolved differently on replay, and either one takes a moment.
   */
  private watchStep(ended: boolean): Step | undefined {
    const step = this.watch.step(this.watchFacts(), ended);
    return step ? { ...step, shielded: true } : undefined;
  }

  /** What the watching rule (./watching.ts) reads of the operation. */
  private watchFacts(): WatchFacts {
    const state = this.state;
    return {
      operationId: state.operationId,
      sellerId: state.sellerId,
      task: state.task,
      status: state.status,
      ...(state.taskId ? { taskId: state.taskId } : {}),
      ...(state.contextId ? { contextId: state.contextId } : {}),
      ...(state.progress !== undefined ? { progress: state.progress } : {}),
      ...this.tenant(),
      ...accountOf(this.input.params),
      deadline: state.deadline,
      webhooksApplied: state.webhooksApplied,
      ...(state.sellerUpdatedAt ? { sellerUpdatedAt: state.sellerUpdatedAt } : {}),
      quickPollsOver: this.quickPollsOver(),
      provisional: state.provisional !== undefined,
      now: this.now(),
    };
  }

  /** The watcher's news: a move is read by the operation's own poll; a hand-back means polling on its own again. */
  private applyWatchNews(): void {
    if (!this.watch.hasNews) return;
    for (const effect of this.watch.takeNews(this.watchFacts())) {
      if (this.terminal) return;
      if (effect.kind === 'readYourself') this.pollRequested = true;
      else if (effect.kind === 'released')
        this.record.note('poll', `the seller's task watcher handed the task back (${effect.reason}); polling it again`);
    }
  }

  private submittedPlan(): WaitPlan {
    return planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: this.state.webhookRegistered });
  }

  /**
   * The parked wait: polls on the plan's cadence, up to the deadline or the end of the working window, in one
   * activity. Without a task ID there is nothing to poll: only a webhook, an adoption, a poll request or a cancel can
   * move the operation then.
   */
  private pollsOnCadence(plan: WaitPlan, quick?: { budgetMs: number; until: 'quick-polls' }): Step | undefined {
    const state = this.state;
    const untilDeadline = this.deadlineMs - this.now();
    if (untilDeadline <= 0) return undefined;
    if (!state.taskId) return { kind: 'wait', for: 'seller', untilMs: this.deadlineMs };
    const limit =
      quick && quick.budgetMs < untilDeadline
        ? quick
        : plan.windowMs !== undefined && plan.windowMs < untilDeadline
          ? { budgetMs: plan.windowMs, until: 'working-window' as const }
          : { budgetMs: untilDeadline, until: 'deadline' as const };
    this.pollsWaitingOn = state.status;
    return {
      kind: 'pollOnCadence',
      plan,
      budgetMs: limit.budgetMs,
      until: limit.until,
      input: {
        ...this.readInput(state.taskId),
        // The seller's own word too: its records may move (pending, then requires_approval) within one status.
        since: {
          status: state.status,
          progress: state.progress ?? null,
          sellerStatus: state.sellerStatus ?? null,
        },
        cadence: {
          firstPollAfterMs: plan.firstPollAfterMs,
          initialIntervalMs: plan.initialIntervalMs,
          maxIntervalMs: plan.maxIntervalMs,
          ...(plan.settle ? { settle: plan.settle } : {}),
        },
      },
    };
  }

  /** The status the polls wait on, how many waits it has had, and since when the task is working. */
  private trackSellerWait(): void {
    const wait = this.sellerWait;
    const status = this.state.status;
    if (status === wait.status) return;
    if (status === 'working' && wait.status !== 'working') wait.workingSinceMs = this.now();
    wait.status = status;
    wait.polls = 0;
    delete wait.quickPollsOver;
  }

  private timeOut(): void {
    this.drainInbox();
    if (this.terminal) return;
    this.record.fail(
      'timed_out',
      `No terminal status from ${this.state.sellerId} within the budget (deadline ${this.state.deadline}); last status ${this.state.status}.`,
    );
  }

  /** Webhooks arrived before the task was bound and the call's answer was lost: a read of their task confirms them. */
  private confirmHeld(taskId: string): Step | undefined {
    this.record.adopt(taskId, 'named by a webhook that arrived while the call was in flight');
    return this.pollStep('confirm-held', taskId);
  }

  /**
   * The call for `step` (with the key generation), planned first when it mutates: one plan per step, so a repeated
   * call of the step (after auth-required, say) re-sends the same bytes. No call starts after a cancel.
   */
  private callStep(step: string, params: Record<string, unknown>): Step | undefined {
    if (this.cancelRequest) {
      this.followUp = undefined;
      return undefined;
    }
    const state = this.state;
    const keyStep = this.keyGeneration === 0 ? step : `${step}#${this.keyGeneration}`;
    const planInput: PlanCallInput = {
      operationId: state.operationId,
      sellerId: state.sellerId,
      task: state.task,
      step: keyStep,
      params,
      ...this.tenant(),
      ...(state.contextId ? { contextId: state.contextId } : {}),
      ...(state.taskId ? { taskId: state.taskId } : {}),
    };
    let send: SendCallInput;
    let timeouts: CallTimeouts;
    if (this.mutating) {
      const plan = this.plans.get(keyStep);
      if (!plan) return { kind: 'planCall', input: planInput };
      send = { plan };
      timeouts = plan.timeouts;
      state.timeouts = plan.timeouts;
    } else {
      // A read has no idempotency key whose bytes history must pin, so it is planned inside its one call.
      send = { planInput };
      timeouts = state.timeouts ?? UNPLANNED_READ_TIMEOUTS;
    }
    this.followUp = undefined;
    this.calling = { step, keyStep, params, taskKnownBefore: state.taskId !== undefined };
    state.callInFlight = { step: keyStep, since: iso(this.now()) };
    return { kind: 'call', step: keyStep, send, local: !this.mutating, timeouts };
  }

  private pollStep(purpose: PollPurpose, taskId: string): Step {
    return { kind: 'poll', ...this.shield(), purpose, input: this.readInput(taskId) };
  }

  /**
   * A cancel never loses what the seller made: the call in flight has answered by now (a cancel waits for it), so
   * the state knows what exists; the seller is told where the protocol allows, and the state says what still exists.
   */
  private cancelStep(request: CancelRequest): Step | undefined {
    this.drainInbox();
    const state = this.state;
    const mediaBuyId = state.resource?.mediaBuyId;
    // The buy is being looked for (the create's answer was lost): read the seller's media buys before settling, so
    // a buy the seller holds is canceled there (or at least named), never left unknown behind a canceled operation.
    if (this.resourceSearch && !state.taskId && !mediaBuyId && !this.terminal) {
      if (!this.cancelLookup)
        return { ...this.resourceStep('before-cancel', this.lostCreate(this.resourceSearch.keyStep)), shielded: true };
      const lookup = this.cancelLookup;
      this.resourceSearch = undefined;
      this.settleCancel(request, { notified: false, note: lookup.note, resource: lookup.resource });
      return undefined;
    }
    const sellerHasSomething = state.taskId !== undefined || mediaBuyId !== undefined;
    const endedOnItsOwn = this.terminal && !mediaBuyId;
    if (sellerHasSomething && !endedOnItsOwn) {
      return {
        kind: 'cancelAtSeller',
        shielded: true,
        input: {
          operationId: state.operationId,
          sellerId: state.sellerId,
          task: state.task,
          ...(state.taskId ? { taskId: state.taskId } : {}),
          ...(state.contextId ? { contextId: state.contextId } : {}),
          ...(mediaBuyId ? { mediaBuyId } : {}),
          ...accountOf(this.input.params),
          ...this.tenant(),
          timeouts: this.timeouts(),
        },
      };
    }
    this.settleCancel(request, {
      notified: false,
      note: endedOnItsOwn ? `the operation had already ended ${state.status}` : 'no seller task existed yet',
    });
    return undefined;
  }

  private settleCancel(
    request: CancelRequest,
    atSeller: { notified: boolean; note: string; resource?: OperationResource },
  ): void {
    this.cancelSettled = true;
    this.record.cancel(request, atSeller);
    if (request.principal !== undefined && this.state.cancellation)
      this.state.cancellation.principal = request.principal;
  }

  /** The final notification, by how the operation ended (canceled operations are not notified). */
  private endEvent(): NotificationEvent | undefined {
    const state = this.state;
    if (state.status === 'completed' || state.status === 'rejected') return state.status;
    if (state.status !== 'failed') return undefined;
    const reason = state.failure?.reason;
    return reason === 'timed_out' || reason === 'input_timed_out' || reason === 'auth_timed_out'
      ? 'timed_out'
      : 'failed';
  }

  /**
   * A notification to the buyer's systems, once per event (and round): its idempotency key is also the child
   * workflow's ID, so it is started once even across runs.
   */
  private notifyStep(event: NotificationEvent, suffix: string): Step | undefined {
    if (!this.notifies) return undefined;
    const idempotencyKey = `${this.state.operationId}:${event}${suffix}`;
    if (this.notified.has(idempotencyKey)) return undefined;
    this.notified.add(idempotencyKey);
    const tenant = this.input.tenant!;
    return {
      kind: 'notify',
      shielded: true,
      notification: buyerNotification(this.state, event, idempotencyKey, tenant, iso(this.now())),
      summary: `${event} of ${this.state.operationId} to tenant ${tenant}`,
    };
  }

  /**
   * The workflow's own ending tells the truth in the Web UI: an operation that failed or was rejected ends the
   * workflow Failed (the whole state in the failure's details, where the typed client reads it), one canceled
   * through Temporal ends Canceled; completed ones return their state.
   */
  private endStep(): Step {
    const state = this.state;
    if (!this.terminal) throw new Error(`invariant: the operation cannot end ${state.status}`);
    if (state.status === 'failed' || state.status === 'rejected') {
      const why = state.failure?.message ?? state.message ?? state.errors?.[0]?.message ?? 'no reason given';
      return { kind: 'end', how: 'fail', message: `${state.task} at ${state.sellerId} ${state.status}: ${why}` };
    }
    if (state.status === 'canceled' && this.temporalCancel)
      return { kind: 'end', how: 'cancel', message: state.message ?? 'canceled' };
    return { kind: 'end', how: 'return', message: `${state.task} at ${state.sellerId} ${state.status}` };
  }

  // ---- results -------------------------------------------------------------------------------------------------

  /** What came of the step `next()` returned. */
  resolve(result: StepResult): void {
    const step = this.current;
    if (!step) throw new Error(`invariant: a ${result.kind} result with no step running`);
    this.current = undefined;
    if (step.kind === 'pollOnCadence') this.pollsWaitingOn = undefined;
    if (result.kind === 'interrupted') {
      this.cancelledThroughTemporal();
      this.followUp = undefined;
      this.reconciling = undefined;
      if (step.kind === 'call') this.afterCall(result);
      return;
    }
    switch (step.kind) {
      case 'planCall':
        if (result.kind !== 'planned') this.unexpected('planCall', result);
        this.plans.set(step.input.step, result.plan);
        this.state.timeouts = result.plan.timeouts;
        return;
      case 'call':
        return this.afterCall(result);
      case 'poll':
        return this.afterPoll(step.purpose, step.input.taskId, result);
      case 'pollOnCadence':
        return this.afterPolls(step, result);
      case 'wait':
        if (result.kind !== 'timedOut') return this.drainInbox();
        return this.waitTimedOut(step.for);
      case 'reconcile':
        return this.afterReconcile(result);
      case 'readResource':
        return this.afterResource(step.purpose, result);
      case 'cancelAtSeller':
        return this.afterCancelAtSeller(result);
      case 'registerWithWatcher':
        if (result.kind === 'watchAnswered') return this.watch.registered(result.outcome);
        if (result.kind === 'failed') return this.watch.registered(undefined, result.error.message);
        return this.unexpected('registerWithWatcher', result);
      case 'unregisterFromWatcher':
        return this.watch.unregistered();
      case 'notify':
      case 'continueAsNew':
      case 'end':
        return;
    }
  }

  private refusalAfterEarlierAttempts(answer: SendCallOutcome): AdcpError | undefined {
    const { snapshot } = answer;
    if (!answer.earlierAttempts || !this.mutating || !makesResource(this.state.task) || this.state.taskId)
      return undefined;
    if (snapshot.taskId || (snapshot.status !== 'failed' && snapshot.status !== 'rejected')) return undefined;
    const first = snapshot.errors?.[0];
    return {
      ...(first ?? { code: 'SELLER_REFUSED', message: snapshot.message ?? `the seller answered ${snapshot.status}` }),
      recovery: first?.recovery === 'transient' || !first ? 'terminal' : first.recovery,
      earlierAttempts: answer.earlierAttempts,
    };
  }

  private unexpected(step: string, result: StepResult): never {
    throw new Error(`invariant: result ${result.kind} for a ${step} step`);
  }

  private afterCall(result: StepResult): void {
    const calling = this.calling;
    this.calling = undefined;
    // A confirming read still running when the call ended is stopped by the workflow; the call's end decides now.
    this.beside = undefined;
    const state = this.state;
    if (!calling) throw new Error('invariant: a call result with no call in flight');
    // A create the seller refused after attempts that may have made it (their answers lost): not the seller's word on
    // what exists, so it is judged as a failed call, which looks for the buy before it ends.
    const refusal = result.kind === 'answered' ? this.refusalAfterEarlierAttempts(result.answer) : undefined;
    if (refusal) {
      this.record.note(
        'call',
        `call ${calling.keyStep} was refused (${refusal.code}) after ${refusal.earlierAttempts} earlier attempt(s) that may have reached ${state.sellerId}; looking for what they made before it ends`,
      );
      result = { kind: 'failed', error: refusal };
    }
    if (result.kind === 'answered') {
      this.watch.forgetMoves();
      const { answer } = result;
      if (answer.timeouts) state.timeouts = answer.timeouts;
      state.webhookRegistered ||= answer.webhookRegistered;
      // The call knows its task is an MCP task (it created it): reads go to MCP tasks/get, whatever is described.
      if (answer.mcpTaskId && answer.mcpTaskId === answer.snapshot.taskId) state.mcpTaskId = answer.mcpTaskId;
      this.record.applyCallAnswer(
        answer.snapshot,
        answer.schemaWarnings?.length ? { schemaWarnings: answer.schemaWarnings } : {},
      );
      this.drainInbox();
      return;
    }
    state.callInFlight = undefined;
    this.drainInbox();
    if (result.kind === 'stopped' || result.kind === 'interrupted') {
      if (calling.stop === 'adoption' && this.pendingAdoption && !state.taskId) {
        const adoption = this.pendingAdoption;
        this.pendingAdoption = undefined;
        this.record.adopt(adoption.taskId, `signalled by ${adoption.requestedBy}`);
        this.followUp = { kind: 'poll', purpose: 'adopted', taskId: adoption.taskId };
      } else if (calling.stop === 'settled') {
        this.record.record(`call ${calling.keyStep} stopped: the operation already ended ${state.status}`);
      } else this.record.note('call', `call ${calling.keyStep} stopped`);
      return;
    }
    if (result.kind !== 'failed') this.unexpected('call', result);
    const error = result.error;
    if (error.code === 'ANSWER_TOO_LARGE') {
      this.record.fail(
        'answer_too_large',
        `The ${state.task} answer from ${state.sellerId} is too large to keep: ${error.message}`,
        error,
      );
      return;
    }
    const decision = this.record.decideAfterCallFailure(error, this.mutating, !calling.taskKnownBefore);
    switch (decision.action) {
      case 'ignore':
      case 'follow-task':
        this.record.note('call', `call ${calling.keyStep} failed (${error.code}); ${decision.why}`);
        return;
      case 'confirm-held': {
        this.record.note(
          'call',
          `call ${calling.keyStep} failed (${error.code}); confirming the webhooks that arrived during it`,
        );
        const taskId = this.record.heldTaskId();
        if (taskId) {
          this.record.adopt(taskId, 'named by a webhook that arrived while the call was in flight');
          this.followUp = { kind: 'poll', purpose: 'confirm-held', taskId };
        } else this.record.acceptHeldUnconfirmed('the webhooks name no task to read');
        return;
      }
      case 'fail':
        this.record.fail(decision.reason, decision.message, error);
        return;
      case 'reconcile':
        this.followUp = {
          kind: 'reconcile',
          keyStep: calling.keyStep,
          step: calling.step,
          params: calling.params,
          error,
        };
        return;
    }
  }

  /** Applies one read; a read that cannot see the task is "cannot see it now", never the task failing. */
  private applyRead(outcome: ReadTaskOutcome): boolean {
    const state = this.state;
    if (state.readMethod !== outcome.readMethod) {
      if (state.readMethod)
        this.record.note('poll', `reads at ${state.sellerId} now use ${outcome.readMethod} (was ${state.readMethod})`);
      state.readMethod = outcome.readMethod;
    }
    this.learnFromRead(outcome);
    // A read of the buy itself (the seller has no task read) is the resource, never a task observation.
    if (outcome.resource && makesResource(state.task)) {
      this.record.applyResource(outcome.resource, 'poll');
      return true;
    }
    if (outcome.snapshot) {
      this.record.applyRead(outcome.snapshot, 'poll', outcome.schemaWarnings);
      return true;
    }
    if (outcome.unreadable)
      this.record.note(
        'poll',
        `cannot read task ${state.taskId ?? '?'} now (${outcome.unreadable.code}): ${outcome.unreadable.message}`,
      );
    return false;
  }

  private afterPoll(purpose: PollPurpose, taskId: string, result: StepResult): void {
    const state = this.state;
    let seen = false;
    if (result.kind === 'read') {
      state.pollCount += 1;
      seen = this.applyRead(result.outcome);
    } else if (result.kind === 'failed') {
      // A missed poll is not a failed operation: the next one, a webhook or reconciliation will tell.
      this.record.note('poll', `read failed, will poll again: ${result.error.code}: ${result.error.message}`);
    } else this.unexpected('poll', result);
    this.watch.afterRead(seen);
    switch (purpose) {
      case 'confirm-held':
        if (!seen) this.record.acceptHeldUnconfirmed(`no read of task ${taskId} is possible at ${state.sellerId} now`);
        return;
      case 'confirm-provisional':
        if (!state.provisional || this.terminal) return;
        if (!seen) {
          this.record.settleProvisional(`task ${taskId} cannot be read at ${state.sellerId}`);
        } else {
          // The read did not settle it (it still says something else): keep waiting for the seller.
          this.record.note('poll', `the read shows ${state.status}; the completion stays unconfirmed for now`);
        }
        if (state.provisional && !this.terminal) this.followUp = { kind: 'provisionalWait' };
        return;
      case 'last-before-deadline':
        this.timeOut();
        return;
      default:
        return;
    }
  }

  private afterPolls(step: Extract<Step, { kind: 'pollOnCadence' }>, result: StepResult): void {
    const state = this.state;
    switch (result.kind) {
      case 'moved':
        state.pollCount += result.outcome.polls;
        this.applyRead(result.outcome);
        return;
      case 'stopped':
        return;
      case 'budgetRanOut':
        state.pollCount += result.polls;
        // After the quick polls the operation may join the watcher; at the end of the working window the next wait
        // is at the slower cadence. Otherwise the next poll would have come after the deadline: wait for it (still
        // interruptible), then the last poll is taken.
        if (step.until === 'quick-polls') this.sellerWait.quickPollsOver = true;
        else if (step.until === 'deadline' && this.deadlineMs > this.now())
          this.followUp = { kind: 'pause', untilMs: this.deadlineMs };
        return;
      case 'failed':
        this.record.note(
          'poll',
          `polling stopped (${result.error.code}: ${result.error.message}); polling again later`,
        );
        this.followUp = { kind: 'pause', untilMs: Math.min(this.now() + step.plan.maxIntervalMs, this.deadlineMs) };
        return;
      default:
        this.unexpected('pollOnCadence', result);
    }
  }

  private waitTimedOut(waitedFor: WaitFor): void {
    const state = this.state;
    if (waitedFor === 'input' && state.status === 'input-required' && state.inputRequest) {
      const request = state.inputRequest;
      this.record.fail(
        'input_timed_out',
        `No answer to the seller's question (${request.reason ?? 'input required'}) by ${request.deadline}.`,
      );
    } else if (waitedFor === 'credentials' && state.status === 'auth-required' && state.authRequired) {
      this.record.fail(
        'auth_timed_out',
        `The seller asked for authentication and no refreshed credentials arrived by ${state.authRequired.deadline}.`,
      );
    }
  }

  /** What a read taught about the seller: whose words its task records use, which fields it refuses. */
  private learnFromRead(outcome: {
    taskRecordAdapter?: ReadTaskOutcome['taskRecordAdapter'];
    shaping?: ReadTaskOutcome['shaping'];
  }): void {
    const state = this.state;
    if (outcome.taskRecordAdapter && outcome.taskRecordAdapter !== state.taskRecordAdapter)
      state.taskRecordAdapter = outcome.taskRecordAdapter;
    if (outcome.shaping?.length) {
      state.requestShaping = withShaping(state.requestShaping, outcome.shaping);
      for (const shaped of outcome.shaping)
        this.record.note(
          'poll',
          `${shaped.tool} at ${state.sellerId} is sent without ${shaped.omitted}: ${shaped.because}`,
        );
    }
  }

  /** Reconciliation looked for the failed call's task: adopt it, use a new key (once), look for the buy, or fail. */
  private afterReconcile(result: StepResult): void {
    const reconciling = this.reconciling;
    this.reconciling = undefined;
    if (!reconciling) throw new Error('invariant: a reconciliation result with none running');
    const { error, keyStep, step, params } = reconciling;
    const trigger = `${error.code} on call step ${keyStep}`;
    let found: 'adopted' | 'not_found' | 'unsupported';
    if (result.kind === 'failed') {
      found = 'unsupported';
      this.record.recordReconciliation({
        trigger,
        outcome: found,
        note: `reconciliation failed: ${result.error.message}`,
      });
    } else if (result.kind === 'found') {
      const outcome = result.outcome;
      found = !outcome.supported ? 'unsupported' : outcome.snapshot ? 'adopted' : 'not_found';
      this.record.recordReconciliation({
        trigger,
        outcome: found,
        ...(outcome.snapshot?.taskId ? { taskId: outcome.snapshot.taskId } : {}),
        note: outcome.note,
      });
      if (found === 'adopted') this.record.applyRead(outcome.snapshot!, 'reconciliation');
    } else this.unexpected('reconcile', result);
    const next = this.record.decideAfterReconciliation(error, found, this.keyGeneration);
    if (next.action === 'call-again' && this.callAgainRounds < MAX_CALL_AGAIN_ROUNDS && !this.cancelRequest) {
      this.callAgainRounds += 1;
      this.record.note(
        'call',
        `call ${keyStep} was not sent: the worker paused calls to ${this.state.sellerId} after repeated failures; calling again with the same key at ${iso(next.atMs)}`,
      );
      this.followUp = { kind: 'callAgain', untilMs: Math.min(next.atMs, this.deadlineMs), step, params };
      return;
    }
    if (next.action === 'call-again') {
      this.record.fail(
        'call_failed',
        `The ${this.state.task} call to ${this.state.sellerId} was not sent: the worker kept calls to the seller paused after repeated failures (${error.message}).`,
        error,
      );
      return;
    }
    if (next.action === 'find-resource') {
      this.resourceSearch = { keyStep, error, nextReadAtMs: this.now(), step, params };
      return;
    }
    if (next.action === 'fail') {
      this.record.fail(next.reason, next.message, error);
    } else if (next.action === 'rekey' && this.cancelRequest) {
      this.record.fail(
        'call_failed',
        `The ${this.state.task} call to ${this.state.sellerId} was refused with ${error.code}; the operation was canceled before a new key was tried.`,
        error,
      );
    } else if (next.action === 'rekey') {
      this.keyGeneration += 1;
      this.followUp = { kind: 'call', step, params };
    }
  }

  /** A read of the resource: the buy found or confirmed, or what the operation says while it cannot know. */
  private afterResource(purpose: ResourcePurpose, result: StepResult): void {
    const state = this.state;
    let outcome: ReadResourceOutcome | undefined;
    if (result.kind === 'resource') outcome = result.outcome;
    else if (result.kind !== 'failed') this.unexpected('readResource', result);
    const why = outcome
      ? outcome.unreadable
        ? `${outcome.unreadable.code}: ${outcome.unreadable.message}`
        : outcome.note
      : `${(result as { error: AdcpError }).error.code}: ${(result as { error: AdcpError }).error.message}`;
    if (outcome) {
      this.learnFromRead(outcome);
      if (outcome.schemaWarnings?.length)
        state.schemaWarnings = [...(state.schemaWarnings ?? []), ...outcome.schemaWarnings].slice(-10);
    }
    const found = outcome?.found && outcome.mediaBuyId && outcome.row ? outcome : undefined;
    if (purpose === 'before-cancel' && !found) {
      this.cancelLookup = outcome?.absent
        ? {
            note: "the seller's media buys, read to the end, hold none from this operation",
            resource: { state: 'absent' },
          }
        : {
            note: `the seller's media buys could not tell whether it holds a buy from this operation (${why}); POST /v1/sellers/${state.sellerId}/reconcile lists its buys and names the ones no operation knows`,
            resource: { state: 'unknown' },
          };
      return;
    }
    // Only the shape ties a listed buy to a lost call: another operation's identical create may have made it. While
    // the same call can still be sent, its replay by the key names this operation's own task or buy for certain.
    if (
      found &&
      purpose === 'find-lost' &&
      found.matchedBy === 'packages_budget_flight' &&
      this.resourceSearch &&
      !this.terminal &&
      this.callAgainAfterLostCall(
        `only packages, budget and flight tie media buy ${found.mediaBuyId!} to it (another operation's identical create may have made it)`,
      )
    ) {
      this.record.recordReconciliation({
        trigger: 'the call was lost and no task route found it',
        outcome: 'not_found',
        note: `${found.note}; not adopted on shape alone while the call can be sent again with the same key`,
      });
      return;
    }
    if (found) {
      this.record.applyResource(
        { mediaBuyId: found.mediaBuyId!, row: found.row!, ...(found.matchedBy ? { matchedBy: found.matchedBy } : {}) },
        'reconciliation',
      );
      if (purpose !== 'confirm-provisional')
        this.record.recordReconciliation({
          trigger:
            purpose === 'requested'
              ? 'reconcile requested'
              : purpose === 'before-cancel'
                ? 'cancel requested while the buy was looked for'
                : 'the call was lost and no task route found it',
          outcome: 'adopted',
          note: found.note,
        });
      this.resourceSearch = undefined;
    } else if (purpose === 'confirm-provisional') {
      if (outcome?.absent && state.provisional && !this.terminal)
        this.record.settleProvisional(`the seller has no media buy ${state.resource?.mediaBuyId ?? '?'}: ${why}`);
      else if (state.provisional && !this.terminal) {
        this.record.note('poll', `the buy the record names could not be read now (${why}); reading again later`);
        this.followUp = { kind: 'provisionalWait' };
      }
    } else if (this.resourceSearch && !this.terminal) {
      const search = this.resourceSearch;
      this.record.recordReconciliation({
        trigger: purpose === 'requested' ? 'reconcile requested' : 'the call was lost and no task route found it',
        outcome: 'not_found',
        note: why,
      });
      if (
        outcome?.absent &&
        this.callAgainAfterLostCall("the seller's media buys, read to the end, hold none from it")
      ) {
        state.resource = { state: 'absent' };
      } else if (outcome?.absent) {
        this.resourceSearch = undefined;
        state.resource = { state: 'absent' };
        const what = mayHaveReachedSeller(search.error)
          ? `call to ${state.sellerId} was refused (${search.error.message}) after ${search.error.earlierAttempts} earlier attempt(s) that may have reached it,`
          : `answer from ${state.sellerId} was lost (${search.error.message})`;
        this.record.fail(
          'call_failed',
          `The ${state.task} ${what} and the seller's media buys, read to the end, hold none from this operation: nothing was bought. Start the operation again (a new idempotency key) to buy.`,
          search.error,
        );
      } else {
        const everyMs = this.submittedPlan().maxIntervalMs;
        search.nextReadAtMs = this.now() + everyMs;
        this.record.lookForResource(
          `The seller may hold this buy; the orchestrator could not ${outcome?.candidates?.length ? 'tell which of its media buys is this one' : 'read its media buys'} (${why}). It reads them again every ${Math.max(1, Math.round(everyMs / 60_000))} min until ${state.deadline}; POST /v1/operations/${state.operationId}/reconcile reads them now.`,
          outcome?.candidates ?? [],
        );
      }
    }
    if (purpose === 'requested')
      this.answerReconcileRequests({
        found: found !== undefined,
        ...(found?.mediaBuyId ? { media_buy_id: found.mediaBuyId } : {}),
        ...(found?.matchedBy ? { matched_by: found.matchedBy } : {}),
        ...(outcome?.candidates?.length ? { candidates: outcome.candidates } : {}),
        note: found ? found.note : why,
      });
  }

  /**
   * A create's call failed in transport and what the seller's media buys show does not tie a buy to it (`why`):
   * nobody refused, so the same call with the same key is sent again after a pause (a request the seller is still
   * processing, or one it made, is replayed by the key, never bought twice), a few rounds at most. False when the
   * rounds are spent or a cancel was asked for.
   */
  private callAgainAfterLostCall(why: string): boolean {
    const search = this.resourceSearch;
    if (!search || this.cancelRequest || this.callsAfterNothingBought >= MAX_CALLS_AFTER_NOTHING_BOUGHT) return false;
    // A refusal is not sent again: the seller answered it, and would answer the same.
    if (mayHaveReachedSeller(search.error)) return false;
    this.resourceSearch = undefined;
    const waitMs = CALL_AFTER_NOTHING_BOUGHT_MS * 2 ** this.callsAfterNothingBought;
    this.callsAfterNothingBought += 1;
    this.record.note(
      'call',
      `call ${search.keyStep} failed in transport (${search.error.message}) and ${why}; calling again with the same key at ${iso(this.now() + waitMs)} (${this.callsAfterNothingBought} of ${MAX_CALLS_AFTER_NOTHING_BOUGHT})`,
    );
    this.followUp = {
      kind: 'callAgain',
      untilMs: Math.min(this.now() + waitMs, this.deadlineMs),
      step: search.step ?? 'call',
      params: search.params ?? this.input.params,
    };
    return true;
  }

  private failOutcomeUnknown(): void {
    const state = this.state;
    const error = this.resourceSearch?.error;
    this.resourceSearch = undefined;
    this.record.fail(
      'outcome_unknown',
      `The ${state.task} answer from ${state.sellerId} was lost and no read of its media buys could tell by the deadline (${state.deadline}) whether the call made a buy. The seller may hold it: POST /v1/sellers/${state.sellerId}/reconcile lists its buys and the operations that know them; starting a new operation could buy twice.`,
      error,
    );
  }

  private afterCancelAtSeller(result: StepResult): void {
    const request = this.cancelRequest ?? TEMPORAL_CANCEL;
    const mediaBuyId = this.state.resource?.mediaBuyId;
    if (result.kind === 'toldSeller') {
      const told = result.outcome;
      this.settleCancel(request, {
        notified: told.notified,
        note: told.note,
        ...(told.resource ? { resource: told.resource } : {}),
      });
    } else if (result.kind === 'failed') {
      this.settleCancel(request, {
        notified: false,
        note: `telling the seller failed: ${result.error.message}`,
        ...(mediaBuyId ? { resource: { mediaBuyId, state: 'unknown' as const } } : {}),
      });
    } else this.unexpected('cancelAtSeller', result);
  }

  // ---- helpers -------------------------------------------------------------------------------------------------

  private drainInbox(): void {
    while (this.inbox.length > 0) this.record.receiveWebhook(this.inbox.shift()!);
  }

  /** Once the workflow is being canceled, what still runs must finish. */
  private shield(): { shielded?: true } {
    return this.temporalCancel ? { shielded: true } : {};
  }

  private tenant(): { tenant?: string } {
    return this.input.tenant !== undefined ? { tenant: this.input.tenant } : {};
  }

  private timeouts(): CallTimeouts {
    return this.state.timeouts ?? DEFAULT_TIMEOUTS;
  }

  private readInput(taskId: string): ReadTaskInput {
    const state = this.state;
    return {
      operationId: state.operationId,
      sellerId: state.sellerId,
      task: state.task,
      taskId,
      ...(state.contextId ? { contextId: state.contextId } : {}),
      ...accountOf(this.input.params),
      ...this.tenant(),
      ...(state.resource?.mediaBuyId ? { mediaBuyId: state.resource.mediaBuyId } : {}),
      ...(state.readMethod ? { readMethod: state.readMethod } : {}),
      ...(state.mcpTaskId !== undefined && state.mcpTaskId === taskId ? { mcpTask: true } : {}),
      ...(state.taskRecordAdapter ? { taskRecordAdapter: state.taskRecordAdapter } : {}),
      ...(state.requestShaping ? { requestShaping: state.requestShaping } : {}),
      timeouts: this.timeouts(),
    };
  }

  private carriedWatch(): Pick<CarriedState, 'watch'> {
    const watch = this.watch.carry();
    return watch ? { watch } : {};
  }

  /** What the create sent, from its plan (protocol/resource-match.ts), for a listing of the seller's buys. */
  private lostCreate(keyStep: string): Pick<ReadResourceInput, 'sent' | 'mediaBuyId'> {
    const plan = this.plans.get(keyStep);
    if (!plan) return {};
    return { sent: sentCreateFrom(plan.args, this.state.operationId, this.state.startedAt) };
  }

  private resourceStep(purpose: ResourcePurpose, what: Pick<ReadResourceInput, 'sent' | 'mediaBuyId' | 'among'>): Step {
    const state = this.state;
    return {
      kind: 'readResource',
      ...this.shield(),
      purpose,
      input: {
        operationId: state.operationId,
        sellerId: state.sellerId,
        ...this.tenant(),
        ...what,
        ...accountOf(this.input.params),
        ...(state.requestShaping ? { requestShaping: state.requestShaping } : {}),
        timeouts: this.timeouts(),
      },
    };
  }

  /** A reconcile request: the buy by id when the operation knows it, else the listing matched by what was sent. */
  private requestedResourceStep(): Step | undefined {
    const mediaBuyId = this.state.resource?.mediaBuyId;
    if (mediaBuyId) return this.resourceStep('requested', { mediaBuyId });
    const keyStep = this.resourceSearch?.keyStep ?? [...this.plans.keys()].at(-1);
    const what = keyStep ? this.lostCreate(keyStep) : {};
    // Only when every waiting request offers a set (reconciliation's orphans) is the match limited to their union.
    const offered = this.reconcileRequests.every(({ request }) => request.among !== undefined)
      ? [...new Set(this.reconcileRequests.flatMap(({ request }) => request.among ?? []))]
      : undefined;
    if (what.sent) return this.resourceStep('requested', { ...what, ...(offered ? { among: offered } : {}) });
    this.answerReconcileRequests({
      found: false,
      note: 'the create has not been sent yet: there is no buy to look for',
    });
    return undefined;
  }

  private answerReconcileRequests(answer: Omit<OperationReconcileAnswer, 'status'> | undefined): void {
    if (this.reconcileRequests.length === 0) return;
    const state = this.state;
    const given: Omit<OperationReconcileAnswer, 'status'> = answer ?? {
      found: state.resource?.mediaBuyId !== undefined,
      ...(state.resource?.mediaBuyId ? { media_buy_id: state.resource.mediaBuyId } : {}),
      ...(state.resource?.matchedBy ? { matched_by: state.resource.matchedBy } : {}),
      note: `the operation ended ${state.status}`,
    };
    for (const { ticket } of this.reconcileRequests.splice(0))
      this.reconcileAnswers.set(ticket, { ...given, status: state.status });
  }

  /** Everything a continued run needs to go on where this one stops. */
  carried(): CarriedState {
    return {
      state: this.state,
      seenEventKeys: [...this.seenEventKeys],
      inbox: [...this.inbox],
      held: [...this.record.held],
      keyGeneration: this.keyGeneration,
      plans: Object.fromEntries(this.plans),
      ...(this.pendingInput ? { pendingInput: this.pendingInput } : {}),
      ...(this.credentialsRefreshed ? { pendingCredentialsRefresh: true } : {}),
      ...(this.pendingAdoption ? { pendingAdoption: this.pendingAdoption } : {}),
      ...(this.pollRequested ? { pollRequested: true } : {}),
      ...(this.notified.size > 0 ? { notified: [...this.notified] } : {}),
      ...(this.resourceSearch
        ? { resourceSearch: { keyStep: this.resourceSearch.keyStep, error: this.resourceSearch.error } }
        : {}),
      sellerWait: {
        status: this.sellerWait.status,
        polls: this.sellerWait.polls,
        workingSince: iso(this.sellerWait.workingSinceMs),
        ...(this.sellerWait.quickPollsOver ? { quickPollsOver: true } : {}),
      },
      ...this.carriedWatch(),
    };
  }
}
