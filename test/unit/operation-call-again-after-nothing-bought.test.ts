/**
 * A create whose call failed in transport on every attempt (5xx, no answer in time: the attempts a busy worker's
 * circuit breaker refused count too), with no task route to find it, and a listing of the seller's media buys read to
 * its end holding none from it: nothing was bought, and nobody refused the buy. The operation calls again with the
 * same idempotency key (a request the seller was still processing is replayed by the key, never bought twice) a few
 * times before it fails `call_failed`; a refusal the seller answered still fails at once.
 */
import type { StepResult } from '../../workflows/operation/machine';
import { type Driven, answered, drive, expectStep, planFor } from '../harness/operation-machine';

const HTTP_500: StepResult = {
  kind: 'failed',
  error: { code: 'TRANSPORT_HTTP_500', message: 'The seller answered HTTP 500', recovery: 'transient' },
};
const NOTHING_BOUGHT: StepResult = {
  kind: 'resource',
  outcome: { found: false, absent: true, shaping: [], note: 'none of the 21 listed media buys matches this create' },
};

/** The call fails in transport, no task route finds it, the listing read to its end holds nothing from it. */
function failedAndNothingBought(driven: Driven, first: boolean): string {
  const { machine } = driven;
  if (first) {
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
  }
  const call = expectStep(machine, 'call');
  machine.resolve(HTTP_500);
  expectStep(machine, 'reconcile');
  machine.resolve({ kind: 'found', outcome: { supported: true, note: 'no create_media_buy task carries the key' } });
  expect(expectStep(machine, 'readResource')).toMatchObject({ purpose: 'find-lost' });
  machine.resolve(NOTHING_BOUGHT);
  return JSON.stringify(call.send);
}

test('nothing bought after transport failures: the create is sent again with the same key, and completes', () => {
  const driven = drive();
  const { machine, clock } = driven;
  const sent = failedAndNothingBought(driven, true);
  expect(machine.state.status).not.toBe('failed');
  // It waits a moment, then sends the same call (same plan, same idempotency key).
  const wait = expectStep(machine, 'wait');
  clock.now = wait.untilMs;
  machine.resolve({ kind: 'timedOut' });
  const again = expectStep(machine, 'call');
  expect(JSON.stringify(again.send)).toBe(sent);
  machine.resolve(answered({ status: 'completed', result: { media_buy_id: 'mb_1', status: 'active' } }));
  expect(machine.next()).toMatchObject({ kind: 'end' });
  expect(machine.state.status).toBe('completed');
  expect(machine.state.resource?.mediaBuyId ?? machine.state.result?.media_buy_id).toBe('mb_1');
});

test('nothing bought, round after round: after a few calls with the same key the operation fails call_failed', () => {
  const driven = drive();
  const { machine, clock } = driven;
  let rounds = 0;
  failedAndNothingBought(driven, true);
  while (machine.state.status !== 'failed') {
    const wait = expectStep(machine, 'wait');
    clock.now = wait.untilMs;
    machine.resolve({ kind: 'timedOut' });
    rounds += 1;
    failedAndNothingBought(driven, false);
    if (rounds > 10) throw new Error('the operation called again without end');
  }
  expect(rounds).toBeGreaterThanOrEqual(2);
  expect(machine.state.failure?.reason).toBe('call_failed');
  expect(machine.state.failure?.message).toContain('nothing was bought');
  expect(machine.state.resource).toMatchObject({ state: 'absent' });
  expect(machine.next()).toMatchObject({ kind: 'end' });
});

test('a refusal the seller answered is not called again', () => {
  const { machine } = drive();
  const plan = expectStep(machine, 'planCall');
  machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
  expectStep(machine, 'call');
  machine.resolve({
    kind: 'failed',
    error: { code: 'INVALID_REQUEST', message: 'packages[0].budget is below the minimum', recovery: 'correctable' },
  });
  const next = machine.next();
  if (next.kind === 'reconcile') {
    machine.resolve({ kind: 'found', outcome: { supported: true, note: 'no task' } });
    expect(machine.next()).toMatchObject({ kind: 'end' });
  } else expect(next).toMatchObject({ kind: 'end' });
  expect(machine.state.status).toBe('failed');
});

test('a listed buy tied to the lost call only by its shape is not adopted while the same call can be sent again', () => {
  const driven = drive();
  const { machine, clock } = driven;
  const plan = expectStep(machine, 'planCall');
  machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
  const call = expectStep(machine, 'call');
  machine.resolve({ kind: 'failed', error: { code: 'TIMEOUT', message: 'no answer in time', recovery: 'transient' } });
  expectStep(machine, 'reconcile');
  machine.resolve({ kind: 'found', outcome: { supported: true, note: 'no task carries the key' } });
  expectStep(machine, 'readResource');
  // Another operation's identical create made this buy; nothing but packages, budget and flight ties it here.
  machine.resolve({
    kind: 'resource',
    outcome: {
      found: true,
      mediaBuyId: 'mb_other',
      row: { media_buy_id: 'mb_other', status: 'active' },
      matchedBy: 'packages_budget_flight',
      shaping: [],
      note: 'matched by packages, budget and flight',
    },
  });
  expect(machine.state.resource?.mediaBuyId).toBeUndefined();
  const wait = expectStep(machine, 'wait');
  clock.now = wait.untilMs;
  machine.resolve({ kind: 'timedOut' });
  // The same call again: the seller's replay by the key names this operation's own task.
  expect(JSON.stringify(expectStep(machine, 'call').send)).toBe(JSON.stringify(call.send));
  machine.resolve(answered({ status: 'submitted', taskId: 'task_own' }));
  expect(machine.state.taskId).toBe('task_own');
  expect(machine.state.resource?.mediaBuyId).toBeUndefined();
});
