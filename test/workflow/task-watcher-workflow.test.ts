/**
 * The task watcher's wiring on the time-skipping server, with stand-ins for its two activities (a seller's task list
 * in memory, and a delivery that records notices instead of signalling): registrations by signalWithStart, a round
 * per interval, one notice per move and only to the operation of the tenant whose listing showed it, unregistration,
 * deadlines, backoff while the seller fails, hand-back when it cannot list, continue-as-new carrying every watched
 * operation, a worker restart, and the end once nothing is watched.
 */
import { randomUUID } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { TaskListingActivities } from '../../activities/task-listing';
import {
  type DeliverTaskNoticesInput,
  type TaskWatchNotice,
  type TaskWatcherInput,
  type WatchRegistration,
  TASK_WATCHER_WORKFLOW_TYPE,
  WATCH_INTERVAL_MS,
  taskWatcherQuery,
  unwatchTaskSignal,
  watchTaskSignal,
} from '../../contract/task-watcher';
import { resolveTestServer } from '../../scripts/lib/temporal-binaries';
import { quietRuntime, workflowBundle } from '../harness/temporal';
import { TaskListSeller } from '../harness/task-list-seller';
import { IDLE_END_MS } from '../../workflows/task-watcher/machine';
import type { adcpTaskWatcher } from '../../workflows/task-watcher/workflow';

type StandIns = Pick<TaskListingActivities, 'listWatchedTasks' | 'deliverTaskNotices'>;

let env: TestWorkflowEnvironment;

// A server per test: one test's waits (and its result() call, which lets time skip) never move another's clock.
beforeEach(async () => {
  quietRuntime();
  env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: resolveTestServer() } },
  });
});

afterEach(async () => {
  await env?.teardown();
});

interface Harness {
  seller: TaskListSeller;
  notices: Array<{ operationId: string; notice: TaskWatchNotice }>;
  listings: number;
  taskQueue: string;
  workflowId: string;
  /** A worker with the stand-ins; `cache: false` keeps no workflow cached (a restarted process has none). */
  start(options?: { cache?: boolean }): Promise<Worker>;
  register(registration: WatchRegistration | WatchRegistration[], input?: Partial<TaskWatcherInput>): Promise<void>;
}

function harness(): Harness {
  const seller = new TaskListSeller();
  const taskQueue = `watcher-${randomUUID()}`;
  const state: Harness = {
    seller,
    notices: [],
    listings: 0,
    taskQueue,
    workflowId: `task-watcher:${taskQueue}:seller:0`,
    async start(options = {}) {
      const activities: StandIns = {
        async listWatchedTasks(input) {
          state.listings += 1;
          return seller.list(input);
        },
        async deliverTaskNotices(input: DeliverTaskNoticesInput) {
          for (const pending of input.notices) {
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
            state.notices.push({ operationId: pending.operationId, notice });
          }
          return { delivered: input.notices.map((pending) => pending.operationId), gone: [], failed: [] };
        },
      };
      return Worker.create({
        connection: env.nativeConnection,
        taskQueue,
        workflowBundle: await workflowBundle(),
        activities,
        // The time-skipping server does not move a stopped worker's sticky tasks back to the queue.
        ...(options.cache === false ? { maxCachedWorkflows: 0 } : {}),
      });
    },
    async register(registration, input = {}) {
      await env.client.workflow.signalWithStart<typeof adcpTaskWatcher, [WatchRegistration | WatchRegistration[]]>(
        TASK_WATCHER_WORKFLOW_TYPE,
        {
          workflowId: state.workflowId,
          taskQueue,
          args: [{ sellerId: 'seller', shard: 0, shards: 1, ...input }],
          signal: watchTaskSignal,
          signalArgs: [registration],
        },
      );
    },
  };
  return state;
}

const moved = (h: Harness) =>
  h.notices
    .filter(({ notice }) => notice.kind === 'moved')
    .map(({ operationId, notice }) => [operationId, notice.kind === 'moved' ? notice.listed.status : '']);

