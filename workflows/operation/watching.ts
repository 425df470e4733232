/**
 * An operation and its seller's task watcher (workflows/task-watcher/), free of Temporal: when a parked operation
 * joins the watcher, how it waits while watched, when it leaves, and what the watcher's news means. The operation
 * machine (./machine.ts) asks this module at three points (the parked wait, the step before it, the end) and hands
 * it the watcher's notices; everything else about the operation stays the machine's.
 *
 * The rule: an operation waiting on its seller (`submitted`, `working`, `input-required`) with a task to name, to
 * which no webhook has come yet, makes the quick polls of its wait on its own (most tasks finish within seconds: the
 * first polls of a `submitted` wait, a `working` task's window) and joins the watcher only once they are over, so an
 * operation that finishes within them never joins or leaves. Joined, it tells the watcher again when it learned of a
 * move the watcher did not tell it. Once a webhook arrives it leaves the watcher and waits exactly as it would
 * without one: what webhooks told it may be ahead of the seller's listing. Watched, it keeps only its deadline and a
 * long safety poll, which backs off while the task stays where the watcher holds it (30 minutes, then 1 h, then every
 * 2 h by default; any move starts the wait afresh). A seller that cannot list its tasks (or a watcher that is off or full) declines: the operation polls on its own cadence, which backs
 * off as before. A notice of a move makes the operation read the task itself, with the read its own poll makes, so
 * batching changes when it learns, never what. A notice is news only to an operation the watcher still holds, to
 * which no webhook has come, and only when the listing is not older than what the operation last applied: a listing
 * made before a webhook reached the watcher's seller (or before the unregistration reached the watcher) must never
 * make the operation read its way back from what the webhook said.
 */
import { TERMINAL_STATUSES, type TaskStatus } from '../../protocol';
import type { OperationStatus } from '../../contract/operation';
import {
  type CarriedTaskWatch,
  type RegisterWithWatcherInput,
  type RegisterWithWatcherOutcome,
  type TaskObservation,
  type TaskWatchNotice,
  type UnregisterFromWatcherInput,
  SAFETY_POLL_MAX_MS,
  SAFETY_POLL_MS,
  WATCH_INTERVAL_MS,
} from '../../contract/task-watcher';
import { pollSchedule, type WaitPlan } from './cadence';

/** Statuses in which an operation waits on its seller and may be watched. */
const WATCHABLE: ReadonlySet<OperationStatus> = new Set(['submitted', 'working', 'input-required']);
/** Notices' event keys remembered against redelivery. */
const MAX_SEEN_NOTICES = 100;

export type WatchStep =
  | { kind: 'registerWithWatcher'; input: RegisterWithWatcherInput }
  | { kind: 'unregisterFromWatcher'; input: UnregisterFromWatcherInput };

/** What the operation is now, as the watching rule reads it. */
export interface WatchFacts {
  operationId: string;
  sellerId: string;
  task: string;
  status: OperationStatus;
  taskId?: string;
  contextId?: string;
  progress?: unknown;
  tenant?: string;
  account?: unknown;
  deadline: string;
  /** Webhooks applied so far: one is enough for the operation to wait as it would without a watcher. */
  webhooksApplied: number;
  /** The seller's time of the last observation applied (a listing older than it is no news). */
  sellerUpdatedAt?: string;
  /**
   * Whether the quick polls of the wait on this status are over: for `submitted` those of a quick window
   * (`quickWindow`), for `working` its window; a wait with no quick polls (`input-required`) has them over at once.
   */
  quickPollsOver: boolean;
  provisional: boolean;
  now: number;
}

/** What a notice changes in the operation. */
export type NoticeEffect =
  /** The watcher saw a move: the operation reads the task itself (its own read, so it learns what a poll learns). */
  { kind: 'readYourself' } | { kind: 'released'; reason: string } | { kind: 'none' };

/** The quick polls of a plan: those made before its interval reaches the watcher's round. */
export function quickPollCount(plan: WaitPlan, watchIntervalMs: number = WATCH_INTERVAL_MS): number {
  return lastQuickPoll(plan, watchIntervalMs).polls;
}

function lastQuickPoll(plan: WaitPlan, watchIntervalMs: number): { polls: number; atMs: number; nextGapMs: number } {
  let polls = 0;
  for (const { atMs, nextGapMs } of pollSchedule(plan)) {
    polls += 1;
    if (nextGapMs >= watchIntervalMs || nextGapMs >= plan.maxIntervalMs) return { polls, atMs, nextGapMs };
  }
  throw new Error('unreachable: a poll schedule never ends');
}

