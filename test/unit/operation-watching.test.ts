/**
 * The operation and its seller's task watcher (workflows/operation/watching.ts through the operation machine): when
 * a parked operation joins the watcher, how it waits while watched (its quick polls, then only the safety poll and
 * its deadline), what a notice means (the watcher's read applied as a poll's, a read of its own, a hand-back), and
 * when it leaves.
 */
import type { RegisterWithWatcherOutcome, TaskWatchNotice } from '../../contract/task-watcher';
import type { TaskSnapshot } from '../../protocol';
import type { OperationMachine } from '../../workflows/operation/machine';
import { quickPollCount, quickWindow } from '../../workflows/operation/watching';
import { planWait, pollOffsets } from '../../workflows/operation/cadence';
import {
  BUY,
  DAY,
  OPERATION,
  answered,
  callWith,
  drive,
  expectStep,
  moved,
  operationInput,
  webhook,
} from '../harness/operation-machine';

const WATCHER = 'task-watcher:adcp:seller:0';
const SAFETY = 30 * 60_000;
const WATCHING = {
  kind: 'watchAnswered' as const,
  outcome: { watching: true, watcherId: WATCHER, safetyPollMs: SAFETY },
};

let keys = 0;
function movedNotice(listed: TaskSnapshot, taskId = 't1'): TaskWatchNotice {
  keys += 1;
  return {
    kind: 'moved',
    eventKey: `watch:${taskId}:${listed.status}:${keys}`,
    taskId,
    listed: { status: listed.status },
    observedAt: new Date(0).toISOString(),
    watcherId: WATCHER,
  };
}

/** The quick window of a submitted wait (2, 6, 14, 30, 62 s), ended by its budget with nothing moved. */
const QUICK_BUDGET_MS = 92_000;
function pastQuickPolls(driven: ReturnType<typeof drive>) {
  const quick = expectStep(driven.machine, 'pollOnCadence');
  expect(quick).toMatchObject({ until: 'quick-polls', budgetMs: QUICK_BUDGET_MS });
  driven.clock.now += quick.budgetMs;
  driven.machine.resolve({ kind: 'budgetRanOut', polls: 5 });
  return quick;
}

/** A create at a seller that can list its tasks, answered `submitted`, past its quick polls, registered and waiting. */
function parkedAndWatched(input = operationInput(), outcome: Partial<RegisterWithWatcherOutcome> = {}) {
  const driven = drive(input);
  const { machine, clock } = driven;
  callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
  const quick = pastQuickPolls(driven);
  const registration = expectStep(machine, 'registerWithWatcher');
  machine.resolve({ ...WATCHING, outcome: { ...WATCHING.outcome, ...outcome } });
  const wait = expectStep(machine, 'pollOnCadence');
  clock.now += 120_000;
  return { ...driven, quick, registration, wait };
}

/** The operation's own read of its task (a `poll` step's answer). */
function read(snapshot: TaskSnapshot) {
  return { kind: 'read' as const, outcome: { snapshot, readMethod: 'tasks/get' as const } };
}

/** Stops the running wait the way the workflow does when `wakes()` says so. */
function wake(machine: OperationMachine): void {
  expect(machine.wakes()).toBe(true);
  expect(machine.woken()).toBe(true);
  machine.resolve({ kind: 'stopped' });
}

