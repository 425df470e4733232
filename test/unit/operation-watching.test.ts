/**
 * The operation and its seller's task watcher (workflows/operation/watching.ts through the operation machine): when
 * a parked operation joins the watcher, how it waits while watched (its quick polls, then only the safety poll and
 * its deadline), what a notice means (the watcher's read applied as a poll's, a read of its own, a hand-back), and
 * when it leaves.
 */
import type { TaskWatchNotice } from '../../contract/task-watcher';
import type { TaskSnapshot } from '../../protocol';
import type { OperationMachine } from '../../workflows/operation/machine';
import { quickPollsBudgetMs } from '../../workflows/operation/watching';
import { planWait } from '../../workflows/operation/cadence';
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
function movedNotice(listed: TaskSnapshot, withRead = true, taskId = 't1'): TaskWatchNotice {
  keys += 1;
  return {
    kind: 'moved',
    eventKey: `watch:${taskId}:${listed.status}:${keys}`,
    taskId,
    listed: { status: listed.status },
    ...(withRead ? { snapshot: listed } : {}),
    observedAt: new Date(0).toISOString(),
    watcherId: WATCHER,
  };
}

/** A create at a seller that can list its tasks, answered `submitted`, registered and past its quick polls. */
function parkedAndWatched(input = operationInput()) {
  const driven = drive(input);
  const { machine, clock } = driven;
  callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
  const registration = expectStep(machine, 'registerWithWatcher');
  machine.resolve(WATCHING);
  const quick = expectStep(machine, 'pollOnCadence');
  clock.now += quick.budgetMs;
  machine.resolve({ kind: 'budgetRanOut', polls: 5 });
  const safety = expectStep(machine, 'pollOnCadence');
  return { ...driven, registration, quick, safety };
}

/** Stops the running wait the way the workflow does when `wakes()` says so. */
function wake(machine: OperationMachine): void {
  expect(machine.wakes()).toBe(true);
  expect(machine.woken()).toBe(true);
  machine.resolve({ kind: 'stopped' });
}