/**
 * The wait an operation makes before it joins the watcher: the quick polls of `plan` only, in a budget that ends
 * half an interval after the last of them (the server ends the polling activity there: the next poll would come
 * later). `after` is the plan's cadence from that point on, for an operation the watcher then declines.
 */
export function quickWindow(
  plan: WaitPlan,
  watchIntervalMs: number = WATCH_INTERVAL_MS,
): { polls: number; budgetMs: number; after: WaitPlan } {
  const { polls, atMs, nextGapMs } = lastQuickPoll(plan, watchIntervalMs);
  const half = Math.floor(nextGapMs / 2);
  return {
    polls,
    budgetMs: atMs + half,
    after: {
      firstPollAfterMs: nextGapMs - half,
      initialIntervalMs: Math.min(nextGapMs * 2, plan.maxIntervalMs),
      maxIntervalMs: plan.maxIntervalMs,
    },
  };
}

/** A watched wait past its quick polls: the first safety poll after `safetyPollMs`, each later gap doubled to `capMs`. */
export function safetyPollPlan(safetyPollMs: number = SAFETY_POLL_MS, capMs: number = SAFETY_POLL_MAX_MS): WaitPlan {
  return { firstPollAfterMs: safetyPollMs, initialIntervalMs: Math.min(safetyPollMs * 2, capMs), maxIntervalMs: capMs };
}

function isNotice(value: unknown): value is TaskWatchNotice {
  const notice = value as Partial<TaskWatchNotice> | undefined;
  if (!notice || typeof notice.taskId !== 'string' || typeof notice.watcherId !== 'string') return false;
  if (notice.kind === 'moved') return typeof notice.eventKey === 'string';
  return notice.kind === 'released';
}

export class TaskWatch {
  /** The watcher holding this operation, while it does. */
  private watcherId: string | undefined;
  private safetyPollMs: number;
  /** The longest gap between safety polls, which double from `safetyPollMs` while the task has not moved. */
  private safetyPollMaxMs: number;
  /** The watcher's round: the quick polls of a submitted wait end where it begins to cover the task. */
  private watchIntervalMs: number | undefined;
  /** What the watcher knows of the task: what the operation registered with, or the last move it told. */
  private told: { taskId: string; status: TaskStatus } | undefined;
  /** The task the watcher declined or released (the operation polls it on its own from then on). */
  private declined: { taskId: string; reason: string } | undefined;
  private readonly inbox: TaskWatchNotice[];
  private readonly seen: Set<string>;
  private pending: WatchStep | undefined;
  /** The event key of the move the operation is reading the task for, until that read answers. */
  private reading: string | undefined;

  constructor(carried?: CarriedTaskWatch) {
    this.watcherId = carried?.watcherId;
    this.safetyPollMs = carried?.safetyPollMs ?? SAFETY_POLL_MS;
    this.safetyPollMaxMs = Math.max(carried?.safetyPollMaxMs ?? SAFETY_POLL_MAX_MS, this.safetyPollMs);
    this.watchIntervalMs = carried?.watchIntervalMs;
    this.told = carried?.told;
    this.declined = carried?.declined;
    this.inbox = [...(carried?.inbox ?? [])];
    this.seen = new Set(carried?.seen ?? []);
  }

  get watched(): boolean {
    return this.watcherId !== undefined;
  }

  /** The watcher's news, not applied yet (a reason to wake the running wait). */
  get hasNews(): boolean {
    return this.inbox.length > 0;
  }

  /** A `taskMoved` signal: recorded once (by event key), never thrown on. */
  receive(notice: unknown): void {
    if (!isNotice(notice)) return;
    // Left the watcher (or never joined it): a move it listed before the unregistration arrived is no news, and must
    // not wake the wait. One that comes while the registration is answered is kept (`takeNews` decides).
    if (notice.kind === 'moved' && !this.watcherId && this.pending?.kind !== 'registerWithWatcher') return;
    if (notice.kind === 'moved') {
      if (this.seen.has(notice.eventKey)) return;
      this.seen.add(notice.eventKey);
      if (this.seen.size > MAX_SEEN_NOTICES) this.seen.delete(this.seen.values().next().value!);
    }
    this.inbox.push(notice);
  }

