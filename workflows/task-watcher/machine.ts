/**
 * The task watcher's rules, free of Temporal: which operations are watched, in which listing group (tenant and
 * account: a list made with one tenant's credentials is matched only to that tenant's operations), when each group
 * is listed and what it lists, what a listing means (a move, nothing, a task the seller does not show), the notices
 * to deliver and what to do when delivery or listing fails. The workflow (./workflow.ts) runs the activities the
 * machine asks for and hands their answers back.
 *
 * A listing group normally reads what changed at the seller since its last listing (`updated_after`, sorted by
 * `updated_at`): one call per round however many operations wait, plus one call per 100 new registrations, which
 * are listed by id once so a move between the operation's last read and the group's next change listing is not
 * missed. A seller that ignores `updated_after` is read by id instead (the group's tasks, 100 a call).
 */
import {
  type CarriedEntry,
  type CarriedGroup,
  type CarriedWatcherState,
  type ListWatchedTasksInput,
  type ListWatchedTasksOutcome,
  type ListedTask,
  type ListingFailure,
  type ListingMode,
  MAX_LISTING_BACKOFF_MS,
  MAX_WATCH_INTERVAL_MS,
  MIN_WATCH_INTERVAL_MS,
  type PendingNotice,
  type TaskObservation,
  type TaskWatcherView,
  type WatchRegistration,
  type WatcherCounters,
  type DeliverTaskNoticesOutcome,
} from '../../contract/task-watcher';
import { TERMINAL_STATUSES, type TaskStatus, normaliseStatus } from '../../protocol/status';

/** The first listing of a new group waits this long, so registrations arriving together are listed together. */
export const FIRST_LISTING_DELAY_MS = 2_000;
/** A `changes` listing starts this long before the newest `updated_at` seen: rows that became visible late. */
export const SINCE_OVERLAP_MS = 10_000;
/** Pages of 100 rows in one `changes` listing; more: the next listing follows at once. */
export const MAX_CHANGE_PAGES = 20;
/** Tasks listed by id in one listing (catch-up of new registrations, or an `ids` group's round). */
export const MAX_IDS_PER_LISTING = 2_000;
/** Listings in which a task listed by id was absent before the operation is handed back to its own polls. */
export const MISSES_BEFORE_RELEASE = 3;
/** Operations one watcher holds; more are handed back (their state is carried through continue-as-new). */
export const MAX_ENTRIES = 10_000;
/** Notices delivered by one activity. */
export const MAX_NOTICES_PER_DELIVERY = 200;
/** Delivery attempts of one notice before it is dropped (the operation's safety poll still reads the task). */
export const MAX_DELIVERY_ATTEMPTS = 8;
/** A watcher with nothing to watch for this long ends; the next registration starts it again. */
export const IDLE_END_MS = 10 * 60_000;
/** A group whose seller could not list is asked again after this long, when an operation registers. */
export const UNSUPPORTED_RECHECK_MS = 60 * 60_000;
/** After a truncated `changes` listing, or a catch-up longer than one listing, the next listing follows this soon. */
const CONTINUE_LISTING_MS = 1_000;

export interface WatcherSettings {
  sellerId: string;
  shard: number;
  shards: number;
  intervalMs: number;
}

interface Entry {
  operationId: string;
  taskId: string;
  task: string;
  group: string;
  known: TaskObservation;
  deadlineMs: number;
  /** Listed (by id or in a change listing) since it registered. */
  confirmed: boolean;
  misses: number;
  contextId?: string;
}

type Group = CarriedGroup;

export type WatcherStep =
  | { kind: 'deliver'; group: string; tenant?: string; account?: unknown; notices: PendingNotice[] }
  | {
      kind: 'list';
      group: string;
      input: Omit<ListWatchedTasksInput, 'sellerId' | 'shard' | 'shards'>;
    }
  | { kind: 'wait'; untilMs: number }
  | { kind: 'end' };

function emptyCounters(): WatcherCounters {
  return {
    listings: 0,
    listingCalls: 0,
    listingFailures: 0,
    rowsListed: 0,
    moves: 0,
    released: 0,
    delivered: 0,
    gone: 0,
    expired: 0,
    registrations: 0,
    unregistrations: 0,
  };
}