describe('operation and task watcher', () => {
  it('a parked operation registers as it starts to wait, makes its quick polls, then keeps only the safety poll', () => {
    const { registration, quick, safety, clock } = parkedAndWatched();
    expect(registration.input).toEqual({
      sellerId: 'seller',
      registration: {
        operationId: OPERATION,
        taskId: 't1',
        task: 'create_media_buy',
        account: { account_id: 'acc_1' },
        known: { status: 'submitted' },
        deadline: new Date(1_000 + DAY).toISOString(),
        registeredAt: new Date(1_000).toISOString(),
      },
    });
    // The quick polls end where the cadence would reach the watcher's round (2, 6, 14, 30, 62 s), plus a margin.
    expect(quick).toMatchObject({ until: 'quick-polls', budgetMs: 67_000, plan: { firstPollAfterMs: 2_000 } });
    expect(safety).toMatchObject({
      until: 'deadline',
      plan: { firstPollAfterMs: SAFETY, initialIntervalMs: SAFETY, maxIntervalMs: SAFETY },
    });
    expect(safety.budgetMs).toBe(1_000 + DAY - clock.now);
  });

  it("a move the watcher read is applied as the operation's own poll would apply it; it ends without leaving", () => {
    const { machine } = parkedAndWatched();
    const pollsBefore = machine.state.pollCount;
    machine.receiveTaskNotice(movedNotice({ status: 'completed', taskId: 't1', result: BUY }));
    wake(machine);
    // No unregistration: the watcher forgot the finished task itself.
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
    expect(machine.state).toMatchObject({ status: 'completed', resource: { mediaBuyId: 'mb_1' } });
    expect(machine.state.transitions.at(-1)).toMatchObject({ from: 'submitted', to: 'completed', source: 'poll' });
    // The operation made no poll of its own for it.
    expect(machine.state.pollCount).toBe(pollsBefore);
  });

  it('a move the watcher could not read makes the operation read the task itself', () => {
    const { machine } = parkedAndWatched();
    machine.receiveTaskNotice(movedNotice({ status: 'completed', taskId: 't1' }, false));
    wake(machine);
    expect(expectStep(machine, 'poll')).toMatchObject({ purpose: 'requested', input: { taskId: 't1' } });
    expect(machine.state.status).toBe('submitted');
  });

  it('a redelivered notice is applied once; a notice about another task or from another watcher changes nothing', () => {
    const { machine } = parkedAndWatched();
    const working = movedNotice({ status: 'working', taskId: 't1' });
    machine.receiveTaskNotice(working);
    machine.receiveTaskNotice(working);
    machine.receiveTaskNotice(movedNotice({ status: 'completed', taskId: 't-other', result: BUY }, true, 't-other'));
    machine.receiveTaskNotice({ kind: 'released', taskId: 't1', reason: 'x', observedAt: '', watcherId: 'other' });
    machine.receiveTaskNotice({ nonsense: true });
    wake(machine);
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
    expect(machine.next()).toMatchObject({ kind: 'end' });
    expect(machine.state.status).toBe('canceled');
  });

  it('a seller that cannot list its tasks declines: the operation polls on its own cadence and does not ask again', () => {
    const driven = drive();
    const { machine, clock } = driven;
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
    expectStep(machine, 'registerWithWatcher');
    machine.resolve({ kind: 'watchAnswered', outcome: { watching: false, reason: 'no list_tasks' } });
    const own = expectStep(machine, 'pollOnCadence');
    expect(own).toMatchObject({ until: 'deadline', plan: { firstPollAfterMs: 2_000, maxIntervalMs: 60_000 } });
    clock.now += 10_000;
    machine.resolve(moved({ status: 'working', taskId: 't1' }));
    // No registration again for this task, whatever its status: straight to its own polls.
    expect(machine.next()).toMatchObject({ kind: 'pollOnCadence', until: 'working-window' });
    machine.resolve(moved({ status: 'submitted', taskId: 't1' }));
    expect(machine.next()).toMatchObject({ kind: 'pollOnCadence', until: 'deadline' });
  });

  it('a failed registration (the activity is missing or failed) leaves the operation polling on its own', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
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
    expectStep(machine, 'registerWithWatcher');
    machine.resolve(WATCHING);
    expectStep(machine, 'pollOnCadence');
    machine.receiveWebhook(webhook({ status: 'working', taskId: 't1' }));
    wake(machine);
    expect(expectStep(machine, 'unregisterFromWatcher').input.watcherId).toBe(WATCHER);
    machine.resolve({ kind: 'watchLeft' });
    expect(machine.next().kind).toBe('pollOnCadence');
  });

  it('a working task keeps its quick window of polls while watched, then only the safety poll', () => {
    const { machine, clock } = drive();
    callWith(machine, answered({ status: 'working', taskId: 't1' }));
    expect(expectStep(machine, 'registerWithWatcher').input.registration.known.status).toBe('working');
    machine.resolve(WATCHING);
    expect(expectStep(machine, 'pollOnCadence')).toMatchObject({ until: 'working-window', budgetMs: 120_000 });
    clock.now += 120_000;
    machine.resolve({ kind: 'budgetRanOut', polls: 24 });
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
    // Still watched and past its quick polls: only the safety poll.
    expect(expectStep(next.machine, 'pollOnCadence').plan.maxIntervalMs).toBe(SAFETY);
    next.machine.receiveTaskNotice(movedNotice({ status: 'completed', taskId: 't1' }, false));
    wake(next.machine);
    expect(expectStep(next.machine, 'poll')).toMatchObject({ purpose: 'requested' });
    next.machine.resolve({
      kind: 'read',
      outcome: { snapshot: { status: 'submitted', taskId: 't1' }, readMethod: 'tasks/get' },
    });
    // The watcher listed it `completed` but the read says otherwise: tell the watcher what the operation knows.
    expect(expectStep(next.machine, 'registerWithWatcher').input.registration.known.status).toBe('submitted');
  });

  it('quick polls last until the cadence reaches the watcher round, for both plans of a submitted wait', () => {
    expect(quickPollsBudgetMs(planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false }))).toBe(
      67_000,
    );
    expect(quickPollsBudgetMs(planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: true }))).toBe(
      67_000,
    );
  });
});