  /** What each notice that arrived means for the operation, as it is now (`facts`), in order. */
  takeNews(facts: Pick<WatchFacts, 'taskId' | 'webhooksApplied' | 'sellerUpdatedAt'>): NoticeEffect[] {
    const { taskId } = facts;
    const effects: NoticeEffect[] = [];
    while (this.inbox.length > 0) {
      const notice = this.inbox.shift()!;
      // A notice about another task (an earlier one, a reused id in another operation) tells this one nothing.
      if (notice.taskId !== taskId) continue;
      if (notice.kind === 'released') {
        if (notice.watcherId !== this.watcherId) continue;
        this.watcherId = undefined;
        this.told = undefined;
        this.declined = { taskId: notice.taskId, reason: notice.reason };
        effects.push({ kind: 'released', reason: notice.reason });
        continue;
      }
      // Only the watcher holding the operation speaks for it (it left, or a watcher it never joined).
      if (notice.watcherId !== this.watcherId) continue;
      // The watcher now knows the task as listed: no registration needed for that status.
      this.told = { taskId: notice.taskId, status: notice.listed.status };
      if (TERMINAL_STATUSES.has(notice.listed.status)) this.watcherId = undefined; // the watcher forgot a finished task
      if (!this.isNews(notice.listed, facts)) continue;
      this.reading = notice.eventKey;
      effects.push({ kind: 'readYourself' });
    }
    return effects;
  }

  /**
   * Whether a listing can tell the operation anything: not once a webhook came (webhooks may be ahead of the
   * seller's listing, and the operation is leaving the watcher), nor when the row is older than the last observation
   * the operation applied (its own read, or the call's answer, already saw later).
   */
  private isNews(listed: TaskObservation, facts: Pick<WatchFacts, 'webhooksApplied' | 'sellerUpdatedAt'>): boolean {
    if (facts.webhooksApplied > 0) return false;
    const listedAt = listed.updatedAt === undefined ? NaN : Date.parse(listed.updatedAt);
    const appliedAt = facts.sellerUpdatedAt === undefined ? NaN : Date.parse(facts.sellerUpdatedAt);
    return !(listedAt < appliedAt); // NaN (either time unknown) compares false: then it is news
  }

  /**
   * The operation's read answered. A move whose read could not see the task (it failed, or the task was unreadable)
   * is news again if the watcher tells it again: the watcher forgets a finished task, the operation, still waiting,
   * joins again, and the watcher's next listing sends the same move, with the same event key. Dropped as a
   * redelivery, it would leave the operation on its safety poll, watched by nobody. A read that saw the task and
   * disagreed with the listing keeps the key seen: the same listing again is no news (the safety poll reads later).
   */
  afterRead(sawTask: boolean): void {
    if (this.reading !== undefined && !sawTask) this.seen.delete(this.reading);
    this.reading = undefined;
  }

  /**
   * A call answered: what the watcher saw before that answer is older than it (a question the answer just resolved,
   * say), so moves not applied yet are dropped. A hand-back still counts.
   */
  forgetMoves(): void {
    const released = this.inbox.filter((notice) => notice.kind === 'released');
    this.inbox.length = 0;
    this.inbox.push(...released);
  }

  /** Whether the operation, as it is now, belongs with the watcher at all. */
  private watchable(facts: WatchFacts): boolean {
    return (
      facts.taskId !== undefined &&
      WATCHABLE.has(facts.status) &&
      !facts.provisional &&
      facts.webhooksApplied === 0 &&
      this.declined?.taskId !== facts.taskId
    );
  }

  /**
   * The quick window of a `submitted` wait (`quickWindow`) while the operation could still join the watcher and its
   * quick polls are not over; undefined otherwise (it waits as `parkedWait` says).
   */
  quickWait(plan: WaitPlan, facts: WatchFacts): ReturnType<typeof quickWindow> | undefined {
    if (facts.status !== 'submitted' || facts.quickPollsOver || plan.windowMs !== undefined) return undefined;
    if (this.watcherId !== undefined || !this.watchable(facts)) return undefined;
    return quickWindow(plan, this.watchIntervalMs);
  }

  private tells(facts: WatchFacts): boolean {
    return this.watcherId !== undefined && this.told?.taskId === facts.taskId && this.told?.status === facts.status;
  }