/** JSON with sorted keys: two spellings of one account are one group. */
export function stableJson(value: unknown): string {
  if (value === undefined) return 'null';
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${stableJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The listing group of a tenant and account. */
export function groupKeyOf(tenant: string | undefined, account: unknown): string {
  return `${tenant ?? ''}|${account === undefined ? '' : stableJson(account)}`;
}

function progressKey(progress: unknown): string {
  return progress === undefined ? '' : stableJson(progress);
}

/** Whether what a listing shows differs from what is known: another status, or other progress where it shows one. */
export function movedFrom(known: TaskObservation, listed: ListedTask): boolean {
  if (listed.status !== known.status) return true;
  return listed.progress !== undefined && progressKey(listed.progress) !== progressKey(known.progress);
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function minusMs(time: string, ms: number): string | undefined {
  const parsed = Date.parse(time);
  return Number.isFinite(parsed) ? iso(parsed - ms) : undefined;
}

function laterOf(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Date.parse(b) > Date.parse(a) ? b : a;
}

export class TaskWatcherMachine {
  private readonly entries = new Map<string, Entry>();
  private readonly groups = new Map<string, Group>();
  /** Per group: task id -> operations watching it (several when a seller reuses task ids). */
  private readonly byTask = new Map<string, Map<string, Set<string>>>();
  /** At most one notice per operation: a newer move replaces one not delivered yet. */
  private readonly outbox = new Map<string, PendingNotice>();
  readonly counters: WatcherCounters;
  private idleSinceMs: number | undefined;
  runs: number;
  /** Between listings of one group while nothing fails: the settings' round, then that of the latest registration. */
  private round: number;

  get intervalMs(): number {
    return this.round;
  }

  constructor(
    readonly settings: WatcherSettings,
    readonly watcherId: string,
    carried?: CarriedWatcherState,
  ) {
    this.round = settings.intervalMs;
    this.counters = { ...emptyCounters(), ...(carried?.counters ?? {}) };
    this.runs = (carried?.runs ?? 0) + (carried ? 1 : 0);
    this.idleSinceMs = carried?.idleSinceMs;
    for (const group of carried?.groups ?? []) this.groups.set(group.key, { ...group });
    for (const [operationId, taskId, task, group, status, deadlineMs, confirmed, misses, extra] of carried?.entries ??
      []) {
      this.add({
        operationId,
        taskId,
        task,
        group,
        known: {
          status,
          ...(extra?.progress !== undefined ? { progress: extra.progress } : {}),
          ...(extra?.updatedAt !== undefined ? { updatedAt: extra.updatedAt } : {}),
        },
        deadlineMs,
        confirmed: confirmed === 1,
        misses,
        ...(extra?.contextId !== undefined ? { contextId: extra.contextId } : {}),
      });
    }
    for (const pending of carried?.outbox ?? []) this.outbox.set(pending.operationId, pending);
  }

  get size(): number {
    return this.entries.size;
  }

  get pendingNotices(): PendingNotice[] {
    return [...this.outbox.values()];
  }

  /** Whether the operation is watched now (tests, the query). */
  watches(operationId: string): boolean {
    return this.entries.has(operationId);
  }

  known(operationId: string): TaskObservation | undefined {
    return this.entries.get(operationId)?.known;
  }

  private add(entry: Entry): void {
    this.entries.set(entry.operationId, entry);
    let index = this.byTask.get(entry.group);
    if (!index) this.byTask.set(entry.group, (index = new Map()));
    let operations = index.get(entry.taskId);
    if (!operations) index.set(entry.taskId, (operations = new Set()));
    operations.add(entry.operationId);
  }

  private remove(operationId: string): Entry | undefined {
    const entry = this.entries.get(operationId);
    if (!entry) return undefined;
    this.entries.delete(operationId);
    const index = this.byTask.get(entry.group);
    const operations = index?.get(entry.taskId);
    operations?.delete(operationId);
    if (operations && operations.size === 0) index!.delete(entry.taskId);
    if (index && index.size === 0) this.byTask.delete(entry.group);
    return entry;
  }

  private release(entry: Entry, reason: string, now: number): void {
    this.remove(entry.operationId);
    this.queue(entry, { kind: 'released', reason, observedAt: iso(now) }, now);
    this.counters.released += 1;
  }

  private queue(
    entry: Pick<Entry, 'operationId' | 'taskId' | 'task' | 'group'>,
    notice: PendingNotice['notice'],
    now: number,
  ): void {
    this.outbox.set(entry.operationId, {
      operationId: entry.operationId,
      taskId: entry.taskId,
      task: entry.task,
      group: entry.group,
      notice,
      attempts: 0,
      notBeforeMs: now,
    });
  }

  // ---- facts from signals (never throw) ----------------------------------------------------------------------

  register(registration: WatchRegistration, now: number): void {
    if (!registration || typeof registration.operationId !== 'string' || typeof registration.taskId !== 'string')
      return;
    const status = normaliseStatus(registration.known?.status);
    const deadlineMs = Date.parse(registration.deadline);
    if (!status || !Number.isFinite(deadlineMs) || typeof registration.task !== 'string') return;
    this.counters.registrations += 1;
    // The registering worker's round (ADCP_TASK_WATCHER_INTERVAL): a changed setting reaches a running watcher.
    const round = registration.intervalMs;
    if (
      typeof round === 'number' &&
      Number.isInteger(round) &&
      round >= MIN_WATCH_INTERVAL_MS &&
      round <= MAX_WATCH_INTERVAL_MS
    )
      this.round = round;
    if (deadlineMs <= now) return;
    const key = groupKeyOf(registration.tenant, registration.account);
    let group = this.groups.get(key);
    if (group?.unsupported !== undefined && now - group.nextDueAtMs >= 0) {
      // Long enough since the seller could not list: try again with this registration.
      group.unsupported = undefined;
      group.nextDueAtMs = now + FIRST_LISTING_DELAY_MS;
      group.failures = 0;
    }
    const previous = this.remove(registration.operationId);
    const entry: Entry = {
      operationId: registration.operationId,
      taskId: registration.taskId,
      task: registration.task,
      group: key,
      known: {
        status,
        ...(registration.known.progress !== undefined ? { progress: registration.known.progress } : {}),
        ...(registration.known.updatedAt !== undefined ? { updatedAt: registration.known.updatedAt } : {}),
      },
      deadlineMs,
      confirmed: false,
      misses: 0,
      ...(registration.contextId !== undefined ? { contextId: registration.contextId } : {}),
    };
    if (group?.unsupported !== undefined) {
      this.queue(entry, { kind: 'released', reason: group.unsupported, observedAt: iso(now) }, now);
      this.counters.released += 1;
      return;
    }
    if (!previous && this.entries.size >= MAX_ENTRIES) {
      this.queue(
        entry,
        {
          kind: 'released',
          reason: `this watcher already holds ${MAX_ENTRIES} operations; add shards (ADCP_TASK_WATCHER_SHARDS)`,
          observedAt: iso(now),
        },
        now,
      );
      this.counters.released += 1;
      return;
    }
    if (!group) {
      group = {
        key,
        ...(registration.tenant !== undefined ? { tenant: registration.tenant } : {}),
        ...(registration.account !== undefined ? { account: registration.account } : {}),
        mode: 'changes',
        nextDueAtMs: now + FIRST_LISTING_DELAY_MS,
        failures: 0,
        idsCursor: 0,
      };
      this.groups.set(key, group);
    }
    this.add(entry);
    this.idleSinceMs = undefined;
  }

  unregister(operationId: unknown): void {
    if (typeof operationId !== 'string') return;
    this.counters.unregistrations += 1;
    this.remove(operationId);
    // A move not delivered yet is no news to an operation that stopped waiting.
    this.outbox.delete(operationId);
  }

  // ---- what to do next ---------------------------------------------------------------------------------------

  /** The earliest time the machine wants to act (the workflow waits until then, or until this moves earlier). */
  wakeAtMs(now: number): number {
    let wake = Number.POSITIVE_INFINITY;
    for (const pending of this.outbox.values()) wake = Math.min(wake, pending.notBeforeMs);
    for (const group of this.groups.values()) {
      if (group.unsupported === undefined && this.byTask.has(group.key)) wake = Math.min(wake, group.nextDueAtMs);
    }
    if (wake === Number.POSITIVE_INFINITY) wake = (this.idleSinceMs ?? now) + IDLE_END_MS;
    return wake;
  }

  next(now: number): WatcherStep {
    this.expire(now);
    const due = [...this.outbox.values()].filter((pending) => pending.notBeforeMs <= now);
    if (due.length > 0) {
      const group = due[0].group;
      const notices = due.filter((pending) => pending.group === group).slice(0, MAX_NOTICES_PER_DELIVERY);
      const owner = this.groups.get(group);
      return {
        kind: 'deliver',
        group,
        ...(owner?.tenant !== undefined ? { tenant: owner.tenant } : {}),
        ...(owner?.account !== undefined ? { account: owner.account } : {}),
        notices,
      };
    }
    for (const group of [...this.groups.values()]) {
      if (!this.byTask.has(group.key)) {
        // Nobody waits in this group: forget it (an unsupported seller is remembered until its recheck).
        if (group.unsupported === undefined) this.groups.delete(group.key);
        continue;
      }
      if (group.unsupported !== undefined || group.nextDueAtMs > now) continue;
      return { kind: 'list', group: group.key, input: this.listingInput(group) };
    }
    if (this.entries.size === 0 && this.outbox.size === 0) {
      this.idleSinceMs ??= now;
      if (now - this.idleSinceMs >= IDLE_END_MS) return { kind: 'end' };
    }
    return { kind: 'wait', untilMs: this.wakeAtMs(now) };
  }

  private listingInput(group: Group): Omit<ListWatchedTasksInput, 'sellerId' | 'shard' | 'shards'> {
    const index = this.byTask.get(group.key) ?? new Map<string, Set<string>>();
    const taskIds: string[] = [];
    if (group.mode === 'changes' && group.since !== undefined) {
      for (const [taskId, operations] of index) {
        if (taskIds.length >= MAX_IDS_PER_LISTING) break;
        for (const operationId of operations) {
          if (!this.entries.get(operationId)!.confirmed) {
            taskIds.push(taskId);
            break;
          }
        }
      }
    } else {
      // Every task of the group by id (an `ids` group, or a `changes` group before it knows where changes start), a
      // slice per listing when there are more than one listing holds.
      const all = [...index.keys()];
      const start = group.idsCursor % Math.max(all.length, 1);
      for (let offset = 0; offset < Math.min(all.length, MAX_IDS_PER_LISTING); offset++)
        taskIds.push(all[(start + offset) % all.length]);
    }
    return {
      ...(group.tenant !== undefined ? { tenant: group.tenant } : {}),
      ...(group.account !== undefined ? { account: group.account } : {}),
      mode: group.mode,
      ...(group.mode === 'changes' && group.since !== undefined ? { since: group.since } : {}),
      taskIds,
      maxPages: MAX_CHANGE_PAGES,
    };
  }

  private expire(now: number): void {
    for (const entry of [...this.entries.values()]) {
      if (entry.deadlineMs > now) continue;
      this.remove(entry.operationId);
      this.outbox.delete(entry.operationId);
      this.counters.expired += 1;
    }
  }

  // ---- answers of the activities -----------------------------------------------------------------------------

  /** A listing's rows: the moves to notify, the tasks it did not show, where the next listing starts. */
  listed(
    groupKey: string,
    input: Pick<ListWatchedTasksInput, 'mode' | 'taskIds' | 'since'>,
    outcome: ListWatchedTasksOutcome,
    now: number,
  ): void {
    const group = this.groups.get(groupKey);
    if (!group) return;
    this.counters.listings += 1;
    this.counters.listingCalls += outcome.calls;
    this.counters.rowsListed += outcome.rows.length;
    const index = this.byTask.get(groupKey);
    if (!outcome.supported) {
      const reason = `${this.settings.sellerId} does not list its tasks here${outcome.note ? ` (${outcome.note})` : ''}`;
      group.unsupported = reason;
      group.nextDueAtMs = now + UNSUPPORTED_RECHECK_MS;
      for (const operations of [...(index?.values() ?? [])])
        for (const operationId of [...operations]) this.release(this.entries.get(operationId)!, reason, now);
      return;
    }
    group.failures = 0;
    group.lastError = undefined;
    const listed = new Map<string, ListedTask>();
    for (const row of outcome.rows) listed.set(row.taskId, row);
    for (const [taskId, row] of listed) {
      const operations = index?.get(taskId);
      if (!operations) continue;
      for (const operationId of [...operations]) this.observe(this.entries.get(operationId)!, row, now);
    }
    // Tasks listed by id that the seller did not show: not visible with these credentials and account (or gone).
    for (const taskId of input.taskIds) {
      if (listed.has(taskId)) continue;
      for (const operationId of [...(index?.get(taskId) ?? [])]) {
        const entry = this.entries.get(operationId)!;
        entry.misses += 1;
        if (entry.misses >= MISSES_BEFORE_RELEASE)
          this.release(
            entry,
            `${this.settings.sellerId}'s task list did not show task ${taskId} in ${entry.misses} listings`,
            now,
          );
      }
    }
    let mode: ListingMode = group.mode;
    if (outcome.ignoresUpdatedAfter && mode === 'changes') mode = 'ids';
    if (mode === 'changes' && outcome.rows.length > 0 && outcome.latestUpdatedAt === undefined) mode = 'ids';
    if (mode !== group.mode) {
      group.mode = mode;
      group.since = undefined;
    }
    if (input.mode === 'ids' || input.since === undefined) group.idsCursor += input.taskIds.length;
    let soon = false;
    if (mode === 'changes' && outcome.latestUpdatedAt !== undefined) {
      const overlapped = minusMs(outcome.latestUpdatedAt, SINCE_OVERLAP_MS);
      const advances =
        overlapped !== undefined && (group.since === undefined || Date.parse(overlapped) > Date.parse(group.since));
      if (advances) group.since = overlapped;
      else if (outcome.truncated) {
        // More changes within one overlap than a listing holds (sorted oldest first): go on from the newest row read,
        // a millisecond before it for rows sharing its time.
        group.since = laterOf(group.since, minusMs(outcome.latestUpdatedAt, 1));
      }
      soon = outcome.truncated;
    }
    if (mode === 'changes' && input.taskIds.length >= MAX_IDS_PER_LISTING) soon ||= this.hasUnconfirmed(groupKey);
    group.nextDueAtMs = now + (soon ? CONTINUE_LISTING_MS : this.round);
  }

  private hasUnconfirmed(groupKey: string): boolean {
    for (const operations of this.byTask.get(groupKey)?.values() ?? [])
      for (const operationId of operations) if (!this.entries.get(operationId)!.confirmed) return true;
    return false;
  }

  private observe(entry: Entry, row: ListedTask, now: number): void {
    entry.confirmed = true;
    entry.misses = 0;
    if (!movedFrom(entry.known, row)) {
      if (row.updatedAt !== undefined) entry.known.updatedAt = row.updatedAt;
      return;
    }
    const listed: TaskObservation = {
      status: row.status,
      ...(row.progress !== undefined ? { progress: row.progress } : {}),
      ...(row.updatedAt !== undefined ? { updatedAt: row.updatedAt } : {}),
    };
    const eventKey = `watch:${row.taskId}:${row.status}:${row.updatedAt ?? ''}:${progressKey(row.progress)}`;
    // A move not delivered yet is replaced by the newer one (queue): the operation hears where the task is now.
    this.queue(
      entry,
      {
        kind: 'moved',
        eventKey,
        listed,
        observedAt: iso(now),
        ...(entry.contextId !== undefined ? { contextId: entry.contextId } : {}),
      },
      now,
    );
    this.counters.moves += 1;
    entry.known = listed;
    // A finished task moves no more: the operation ends on this notice (or reads and polls on its own).
    if (TERMINAL_STATUSES.has(row.status as TaskStatus)) this.remove(entry.operationId);
  }

  listingFailed(groupKey: string, failure: ListingFailure, now: number): void {
    const group = this.groups.get(groupKey);
    if (!group) return;
    this.counters.listingFailures += 1;
    group.failures += 1;
    group.lastError = `${failure.error.code}: ${failure.error.message}`;
    if (failure.permanent) {
      const reason = `listing ${this.settings.sellerId}'s tasks fails: ${group.lastError}`;
      group.unsupported = reason;
      group.nextDueAtMs = now + UNSUPPORTED_RECHECK_MS;
      for (const operations of [...(this.byTask.get(groupKey)?.values() ?? [])])
        for (const operationId of [...operations]) this.release(this.entries.get(operationId)!, reason, now);
      return;
    }
    // The operations keep their safety polls meanwhile; the seller is asked less often the longer it fails.
    group.nextDueAtMs = now + Math.min(this.round * 2 ** Math.min(group.failures, 10), MAX_LISTING_BACKOFF_MS);
  }

  delivered(notices: readonly PendingNotice[], outcome: DeliverTaskNoticesOutcome, now: number): void {
    const done = new Set([...outcome.delivered, ...outcome.gone]);
    this.counters.delivered += outcome.delivered.length;
    this.counters.gone += outcome.gone.length;
    for (const operationId of outcome.gone) this.remove(operationId);
    for (const sent of notices) {
      // Only the notice that was sent: a newer one queued meanwhile stays.
      if (this.outbox.get(sent.operationId) !== sent) continue;
      if (done.has(sent.operationId)) {
        this.outbox.delete(sent.operationId);
        continue;
      }
      // Failed, or not answered for: tried again later, up to a bound.
      const attempts = sent.attempts + 1;
      if (attempts >= MAX_DELIVERY_ATTEMPTS) this.outbox.delete(sent.operationId);
      else
        this.outbox.set(sent.operationId, {
          ...sent,
          attempts,
          notBeforeMs: now + Math.min(5_000 * 2 ** attempts, 5 * 60_000),
        });
    }
  }

  /** The delivery activity itself failed: every notice it carried is tried again later. */
  deliveryFailed(notices: readonly PendingNotice[], now: number): void {
    this.delivered(notices, { delivered: [], gone: [], failed: notices.map((notice) => notice.operationId) }, now);
  }

  // ---- continue-as-new and the query -------------------------------------------------------------------------

  carry(): CarriedWatcherState {
    const entries: CarriedEntry[] = [];
    for (const entry of this.entries.values()) {
      const extra = {
        ...(entry.known.progress !== undefined ? { progress: entry.known.progress } : {}),
        ...(entry.known.updatedAt !== undefined ? { updatedAt: entry.known.updatedAt } : {}),
        ...(entry.contextId !== undefined ? { contextId: entry.contextId } : {}),
      };
      const row: CarriedEntry = [
        entry.operationId,
        entry.taskId,
        entry.task,
        entry.group,
        entry.known.status,
        entry.deadlineMs,
        entry.confirmed ? 1 : 0,
        entry.misses,
      ];
      if (Object.keys(extra).length > 0) row.push(extra);
      entries.push(row);
    }
    return {
      entries,
      groups: [...this.groups.values()].map((group) => ({ ...group })),
      outbox: [...this.outbox.values()],
      counters: { ...this.counters },
      ...(this.idleSinceMs !== undefined ? { idleSinceMs: this.idleSinceMs } : {}),
      runs: this.runs,
    };
  }

  view(now: number): TaskWatcherView {
    let confirmed = 0;
    for (const entry of this.entries.values()) if (entry.confirmed) confirmed += 1;
    return {
      sellerId: this.settings.sellerId,
      shard: this.settings.shard,
      watching: this.entries.size,
      confirmed,
      pendingNotices: this.outbox.size,
      groups: [...this.groups.values()].map((group) => {
        let watching = 0;
        for (const operations of this.byTask.get(group.key)?.values() ?? []) watching += operations.size;
        return {
          key: group.key,
          ...(group.tenant !== undefined ? { tenant: group.tenant } : {}),
          watching,
          mode: group.mode,
          ...(group.since !== undefined ? { since: group.since } : {}),
          nextListingAt: iso(Math.max(group.nextDueAtMs, now)),
          failures: group.failures,
          ...(group.lastError !== undefined ? { lastError: group.lastError } : {}),
          ...(group.unsupported !== undefined ? { unsupported: group.unsupported } : {}),
        };
      }),
      counters: { ...this.counters },
      runs: this.runs,
      intervalMs: this.round,
    };
  }
}
