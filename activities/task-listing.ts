/**
 * The task watcher's I/O (workflows/task-watcher/): list a seller's tasks for one listing group (tenant and account)
 * in as few calls as the seller allows, read the tasks that moved and tell their operations, and, for the operation
 * side, register with the seller's watcher or leave it. The decisions are the watcher machine's; these only call.
 *
 * Listing: `list_tasks` (3.1) or `tasks/list` (3.0), whichever the seller offers (its stored capabilities, else its
 * tools/list). What changed since `since` (`updated_after`, oldest first, paged), and tasks by id (`task_ids`, 100 a
 * call). Rows of other shards are dropped here, so a watcher's history holds only its own shard's rows.
 * Credentials are the group's tenant's (config/sellers.ts), resolved at the call, never carried in inputs.
 */
import { Context } from '@temporalio/activity';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { z } from 'zod';
import { type SellerRegistry, ConfigError } from '../config/sellers';
import { normaliseStatus } from '../protocol/status';
import { asRecord } from '../protocol/records';
import {
  type DeliverTaskNoticesInput,
  type DeliverTaskNoticesOutcome,
  type ListWatchedTasksInput,
  type ListWatchedTasksOutcome,
  type ListedTask,
  type RegisterWithWatcherInput,
  type RegisterWithWatcherOutcome,
  type TaskWatchNotice,
  type TaskWatcherInput,
  type UnwatchRequest,
  type WatchRegistration,
  TASK_WATCHER_WORKFLOW_TYPE,
  type UnregisterFromWatcherInput,
  MAX_WATCH_INTERVAL_MS,
  MIN_WATCH_INTERVAL_MS,
  SAFETY_POLL_MAX_MS,
  WATCH_INTERVAL_MS,
  taskMovedSignal,
  taskWatcherShard,
  taskWatcherWorkflowId,
  unwatchTaskSignal,
  watchTaskSignal,
} from '../contract/task-watcher';
import { sellerAccess } from './seller-access';
import { type StoredCapabilitiesLookup, StoredCapabilitiesCache, withStoredWireVersion } from './stored-capabilities';
import { deadlineSignal } from './linked-signal';
import { SignalBatcher } from './signal-batcher';
import { raceSignal } from './mcp-connection';
import { SellerDescriptionCache } from './read-strategy';
import {
  type CallContext,
  type SellerClient,
  type SellerDescription,
  type TaskListPage,
  createSdkSellerClient,
  isUnknownToolError,
} from './seller-client';

const settingsSchema = z.object({
  /** `off`: operations poll on their own, as before the watcher. */
  ADCP_TASK_WATCHER: z.enum(['on', 'off']).default('on'),
  /** Watchers per seller: each holds up to MAX_ENTRIES parked operations (workflows/task-watcher/machine.ts). */
  ADCP_TASK_WATCHER_SHARDS: z.coerce.number().int().min(1).max(1024).default(1),
  /** When a watched operation first reads its task itself after its quick polls: `15m`, `30m`, `2h`. */
  ADCP_TASK_WATCHER_SAFETY_POLL: z
    .string()
    .regex(/^\d+(s|m|h)$/, 'must be a duration such as 15m, 30m or 2h')
    .default('30m'),
  /**
   * The longest gap its later reads double to while the task has not moved (default: 2h, or the first read's delay
   * when that is longer; equal to it: no backoff).
   */
  ADCP_TASK_WATCHER_SAFETY_POLL_MAX: z
    .string()
    .regex(/^\d+(s|m|h)$/, 'must be a duration such as 30m, 2h or 6h')
    .optional(),
  /** How often a watcher lists its seller's tasks: `30s`, `1m`, `5m` (a watcher started by this worker). */
  ADCP_TASK_WATCHER_INTERVAL: z
    .string()
    .regex(/^\d+(s|m|h)$/, 'must be a duration such as 30s, 1m or 5m')
    .default('1m'),
});

const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000 } as const;

export interface TaskWatcherSettings {
  enabled: boolean;
  shards: number;
  safetyPollMs: number;
  /** The cap the safety poll backs off to (at least `safetyPollMs`). */
  safetyPollMaxMs: number;
  /** The round of the watchers this worker starts (default WATCH_INTERVAL_MS). */
  intervalMs?: number;
}