test('tells only the operation whose task moved, once, and only within its own tenant', async () => {
  const h = harness();
  const worker = await h.start();
  await worker.runUntil(async () => {
    h.seller.set('acme', undefined, 'task_1', 'submitted');
    h.seller.set('globex', undefined, 'task_1', 'submitted'); // the same task id at another tenant
    h.seller.set('acme', undefined, 'task_2', 'submitted');
    // Two registrations in one signal (as the worker gathers them), one on its own.
    await h.register([
      h.seller.registration('op-acme-1', 'task_1', { tenant: 'acme' }),
      h.seller.registration('op-globex-1', 'task_1', { tenant: 'globex' }),
    ]);
    await h.register(h.seller.registration('op-acme-2', 'task_2', { tenant: 'acme' }));
    await env.sleep(5_000);
    const handle = env.client.workflow.getHandle(h.workflowId);
    expect((await handle.query(taskWatcherQuery)).watching).toBe(3);

    h.seller.set('acme', undefined, 'task_1', 'completed');
    await env.sleep(WATCH_INTERVAL_MS + 5_000);
    expect(moved(h)).toEqual([['op-acme-1', 'completed']]);

    // Three more rounds with nothing new: no more notices.
    await env.sleep(3 * WATCH_INTERVAL_MS);
    expect(moved(h)).toEqual([['op-acme-1', 'completed']]);

    h.seller.set('globex', undefined, 'task_1', 'working', { percentage: 40 });
    h.seller.set('acme', undefined, 'task_2', 'input-required');
    await env.sleep(WATCH_INTERVAL_MS + 5_000);
    expect(moved(h).sort()).toEqual([
      ['op-acme-1', 'completed'],
      ['op-acme-2', 'input-required'],
      ['op-globex-1', 'working'],
    ]);
    const view = await handle.query(taskWatcherQuery);
    // The completed task is no longer watched; the two others are, in their own groups.
    expect(view.watching).toBe(2);
    expect(view.groups.map((group) => group.tenant).sort()).toEqual(['acme', 'globex']);
  });
});

test('forgets operations that unregister or pass their deadline, then ends', async () => {
  const h = harness();
  const worker = await h.start();
  await worker.runUntil(async () => {
    h.seller.set(undefined, undefined, 'task_a', 'submitted');
    h.seller.set(undefined, undefined, 'task_b', 'submitted');
    await h.register(h.seller.registration('op-a', 'task_a'));
    const deadline = new Date((await env.currentTimeMs()) + 10 * 60_000).toISOString();
    await h.register(h.seller.registration('op-b', 'task_b', { deadline }));
    await env.sleep(5_000);
    const handle = env.client.workflow.getHandle(h.workflowId);
    await handle.signal(unwatchTaskSignal, { operationId: 'op-a', reason: 'the operation ended' });
    h.seller.set(undefined, undefined, 'task_a', 'completed');
    await env.sleep(WATCH_INTERVAL_MS + 5_000);
    expect(h.notices).toEqual([]);
    await env.sleep(10 * 60_000);
    h.seller.set(undefined, undefined, 'task_b', 'completed');
    await env.sleep(WATCH_INTERVAL_MS + 5_000);
    expect(h.notices).toEqual([]);
    await env.sleep(IDLE_END_MS + WATCH_INTERVAL_MS);
    const result = await handle.result();
    expect(result.watching).toBe(0);
    expect(result.counters).toMatchObject({ registrations: 2, unregistrations: 1, expired: 1, moves: 0 });
  });
});

test('backs off while the seller fails, then delivers the move it missed', async () => {
  const h = harness();
  const worker = await h.start();
  await worker.runUntil(async () => {
    h.seller.set(undefined, undefined, 'task_x', 'submitted');
    await h.register(h.seller.registration('op-x', 'task_x'));
    await env.sleep(5_000);
    const before = h.listings;
    h.seller.failNext = 1_000;
    h.seller.set(undefined, undefined, 'task_x', 'completed');
    await env.sleep(60 * 60_000);
    const duringOutage = h.listings - before;
    // A round a minute would have made 60 listings (each up to two attempts) in the hour; backing off (2, 4, 8, 15,
    // 15 ... minutes) makes six.
    expect(duringOutage).toBeLessThanOrEqual(2 * 7);
    expect(h.notices).toEqual([]);
    h.seller.failNext = 0;
    await env.sleep(16 * 60_000);
    expect(moved(h)).toEqual([['op-x', 'completed']]);
    const view = await env.client.workflow.getHandle(h.workflowId).query(taskWatcherQuery);
    expect(view.counters.listingFailures).toBeGreaterThan(0);
  });
});

