/**
 * The task watcher's public surface: one long-lived workflow per task queue, seller and shard holds the operations
 * parked at that seller and reads their tasks in a few list calls per round (`list_tasks` / `tasks/list`), instead of
 * one poll per operation. Operations register when they park and unregister when they stop waiting; the watcher
 * tells an operation only when its task moved (`taskMoved`), with what a read of the task answered. Imported by the
 * watcher, its activities, the operation workflow and tests. Message names are stable: renaming one breaks running
 * watchers and operations.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { AdcpError, TaskStatus } from '../protocol';

export const TASK_WATCHER_WORKFLOW_TYPE = 'adcpTaskWatcher';

/**
 * One watcher per task queue, seller and shard (deployments sharing a namespace on different queues keep their own,
 * as the reconciliation schedules and capability workflows do).
 */
export function taskWatcherWorkflowId(taskQueue: string, sellerId: string, shard: number): string {
  return `task-watcher:${taskQueue}:${sellerId}:${shard}`;
}

/**
 * The shard of a seller task: FNV-1a of the task id, modulo the shard count. By task id (not operation id) so a list
 * activity can keep only its own shard's rows out of a listing of the whole seller.
 */
export function taskWatcherShard(taskId: string, shards: number): number {
  if (shards <= 1) return 0;
  let hash = 0x811c9dc5;
  for (let index = 0; index < taskId.length; index++) {
    hash ^= taskId.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shards;
}

/** What the watcher last knows of a task: the status and progress the operation (or a listing) saw. */
export interface TaskObservation {
  status: TaskStatus;
  /** Progress as the seller reported it (compared as JSON); list rows rarely carry it. */
  progress?: unknown;
  /** The seller's own time of the last change, when it said. */
  updatedAt?: string;
}

/** An operation asking to be watched (signalWithStart by the operation's registration activity, batched). */
export interface WatchRegistration {
  operationId: string;
  taskId: string;
  /** The AdCP task (create_media_buy ...): reads of a moved task need it. */
  task: string;
  /** The operation's tenant: its tasks are listed with that tenant's credentials and matched only to its operations. */
  tenant?: string;
  /** The request's `account`: sellers scope task lists by account, so a listing is per (tenant, account). */
  account?: unknown;
  contextId?: string;
  /** What the operation knows now: a listing that shows anything else is a move. */
  known: TaskObservation;
  /** The operation's deadline (ISO 8601): after it the watcher forgets the operation. */
  deadline: string;
  /** When the operation registered (ISO 8601, its workflow time). */
  registeredAt: string;
  /**
   * The round of the worker that sent the registration (its ADCP_TASK_WATCHER_INTERVAL; set by the worker, not the
   * operation): the watcher lists at the round of its latest registration, so a changed setting reaches a watcher
   * already running. Absent in registrations from before the setting: the watcher keeps its round.
   */
  intervalMs?: number;
}

export interface UnwatchRequest {
  operationId: string;
  /** Why it stopped waiting (ended, moved on, webhook): for the record. */
  reason: string;
}

/**
 * The watcher's notice to an operation. `moved`: the task's status (or progress) differs from what the operation
 * registered with, as the listing showed it (the operation reads the task itself before it believes it). `released`: the watcher stopped watching the operation (the seller cannot
 * list its tasks, does not list this one, the shard is full): the operation polls on its own again.
 */
export type TaskWatchNotice =
  | {
      kind: 'moved';
      /** Dedupe key of this move (task, what it moved to, when): a redelivered notice is applied once. */
      eventKey: string;
      taskId: string;
      /** What the listing showed. */
      listed: TaskObservation;
      /** When the watcher saw it (ISO 8601). */
      observedAt: string;
      watcherId: string;
    }
  | { kind: 'released'; taskId: string; reason: string; observedAt: string; watcherId: string };

/** Watcher → operation. */
export const taskMovedSignal = defineSignal<[TaskWatchNotice]>('taskMoved');
/**
 * Operation → watcher: start watching (or update what the operation knows). The worker gathers the registrations of
 * many operations into one signal (activities/signal-batcher.ts), so it carries one or a batch.
 */
export const watchTaskSignal = defineSignal<[WatchRegistration | WatchRegistration[]]>('watchTask');
/** Operation → watcher: stop watching (one, or a batch gathered by the worker). */
export const unwatchTaskSignal = defineSignal<[UnwatchRequest | UnwatchRequest[]]>('unwatchTask');

/** How a listing group reads the seller: what changed since a time, or the registered tasks by id. */
export type ListingMode = 'changes' | 'ids';

export interface TaskWatcherInput {
  sellerId: string;
  shard: number;
  /** How many shards the seller's tasks are spread over (rows of other shards are dropped in the list activity). */
  shards: number;
  /** Between listings of one group while nothing fails (default WATCH_INTERVAL_MS). */
  intervalMs?: number;
  /** Continue as new after this many history events instead of when Temporal suggests it (tests). */
  continueAsNewAfterEvents?: number;
  /** Set only by continue-as-new. */
  carried?: CarriedWatcherState;
}

/** A watched operation as carried across continue-as-new (compact: the watcher may hold thousands). */
export type CarriedEntry = [
  operationId: string,
  taskId: string,
  task: string,
  group: string,
  status: TaskStatus,
  deadlineMs: number,
  confirmed: 0 | 1,
  misses: number,
  extra?: { progress?: unknown; updatedAt?: string; contextId?: string },
];

export interface CarriedGroup {
  key: string;
  tenant?: string;
  account?: unknown;
  mode: ListingMode;
  since?: string;
  nextDueAtMs: number;
  failures: number;
  lastError?: string;
  unsupported?: string;
  idsCursor: number;
}

export interface CarriedWatcherState {
  entries: CarriedEntry[];
  groups: CarriedGroup[];
  outbox: PendingNotice[];
  counters: WatcherCounters;
  idleSinceMs?: number;
  runs: number;
}

/** A notice planned by the machine and not yet delivered. */
export interface PendingNotice {
  operationId: string;
  taskId: string;
  task: string;
  group: string;
  notice:
    | { kind: 'moved'; eventKey: string; listed: TaskObservation; observedAt: string; contextId?: string }
    | { kind: 'released'; reason: string; observedAt: string };
  attempts: number;
  notBeforeMs: number;
}

export interface WatcherCounters {
  listings: number;
  listingCalls: number;
  listingFailures: number;
  rowsListed: number;
  moves: number;
  released: number;
  delivered: number;
  gone: number;
  expired: number;
  registrations: number;
  unregistrations: number;
}

export interface TaskWatcherView {
  sellerId: string;
  shard: number;
  watching: number;
  confirmed: number;
  pendingNotices: number;
  groups: Array<{
    key: string;
    tenant?: string;
    watching: number;
    mode: ListingMode;
    since?: string;
    nextListingAt: string;
    failures: number;
    lastError?: string;
    unsupported?: string;
  }>;
  counters: WatcherCounters;
  runs: number;
  /** Between listings of one group while nothing fails (the round of the latest registration). */
  intervalMs: number;
}

export const taskWatcherQuery = defineQuery<TaskWatcherView>('taskWatcher');

// ---- activities ------------------------------------------------------------------------------------------------

/** A row of the seller's task list as the watcher compares it. */
export interface ListedTask {
  taskId: string;
  status: TaskStatus;
  updatedAt?: string;
  progress?: unknown;
}

export interface ListWatchedTasksInput {
  sellerId: string;
  tenant?: string;
  account?: unknown;
  /** `changes`: rows updated after `since` (all of them when absent is never asked: see the machine). */
  mode: ListingMode;
  since?: string;
  /** Tasks to list by id (new registrations, or every task of an `ids` group), at most 100 a call. */
  taskIds: string[];
  shard: number;
  shards: number;
  /** Bound of the `changes` part: pages of 100 rows. */
  maxPages: number;
}

export interface ListWatchedTasksOutcome {
  /** false: the seller offers no task list (or refused it as an unknown tool); `note` says what was seen. */
  supported: boolean;
  rows: ListedTask[];
  /** The latest `updated_at` among every row the seller returned (all shards), the next `since`. */
  latestUpdatedAt?: string;
  /** The `changes` listing stopped at `maxPages` with more to read: list again soon from `latestUpdatedAt`. */
  truncated: boolean;
  /** The seller returned rows older than `since` or without `updated_at`: it ignores the filter. */
  ignoresUpdatedAfter: boolean;
  calls: number;
  note?: string;
}

export interface DeliverTaskNoticesInput {
  sellerId: string;
  tenant?: string;
  account?: unknown;
  watcherId: string;
  notices: PendingNotice[];
}

export interface DeliverTaskNoticesOutcome {
  /** Signalled. */
  delivered: string[];
  /** The operation no longer runs. */
  gone: string[];
  /** Could not be signalled now (Temporal busy): tried again later. */
  failed: string[];
}

/** The operation side's registration (a local activity of the operation): whether the watcher takes it. */
export interface RegisterWithWatcherInput {
  registration: WatchRegistration;
  sellerId: string;
}

export interface RegisterWithWatcherOutcome {
  watching: boolean;
  watcherId?: string;
  /**
   * While watched, the operation still reads its task itself: first this long after its quick polls (the worker's
   * ADCP_TASK_WATCHER_SAFETY_POLL), then twice as long each time the task has not moved...
   */
  safetyPollMs?: number;
  /** ...up to this gap (ADCP_TASK_WATCHER_SAFETY_POLL_MAX; absent: `safetyPollMs`, no backoff). */
  safetyPollMaxMs?: number;
  /** The watcher's round (the worker's ADCP_TASK_WATCHER_INTERVAL; absent: WATCH_INTERVAL_MS): quick polls end there. */
  watchIntervalMs?: number;
  /** Why not, when not (the seller cannot list, the watcher is off): the operation polls on its own. */
  reason?: string;
}

export interface UnregisterFromWatcherInput {
  watcherId: string;
  operationId: string;
  reason: string;
}

/** The operation's side of the watcher, as carried across the operation's continue-as-new. */
export interface CarriedTaskWatch {
  watcherId?: string;
  safetyPollMs?: number;
  safetyPollMaxMs?: number;
  watchIntervalMs?: number;
  told?: { taskId: string; status: TaskStatus };
  declined?: { taskId: string; reason: string };
  inbox?: TaskWatchNotice[];
  seen?: string[];
}

/** A listing that failed, in the machine's terms. */
export interface ListingFailure {
  error: AdcpError;
  /** A retry cannot fix it (configuration): the group stops listing until a registration changes it. */
  permanent: boolean;
}

/** Between listings of one group (the `submitted` poll cadence of one operation: nobody learns later than today). */
export const WATCH_INTERVAL_MS = 60_000;
/** The shortest watcher round: a listing is one call per group, but not a poll loop. */
export const MIN_WATCH_INTERVAL_MS = 5_000;
/** The longest: a change may reach its operation this late. */
export const MAX_WATCH_INTERVAL_MS = 3_600_000;
/**
 * A watched operation's own read of its task, in case the watcher misses a move: the first this long after its quick
 * polls by default, each later one twice as long after the one before while the task has not moved...
 */
export const SAFETY_POLL_MS = 30 * 60_000;
/** ...up to this gap by default (a move the watcher missed is found within it; any move starts the wait afresh). */
export const SAFETY_POLL_MAX_MS = 2 * 3_600_000;
/** Longest wait after repeated listing failures. */
export const MAX_LISTING_BACKOFF_MS = 15 * 60_000;
