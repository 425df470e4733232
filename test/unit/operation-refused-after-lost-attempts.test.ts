/**
 * A create whose first attempts failed in ways that are retried (the answer lost, a 5xx) and whose last attempt the
 * seller refused (a duplicate order number: the buy an earlier attempt made is already there). The refusal does not
 * prove that nothing was made: the operation reads the seller's media buys before it fails, adopts the buy it finds,
 * and fails `call_failed` only when the listing, read to its end, holds none from it. A refusal at the first attempt
 * still fails at once, and a refusal is never sent again.
 */
import type { StepResult } from '../../workflows/operation/machine';
import { mayHaveReachedSeller } from '../../workflows/operation/observations';
import { answered, drive, expectStep, planFor } from '../harness/operation-machine';

const REFUSED_AFTER_LOST: StepResult = {
  kind: 'failed',
  error: {
    code: 'INVALID_REQUEST',
    message: 'a media buy with po_number PO-1 already exists',
    recovery: 'correctable',
    earlierAttempts: 2,
  },
};

function refusedAfterLostAttempts() {
  const driven = drive();
  const { machine } = driven;
  const plan = expectStep(machine, 'planCall');
  machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
  expectStep(machine, 'call');
  machine.resolve(REFUSED_AFTER_LOST);
  expect(machine.state.status).not.toBe('failed');
  expectStep(machine, 'reconcile');
  machine.resolve({ kind: 'found', outcome: { supported: true, note: 'no create_media_buy task carries the key' } });
  expect(expectStep(machine, 'readResource')).toMatchObject({ purpose: 'find-lost' });
  return driven;
}

test('refused after attempts that may have reached the seller: the buy an earlier attempt made is adopted', () => {
  const { machine } = refusedAfterLostAttempts();
  machine.resolve({
    kind: 'resource',
    outcome: {
      found: true,
      mediaBuyId: 'mb_made_by_attempt_1',
      row: { media_buy_id: 'mb_made_by_attempt_1', status: 'pending_activation' },
      matchedBy: 'idempotency_key',
      shaping: [],
      note: 'media buy mb_made_by_attempt_1 echoes the idempotency key',
    },
  });
  expect(machine.state.resource?.mediaBuyId).toBe('mb_made_by_attempt_1');
  expect(machine.state.status).not.toBe('failed');
});

test('refused after lost attempts, nothing bought: call_failed at once, the refusal not sent again', () => {
  const { machine } = refusedAfterLostAttempts();
  machine.resolve({
    kind: 'resource',
    outcome: { found: false, absent: true, shaping: [], note: 'none of the 4 listed media buys matches this create' },
  });
  expect(machine.next()).toMatchObject({ kind: 'end' });
  expect(machine.state.failure?.reason).toBe('call_failed');
  expect(machine.state.failure?.message).toContain('after 2 earlier attempt(s) that may have reached it');
  expect(machine.state.failure?.message).toContain('nothing was bought');
  expect(machine.state.resource).toMatchObject({ state: 'absent' });
});

test('an idempotency refusal after lost attempts looks for the buy before it would try a new key', () => {
  const { machine } = drive();
  const plan = expectStep(machine, 'planCall');
  machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
  expectStep(machine, 'call');
  machine.resolve({
    kind: 'failed',
    error: { code: 'IDEMPOTENCY_EXPIRED', message: 'key expired', recovery: 'correctable', earlierAttempts: 1 },
  });
  expectStep(machine, 'reconcile');
  machine.resolve({ kind: 'found', outcome: { supported: true, note: 'no task carries the key' } });
  expect(expectStep(machine, 'readResource')).toMatchObject({ purpose: 'find-lost' });
});

test('a refusal at the first attempt fails without a read', () => {
  const { machine } = drive();
  const plan = expectStep(machine, 'planCall');
  machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
  expectStep(machine, 'call');
  machine.resolve({ kind: 'failed', error: { ...REFUSED_AFTER_LOST.error, earlierAttempts: undefined } });
  expect(machine.next()).toMatchObject({ kind: 'end' });
  expect(machine.state.failure?.reason).toBe('call_failed');
});

test('only a refusal after earlier attempts may have reached the seller; a transient error is judged as lost', () => {
  expect(mayHaveReachedSeller({ code: 'CONFLICT', message: '', recovery: 'correctable', earlierAttempts: 1 })).toBe(
    true,
  );
  expect(mayHaveReachedSeller({ code: 'CONFLICT', message: '', recovery: 'correctable' })).toBe(false);
  expect(mayHaveReachedSeller({ code: 'TIMEOUT', message: '', recovery: 'transient', earlierAttempts: 3 })).toBe(false);
});

test('a refusal answered as a failed task after lost attempts is looked into the same way; at the first attempt it ends', () => {
  for (const earlierAttempts of [1, 0]) {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    const refusal = answered({
      status: 'failed',
      errors: [
        { code: 'CONFLICT', message: 'a media buy with po_number PO-1 already exists', recovery: 'correctable' },
      ],
    });
    if (refusal.kind !== 'answered') throw new Error('answered() made no answer');
    machine.resolve({ ...refusal, answer: { ...refusal.answer, earlierAttempts } });
    if (earlierAttempts === 0) {
      expect(machine.state.status).toBe('failed');
      continue;
    }
    expect(machine.state.status).not.toBe('failed');
    expectStep(machine, 'reconcile');
    machine.resolve({ kind: 'found', outcome: { supported: false, note: 'no task listing' } });
    expect(expectStep(machine, 'readResource')).toMatchObject({ purpose: 'find-lost' });
  }
});
