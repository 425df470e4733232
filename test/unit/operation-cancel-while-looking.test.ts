/**
 * A cancel that arrives while the operation looks for its buy (the create's answer was lost and no task route found
 * it: `resource.state: unknown`): the machine reads the seller's media buys before it settles the cancel, so a buy the
 * seller holds is canceled there, and one it cannot see is named as unknown, never settled blind.
 */
import type { StepResult } from '../../workflows/operation/machine';
import { type Driven, drive, expectStep, planFor } from '../harness/operation-machine';

const LOST: StepResult = { kind: 'failed', error: { code: 'TIMEOUT', message: 'lost', recovery: 'transient' } };
const DOWN: StepResult = {
  kind: 'resource',
  outcome: {
    found: false,
    unreadable: { code: 'SERVICE_UNAVAILABLE', message: 'listing down', recovery: 'transient' },
    shaping: [],
    note: 'down',
  },
};

/** A create whose answer was lost, no task listing, and a first read of the listing that could not tell: waiting. */
function lookingForTheBuy(): Driven {
  const driven = drive();
  const { machine } = driven;
  const plan = expectStep(machine, 'planCall');
  machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
  expectStep(machine, 'call');
  machine.resolve(LOST);
  expectStep(machine, 'reconcile');
  machine.resolve({ kind: 'found', outcome: { supported: false, note: 'no task listing' } });
  expect(expectStep(machine, 'readResource')).toMatchObject({ purpose: 'find-lost' });
  machine.resolve(DOWN);
  expect(machine.state.resource?.state).toBe('unknown');
  expectStep(machine, 'wait');
  machine.requestCancel({ requestedBy: 'ops', reason: 'pulled' });
  expect(machine.wakes()).toBe(true);
  machine.resolve({ kind: 'woke' });
  return driven;
}

describe('a cancel while the operation looks for its buy', () => {
  it('reads the seller’s media buys first, then cancels the buy it finds at the seller', () => {
    const { machine } = lookingForTheBuy();
    const lookup = expectStep(machine, 'readResource');
    expect(lookup).toMatchObject({ purpose: 'before-cancel', shielded: true });
    expect(lookup.input.sent?.operationId).toBe(machine.state.operationId);
    machine.resolve({
      kind: 'resource',
      outcome: {
        found: true,
        mediaBuyId: 'mb_9',
        row: { media_buy_id: 'mb_9', status: 'active' },
        matchedBy: 'context',
        shaping: [],
        note: 'matched by context',
      },
    });
    const cancel = expectStep(machine, 'cancelAtSeller');
    expect(cancel).toMatchObject({ shielded: true, input: { mediaBuyId: 'mb_9' } });
    machine.resolve({
      kind: 'toldSeller',
      outcome: { notified: true, note: 'canceled', resource: { mediaBuyId: 'mb_9', state: 'canceled' } },
    });
    expect(machine.state.resource).toMatchObject({ mediaBuyId: 'mb_9', state: 'canceled' });
    expect(machine.state.cancellation).toMatchObject({ sellerNotified: true, resource: { mediaBuyId: 'mb_9' } });
    expect(machine.next()).toMatchObject({ kind: 'end' });
  });

  it('a listing that cannot be read settles the cancel with the buy named unknown, and says where to look', () => {
    const { machine } = lookingForTheBuy();
    expect(expectStep(machine, 'readResource')).toMatchObject({ purpose: 'before-cancel' });
    machine.resolve(DOWN);
    const end = machine.next();
    expect(end).toMatchObject({ kind: 'end' });
    expect(machine.state.status).toBe('canceled');
    expect(machine.state.cancellation).toMatchObject({ sellerNotified: false, resource: { state: 'unknown' } });
    expect(machine.state.cancellation?.sellerNote).toContain('/v1/sellers/seller/reconcile');
  });

  it('a listing read to its end with no buy from the operation settles the cancel: nothing was bought', () => {
    const { machine } = lookingForTheBuy();
    expectStep(machine, 'readResource');
    machine.resolve({ kind: 'resource', outcome: { found: false, absent: true, shaping: [], note: 'none' } });
    expect(machine.next()).toMatchObject({ kind: 'end' });
    expect(machine.state).toMatchObject({ status: 'canceled', resource: { state: 'absent' } });
  });
});