function durationMs(value: string): number {
  return Number.parseInt(value, 10) * UNIT_MS[value.slice(-1) as keyof typeof UNIT_MS];
}

export function taskWatcherSettings(env: NodeJS.ProcessEnv = process.env): TaskWatcherSettings {
  const parsed = settingsSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      `Invalid task watcher settings: ${parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`,
    );
  }
  const interval = parsed.data.ADCP_TASK_WATCHER_INTERVAL;
  const intervalMs = durationMs(interval);
  if (intervalMs < MIN_WATCH_INTERVAL_MS || intervalMs > MAX_WATCH_INTERVAL_MS)
    throw new ConfigError(`ADCP_TASK_WATCHER_INTERVAL=${interval} is outside 5s to 1h.`);
  const safety = parsed.data.ADCP_TASK_WATCHER_SAFETY_POLL;
  const safetyPollMs = durationMs(safety);
  if (safetyPollMs < intervalMs)
    throw new ConfigError(
      `ADCP_TASK_WATCHER_SAFETY_POLL=${safety} is shorter than the watcher's own round (ADCP_TASK_WATCHER_INTERVAL=${interval}).`,
    );
  const safetyMax = parsed.data.ADCP_TASK_WATCHER_SAFETY_POLL_MAX;
  const safetyPollMaxMs = safetyMax === undefined ? Math.max(SAFETY_POLL_MAX_MS, safetyPollMs) : durationMs(safetyMax);
  if (safetyPollMaxMs < safetyPollMs)
    throw new ConfigError(
      `ADCP_TASK_WATCHER_SAFETY_POLL_MAX=${safetyMax} is shorter than the first safety poll (ADCP_TASK_WATCHER_SAFETY_POLL=${safety}); set it equal for a safety poll that does not back off.`,
    );
  return {
    enabled: parsed.data.ADCP_TASK_WATCHER === 'on',
    shards: parsed.data.ADCP_TASK_WATCHER_SHARDS,
    safetyPollMs,
    safetyPollMaxMs,
    ...(intervalMs !== WATCH_INTERVAL_MS ? { intervalMs } : {}),
  };
}

export interface TaskListingDependencies {
  sellers: SellerRegistry;
  /** Signals operations and watchers. */
  client: Client;
  /**
   * The task queue watchers run on and their IDs name; default: the queue of the activity that registers (a local
   * activity of the operation, so the operation's own queue).
   */
  taskQueue?: string;
  seller?: SellerClient;
  env?: NodeJS.ProcessEnv;
  /** Bound of one list or read call (default 60 s). */
  readTimeoutMs?: number;
  /** The sellers' stored capabilities (which list tool they offer); default: read from their workflows' memos. */
  storedCapabilities?: StoredCapabilitiesLookup;
  /** Defaults from the environment (taskWatcherSettings). */
  settings?: TaskWatcherSettings;
  now?: () => number;
}

const PAGE_SIZE = 100;
/** Signals to operations sent at once by one delivery. */
const DELIVERY_CONCURRENCY = 4;
/** Registrations (and leavings) gathered into one signal to their watcher: up to 200, or what came within 200 ms. */
const SIGNAL_BATCHING = { delayMs: 200, maxBatch: 200 };

/** The list tool a seller offers, by what it says it offers; undefined: none. */
export function listToolOf(description: SellerDescription | undefined): 'list_tasks' | 'tasks/list' | undefined {
  if (!description) return undefined;
  if (description.tools.includes('list_tasks')) return 'list_tasks';
  if (description.tools.includes('tasks/list')) return 'tasks/list';
  return undefined;
}

/** A list row as the watcher compares it; undefined when it has no id or no status we can read. */
export function listedTaskOf(row: Record<string, unknown>): ListedTask | undefined {
  if (typeof row.task_id !== 'string') return undefined;
  const status = normaliseStatus(row.status);
  if (!status || status === 'unknown') return undefined;
  const progress = asRecord(row.progress);
  return {
    taskId: row.task_id,
    status,
    ...(typeof row.updated_at === 'string' ? { updatedAt: row.updated_at } : {}),
    ...(progress ? { progress } : {}),
  };
}

function later(a: string | undefined, b: string | undefined): string | undefined {
  if (b === undefined || !Number.isFinite(Date.parse(b))) return a;
  if (a === undefined) return b;
  return Date.parse(b) > Date.parse(a) ? b : a;
}