test('hands every operation back when the seller has no task list', async () => {
  const h = harness();
  const worker = await h.start();
  await worker.runUntil(async () => {
    h.seller.unsupported = true;
    h.seller.set(undefined, undefined, 'task_1', 'submitted');
    h.seller.set(undefined, undefined, 'task_2', 'submitted');
    await h.register(h.seller.registration('op-1', 'task_1'));
    await h.register(h.seller.registration('op-2', 'task_2'));
    await env.sleep(10_000);
    expect(h.notices.map(({ operationId, notice }) => [operationId, notice.kind]).sort()).toEqual([
      ['op-1', 'released'],
      ['op-2', 'released'],
    ]);
  });
});

test('continues as new carrying every watched operation, and survives a worker restart', async () => {
  const h = harness();
  let worker = await h.start({ cache: false });
  const handle = env.client.workflow.getHandle(h.workflowId);
  let firstRun = '';
  await worker.runUntil(async () => {
    for (let index = 0; index < 30; index++) {
      h.seller.set(undefined, undefined, `task_${index}`, 'submitted');
      await h.register(h.seller.registration(`op-${index}`, `task_${index}`), { continueAsNewAfterEvents: 40 });
    }
    firstRun = (await handle.describe()).runId;
    await env.sleep(3 * WATCH_INTERVAL_MS);
  });
  // A new worker (the old one is gone); the watcher's state is in Temporal, not in a process.
  worker = await h.start({ cache: false });
  await worker.runUntil(async () => {
    h.seller.set(undefined, undefined, 'task_7', 'failed');
    h.seller.set(undefined, undefined, 'task_23', 'completed');
    await env.sleep(WATCH_INTERVAL_MS + 5_000);
    expect(moved(h).sort()).toEqual([
      ['op-23', 'completed'],
      ['op-7', 'failed'],
    ]);
    const description = await handle.describe();
    expect(description.runId).not.toBe(firstRun);
    const view = await handle.query(taskWatcherQuery);
    expect(view.runs).toBeGreaterThan(0);
    expect(view.watching).toBe(28);
    expect(view.counters.registrations).toBe(30);
  });
});

test('lists at the round of its latest registration, and keeps it across continue-as-new', async () => {
  const h = harness();
  const worker = await h.start();
  const handle = env.client.workflow.getHandle(h.workflowId);
  await worker.runUntil(async () => {
    h.seller.set(undefined, undefined, 'task_1', 'submitted');
    // Started at the default round, by a registration from before the setting (no round in it).
    await h.register(h.seller.registration('op-1', 'task_1'), { continueAsNewAfterEvents: 60 });
    await env.sleep(5_000);
    expect((await handle.query(taskWatcherQuery)).intervalMs).toBe(WATCH_INTERVAL_MS);
    // A worker set to a 10 s round registers the next operation: the running watcher takes that round.
    h.seller.set(undefined, undefined, 'task_2', 'submitted');
    await h.register({ ...h.seller.registration('op-2', 'task_2'), intervalMs: 10_000 });
    await env.sleep(WATCH_INTERVAL_MS + 5_000); // the listing due at the old round; the next are 10 s apart
    const firstRun = (await handle.describe()).runId;
    const before = h.listings;
    await env.sleep(10 * 10_000);
    // Ten rounds in 100 s (a minute's round would list once or twice).
    expect(h.listings - before).toBeGreaterThanOrEqual(9);
    expect(h.listings - before).toBeLessThanOrEqual(11);
    // Enough rounds to have continued as new: the next run lists at the same round.
    await env.sleep(30 * 10_000);
    expect((await handle.describe()).runId).not.toBe(firstRun);
    const view = await handle.query(taskWatcherQuery);
    expect(view.runs).toBeGreaterThan(0);
    expect(view.intervalMs).toBe(10_000);
    const afterRun = h.listings;
    await env.sleep(5 * 10_000);
    expect(h.listings - afterRun).toBeGreaterThanOrEqual(4);
    // A round outside 5 s to 1 h is ignored.
    h.seller.set(undefined, undefined, 'task_3', 'submitted');
    await h.register({ ...h.seller.registration('op-3', 'task_3'), intervalMs: 1_000 });
    await env.sleep(1_000);
    expect((await handle.query(taskWatcherQuery)).intervalMs).toBe(10_000);
  });
});