  /**
   * The step before the operation waits: join the watcher once the wait's quick polls are over (or tell it what the
   * operation knows now, when that changed), or leave it when the operation no longer waits on the seller. Ended
   * operations leave it too, unless the watcher saw the end itself (it forgets finished tasks).
   */
  step(facts: WatchFacts, ended: boolean): WatchStep | undefined {
    const taskId = facts.taskId;
    if (ended || !this.watchable(facts)) {
      if (!this.watcherId) return undefined;
      const watcherId = this.watcherId;
      this.watcherId = undefined;
      this.told = undefined;
      return this.begin({
        kind: 'unregisterFromWatcher',
        input: {
          watcherId,
          operationId: facts.operationId,
          reason: ended ? `the operation ended ${facts.status}` : `the operation no longer waits (${facts.status})`,
        },
      });
    }
    if (this.tells(facts)) return undefined;
    if (this.watcherId === undefined && !facts.quickPollsOver) return undefined;
    return this.begin({
      kind: 'registerWithWatcher',
      input: {
        sellerId: facts.sellerId,
        registration: {
          operationId: facts.operationId,
          taskId: taskId!,
          task: facts.task,
          ...(facts.tenant !== undefined ? { tenant: facts.tenant } : {}),
          ...(facts.account !== undefined ? { account: facts.account } : {}),
          ...(facts.contextId !== undefined ? { contextId: facts.contextId } : {}),
          known: {
            status: facts.status as TaskStatus, // watchable: never pending
            ...(facts.progress !== undefined ? { progress: facts.progress } : {}),
          },
          deadline: facts.deadline,
          registeredAt: new Date(facts.now).toISOString(),
        },
      },
    });
  }

  private begin(step: WatchStep): WatchStep {
    this.pending = step;
    return step;
  }

  /** The registration's answer (undefined: the activity failed, so the operation polls on its own). */
  registered(outcome: RegisterWithWatcherOutcome | undefined, failure?: string): void {
    const step = this.pending;
    this.pending = undefined;
    if (step?.kind !== 'registerWithWatcher') return;
    const { taskId, known } = step.input.registration;
    if (outcome?.watching && outcome.watcherId) {
      this.watcherId = outcome.watcherId;
      this.safetyPollMs = outcome.safetyPollMs ?? this.safetyPollMs;
      // A worker that names no cap (one from before the backoff) keeps its safety poll at one interval.
      this.safetyPollMaxMs = Math.max(outcome.safetyPollMaxMs ?? this.safetyPollMs, this.safetyPollMs);
      this.watchIntervalMs = outcome.watchIntervalMs ?? this.watchIntervalMs;
      this.told = { taskId, status: known.status };
      return;
    }
    this.watcherId = undefined;
    this.told = undefined;
    this.declined = { taskId, reason: outcome?.reason ?? failure ?? 'the task watcher did not answer' };
  }

  /** The unregistration ran (or failed: the watcher forgets the operation at its deadline or when it ends anyway). */
  unregistered(): void {
    this.pending = undefined;
  }

  /** Why the watcher does not hold this task, if it declined or released it (for the operation's record). */
  declinedReason(taskId: string | undefined): string | undefined {
    return this.declined?.taskId === taskId ? this.declined?.reason : undefined;
  }

  /**
   * How a parked wait polls. Watched: a working task keeps its window of quick polls; a submitted wait whose quick
   * polls are not over (it told the watcher a new status) makes them, then only the safety poll up to the deadline,
   * in the same activity; past its quick polls, only the safety poll. The safety poll doubles from one to the next, up
   * to its cap: each one that finds the task unmoved confirms the watcher once more (a move ends the wait, and the
   * next wait starts from the first interval again). Not watched: its own cadence (`plan`), taken
   * up after the quick polls where it made them before the watcher declined it.
   */
  parkedWait(plan: WaitPlan, facts: WatchFacts): WaitPlan {
    if (plan.windowMs !== undefined) return plan;
    if (!this.tells(facts))
      return facts.status === 'submitted' && facts.quickPollsOver
        ? quickWindow(plan, this.watchIntervalMs).after
        : plan;
    const safety = this.safetyPollMs;
    const cap = this.safetyPollMaxMs;
    if (facts.status === 'submitted' && !facts.quickPollsOver)
      return {
        ...plan,
        settle: { afterPolls: quickPollCount(plan, this.watchIntervalMs), intervalMs: safety, maxIntervalMs: cap },
      };
    return safetyPollPlan(safety, cap);
  }

  carry(): CarriedTaskWatch | undefined {
    if (!this.watcherId && !this.declined && this.inbox.length === 0) return undefined;
    return {
      ...(this.watcherId
        ? { watcherId: this.watcherId, safetyPollMs: this.safetyPollMs, safetyPollMaxMs: this.safetyPollMaxMs }
        : {}),
      ...(this.watcherId && this.watchIntervalMs ? { watchIntervalMs: this.watchIntervalMs } : {}),
      ...(this.told ? { told: this.told } : {}),
      ...(this.declined ? { declined: this.declined } : {}),
      ...(this.inbox.length > 0 ? { inbox: [...this.inbox] } : {}),
      ...(this.seen.size > 0 ? { seen: [...this.seen] } : {}),
    };
  }
}
