/**
 * The task watcher's machine against a simulated seller, in randomized runs: operations register (with current or
 * stale knowledge), re-register, unregister and end; the seller moves tasks (some only visible seconds later), hides
 * some from some tenants, reuses task ids across tenants, fails listings and ignores filters; deliveries fail or find
 * the operation gone. Listings go through the activity's own paging logic (listGroupTasks).
 *
 * Invariants: a notice reaches only an operation that is watched, and only with what its own tenant's listing showed
 * for its own task; it always differs from what the operation knew (no notice for an unmoved task, none twice); once
 * the seller is quiet, every watched operation knows where its task is (each move signalled, and exactly once:
 * consecutive notices differ); a task the seller never shows is handed back to its operation; none after a deadline.
 */
import { listGroupTasks, type TaskListPager } from '../../activities/task-listing';
import type { TaskListPage } from '../../activities/seller-client';
import type { PendingNotice, TaskObservation, WatchRegistration } from '../../contract/task-watcher';
import type { TaskStatus } from '../../protocol/status';
import {
  IDLE_END_MS,
  MAX_ENTRIES,
  MISSES_BEFORE_RELEASE,
  TaskWatcherMachine,
  groupKeyOf,
  movedFrom,
} from '../../workflows/task-watcher/machine';

function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

const INTERVAL = 60_000;
const TERMINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);

interface Version {
  status: TaskStatus;
  progress?: { percentage: number };
  updatedAtMs: number;
  visibleAtMs: number;
}

interface SimTask {
  taskId: string;
  versions: Version[];
  /** The seller never shows this task to this group (another account's, expired). */
  hidden: boolean;
}

interface SimGroup {
  tenant?: string;
  account?: unknown;
  /** The seller's clock runs this far from ours, different per group, so rows of two groups never look alike. */
  skewMs: number;
  tasks: Map<string, SimTask>;
}

class SimSeller {
  readonly groups = new Map<string, SimGroup>();
  ignoresUpdatedAfter = false;
  unsupported = false;
  listingFailureRate = 0;
  calls = 0;

  constructor(private readonly random: () => number) {}

  group(tenant: string | undefined, account: unknown, skewMs: number): SimGroup {
    const key = groupKeyOf(tenant, account);
    let group = this.groups.get(key);
    if (!group) {
      group = {
        ...(tenant !== undefined ? { tenant } : {}),
        ...(account !== undefined ? { account } : {}),
        skewMs,
        tasks: new Map(),
      };
      this.groups.set(key, group);
    }
    return group;
  }

  visible(task: SimTask, now: number): Version {
    let current = task.versions[0];
    for (const version of task.versions) if (version.visibleAtMs <= now) current = version;
    return current;
  }

  /** The latest version, visible or not: where the task really is. */
  latest(task: SimTask): Version {
    return task.versions[task.versions.length - 1];
  }

  row(group: SimGroup, task: SimTask, version: Version): Record<string, unknown> {
    return {
      task_id: task.taskId,
      task_type: 'create_media_buy',
      status: version.status,
      updated_at: new Date(version.updatedAtMs + group.skewMs).toISOString(),
      ...(version.progress ? { progress: version.progress } : {}),
    };
  }

  pager(groupKey: string, now: number): TaskListPager {
    return async (filters, cursor, sort) => {
      this.calls += 1;
      if (this.unsupported) return undefined;
      if (this.random() < this.listingFailureRate) throw new Error('ECONNRESET: the seller dropped the connection');
      const group = this.groups.get(groupKey);
      const tasks = [...(group?.tasks.values() ?? [])].filter((task) => !task.hidden);
      let rows = tasks.map((task) => ({ task, version: this.visible(task, now) }));
      const ids = filters.task_ids as string[] | undefined;
      if (ids) rows = rows.filter(({ task }) => ids.includes(task.taskId));
      const after = filters.updated_after as string | undefined;
      if (after !== undefined && !this.ignoresUpdatedAfter)
        rows = rows.filter(({ version }) => version.updatedAtMs + group!.skewMs > Date.parse(after));
      if (sort?.field === 'updated_at' && !this.ignoresUpdatedAfter)
        rows.sort((a, b) => a.version.updatedAtMs - b.version.updatedAtMs);
      const offset = Number(cursor ?? 0);
      const slice = rows.slice(offset, offset + 100);
      const page: TaskListPage = {
        tasks: [],
        rows: slice.map(({ task, version }) => this.row(group!, task, version)),
        supported: true,
        ...(offset + 100 < rows.length ? { nextCursor: String(offset + 100) } : {}),
      };
      return page;
    };
  }
}

