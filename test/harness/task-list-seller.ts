/**
 * A seller's task list in memory, for the task watcher's tests: tasks per listing group (tenant and account), each
 * with its status and `updated_at`, answered page by page as `list_tasks` would (updated_after, task_ids, sort by
 * updated_at, cursors of 100), through the list activity's own paging logic (listGroupTasks).
 */
import { listGroupTasks, type TaskListPager } from '../../activities/task-listing';
import type { TaskListPage } from '../../activities/seller-client';
import type {
  ListWatchedTasksInput,
  ListWatchedTasksOutcome,
  TaskObservation,
  WatchRegistration,
} from '../../contract/task-watcher';
import type { TaskStatus } from '../../protocol/status';
import { groupKeyOf } from '../../workflows/task-watcher/machine';

export interface ListedSellerTask {
  status: TaskStatus;
  updatedAtMs: number;
  progress?: Record<string, unknown>;
}

export class TaskListSeller {
  private readonly groups = new Map<string, Map<string, ListedSellerTask>>();
  /** Calls answered (pages), by group. */
  readonly calls = new Map<string, number>();
  /** Throws instead of answering while positive (counts down). */
  failNext = 0;
  /** Answers as a seller without any task list. */
  unsupported = false;

  constructor(private readonly clock: () => number = Date.now) {}

  set(
    tenant: string | undefined,
    account: unknown,
    taskId: string,
    status: TaskStatus,
    progress?: Record<string, unknown>,
  ) {
    const key = groupKeyOf(tenant, account);
    let tasks = this.groups.get(key);
    if (!tasks) this.groups.set(key, (tasks = new Map()));
    const previous = tasks.get(taskId)?.updatedAtMs ?? 0;
    tasks.set(taskId, { status, updatedAtMs: Math.max(this.clock(), previous + 1), ...(progress ? { progress } : {}) });
  }

  get(tenant: string | undefined, account: unknown, taskId: string): ListedSellerTask | undefined {
    return this.groups.get(groupKeyOf(tenant, account))?.get(taskId);
  }

  observation(tenant: string | undefined, account: unknown, taskId: string): TaskObservation {
    const task = this.get(tenant, account, taskId);
    if (!task) throw new Error(`no task ${taskId}`);
    return { status: task.status, updatedAt: new Date(task.updatedAtMs).toISOString() };
  }

  /** A registration of an operation that knows its task as the seller has it now. */
  registration(
    operationId: string,
    taskId: string,
    options: { tenant?: string; account?: unknown; deadline?: string } = {},
  ): WatchRegistration {
    return {
      operationId,
      taskId,
      task: 'create_media_buy',
      ...(options.tenant !== undefined ? { tenant: options.tenant } : {}),
      ...(options.account !== undefined ? { account: options.account } : {}),
      known: this.observation(options.tenant, options.account, taskId),
      deadline: options.deadline ?? new Date(this.clock() + 30 * 86_400_000).toISOString(),
      registeredAt: new Date(this.clock()).toISOString(),
    };
  }

  pager(groupKey: string): TaskListPager {
    return async (filters, cursor, sort) => {
      this.calls.set(groupKey, (this.calls.get(groupKey) ?? 0) + 1);
      if (this.unsupported) return undefined;
      if (this.failNext > 0) {
        this.failNext -= 1;
        throw new Error('ECONNREFUSED: the seller is down');
      }
      let rows = [...(this.groups.get(groupKey)?.entries() ?? [])];
      const ids = filters.task_ids as string[] | undefined;
      if (ids) rows = rows.filter(([taskId]) => ids.includes(taskId));
      const after = filters.updated_after as string | undefined;
      if (after !== undefined) rows = rows.filter(([, task]) => task.updatedAtMs > Date.parse(after));
      if (sort?.field === 'updated_at') rows.sort((a, b) => a[1].updatedAtMs - b[1].updatedAtMs);
      const offset = Number(cursor ?? 0);
      const page: TaskListPage = {
        tasks: [],
        rows: rows.slice(offset, offset + 100).map(([taskId, task]) => ({
          task_id: taskId,
          task_type: 'create_media_buy',
          status: task.status,
          updated_at: new Date(task.updatedAtMs).toISOString(),
          ...(task.progress ? { progress: task.progress } : {}),
        })),
        supported: true,
        ...(offset + 100 < rows.length ? { nextCursor: String(offset + 100) } : {}),
      };
      return page;
    };
  }

  /** The list activity's answer for one group, as the real activity computes it. */
  list(input: ListWatchedTasksInput): Promise<ListWatchedTasksOutcome> {
    return listGroupTasks(input, this.pager(groupKeyOf(input.tenant, input.account)));
  }
}