/** One page of a seller's task list, or undefined when it has no such list (an unknown tool). */
export type TaskListPager = (
  filters: Record<string, unknown>,
  cursor?: string,
  sort?: Record<string, unknown>,
) => Promise<TaskListPage | undefined>;

/**
 * The listing of one group through `page`: what changed after `since` (oldest first, up to `maxPages` pages), then
 * the tasks named by id (100 a call), keeping only this shard's rows. Separate from the activity so the machine's
 * tests list through exactly this logic against a simulated seller.
 */
export async function listGroupTasks(
  input: Pick<ListWatchedTasksInput, 'mode' | 'since' | 'taskIds' | 'shard' | 'shards' | 'maxPages'>,
  page: TaskListPager,
): Promise<ListWatchedTasksOutcome> {
  const unsupported = (calls: number): ListWatchedTasksOutcome => ({
    supported: false,
    rows: [],
    truncated: false,
    ignoresUpdatedAfter: false,
    calls,
  });
  const rows = new Map<string, ListedTask>();
  let latestUpdatedAt: string | undefined;
  let calls = 0;
  let truncated = false;
  let ignoresUpdatedAfter = false;
  const keep = (row: ListedTask) => {
    if (taskWatcherShard(row.taskId, input.shards) === input.shard) rows.set(row.taskId, row);
  };
  if (input.mode === 'changes' && input.since !== undefined) {
    const sinceMs = Date.parse(input.since);
    let cursor: string | undefined;
    for (let pages = 0; ; pages++) {
      if (pages >= input.maxPages) {
        truncated = true;
        break;
      }
      calls += 1;
      const answer = await page({ updated_after: input.since }, cursor, { field: 'updated_at', direction: 'asc' });
      if (!answer) return unsupported(calls);
      for (const raw of answer.rows ?? []) {
        const updatedAt = typeof raw.updated_at === 'string' ? raw.updated_at : undefined;
        // A row from before `since` (or without a time) means the seller does not filter by it.
        if (updatedAt === undefined || !(Date.parse(updatedAt) > sinceMs)) ignoresUpdatedAfter = true;
        latestUpdatedAt = later(latestUpdatedAt, updatedAt);
        const row = listedTaskOf(raw);
        if (row) keep(row);
      }
      // Paging through everything a seller holds is what the filter is there to avoid: read by id instead.
      if (ignoresUpdatedAfter) break;
      cursor = answer.nextCursor;
      if (!cursor) break;
    }
  }
  // Rows listed by id must not move `since` past changes a truncated listing has not read yet.
  const latestOfChanges = latestUpdatedAt;
  for (let offset = 0; offset < input.taskIds.length; offset += PAGE_SIZE) {
    const wanted = input.taskIds.slice(offset, offset + PAGE_SIZE);
    calls += 1;
    const answer = await page({ task_ids: wanted });
    if (!answer) return unsupported(calls);
    const asked = new Set(wanted);
    for (const raw of answer.rows ?? []) {
      const row = listedTaskOf(raw);
      // A seller that ignores the filter lists other tasks: only the ones asked for count as listed by id.
      if (!row || !asked.has(row.taskId)) continue;
      latestUpdatedAt = later(latestUpdatedAt, row.updatedAt);
      keep(row);
    }
  }
  if (truncated) latestUpdatedAt = latestOfChanges;
  return {
    supported: true,
    rows: [...rows.values()],
    ...(latestUpdatedAt !== undefined ? { latestUpdatedAt } : {}),
    truncated,
    ignoresUpdatedAfter,
    calls,
  };
}