interface SimOperation {
  operationId: string;
  groupKey: string;
  taskId: string;
  /** What the operation knows: its registration, then each notice. */
  known: TaskObservation;
  watched: boolean;
  ended: boolean;
  released: number;
  done: boolean;
  deadlineMs: number;
  notices: number;
}

function observationOf(version: Version, skewMs: number): TaskObservation {
  return {
    status: version.status,
    ...(version.progress ? { progress: version.progress } : {}),
    updatedAt: new Date(version.updatedAtMs + skewMs).toISOString(),
  };
}

interface Scenario {
  seed: number;
  steps: number;
  ignoresUpdatedAfter?: boolean;
  listingFailureRate?: number;
  deliveryFailureRate?: number;
  visibilityLagMs?: number;
}

async function run(scenario: Scenario) {
  const random = prng(scenario.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const seller = new SimSeller(random);
  seller.ignoresUpdatedAfter = scenario.ignoresUpdatedAfter ?? false;
  seller.listingFailureRate = scenario.listingFailureRate ?? 0;
  const machine = new TaskWatcherMachine(
    { sellerId: 'seller', shard: 0, shards: 1, intervalMs: INTERVAL },
    'task-watcher:q:seller:0',
  );
  const groups = [
    seller.group('acme', { account_id: 'a1' }, 3),
    seller.group('acme', undefined, 11),
    seller.group('globex', { account_id: 'a1' }, 17),
    seller.group(undefined, undefined, 29),
  ];
  const operations = new Map<string, SimOperation>();
  const problems: string[] = [];
  let now = Date.UTC(2026, 11, 1);
  let nextId = 0;

  const change = (task: SimTask, at: number) => {
    const current = seller.latest(task);
    if (TERMINAL.has(current.status)) return;
    const status = pick<TaskStatus>(['submitted', 'working', 'working', 'input-required', 'completed', 'failed']);
    const progress = status === 'working' && random() < 0.5 ? { percentage: Math.floor(random() * 100) } : undefined;
    const lag = Math.floor(random() * (scenario.visibilityLagMs ?? 0));
    const visibleAtMs = Math.max(at + lag, task.versions[task.versions.length - 1].visibleAtMs);
    task.versions.push({ status, ...(progress ? { progress } : {}), updatedAtMs: at, visibleAtMs });
  };

  const register = (operation: SimOperation) => {
    const group = seller.groups.get(operation.groupKey)!;
    const registration: WatchRegistration = {
      operationId: operation.operationId,
      taskId: operation.taskId,
      task: 'create_media_buy',
      ...(group.tenant !== undefined ? { tenant: group.tenant } : {}),
      ...(group.account !== undefined ? { account: group.account } : {}),
      known: operation.known,
      deadline: new Date(operation.deadlineMs).toISOString(),
      registeredAt: new Date(now).toISOString(),
    };
    machine.register(registration, now);
    operation.watched = true;
  };

  const deliver = (notices: PendingNotice[]) => {
    const delivered: string[] = [];
    const gone: string[] = [];
    const failed: string[] = [];
    for (const pending of notices) {
      const operation = operations.get(pending.operationId)!;
      if (operation.ended) {
        gone.push(operation.operationId);
        continue;
      }
      if (random() < (scenario.deliveryFailureRate ?? 0)) {
        failed.push(operation.operationId);
        continue;
      }
      delivered.push(operation.operationId);
      if (!operation.watched) problems.push(`${operation.operationId} got a notice while not watched`);
      if (now > operation.deadlineMs) problems.push(`${operation.operationId} got a notice after its deadline`);
      if (pending.group !== operation.groupKey) problems.push(`${operation.operationId} got another group's notice`);
      if (pending.notice.kind === 'released') {
        operation.watched = false;
        operation.released += 1;
        continue;
      }
      const listed = pending.notice.listed;
      const task = seller.groups.get(operation.groupKey)!.tasks.get(operation.taskId)!;
      const skew = seller.groups.get(operation.groupKey)!.skewMs;
      const seen = task.versions.some(
        (version) =>
          version.status === listed.status &&
          observationOf(version, skew).updatedAt === listed.updatedAt &&
          JSON.stringify(version.progress ?? null) === JSON.stringify(listed.progress ?? null),
      );
      if (!seen) problems.push(`${operation.operationId} was told of a state its own task never had`);
      if (!movedFrom(operation.known, { taskId: operation.taskId, ...listed }))
        problems.push(`${operation.operationId} was told of a move to what it already knew (${listed.status})`);
      if (task.hidden) problems.push(`${operation.operationId} was told of a task its tenant cannot see`);
      operation.known = listed;
      operation.notices += 1;
      if (TERMINAL.has(listed.status)) {
        operation.done = true;
        operation.watched = false;
      }
    }
    machine.delivered(notices, { delivered, gone, failed }, now);
  };

  const drive = async () => {
    for (let guard = 0; guard < 200; guard++) {
      const step = machine.next(now);
      if (step.kind === 'wait' || step.kind === 'end') return step.kind === 'wait' ? step.untilMs : now + INTERVAL;
      if (step.kind === 'deliver') {
        deliver(step.notices);
        continue;
      }
      try {
        const outcome = await listGroupTasks({ ...step.input, shard: 0, shards: 1 }, seller.pager(step.group, now));
        machine.listed(step.group, step.input, outcome, now);
      } catch (error) {
        machine.listingFailed(
          step.group,
          { error: { code: 'TRANSPORT', message: String(error), recovery: 'transient' }, permanent: false },
          now,
        );
      }
    }
    throw new Error('the machine did not come to rest');
  };

  let wake = now;
  for (let stepIndex = 0; stepIndex < scenario.steps; stepIndex++) {
    const roll = random();
    if (roll < 0.3) {
      // A new operation parks: its task is new or one another operation (of any group) has by id.
      const group = pick(groups);
      const groupKey = groupKeyOf(group.tenant, group.account);
      const taskId = `task_${Math.floor(random() * 40)}`;
      let task = group.tasks.get(taskId);
      if (!task) {
        task = {
          taskId,
          versions: [{ status: 'submitted', updatedAtMs: now - 1_000, visibleAtMs: now - 1_000 }],
          hidden: random() < 0.05,
        };
        group.tasks.set(taskId, task);
      }
      const latest = seller.latest(task);
      if (TERMINAL.has(latest.status)) continue;
      // Mostly what its last read showed; sometimes an older state (the task moved after that read).
      const basis = random() < 0.2 && task.versions.length > 1 ? task.versions[task.versions.length - 2] : latest;
      const operation: SimOperation = {
        operationId: `op_${nextId++}`,
        groupKey,
        taskId,
        known: observationOf(basis, group.skewMs),
        watched: false,
        ended: false,
        released: 0,
        done: false,
        deadlineMs: now + (random() < 0.1 ? 10 * 60_000 : 24 * 60 * 60_000),
        notices: 0,
      };
      operations.set(operation.operationId, operation);
      register(operation);
    } else if (roll < 0.38) {
      const watched = [...operations.values()].filter((operation) => operation.watched);
      if (watched.length > 0) {
        const operation = pick(watched);
        machine.unregister(operation.operationId);
        operation.watched = false;
      }
    } else if (roll < 0.42) {
      // An operation that ended without telling the watcher (its delivery finds it gone).
      const watched = [...operations.values()].filter((operation) => operation.watched && !operation.ended);
      if (watched.length > 0) {
        const operation = pick(watched);
        operation.ended = true;
        operation.watched = false;
      }
    } else if (roll < 0.46) {
      // Re-registration with what it knows (it left parking and came back).
      const watched = [...operations.values()].filter((operation) => operation.watched);
      if (watched.length > 0) register(pick(watched));
    } else {
      const group = pick(groups);
      const tasks = [...group.tasks.values()];
      if (tasks.length > 0) change(pick(tasks), now);
    }
    if (random() < 0.5 || now >= wake) {
      const gap = Math.floor(random() * 20_000);
      now = Math.max(now + gap, Math.min(wake, now + 90_000));
      wake = await drive();
    }
  }

  // The seller goes quiet and answers every call: after a few rounds (and any backoff), everyone must know.
  seller.listingFailureRate = 0;
  scenario.deliveryFailureRate = 0;
  const quietUntil = now + 3 * 60 * 60_000;
  while (now < quietUntil) {
    wake = await drive();
    now = Math.max(now + 1_000, Math.min(wake, quietUntil));
  }
  await drive();

  for (const operation of operations.values()) {
    if (!operation.watched || operation.ended) continue;
    const group = seller.groups.get(operation.groupKey)!;
    const task = group.tasks.get(operation.taskId)!;
    if (now > operation.deadlineMs) {
      if (machine.watches(operation.operationId)) problems.push(`${operation.operationId} watched past its deadline`);
      continue;
    }
    if (task.hidden) {
      problems.push(`${operation.operationId} waits on a task its tenant cannot see and was not handed back`);
      continue;
    }
    const truth = observationOf(seller.latest(task), group.skewMs);
    if (movedFrom(operation.known, { taskId: operation.taskId, ...truth }))
      problems.push(
        `${operation.operationId} still knows ${operation.known.status}, its task is ${truth.status} (never told)`,
      );
  }
  return { problems, operations, machine, seller };
}

describe('task watcher machine (randomized)', () => {
  const scenarios: Scenario[] = [
    ...Array.from({ length: 12 }, (_, index) => ({ seed: 1_000 + index, steps: 400 })),
    ...Array.from({ length: 6 }, (_, index) => ({
      seed: 2_000 + index,
      steps: 400,
      listingFailureRate: 0.15,
      deliveryFailureRate: 0.15,
    })),
    ...Array.from({ length: 6 }, (_, index) => ({ seed: 3_000 + index, steps: 400, visibilityLagMs: 5_000 })),
    ...Array.from({ length: 4 }, (_, index) => ({ seed: 4_000 + index, steps: 300, ignoresUpdatedAfter: true })),
  ];

  it.each(scenarios)('keeps its invariants (seed $seed)', async (scenario) => {
    const { problems, operations } = await run(scenario);
    expect(problems).toEqual([]);
    // The run exercised what it is meant to: moves, hand-backs.
    const notified = [...operations.values()].filter((operation) => operation.notices > 0).length;
    expect(notified).toBeGreaterThan(0);
  });

  it('hands back operations whose task the seller never lists for their tenant', async () => {
    const results = await Promise.all([1_000, 1_001, 1_002, 1_003].map((seed) => run({ seed, steps: 400 })));
    const released = results.flatMap(({ operations, seller }) =>
      [...operations.values()].filter(
        (operation) => seller.groups.get(operation.groupKey)!.tasks.get(operation.taskId)!.hidden,
      ),
    );
    const handedBack = released.filter((operation) => operation.released > 0 || operation.ended || !operation.watched);
    expect(released.length).toBeGreaterThan(0);
    expect(handedBack.length).toBe(released.length);
  });
});

describe('task watcher machine', () => {
  const settings = { sellerId: 'seller', shard: 0, shards: 1, intervalMs: INTERVAL };
  const t0 = Date.UTC(2026, 11, 1);
  const registration = (operationId: string, taskId: string, extra: Partial<WatchRegistration> = {}) => ({
    operationId,
    taskId,
    task: 'create_media_buy',
    known: { status: 'submitted' as const },
    deadline: new Date(t0 + 86_400_000).toISOString(),
    registeredAt: new Date(t0).toISOString(),
    ...extra,
  });

  it('lists new registrations by id once, then only what changed since', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    machine.register(registration('op1', 't1'), t0);
    machine.register(registration('op2', 't2'), t0);
    let step = machine.next(t0);
    expect(step.kind).toBe('wait');
    step = machine.next(t0 + 2_000);
    expect(step).toMatchObject({ kind: 'list', input: { mode: 'changes', taskIds: ['t1', 't2'] } });
    if (step.kind !== 'list') throw new Error('expected a listing');
    expect(step.input.since).toBeUndefined();
    const at = new Date(t0 + 1_500).toISOString();
    machine.listed(
      step.group,
      step.input,
      {
        supported: true,
        rows: [
          { taskId: 't1', status: 'submitted', updatedAt: at },
          { taskId: 't2', status: 'submitted', updatedAt: at },
        ],
        latestUpdatedAt: at,
        truncated: false,
        ignoresUpdatedAfter: false,
        calls: 1,
      },
      t0 + 2_000,
    );
    expect(machine.pendingNotices).toEqual([]);
    const next = machine.next(t0 + 2_000 + INTERVAL);
    expect(next).toMatchObject({ kind: 'list', input: { mode: 'changes', taskIds: [] } });
    if (next.kind !== 'list') throw new Error('expected a listing');
    expect(Date.parse(next.input.since!)).toBe(t0 + 1_500 - 10_000);
  });

  it('lists at the round of the latest registration that names one within 5 s to 1 h', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    machine.register(registration('op1', 't1'), t0);
    expect(machine.view(t0).intervalMs).toBe(INTERVAL);
    machine.register(registration('op2', 't2', { intervalMs: 10_000 }), t0);
    for (const ignored of [1_000, 2 * 3_600_000, 10_000.5, Number.NaN])
      machine.register(registration('op3', 't3', { intervalMs: ignored }), t0);
    expect(machine.intervalMs).toBe(10_000);
    const step = machine.next(t0 + 2_000);
    if (step.kind !== 'list') throw new Error('expected a listing');
    machine.listed(
      step.group,
      step.input,
      { supported: true, rows: [], truncated: false, ignoresUpdatedAfter: false, calls: 1 },
      t0 + 2_000,
    );
    expect(Date.parse(machine.view(t0 + 2_000).groups[0]!.nextListingAt)).toBe(t0 + 2_000 + 10_000);
  });

  it('asks no earlier wake-up for a registration into a group already listed', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    machine.register(registration('op1', 't1'), t0);
    const first = machine.wakeAtMs(t0);
    machine.register(registration('op2', 't2'), t0 + 500);
    expect(machine.wakeAtMs(t0 + 500)).toBe(first);
  });

  it('hands registrations beyond its capacity back to their operations', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    for (let index = 0; index < MAX_ENTRIES; index++) machine.register(registration(`op${index}`, `t${index}`), t0);
    machine.register(registration('one-too-many', 'tx'), t0);
    expect(machine.size).toBe(MAX_ENTRIES);
    expect(machine.pendingNotices).toMatchObject([{ operationId: 'one-too-many', notice: { kind: 'released' } }]);
  });

  it('hands everything back when the seller has no task list, and hands later registrations back at once', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    machine.register(registration('op1', 't1', { tenant: 'acme' }), t0);
    const step = machine.next(t0 + 2_000);
    if (step.kind !== 'list') throw new Error('expected a listing');
    machine.listed(
      step.group,
      step.input,
      { supported: false, rows: [], truncated: false, ignoresUpdatedAfter: false, calls: 1 },
      t0 + 2_000,
    );
    machine.register(registration('op2', 't2', { tenant: 'acme' }), t0 + 3_000);
    // Another tenant's group is not affected.
    machine.register(registration('op3', 't3', { tenant: 'globex' }), t0 + 3_000);
    expect(machine.pendingNotices.map((pending) => [pending.operationId, pending.notice.kind])).toEqual([
      ['op1', 'released'],
      ['op2', 'released'],
    ]);
    expect(machine.watches('op3')).toBe(true);
  });

  it('backs off a failing seller and never lists it more often than the interval', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    machine.register(registration('op1', 't1'), t0);
    let now = t0 + 2_000;
    const gaps: number[] = [];
    for (let attempt = 0; attempt < 6; attempt++) {
      const step = machine.next(now);
      if (step.kind !== 'list') throw new Error(`expected a listing, got ${step.kind}`);
      machine.listingFailed(
        step.group,
        { error: { code: 'TIMEOUT', message: 'no answer', recovery: 'transient' }, permanent: false },
        now,
      );
      const wake = machine.wakeAtMs(now);
      gaps.push(wake - now);
      now = wake;
    }
    expect(gaps).toEqual([120_000, 240_000, 480_000, 900_000, 900_000, 900_000]);
  });

  it('forgets operations at their deadline and ends once idle', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    machine.register(registration('op1', 't1', { deadline: new Date(t0 + 60_000).toISOString() }), t0);
    expect(machine.next(t0 + 61_000).kind).toBe('wait');
    expect(machine.watches('op1')).toBe(false);
    expect(machine.next(t0 + 61_000 + IDLE_END_MS).kind).toBe('end');
  });

  it('drops a task listed by id that never shows up after a few listings', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    machine.register(registration('op1', 't1'), t0);
    let now = t0 + 2_000;
    for (let listing = 0; listing < MISSES_BEFORE_RELEASE; listing++) {
      const step = machine.next(now);
      if (step.kind !== 'list') throw new Error('expected a listing');
      machine.listed(
        step.group,
        step.input,
        { supported: true, rows: [], truncated: false, ignoresUpdatedAfter: false, calls: 1 },
        now,
      );
      now += INTERVAL;
    }
    expect(machine.watches('op1')).toBe(false);
    expect(machine.pendingNotices).toMatchObject([{ operationId: 'op1', notice: { kind: 'released' } }]);
  });

  it('carries everything through continue-as-new', () => {
    const machine = new TaskWatcherMachine(settings, 'w');
    machine.register(registration('op1', 't1', { tenant: 'acme', account: { account_id: 'a' } }), t0);
    machine.register(registration('op2', 't2', { known: { status: 'working', progress: { percentage: 5 } } }), t0);
    const step = machine.next(t0 + 2_000);
    if (step.kind !== 'list') throw new Error('expected a listing');
    machine.listed(
      step.group,
      step.input,
      {
        supported: true,
        rows: [{ taskId: 't1', status: 'completed', updatedAt: new Date(t0).toISOString() }],
        latestUpdatedAt: new Date(t0).toISOString(),
        truncated: false,
        ignoresUpdatedAfter: false,
        calls: 1,
      },
      t0 + 2_000,
    );
    const carried = JSON.parse(JSON.stringify(machine.carry()));
    const resumed = new TaskWatcherMachine(settings, 'w', carried);
    expect(resumed.view(t0 + 3_000)).toEqual({ ...machine.view(t0 + 3_000), runs: 1 });
    expect(resumed.pendingNotices).toEqual(machine.pendingNotices);
    expect(resumed.known('op2')).toEqual({ status: 'working', progress: { percentage: 5 } });
  });
});
