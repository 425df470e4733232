/**
 * A create whose last attempts the worker's own circuit breaker refused (the seller was never asked then) is not a
 * failed operation: after reconciliation finds no task, the same call, with the same idempotency key, is made again
 * once the breaker's cool-off ends. Under heavy load the breaker opens for every call to a seller at once, and giving
 * up then failed operations nobody had refused.
 */
import type { StepResult } from '../../workflows/operation/machine';
import { answered, BUY, drive, expectStep, planFor } from '../harness/operation-machine';

const PAUSED: StepResult = {
  kind: 'failed',
  error: {
    code: 'SERVICE_UNAVAILABLE',
    message: 'Calls to seller "seller" are paused after repeated failures; the next try is in 30 s.',
    recovery: 'transient',
    retryAfterSeconds: 30,
    details: { origin: 'circuit-open' },
  },
};

describe('a call the worker’s circuit breaker refused', () => {
  it('is made again with the same key after the cool-off, and the operation completes', () => {
    const { machine, clock } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    const first = expectStep(machine, 'call');
    machine.resolve(PAUSED);
    expectStep(machine, 'reconcile');
    machine.resolve({ kind: 'found', outcome: { supported: true, note: 'no task from that key' } });
    expect(machine.state.status).not.toBe('failed');
    const wait = expectStep(machine, 'wait');
    expect(wait.untilMs).toBe(clock.now + 30_000);
    clock.now = wait.untilMs;
    machine.resolve({ kind: 'timedOut' });
    const again = expectStep(machine, 'call');
    expect(again.step).toBe(first.step);
    expect(again.send).toEqual(first.send);
    machine.resolve(answered({ status: 'completed', taskId: 't1', result: BUY }));
    expect(machine.state).toMatchObject({ status: 'completed', result: BUY });
  });

  it('a cancel during the wait makes no call', () => {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.resolve(PAUSED);
    expectStep(machine, 'reconcile');
    machine.resolve({ kind: 'found', outcome: { supported: false, note: 'no task listing' } });
    expectStep(machine, 'wait');
    machine.requestCancel({ requestedBy: 'ops', reason: 'pulled' });
    expect(machine.wakes()).toBe(true);
    machine.resolve({ kind: 'woke' });
    expect(machine.next()).toMatchObject({ kind: 'end' });
    expect(machine.state.status).toBe('canceled');
  });

  it('gives up with call_failed after the breaker stayed open for every round', () => {
    const { machine, clock } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.resolve(PAUSED);
    for (let round = 0; round < 50 && machine.state.status !== 'failed'; round += 1) {
      expectStep(machine, 'reconcile');
      machine.resolve({ kind: 'found', outcome: { supported: true, note: 'no task from that key' } });
      if (machine.terminal) break;
      const wait = expectStep(machine, 'wait');
      clock.now = wait.untilMs;
      machine.resolve({ kind: 'timedOut' });
      expectStep(machine, 'call');
      machine.resolve(PAUSED);
    }
    expect(machine.state.failure?.reason).toBe('call_failed');
  });
});