export function createTaskListingActivities(deps: TaskListingDependencies) {
  const storedCapabilities =
    deps.storedCapabilities ??
    (deps.taskQueue !== undefined
      ? new StoredCapabilitiesCache({ client: deps.client, taskQueue: deps.taskQueue })
      : undefined);
  const seller = withStoredWireVersion(deps.seller ?? createSdkSellerClient(), storedCapabilities);
  const env = deps.env ?? process.env;
  const readTimeoutMs = deps.readTimeoutMs ?? 60_000;
  const settings = deps.settings ?? taskWatcherSettings(env);
  const descriptions = new SellerDescriptionCache(10 * 60_000, deps.now ?? Date.now, storedCapabilities);

  function contextBase(sellerId: string, tenant: string | undefined): Omit<CallContext, 'signal'> {
    return { ...sellerAccess(deps.sellers, sellerId, env, tenant), timeoutMs: readTimeoutMs };
  }

  /** One call with its own deadline inside the activity's cancellation. */
  async function bounded<T>(work: (signal: AbortSignal) => Promise<T>, source?: AbortSignal): Promise<T> {
    const cancellation = source ?? Context.current().cancellationSignal;
    const deadline = deadlineSignal(cancellation, readTimeoutMs);
    try {
      return await raceSignal(deadline.signal, () => work(deadline.signal));
    } finally {
      deadline.dispose();
    }
  }

  /** What the seller offers to list with: its stored capabilities, else its tools/list (cached per seller). */
  async function listTool(base: Omit<CallContext, 'signal'>): Promise<'list_tasks' | 'tasks/list' | undefined> {
    const stored = await descriptions.stored(base.agent.id);
    if (stored) return listToolOf(stored.description);
    if (base.agent.protocol !== 'mcp') return undefined; // A2A has no standard task list
    return listToolOf(await bounded((signal) => descriptions.get(seller, { ...base, signal })));
  }

  /** The watchers this worker registered with: how to start each one (signalWithStart). */
  const watchers = new Map<string, { taskQueue: string; input: TaskWatcherInput }>();
  const registrations = new SignalBatcher<WatchRegistration>(async (watcherId, batch) => {
    const watcher = watchers.get(watcherId);
    if (!watcher) throw new Error(`no watcher ${watcherId} known to this worker`);
    await deps.client.workflow.signalWithStart(TASK_WATCHER_WORKFLOW_TYPE, {
      workflowId: watcherId,
      taskQueue: watcher.taskQueue,
      args: [watcher.input],
      signal: watchTaskSignal,
      signalArgs: [batch],
      staticSummary: `Watches the tasks of operations parked at ${watcher.input.sellerId} (shard ${watcher.input.shard + 1} of ${watcher.input.shards})`,
    });
  }, SIGNAL_BATCHING);
  const unregistrations = new SignalBatcher<UnwatchRequest>(async (watcherId, batch) => {
    try {
      await deps.client.workflow.getHandle(watcherId).signal(unwatchTaskSignal, batch);
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    }
  }, SIGNAL_BATCHING);

  return {
    /**
     * One listing of a group: what changed since `since` (when given), then the tasks named by id. A seller without
     * a task list answers `supported: false`; transport failures throw (the watcher backs off).
     */
    async listWatchedTasks(input: ListWatchedTasksInput): Promise<ListWatchedTasksOutcome> {
      const base = contextBase(input.sellerId, input.tenant);
      const tool = await listTool(base);
      if (!tool) return { supported: false, rows: [], truncated: false, ignoresUpdatedAfter: false, calls: 0 };
      const context = Context.current();
      const account = input.account !== undefined ? { account: input.account } : {};
      const outcome = await listGroupTasks(input, async (filters, cursor, sort) => {
        let answer: TaskListPage;
        try {
          answer = await bounded((signal) =>
            seller.listTasks({
              ...base,
              signal,
              tool,
              filters,
              maxResults: PAGE_SIZE,
              ...account,
              ...(cursor ? { cursor } : {}),
              ...(sort ? { sort } : {}),
            }),
          );
        } catch (error) {
          if (context.cancellationSignal.aborted || !isUnknownToolError(error)) throw error;
          return undefined;
        }
        context.heartbeat();
        return answer.supported ? answer : undefined;
      });
      return outcome.supported ? { ...outcome, note: `${tool}, ${outcome.calls} call(s)` } : outcome;
    },

    /**
     * Tells each operation what the watcher saw. A move carries what the listing showed, not a read: the operation
     * reads the task itself, with its own read (its read method, task-record adapter, request shaping, schema check),
     * so the watcher changes when it learns, never what. An operation that ended is `gone`; one Temporal could not
     * reach now is `failed` (the watcher tries again later).
     */
    async deliverTaskNotices(input: DeliverTaskNoticesInput): Promise<DeliverTaskNoticesOutcome> {
      const context = Context.current();
      const outcome: DeliverTaskNoticesOutcome = { delivered: [], gone: [], failed: [] };
      let next = 0;
      let done = 0;
      const worker = async () => {
        for (;;) {
          const index = next++;
          if (index >= input.notices.length) return;
          const pending = input.notices[index];
          const notice: TaskWatchNotice =
            pending.notice.kind === 'moved'
              ? {
                  kind: 'moved',
                  eventKey: pending.notice.eventKey,
                  taskId: pending.taskId,
                  listed: pending.notice.listed,
                  observedAt: pending.notice.observedAt,
                  watcherId: input.watcherId,
                }
              : {
                  kind: 'released',
                  taskId: pending.taskId,
                  reason: pending.notice.reason,
                  observedAt: pending.notice.observedAt,
                  watcherId: input.watcherId,
                };
          try {
            await deps.client.workflow.getHandle(pending.operationId).signal(taskMovedSignal, notice);
            outcome.delivered.push(pending.operationId);
          } catch (error) {
            if (error instanceof WorkflowNotFoundError) outcome.gone.push(pending.operationId);
            else outcome.failed.push(pending.operationId);
          }
          done += 1;
          if (done % 20 === 0) context.heartbeat(done);
        }
      };
      await Promise.all(Array.from({ length: Math.min(DELIVERY_CONCURRENCY, input.notices.length) }, worker));
      return outcome;
    },

    /**
     * The operation side: joins the seller's watcher when the seller can list its tasks and the watcher is on. A
     * local activity of the operation that waits only for the signal carrying its registration: the registrations of
     * many operations go out as one signalWithStart (./signal-batcher.ts), one in flight per watcher, so a watcher
     * many operations join at once is not a queue of signals each holding an operation's workflow task. The answer
     * says why not, when not.
     */
    async registerWithTaskWatcher(input: RegisterWithWatcherInput): Promise<RegisterWithWatcherOutcome> {
      if (!settings.enabled) return { watching: false, reason: 'the task watcher is off (ADCP_TASK_WATCHER=off)' };
      // Whatever goes wrong here, the operation polls on its own: never a failure of the operation.
      try {
        const tool = await listTool(contextBase(input.sellerId, input.registration.tenant));
        if (!tool) return { watching: false, reason: `${input.sellerId} offers no list_tasks or tasks/list` };
        const shard = taskWatcherShard(input.registration.taskId, settings.shards);
        const taskQueue = deps.taskQueue ?? Context.current().info.taskQueue;
        const watcherId = taskWatcherWorkflowId(taskQueue, input.sellerId, shard);
        const round = settings.intervalMs;
        watchers.set(watcherId, {
          taskQueue,
          input: { sellerId: input.sellerId, shard, shards: settings.shards, ...(round ? { intervalMs: round } : {}) },
        });
        // The watcher takes this worker's round from it, also when another build started it with another.
        await registrations.add(watcherId, { ...input.registration, intervalMs: round ?? WATCH_INTERVAL_MS });
        return {
          watching: true,
          watcherId,
          safetyPollMs: settings.safetyPollMs,
          safetyPollMaxMs: settings.safetyPollMaxMs,
          ...(round ? { watchIntervalMs: round } : {}),
        };
      } catch (error) {
        return { watching: false, reason: `the task watcher could not take it: ${(error as Error).message}` };
      }
    },

    /** The operation stopped waiting: the watcher forgets it (batched like registrations). An ended watcher is no error. */
    async unregisterFromTaskWatcher(input: UnregisterFromWatcherInput): Promise<void> {
      await unregistrations.add(input.watcherId, { operationId: input.operationId, reason: input.reason });
    },
  };
}

/**
 * The operation side of the watcher on a worker without a Temporal client (a test worker, a tool): registration
 * declines and leaving does nothing, so the operation workflow takes the same path with or without a client. Without
 * them the SDK refuses the unregistered local activity before it records a marker, and replay of that history then
 * schedules it: a nondeterminism error.
 */
export function createDeclinedTaskWatcherActivities(
  reason: string,
): Pick<TaskListingActivities, 'registerWithTaskWatcher' | 'unregisterFromTaskWatcher'> {
  return {
    async registerWithTaskWatcher(): Promise<RegisterWithWatcherOutcome> {
      return { watching: false, reason };
    },
    async unregisterFromTaskWatcher(): Promise<void> {},
  };
}

export type TaskListingActivities = ReturnType<typeof createTaskListingActivities>;