describe('operation and task watcher', () => {
  it('a parked operation makes its quick polls on its own, joins the watcher once they are over, then makes only the safety poll', () => {
    const { quick, registration, wait, clock } = parkedAndWatched();
    // The quick polls (2, 6, 14, 30, 62 s) in one activity that ends half an interval after the last.
    expect(quick.input.cadence).toEqual({ firstPollAfterMs: 2_000, initialIntervalMs: 4_000, maxIntervalMs: 60_000 });
    expect(pollOffsets(quick.plan, quick.budgetMs)).toEqual([2_000, 6_000, 14_000, 30_000, 62_000]);
    expect(registration.input).toEqual({
      sellerId: 'seller',
      registration: {
        operationId: OPERATION,
        taskId: 't1',
        task: 'create_media_buy',
        account: { account_id: 'acc_1' },
        known: { status: 'submitted' },
        deadline: new Date(1_000 + DAY).toISOString(),
        registeredAt: new Date(1_000 + QUICK_BUDGET_MS).toISOString(),
      },
    });
    // One activity to the deadline, one poll every safety interval.
    expect(wait).toMatchObject({
      until: 'deadline',
      input: { cadence: { firstPollAfterMs: SAFETY, initialIntervalMs: SAFETY, maxIntervalMs: SAFETY } },
    });
    expect(wait.input.cadence.settle).toBeUndefined();
    expect(wait.budgetMs).toBe(1_000 + DAY - (clock.now - 120_000));
  });

  it("the safety poll backs off to the worker's cap while the task stays put; a move starts the next wait afresh; carried on", () => {
    const CAP = 2 * 3_600_000;
    const driven = parkedAndWatched(operationInput(), { safetyPollMaxMs: CAP });
    const { machine, wait } = driven;
    const minutes = (offsets: number[]) => offsets.map((at) => at / 60_000);
    // 30 min, then 1 h, then every 2 h: 13 reads in a day against 48 at a fixed 30 minutes.
    expect(wait.plan).toEqual({ firstPollAfterMs: SAFETY, initialIntervalMs: 2 * SAFETY, maxIntervalMs: CAP });
    expect(minutes(pollOffsets(wait.plan, 8 * 3_600_000))).toEqual([30, 90, 210, 330, 450]);
    expect(pollOffsets(wait.plan, DAY)).toHaveLength(13);
    // Its safety poll sees the task working (the watcher missed it): the next watched wait starts at 30 min again.
    machine.resolve(moved({ status: 'working', taskId: 't1' }));
    expectStep(machine, 'registerWithWatcher');
    machine.resolve(WATCHING);
    expect(expectStep(machine, 'pollOnCadence').until).toBe('working-window');
    machine.resolve(moved({ status: 'submitted', taskId: 't1' }));
    expectStep(machine, 'registerWithWatcher');
    machine.resolve({ ...WATCHING, outcome: { ...WATCHING.outcome, safetyPollMaxMs: CAP } });
    // Back to submitted: its quick polls, then the safety poll from its first interval, backing off to the cap.
    const again = expectStep(machine, 'pollOnCadence');
    expect(again.input.cadence.settle).toEqual({ afterPolls: 5, intervalMs: SAFETY, maxIntervalMs: CAP });
    expect(minutes(pollOffsets(again.plan, 8 * 3_600_000)).slice(5)).toEqual(
      [30, 90, 210, 330, 450].map((at) => at + 62_000 / 60_000),
    );
    // Continue-as-new carries the cap.
    expect(machine.carried().watch).toMatchObject({ safetyPollMs: SAFETY, safetyPollMaxMs: CAP });
    driven.history.long = true;
    machine.resolve({ kind: 'stopped' });
    expect(machine.next().kind).toBe('continueAsNew');
    driven.history.long = false;
    expect(expectStep(driven.continued().machine, 'pollOnCadence').input.cadence.settle).toEqual({
      afterPolls: 5,
      intervalMs: SAFETY,
      maxIntervalMs: CAP,
    });
  });

  it('a worker that names no cap (a build from before the backoff) keeps the safety poll at one interval', () => {
    const { wait } = parkedAndWatched();
    expect(pollOffsets(wait.plan, 3 * 3_600_000).map((at) => at / 60_000)).toEqual([30, 60, 90, 120, 150, 180]);
  });

  it('an operation its seller finishes within the quick polls never joins or leaves the watcher', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
    expect(expectStep(machine, 'pollOnCadence').until).toBe('quick-polls');
    machine.resolve(moved({ status: 'completed', taskId: 't1', result: BUY }));
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
    expect(machine.state).toMatchObject({ status: 'completed', resource: { mediaBuyId: 'mb_1' } });
  });

  it("a watcher with a shorter round (the worker's ADCP_TASK_WATCHER_INTERVAL) ends a later wait's quick polls there, carried on", () => {
    const { machine } = parkedAndWatched(operationInput(), { watchIntervalMs: 10_000 });
    expect(machine.carried().watch).toMatchObject({ watcherId: WATCHER, watchIntervalMs: 10_000 });
    // Its own safety poll sees the task working, then submitted again: told to the watcher at once each time.
    machine.resolve(moved({ status: 'working', taskId: 't1' }));
    expectStep(machine, 'registerWithWatcher');
    machine.resolve(WATCHING);
    expect(expectStep(machine, 'pollOnCadence').until).toBe('working-window');
    machine.resolve(moved({ status: 'submitted', taskId: 't1' }));
    expectStep(machine, 'registerWithWatcher');
    machine.resolve({ ...WATCHING, outcome: { ...WATCHING.outcome, watchIntervalMs: 10_000 } });
    // 2, 6, 14 s: the next interval (16 s) is past the 10 s round, so the watcher covers the task from there.
    const wait = expectStep(machine, 'pollOnCadence');
    expect(wait).toMatchObject({ until: 'deadline' });
    expect(wait.input.cadence.settle).toEqual({ afterPolls: 3, intervalMs: SAFETY, maxIntervalMs: SAFETY });
  });

  it('a move makes the operation read the task itself, with its own read; it ends without leaving the watcher', () => {
    const { machine } = parkedAndWatched();
    const pollsBefore = machine.state.pollCount;
    machine.receiveTaskNotice(movedNotice({ status: 'completed', taskId: 't1' }));
    wake(machine);
    // What the listing showed is not applied: the operation's own read (read method, adapter, shaping) decides.
    expect(machine.state.status).toBe('submitted');
    expect(expectStep(machine, 'poll')).toMatchObject({ purpose: 'requested', input: { taskId: 't1' } });
    machine.resolve(read({ status: 'completed', taskId: 't1', result: BUY }));
    // No unregistration: the watcher forgot the finished task itself.
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
    expect(machine.state).toMatchObject({ status: 'completed', resource: { mediaBuyId: 'mb_1' } });
    expect(machine.state.transitions.at(-1)).toMatchObject({ from: 'submitted', to: 'completed', source: 'poll' });
    expect(machine.state.pollCount).toBe(pollsBefore + 1);
  });

  it('a move whose read failed is read again when the watcher tells it again after the new registration', () => {
    // Seen in `npm run fault-test`: the read after a `completed` move timed out; the operation registered again (the
    // watcher forgets a finished task), the watcher listed the task and sent the same move (same event key), and
    // the operation dropped it as a redelivery: it waited for its 30-minute safety poll, watched by nobody.
    const { machine } = parkedAndWatched();
    const finished = movedNotice({ status: 'completed', taskId: 't1' });
    machine.receiveTaskNotice(finished);
    wake(machine);
    expect(expectStep(machine, 'poll')).toMatchObject({ purpose: 'requested' });
    machine.resolve({
      kind: 'failed',
      error: { code: 'TRANSPORT_TIMEOUT', message: 'no answer', recovery: 'transient' },
    });
    const again = expectStep(machine, 'registerWithWatcher');
    expect(again.input.registration.known.status).toBe('submitted');
    // The watcher's answer to the new registration may arrive before the registration's own answer.
    machine.receiveTaskNotice({ ...finished, observedAt: new Date(60_000).toISOString() });
    machine.resolve(WATCHING);
    expect(expectStep(machine, 'poll')).toMatchObject({ purpose: 'requested' });
    machine.resolve(read({ status: 'completed', taskId: 't1', result: BUY }));
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
    expect(machine.state).toMatchObject({ status: 'completed', resource: { mediaBuyId: 'mb_1' } });
  });

  it('a move whose read saw the task disagree is not read again for the same listing: the safety poll reads later', () => {
    // A seller whose listing is ahead of its task read: reading again at every listing round would cost a
    // registration and a read a minute until the read caught up.
    const { machine } = parkedAndWatched();
    const finished = movedNotice({ status: 'completed', taskId: 't1' });
    machine.receiveTaskNotice(finished);
    wake(machine);
    expectStep(machine, 'poll');
    machine.resolve(read({ status: 'submitted', taskId: 't1' }));
    expect(expectStep(machine, 'registerWithWatcher').input.registration.known.status).toBe('submitted');
    machine.resolve(WATCHING);
    const wait = expectStep(machine, 'pollOnCadence');
    machine.receiveTaskNotice({ ...finished, observedAt: new Date(60_000).toISOString() });
    expect(machine.wakes()).toBe(false);
    expect(wait.plan.maxIntervalMs).toBe(SAFETY);
  });

  it('a redelivered notice is applied once; a notice about another task or from another watcher changes nothing', () => {
    const { machine } = parkedAndWatched();
    const working = movedNotice({ status: 'working', taskId: 't1' });
    machine.receiveTaskNotice(working);
    machine.receiveTaskNotice(working);
    machine.receiveTaskNotice(movedNotice({ status: 'completed', taskId: 't-other', result: BUY }, 't-other'));
    machine.receiveTaskNotice({ kind: 'released', taskId: 't1', reason: 'x', observedAt: '', watcherId: 'other' });
    machine.receiveTaskNotice({ nonsense: true });
    wake(machine);
    // One read for the one move.
    expectStep(machine, 'poll');
    machine.resolve(read({ status: 'working', taskId: 't1' }));
    // The watcher already knows `working` (its own listing said so): no new registration, the working window polls.
    expect(machine.next()).toMatchObject({
      kind: 'pollOnCadence',
      until: 'working-window',
      plan: { maxIntervalMs: 5_000 },
    });
    expect(machine.state.status).toBe('working');
    expect(machine.state.transitions.filter((t) => t.to === 'working')).toHaveLength(1);
  });

  it('a move learned without the watcher (its own safety poll) is told to the watcher with a new registration', () => {
    const { machine } = parkedAndWatched();
    machine.resolve(moved({ status: 'input-required', taskId: 't1', message: 'approve?' }));
    const again = expectStep(machine, 'registerWithWatcher');
    expect(again.input.registration.known).toEqual({ status: 'input-required' });
    machine.resolve(WATCHING);
    // Watched while it waits for the buyer: a move at the seller wakes the wait.
    expectStep(machine, 'wait');
    machine.receiveTaskNotice(movedNotice({ status: 'canceled', taskId: 't1' }));
    expect(machine.wakes()).toBe(true);
    machine.resolve({ kind: 'woke' });
    expectStep(machine, 'poll');
    machine.resolve(read({ status: 'canceled', taskId: 't1' }));
    expect(machine.next()).toMatchObject({ kind: 'end' });
    expect(machine.state.status).toBe('canceled');
  });

  it('a seller that cannot list its tasks declines: the operation polls on its own cadence and does not ask again', () => {
    const driven = drive();
    const { machine, clock } = driven;
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
    pastQuickPolls(driven);
    expectStep(machine, 'registerWithWatcher');
    machine.resolve({ kind: 'watchAnswered', outcome: { watching: false, reason: 'no list_tasks' } });
    // Its cadence goes on where the quick polls left it: the next poll 60 s after the last (62 s), then every 60 s.
    const own = expectStep(machine, 'pollOnCadence');
    expect(own).toMatchObject({
      until: 'deadline',
      plan: { firstPollAfterMs: 30_000, initialIntervalMs: 60_000, maxIntervalMs: 60_000 },
    });
    clock.now += 10_000;
    machine.resolve(moved({ status: 'working', taskId: 't1' }));
    // No registration again for this task, whatever its status: straight to its own polls.
    expect(machine.next()).toMatchObject({ kind: 'pollOnCadence', until: 'working-window' });
    // Submitted again: a fresh cadence, in one activity to the deadline (no quick window: it will not join).
    machine.resolve(moved({ status: 'submitted', taskId: 't1' }));
    expect(machine.next()).toMatchObject({
      kind: 'pollOnCadence',
      until: 'deadline',
      plan: { firstPollAfterMs: 2_000 },
    });
  });

  it('a failed registration (the activity is missing or failed) leaves the operation polling on its own', () => {
    const driven = drive();
    const { machine } = driven;
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
    pastQuickPolls(driven);
    expectStep(machine, 'registerWithWatcher');
    machine.resolve({
      kind: 'failed',
      error: { code: 'ACTIVITY_FAILED', message: 'not registered', recovery: 'terminal' },
    });
    expect(expectStep(machine, 'pollOnCadence')).toMatchObject({ until: 'deadline', plan: { maxIntervalMs: 60_000 } });
  });

  it('handed back by the watcher, the operation polls on its own cadence again', () => {
    const { machine } = parkedAndWatched();
    machine.receiveTaskNotice({
      kind: 'released',
      taskId: 't1',
      reason: 'the seller does not list it',
      observedAt: new Date(0).toISOString(),
      watcherId: WATCHER,
    });
    wake(machine);
    expect(expectStep(machine, 'pollOnCadence')).toMatchObject({ until: 'deadline', plan: { maxIntervalMs: 60_000 } });
    expect(machine.state.anomalies.at(-1)?.note).toContain('handed the task back');
  });

  it('ending on its own (its poll, the deadline) it leaves the watcher before it ends', () => {
    const { machine } = parkedAndWatched();
    machine.resolve(moved({ status: 'completed', taskId: 't1', result: BUY }));
    const leave = expectStep(machine, 'unregisterFromWatcher');
    expect(leave.input).toMatchObject({ watcherId: WATCHER, operationId: OPERATION });
    machine.resolve({ kind: 'watchLeft' });
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
  });

  it('once its webhooks arrive it relies on them: it leaves the watcher and keeps the webhook backup cadence', () => {
    const driven = drive();
    const { machine } = driven;
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }, true));
    // The webhook backup cadence (up to 120 s) has the same quick polls; its next interval is 64 s.
    const quick = expectStep(machine, 'pollOnCadence');
    expect(quick).toMatchObject({ until: 'quick-polls', budgetMs: 62_000 + 32_000, plan: { maxIntervalMs: 120_000 } });
    machine.resolve({ kind: 'budgetRanOut', polls: 5 });
    expectStep(machine, 'registerWithWatcher');
    machine.resolve(WATCHING);
    expectStep(machine, 'pollOnCadence');
    machine.receiveWebhook(webhook({ status: 'working', taskId: 't1' }));
    wake(machine);
    expect(expectStep(machine, 'unregisterFromWatcher').input.watcherId).toBe(WATCHER);
    machine.resolve({ kind: 'watchLeft' });
    expect(machine.next().kind).toBe('pollOnCadence');
  });

  it('a webhook within the quick polls: the operation never joins and waits as it would without a watcher', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
    expect(expectStep(machine, 'pollOnCadence').until).toBe('quick-polls');
    machine.receiveWebhook(webhook({ status: 'working', taskId: 't1' }));
    wake(machine);
    expect(machine.next()).toMatchObject({ kind: 'pollOnCadence', until: 'working-window' });
    machine.resolve(moved({ status: 'submitted', taskId: 't1' }));
    // Back to submitted after a webhook: its own cadence to the deadline, no quick window, no registration.
    expect(machine.next()).toMatchObject({ kind: 'pollOnCadence', until: 'deadline' });
  });

  it('a webhook it did not register for still makes it leave: it then waits as it would without a watcher', () => {
    const { machine } = parkedAndWatched();
    machine.receiveWebhook(webhook({ status: 'working', taskId: 't1' }));
    wake(machine);
    expect(expectStep(machine, 'unregisterFromWatcher').input.watcherId).toBe(WATCHER);
    machine.resolve({ kind: 'watchLeft' });
    // Its own working window, not a registration with what the webhook said (the listing may not show it yet).
    expect(machine.next()).toMatchObject({ kind: 'pollOnCadence', until: 'working-window' });
  });

  it('a move the listing showed is no news once a webhook came: no read, so a listing never moves a task back from what a webhook said', () => {
    const { machine } = parkedAndWatched();
    // The listing saw the task working before the webhook said so; its notice lands with the webhook.
    machine.receiveWebhook(webhook({ status: 'working', taskId: 't1', updatedAt: '2026-01-01T00:00:05Z' }));
    machine.receiveTaskNotice(movedNotice({ status: 'working', taskId: 't1' }));
    wake(machine);
    // It leaves the watcher and reads nothing on the watcher's word.
    expect(expectStep(machine, 'unregisterFromWatcher').input.watcherId).toBe(WATCHER);
    machine.resolve({ kind: 'watchLeft' });
    expect(expectStep(machine, 'pollOnCadence')).toMatchObject({ until: 'working-window' });
    // A notice delivered after it left (the watcher listed before the unregistration reached it) wakes nothing.
    machine.receiveTaskNotice(movedNotice({ status: 'working', taskId: 't1' }));
    machine.receiveTaskNotice(movedNotice({ status: 'submitted', taskId: 't1' }));
    expect(machine.wakes()).toBe(false);
    machine.resolve({ kind: 'stopped' });
    expect(machine.next()).toMatchObject({ kind: 'pollOnCadence', until: 'working-window' });
    expect(machine.state.status).toBe('working');
    expect(machine.state.transitions.map((t) => `${t.from}->${t.to}:${t.source}`)).toEqual([
      'pending->submitted:call',
      'submitted->working:webhook',
    ]);
  });

  it('a listing older than what the operation last read is no news: no read', () => {
    const { machine } = parkedAndWatched();
    machine.resolve(moved({ status: 'working', taskId: 't1', updatedAt: '2026-01-01T00:00:10Z' }));
    // The watcher is told the operation's own read (a new registration), and keeps it.
    expect(expectStep(machine, 'registerWithWatcher').input.registration.known.status).toBe('working');
    machine.resolve(WATCHING);
    expectStep(machine, 'pollOnCadence');
    const older = movedNotice({ status: 'submitted', taskId: 't1' });
    if (older.kind === 'moved') older.listed.updatedAt = '2026-01-01T00:00:04Z';
    machine.receiveTaskNotice(older);
    wake(machine);
    // No read; the watcher, which now holds the older row, is told what the operation knows.
    expect(expectStep(machine, 'registerWithWatcher').input.registration.known.status).toBe('working');
    machine.resolve(WATCHING);
    expect(machine.next()).toMatchObject({ kind: 'pollOnCadence', until: 'working-window' });
    expect(machine.state.status).toBe('working');
    // A newer one is a move: the operation reads the task itself.
    machine.resolve({ kind: 'stopped' });
    const newer = movedNotice({ status: 'completed', taskId: 't1' });
    if (newer.kind === 'moved') newer.listed.updatedAt = '2026-01-01T00:00:20Z';
    machine.receiveTaskNotice(newer);
    expect(machine.next()).toMatchObject({ kind: 'poll', purpose: 'requested' });
  });

  it('a working task makes its window of quick polls on its own, then joins the watcher and makes only the safety poll', () => {
    const { machine, clock } = drive();
    callWith(machine, answered({ status: 'working', taskId: 't1' }));
    expect(expectStep(machine, 'pollOnCadence')).toMatchObject({ until: 'working-window', budgetMs: 120_000 });
    clock.now += 120_000;
    machine.resolve({ kind: 'budgetRanOut', polls: 24 });
    expect(expectStep(machine, 'registerWithWatcher').input.registration.known.status).toBe('working');
    machine.resolve(WATCHING);
    expect(expectStep(machine, 'pollOnCadence')).toMatchObject({ until: 'deadline', plan: { maxIntervalMs: SAFETY } });
  });

  it('continue-as-new carries the watch: the continued run is still watched and applies what arrives', () => {
    const driven = parkedAndWatched();
    driven.history.long = true;
    driven.machine.resolve({ kind: 'stopped' });
    expect(driven.machine.next().kind).toBe('continueAsNew');
    const carried = driven.machine.carried();
    expect(carried.watch).toMatchObject({ watcherId: WATCHER, told: { taskId: 't1', status: 'submitted' } });
    driven.history.long = false;
    const next = driven.continued();
    // Still watched, its quick polls long over: only the safety poll.
    expect(expectStep(next.machine, 'pollOnCadence').plan).toEqual({
      firstPollAfterMs: SAFETY,
      initialIntervalMs: SAFETY,
      maxIntervalMs: SAFETY,
    });
    next.machine.receiveTaskNotice(movedNotice({ status: 'completed', taskId: 't1' }));
    wake(next.machine);
    expect(expectStep(next.machine, 'poll')).toMatchObject({ purpose: 'requested' });
    next.machine.resolve({
      kind: 'read',
      outcome: { snapshot: { status: 'submitted', taskId: 't1' }, readMethod: 'tasks/get' },
    });
    // The watcher listed it `completed` but the read says otherwise: tell the watcher what the operation knows.
    expect(expectStep(next.machine, 'registerWithWatcher').input.registration.known.status).toBe('submitted');
  });

  it('the quick polls are those before the cadence reaches the watcher round, for both plans of a submitted wait', () => {
    expect(quickPollCount(planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false }))).toBe(5);
    expect(quickPollCount(planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: true }))).toBe(5);
    expect(quickPollCount(planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false }), 10_000)).toBe(
      3,
    );
    expect(quickPollCount(planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false }), 4_000)).toBe(1);
  });

  it('the quick window ends between its last quick poll and the next, and the cadence after it keeps the plan', () => {
    for (const webhookRegistered of [false, true]) {
      const plan = planWait({ status: 'submitted', workingForMs: 0, webhookRegistered });
      for (const round of [5_000, 10_000, 60_000, 3_600_000]) {
        const { polls, budgetMs, after } = quickWindow(plan, round);
        const offsets = pollOffsets(plan, 24 * 3_600_000);
        expect(polls).toBe(quickPollCount(plan, round));
        // The last quick poll is inside the budget, the next one outside it.
        expect(offsets[polls - 1]).toBeLessThan(budgetMs);
        expect(offsets[polls]).toBeGreaterThan(budgetMs);
        // The wait after the window polls where the plan would have, from its end.
        const resumed = pollOffsets(after, 24 * 3_600_000 - budgetMs).map((at) => at + budgetMs);
        expect(resumed.slice(0, 20)).toEqual(offsets.slice(polls, polls + 20));
      }
    }
  });
});
