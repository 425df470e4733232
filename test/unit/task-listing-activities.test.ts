/**
 * The task watcher's activities with a fake SellerClient and a recording Temporal client: which list tool and
 * filters a listing uses, with whose credentials, that other shards' rows stay out, that a seller without a task list
 * (or ignoring `updated_after`) says so; that a moved task's operation is signalled (it reads the task itself), and an
 * ended operation is `gone`; that registration joins the watcher of the task's shard only where the seller lists
 * tasks, with the registrations that arrive together in one signal.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { createActivities } from '../../activities';
import { createTaskListingActivities, taskWatcherSettings } from '../../activities/task-listing';
import type { SellerClient, TaskListRequest, TaskReadRequest } from '../../activities/seller-client';
import { SellerRegistry } from '../../config/sellers';
import {
  type ListWatchedTasksInput,
  type PendingNotice,
  type WatchRegistration,
  WATCH_INTERVAL_MS,
  taskWatcherShard,
} from '../../contract/task-watcher';

const sellers = new SellerRegistry(
  [
    { id: 'lister', url: 'http://lister.test/mcp', protocol: 'mcp', token_env: 'LISTER_TOKEN' },
    { id: 'silent', url: 'http://silent.test/mcp', protocol: 'mcp' },
  ],
  'test',
  [{ id: 'acme', sellers: { lister: { token_env: 'ACME_LISTER_TOKEN' } } }],
);
const env = { LISTER_TOKEN: 'shared-token', ACME_LISTER_TOKEN: 'acme-token' };

function fakeSeller(
  rows: Record<string, unknown>[],
  tools: string[] = ['create_media_buy', 'list_tasks', 'tasks/get'],
) {
  const lists: TaskListRequest[] = [];
  const reads: TaskReadRequest[] = [];
  const seller: SellerClient = {
    callTask: async () => {
      throw new Error('not used');
    },
    getTask: async () => {
      throw new Error('not used');
    },
    cancelTask: async () => ({ notified: false, note: '' }),
    describe: async () => ({ tools, mcpTasks: false }),
    listTasks: async (request) => {
      lists.push(request);
      let matching = rows;
      const ids = request.filters.task_ids as string[] | undefined;
      if (ids) matching = matching.filter((row) => ids.includes(String(row.task_id)));
      return { tasks: [], rows: matching, supported: true };
    },
    readTask: async (request) => {
      reads.push(request);
      return {
        snapshot: { status: 'completed', taskId: request.taskId, result: { media_buy_id: `mb-${request.taskId}` } },
        callError: false,
      };
    },
  };
  return { seller, lists, reads };
}

function fakeClient(options: { gone?: string[] } = {}) {
  const signals: Array<{ workflowId: string; name: string; args: unknown[] }> = [];
  const starts: Array<Record<string, unknown>> = [];
  const client = {
    workflow: {
      getHandle: (workflowId: string) => ({
        signal: async (definition: { name: string } | string, ...args: unknown[]) => {
          if (options.gone?.includes(workflowId)) throw new WorkflowNotFoundError('gone', workflowId, undefined);
          signals.push({ workflowId, name: typeof definition === 'string' ? definition : definition.name, args });
        },
      }),
      signalWithStart: async (type: string, startOptions: Record<string, unknown>) => {
        starts.push({ type, ...startOptions });
      },
    },
  } as unknown as Client;
  return { client, signals, starts };
}

function run<P extends unknown[], R>(fn: (...args: P) => Promise<R>, ...args: P): Promise<R> {
  const environment: { run(fn: unknown, ...args: unknown[]): Promise<unknown> } = new MockActivityEnvironment({
    taskQueue: 'operations',
  });
  return environment.run(fn, ...args) as Promise<R>;
}

const at = (seconds: number) => new Date(Date.UTC(2026, 11, 1, 12, 0, seconds)).toISOString();
const listing = (overrides: Partial<ListWatchedTasksInput> = {}): ListWatchedTasksInput => ({
  sellerId: 'lister',
  mode: 'changes',
  since: at(0),
  taskIds: [],
  shard: 0,
  shards: 1,
  maxPages: 20,
  ...overrides,
});

describe('listWatchedTasks', () => {
  test('lists what changed since, oldest first, with the tenant credential and account, then new tasks by id', async () => {
    const { seller, lists } = fakeSeller([
      { task_id: 't1', status: 'completed', updated_at: at(5) },
      { task_id: 't2', status: 'submitted', updated_at: at(9) },
    ]);
    const { client } = fakeClient();
    const activities = createTaskListingActivities({ sellers, client, seller, env, taskQueue: 'operations' });
    const outcome = await run(
      activities.listWatchedTasks,
      listing({ tenant: 'acme', account: { account_id: 'a1' }, taskIds: ['t2'] }),
    );
    expect(
      lists.map((request) => [request.tool, request.filters, request.sort, request.token, request.account]),
    ).toEqual([
      [
        'list_tasks',
        { updated_after: at(0) },
        { field: 'updated_at', direction: 'asc' },
        'acme-token',
        { account_id: 'a1' },
      ],
      ['list_tasks', { task_ids: ['t2'] }, undefined, 'acme-token', { account_id: 'a1' }],
    ]);
    expect(outcome).toMatchObject({
      supported: true,
      latestUpdatedAt: at(9),
      truncated: false,
      ignoresUpdatedAfter: false,
      calls: 2,
    });
    expect(outcome.rows).toEqual([
      { taskId: 't1', status: 'completed', updatedAt: at(5) },
      { taskId: 't2', status: 'submitted', updatedAt: at(9) },
    ]);
  });

  test("keeps only its own shard's rows", async () => {
    const ids = Array.from({ length: 40 }, (_, index) => `task_${index}`);
    const { seller } = fakeSeller(ids.map((taskId) => ({ task_id: taskId, status: 'working', updated_at: at(3) })));
    const { client } = fakeClient();
    const activities = createTaskListingActivities({ sellers, client, seller, env, taskQueue: 'operations' });
    const outcome = await run(activities.listWatchedTasks, listing({ shard: 2, shards: 4 }));
    const expected = ids.filter((taskId) => taskWatcherShard(taskId, 4) === 2);
    expect(expected.length).toBeGreaterThan(0);
    expect(outcome.rows.map((row) => row.taskId)).toEqual(expected);
    // `since` moves on with every row the seller returned, whichever shard it belongs to.
    expect(outcome.latestUpdatedAt).toBe(at(3));
  });

  test('says when the seller ignores updated_after, and stops paging', async () => {
    const { seller, lists } = fakeSeller([{ task_id: 'old', status: 'submitted', updated_at: at(-60) }]);
    const { client } = fakeClient();
    const activities = createTaskListingActivities({ sellers, client, seller, env, taskQueue: 'operations' });
    const outcome = await run(activities.listWatchedTasks, listing());
    expect(outcome.ignoresUpdatedAfter).toBe(true);
    expect(lists).toHaveLength(1);
  });

  test('answers unsupported for a seller without a task list, calling nothing', async () => {
    const { seller, lists } = fakeSeller([], ['create_media_buy', 'get_task_status']);
    const { client } = fakeClient();
    const activities = createTaskListingActivities({ sellers, client, seller, env, taskQueue: 'operations' });
    const outcome = await run(activities.listWatchedTasks, listing({ sellerId: 'silent' }));
    expect(outcome).toMatchObject({ supported: false, calls: 0 });
    expect(lists).toEqual([]);
  });
});

describe('deliverTaskNotices', () => {
  const moved = (operationId: string, taskId: string): PendingNotice => ({
    operationId,
    taskId,
    task: 'create_media_buy',
    group: 'acme|',
    notice: {
      kind: 'moved',
      eventKey: `watch:${taskId}:completed`,
      listed: { status: 'completed', updatedAt: at(5) },
      observedAt: at(6),
    },
    attempts: 0,
    notBeforeMs: 0,
  });

  test('signals each operation whose task moved with what the listing showed, and reads nothing itself', async () => {
    const { seller, reads } = fakeSeller([]);
    const { client, signals } = fakeClient({ gone: ['op-ended'] });
    const activities = createTaskListingActivities({ sellers, client, seller, env, taskQueue: 'operations' });
    const outcome = await run(activities.deliverTaskNotices, {
      sellerId: 'lister',
      tenant: 'acme',
      watcherId: 'task-watcher:operations:lister:0',
      notices: [moved('op-1', 't1'), moved('op-ended', 't2')],
    });
    expect(outcome).toEqual({ delivered: ['op-1'], gone: ['op-ended'], failed: [] });
    // The operation reads the task itself, with its own read.
    expect(reads).toEqual([]);
    expect(signals).toEqual([
      {
        workflowId: 'op-1',
        name: 'taskMoved',
        args: [
          {
            kind: 'moved',
            eventKey: 'watch:t1:completed',
            taskId: 't1',
            listed: { status: 'completed', updatedAt: at(5) },
            observedAt: at(6),
            watcherId: 'task-watcher:operations:lister:0',
          },
        ],
      },
    ]);
  });
});

describe('registerWithTaskWatcher', () => {
  const registration: WatchRegistration = {
    operationId: 'op-1',
    taskId: 'task_abc',
    task: 'create_media_buy',
    tenant: 'acme',
    known: { status: 'submitted' },
    deadline: at(3600),
    registeredAt: at(0),
  };

  test("joins the watcher of the task's shard on the operation's own queue (signalWithStart)", async () => {
    const { seller } = fakeSeller([]);
    const { client, starts } = fakeClient();
    const activities = createTaskListingActivities({
      sellers,
      client,
      seller,
      env,
      settings: { enabled: true, shards: 8, safetyPollMs: 1_800_000, safetyPollMaxMs: 7_200_000 },
    });
    const outcome = await run(activities.registerWithTaskWatcher, { sellerId: 'lister', registration });
    const shard = taskWatcherShard('task_abc', 8);
    expect(outcome).toEqual({
      watching: true,
      watcherId: `task-watcher:operations:lister:${shard}`,
      safetyPollMs: 1_800_000,
      safetyPollMaxMs: 7_200_000,
    });
    expect(starts).toMatchObject([
      {
        type: 'adcpTaskWatcher',
        workflowId: `task-watcher:operations:lister:${shard}`,
        taskQueue: 'operations',
        args: [{ sellerId: 'lister', shard, shards: 8 }],
        signal: expect.objectContaining({ name: 'watchTask' }),
        signalArgs: [[registration]],
      },
    ]);
    // The registration carries this worker's round: a watcher another build started takes it.
    expect(starts[0]!.signalArgs).toEqual([[{ ...registration, intervalMs: WATCH_INTERVAL_MS }]]);
  });

  test('a worker with its own watcher round starts watchers with it and tells the operation (its quick polls end there)', async () => {
    const { seller } = fakeSeller([]);
    const { client, starts } = fakeClient();
    const activities = createTaskListingActivities({
      sellers,
      client,
      seller,
      env,
      settings: taskWatcherSettings({ ADCP_TASK_WATCHER_INTERVAL: '10s', ADCP_TASK_WATCHER_SAFETY_POLL: '5m' }),
    });
    const outcome = await run(activities.registerWithTaskWatcher, { sellerId: 'lister', registration });
    expect(outcome).toEqual({
      watching: true,
      watcherId: 'task-watcher:operations:lister:0',
      safetyPollMs: 300_000,
      safetyPollMaxMs: 7_200_000,
      watchIntervalMs: 10_000,
    });
    expect(starts).toMatchObject([{ args: [{ sellerId: 'lister', shard: 0, shards: 1, intervalMs: 10_000 }] }]);
    expect(starts[0]!.signalArgs).toEqual([[{ ...registration, intervalMs: 10_000 }]]);
  });

  test('registrations that arrive together go to their watcher as one signal; each is answered', async () => {
    const { seller } = fakeSeller([]);
    const { client, starts } = fakeClient();
    const activities = createTaskListingActivities({
      sellers,
      client,
      seller,
      env,
      settings: { enabled: true, shards: 1, safetyPollMs: 1_800_000, safetyPollMaxMs: 7_200_000 },
    });
    const many = Array.from({ length: 5 }, (_, index) => ({
      ...registration,
      operationId: `op-${index}`,
      taskId: `task-${index}`,
    }));
    const outcomes = await Promise.all(
      many.map((one) => run(activities.registerWithTaskWatcher, { sellerId: 'lister', registration: one })),
    );
    expect(outcomes.every((outcome) => outcome.watching)).toBe(true);
    expect(starts).toHaveLength(1);
    expect(starts[0]).toMatchObject({ workflowId: 'task-watcher:operations:lister:0', signalArgs: [many] });
  });

  test('a failed signal declines every registration of its batch (the operations poll on their own)', async () => {
    const { seller } = fakeSeller([]);
    const client = {
      workflow: {
        signalWithStart: async () => {
          throw new Error('Temporal is unavailable');
        },
      },
    } as unknown as Client;
    const activities = createTaskListingActivities({
      sellers,
      client,
      seller,
      env,
      settings: { enabled: true, shards: 1, safetyPollMs: 1_800_000, safetyPollMaxMs: 7_200_000 },
    });
    const outcomes = await Promise.all(
      ['a', 'b'].map((id) =>
        run(activities.registerWithTaskWatcher, {
          sellerId: 'lister',
          registration: { ...registration, operationId: `op-${id}` },
        }),
      ),
    );
    expect(outcomes).toEqual([
      { watching: false, reason: expect.stringContaining('Temporal is unavailable') },
      { watching: false, reason: expect.stringContaining('Temporal is unavailable') },
    ]);
  });

  test('declines where the seller has no task list, or the watcher is off', async () => {
    const { seller } = fakeSeller([], ['create_media_buy', 'get_task_status']);
    const { client, starts } = fakeClient();
    const activities = createTaskListingActivities({ sellers, client, seller, env });
    const { tenant: _tenant, ...untenanted } = registration;
    expect(
      await run(activities.registerWithTaskWatcher, { sellerId: 'silent', registration: untenanted }),
    ).toMatchObject({ watching: false, reason: expect.stringContaining('no list_tasks') });
    // A tenant without access there (the call itself would have been refused): declined, never thrown.
    expect(await run(activities.registerWithTaskWatcher, { sellerId: 'silent', registration })).toMatchObject({
      watching: false,
      reason: expect.stringContaining('no access'),
    });
    const off = createTaskListingActivities({
      sellers,
      client,
      seller: fakeSeller([]).seller,
      env,
      settings: taskWatcherSettings({ ADCP_TASK_WATCHER: 'off' }),
    });
    expect(await run(off.registerWithTaskWatcher, { sellerId: 'lister', registration })).toMatchObject({
      watching: false,
      reason: expect.stringContaining('off'),
    });
    expect(starts).toEqual([]);
  });

  test('a worker without a Temporal client has the operation side too: it declines, and leaving does nothing', async () => {
    const activities = createActivities({ sellers, seller: fakeSeller([]).seller, env });
    expect(await run(activities.registerWithTaskWatcher, { sellerId: 'lister', registration })).toEqual({
      watching: false,
      reason: 'no Temporal client on this worker',
    });
    await expect(
      run(activities.unregisterFromTaskWatcher, {
        watcherId: 'task-watcher:operations:lister:0',
        operationId: 'op-1',
        reason: 'ended',
      }),
    ).resolves.toBeUndefined();
    // The watcher's own activities need a client: that worker runs no watchers.
    expect('listWatchedTasks' in activities).toBe(false);
  });
});

describe('taskWatcherSettings', () => {
  test('defaults: on, one shard, a 30-minute safety poll backing off to 2 h, the standard round (not named in the watcher input)', () => {
    expect(taskWatcherSettings({})).toEqual({
      enabled: true,
      shards: 1,
      safetyPollMs: 1_800_000,
      safetyPollMaxMs: 7_200_000,
    });
    expect(taskWatcherSettings({ ADCP_TASK_WATCHER_INTERVAL: '1m' })).not.toHaveProperty('intervalMs');
  });

  test('a round of its own, between 5 s and 1 h, and a safety poll no shorter than it', () => {
    expect(taskWatcherSettings({ ADCP_TASK_WATCHER_INTERVAL: '30s' })).toMatchObject({ intervalMs: 30_000 });
    expect(() => taskWatcherSettings({ ADCP_TASK_WATCHER_INTERVAL: '2s' })).toThrow(/ADCP_TASK_WATCHER_INTERVAL=2s/);
    expect(() => taskWatcherSettings({ ADCP_TASK_WATCHER_INTERVAL: '2h' })).toThrow(/outside 5s to 1h/);
    expect(() => taskWatcherSettings({ ADCP_TASK_WATCHER_INTERVAL: 'often' })).toThrow(/ADCP_TASK_WATCHER_INTERVAL/);
    expect(() =>
      taskWatcherSettings({ ADCP_TASK_WATCHER_INTERVAL: '10m', ADCP_TASK_WATCHER_SAFETY_POLL: '5m' }),
    ).toThrow(/shorter than the watcher's own round/);
    expect(
      taskWatcherSettings({ ADCP_TASK_WATCHER_SAFETY_POLL: '10s', ADCP_TASK_WATCHER_INTERVAL: '10s' }),
    ).toMatchObject({ safetyPollMs: 10_000, intervalMs: 10_000 });
  });

  test("the safety poll's cap: its own, at least the first safety poll; by default 2 h or the first one when longer", () => {
    expect(taskWatcherSettings({ ADCP_TASK_WATCHER_SAFETY_POLL_MAX: '6h' })).toMatchObject({
      safetyPollMs: 1_800_000,
      safetyPollMaxMs: 21_600_000,
    });
    // Equal to the first: a safety poll that does not back off.
    expect(
      taskWatcherSettings({ ADCP_TASK_WATCHER_SAFETY_POLL: '45m', ADCP_TASK_WATCHER_SAFETY_POLL_MAX: '45m' }),
    ).toMatchObject({ safetyPollMs: 2_700_000, safetyPollMaxMs: 2_700_000 });
    expect(taskWatcherSettings({ ADCP_TASK_WATCHER_SAFETY_POLL: '3h' })).toMatchObject({
      safetyPollMs: 10_800_000,
      safetyPollMaxMs: 10_800_000,
    });
    expect(() =>
      taskWatcherSettings({ ADCP_TASK_WATCHER_SAFETY_POLL: '1h', ADCP_TASK_WATCHER_SAFETY_POLL_MAX: '30m' }),
    ).toThrow(/ADCP_TASK_WATCHER_SAFETY_POLL_MAX=30m is shorter than the first safety poll/);
    expect(() => taskWatcherSettings({ ADCP_TASK_WATCHER_SAFETY_POLL_MAX: 'daily' })).toThrow(
      /ADCP_TASK_WATCHER_SAFETY_POLL_MAX/,
    );
  });
});
