/**
 * A seller's action list read in AdCP's vocabulary (3.1.19 enums/media-buy-valid-action.json; 3.0.6's values are in
 * it): which changes the orchestrator refuses locally and which it sends, and how a description of the buy after a
 * change shows, contradicts or says nothing about it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { MEDIA_BUY_ACTIONS, actionsPermit, mediaBuySnapshotFrom } from '../../protocol/media-buy';
import type { ChangeRequest, MediaBuyState } from '../../contract/media-buy';
import { changeEvidence, validateChange } from '../../workflows/media-buy/changes';
import { MediaBuyMachine, type OperationOutcome, newMediaBuyState } from '../../workflows/media-buy/machine';
import type { OperationState } from '../../contract/operation';

const THREE_ONE = 'enums/media-buy-valid-action.json';
const enumFile = path.join(__dirname, '..', 'conformance', 'adcp-schemas-3.1.19', THREE_ONE);
const threeZeroFile = path.join(
  path.dirname(require.resolve('@adcp/sdk/package.json')),
  'dist/lib/schemas-data/3.0',
  THREE_ONE,
);

function buy(actions: string[], budgets: Record<string, number> = { p1: 1_000, p2: 3_000 }): MediaBuyState {
  const state = newMediaBuyState({
    buyKey: 'k',
    workflowId: 'w',
    sellerId: 's',
    createOperationId: 'c',
    nowMs: Date.UTC(2027, 0, 1),
    params: { start_time: '2027-02-01T00:00:00Z', end_time: '2027-03-01T00:00:00Z' },
  });
  return {
    ...state,
    status: 'active',
    mediaBuyId: 'mb_1',
    availableActions: actions,
    packages: Object.fromEntries(
      Object.entries(budgets).map(([packageId, budget]) => [packageId, { packageId, budget, creativeIds: [] }]),
    ),
  };
}

const budget = (budgets: Record<string, number>): ChangeRequest => ({ kind: 'budget', requestedBy: 'ops', budgets });
const endAt = (endTime: string): ChangeRequest => ({ kind: 'dates', requestedBy: 'ops', endTime });

describe('the action vocabulary', () => {
  it('is the 3.1.19 enum with its metadata, the coarse 3.0 names rolling up to the finer ones', () => {
    const official = JSON.parse(readFileSync(enumFile, 'utf8')) as {
      enum: string[];
      enumMetadata: Record<string, { update_fields: string[]; rollup?: string[] }>;
    };
    expect(Object.keys(MEDIA_BUY_ACTIONS).sort()).toEqual([...official.enum].sort());
    for (const [name, action] of Object.entries(MEDIA_BUY_ACTIONS)) {
      expect([name, [...action.updateFields]]).toEqual([name, official.enumMetadata[name]!.update_fields]);
      expect([name, action.rollup ? [...action.rollup] : undefined]).toEqual([
        name,
        official.enumMetadata[name]!.rollup,
      ]);
    }
    // 3.0.6's values (as @adcp/sdk bundles them) are all there.
    const threeZero = JSON.parse(readFileSync(threeZeroFile, 'utf8')) as { enum: string[] };
    expect(threeZero.enum).toContain('update_budget');
    for (const name of threeZero.enum) expect([name, MEDIA_BUY_ACTIONS[name] !== undefined]).toEqual([name, true]);
  });
});

describe('changes a seller’s action list lets through', () => {
  const coarse = ['pause', 'cancel', 'update_budget', 'update_dates', 'update_packages'];

  it('3.0 coarse names: update_budget and update_dates cover every budget and flight change', () => {
    expect(validateChange(buy(coarse), budget({ p1: 5_000 }))).toEqual({ ok: true });
    expect(validateChange(buy(coarse), budget({ p1: 500 }))).toEqual({ ok: true });
    expect(validateChange(buy(coarse), endAt('2027-04-01T00:00:00Z'))).toEqual({ ok: true });
    expect(validateChange(buy(coarse), endAt('2027-02-15T00:00:00Z'))).toEqual({ ok: true });
    expect(
      validateChange(buy(coarse), { kind: 'dates', requestedBy: 'ops', startTime: '2027-02-03T00:00:00Z' }),
    ).toEqual({ ok: true });
  });

  it('reallocate_budget keeps the total: moving budget between packages passes, raising the total does not', () => {
    const reallocate = ['pause', 'cancel', 'reallocate_budget'];
    expect(validateChange(buy(reallocate), budget({ p1: 2_000, p2: 2_000 }))).toEqual({ ok: true });
    expect(validateChange(buy(reallocate), budget({ p1: 2_000 }))).toMatchObject({
      ok: false,
      code: 'ACTION_NOT_ALLOWED',
      message: expect.stringContaining('packages[].budget (raised)'),
    });
    // update_packages (3.0) rolls up to reallocate_budget: the same rule.
    expect(validateChange(buy(['update_packages']), budget({ p1: 2_000, p2: 2_000 }))).toEqual({ ok: true });
    expect(validateChange(buy(['update_packages']), budget({ p1: 2_000 }))).toMatchObject({ ok: false });
  });

  it('increase and decrease go one way each; a change both ways needs both (or update_budget)', () => {
    expect(validateChange(buy(['increase_budget']), budget({ p1: 2_000 }))).toEqual({ ok: true });
    expect(validateChange(buy(['increase_budget']), budget({ p1: 500 }))).toMatchObject({ ok: false });
    expect(validateChange(buy(['decrease_budget']), budget({ p1: 500 }))).toEqual({ ok: true });
    expect(validateChange(buy(['increase_budget']), budget({ p1: 5_000, p2: 1_000 }))).toMatchObject({ ok: false });
    expect(validateChange(buy(['increase_budget', 'decrease_budget']), budget({ p1: 5_000, p2: 1_000 }))).toEqual({
      ok: true,
    });
  });

  it('extend_flight only moves the end later, shorten_flight only earlier; a new start needs update_flight_dates', () => {
    expect(validateChange(buy(['extend_flight']), endAt('2027-04-01T00:00:00Z'))).toEqual({ ok: true });
    expect(validateChange(buy(['extend_flight']), endAt('2027-02-15T00:00:00Z'))).toMatchObject({ ok: false });
    expect(validateChange(buy(['shorten_flight']), endAt('2027-02-15T00:00:00Z'))).toEqual({ ok: true });
    expect(
      validateChange(buy(['extend_flight']), { kind: 'dates', requestedBy: 'ops', startTime: '2027-02-03T00:00:00Z' }),
    ).toMatchObject({ ok: false, message: expect.stringContaining('update_dates / update_flight_dates') });
  });

  it('a name AdCP does not know means the seller is asked; package fields other than budget are the seller’s call', () => {
    expect(validateChange(buy(['pause', 'custom_reprice']), budget({ p1: 9_000 }))).toEqual({ ok: true });
    const assignment: ChangeRequest = {
      kind: 'packages',
      requestedBy: 'ops',
      packages: [{ package_id: 'p1', creative_assignments: [{ creative_id: 'c2' }], paused: true }],
    };
    expect(validateChange(buy(['pause', 'cancel', 'increase_budget']), assignment)).toEqual({ ok: true });
    // A packages change that raises a budget is a budget change too.
    expect(
      validateChange(buy(['pause', 'decrease_budget']), {
        kind: 'packages',
        requestedBy: 'ops',
        packages: [{ package_id: 'p1', budget: 4_000 }],
      }),
    ).toMatchObject({ ok: false, code: 'ACTION_NOT_ALLOWED' });
  });

  it('reads the same from the protocol core, for any caller that holds an update_media_buy request', () => {
    expect(
      actionsPermit(['update_budget'], { packages: [{ package_id: 'p1', budget: 10 }] }, { budgets: { p1: 5 } }),
    ).toEqual({ permitted: true });
    expect(actionsPermit(['resume'], { paused: true }, { budgets: {} })).toMatchObject({ permitted: false });
  });
});

describe('what a description of the buy says about a change', () => {
  it('shows, contradicts, or says nothing', () => {
    const pause: ChangeRequest = { kind: 'pause', requestedBy: 'ops' };
    expect(changeEvidence(pause, { status: 'paused' })).toEqual({ evidence: 'shown' });
    expect(changeEvidence(pause, { status: 'active' })).toEqual({
      evidence: 'contradicted',
      differences: ['status: active'],
    });
    expect(changeEvidence(pause, {})).toEqual({ evidence: 'unknown' });
    const packages: ChangeRequest = {
      kind: 'packages',
      requestedBy: 'ops',
      packages: [{ package_id: 'p1', budget: 12_345, creative_assignments: [{ creative_id: 'c2' }] }],
    };
    expect(changeEvidence(packages, { packages: [{ packageId: 'p1', budget: 12_345, creativeIds: ['c2'] }] })).toEqual({
      evidence: 'shown',
    });
    expect(changeEvidence(packages, { packages: [{ packageId: 'p1', budget: 10_000, creativeIds: ['c1'] }] })).toEqual({
      evidence: 'contradicted',
      differences: ['p1 budget: 10000', 'p1 creatives: [c1]'],
    });
    // A 3.0 answer's affected_packages name the packages and nothing else.
    expect(changeEvidence(packages, mediaBuySnapshotFrom({ affected_packages: [{ package_id: 'p1' }] }))).toEqual({
      evidence: 'unknown',
    });
  });

  it('reads affected_packages, a pending approval, and an empty creative list as the seller’s word', () => {
    const answer = mediaBuySnapshotFrom({
      media_buy_id: 'mb_1',
      implementation_date: null,
      affected_packages: [{ package_id: 'p1', budget: 5_000, creative_assignments: [] }],
    });
    expect(answer).toMatchObject({
      pendingApproval: true,
      packages: [{ packageId: 'p1', budget: 5_000, creativeIds: [] }],
    });
    expect(mediaBuySnapshotFrom({ packages: [{ package_id: 'p1' }] }).packages).toEqual([{ packageId: 'p1' }]);
  });
});

describe('a change verified by the read after it', () => {
  function machineWith(status: MediaBuyState['status']) {
    const state = { ...buy(['pause', 'resume', 'cancel', 'increase_budget']), status, revision: 3 };
    const machine = new MediaBuyMachine(state, { now: () => Date.UTC(2027, 1, 10) });
    return { state, machine };
  }
  const completed = (result: Record<string, unknown>): OperationOutcome => ({
    operation: {
      operationId: 'op',
      sellerId: 's',
      task: 'update_media_buy',
      status: 'completed',
      inputRounds: 0,
      result,
    } as OperationState,
  });

  it('the seller answers a cancel as made and its read still shows the buy live: sent, not canceled; a later read confirms', () => {
    const { state, machine } = machineWith('active');
    const sequence = machine.acceptChange({ kind: 'cancel', requestedBy: 'ops' });
    machine.beginChange(sequence);
    const verify = machine.applyChangeOutcome(
      sequence,
      completed({ media_buy_id: 'mb_1', media_buy_status: 'canceled' }),
    );
    expect(verify).toEqual({ sellerId: 's', mediaBuyId: 'mb_1' });
    machine.verifyChange(sequence, { snapshot: { mediaBuyId: 'mb_1', status: 'active' } });
    expect(machine.changeAnswer(sequence)).toMatchObject({ outcome: 'sent', status: 'active' });
    expect(state.status).toBe('active');
    expect(state.changes[0]!.note).toContain('a read of the buy right after shows status: active');
    // The seller's read catches up.
    machine.applyRead({ snapshot: { mediaBuyId: 'mb_1', status: 'canceled' } });
    expect(state.status).toBe('canceled');
    expect(state.changes[0]).toMatchObject({ outcome: 'applied', verifiedBy: 'read' });
    expect(machine.changeAnswer(sequence)).toMatchObject({ outcome: 'applied' });
  });

  it('a terse answer and a read that shows otherwise: not applied; the status is never implied from the request', () => {
    const { state, machine } = machineWith('active');
    const sequence = machine.acceptChange({ kind: 'pause', requestedBy: 'ops' });
    machine.beginChange(sequence);
    machine.applyChangeOutcome(sequence, completed({ media_buy_id: 'mb_1', affected_packages: [] }));
    expect(state.status).toBe('active');
    machine.verifyChange(sequence, { snapshot: { mediaBuyId: 'mb_1', status: 'active' } });
    expect(machine.changeAnswer(sequence)).toMatchObject({ outcome: 'failed', error: { code: 'PAUSE_NOT_APPLIED' } });
    expect(state.status).toBe('active');
  });

  it('a change pending the seller’s approval is sent; the read that shows it later confirms it', () => {
    const { state, machine } = machineWith('active');
    const sequence = machine.acceptChange({ kind: 'pause', requestedBy: 'ops' });
    machine.beginChange(sequence);
    machine.applyChangeOutcome(sequence, completed({ media_buy_id: 'mb_1', implementation_date: null }));
    machine.verifyChange(sequence, { snapshot: { mediaBuyId: 'mb_1', status: 'active' } });
    expect(machine.changeAnswer(sequence)).toMatchObject({ outcome: 'sent' });
    expect(state.changes[0]!.note).toContain('pending its approval');
    machine.applyRead({ snapshot: { mediaBuyId: 'mb_1', status: 'paused' } });
    expect(state.changes[0]).toMatchObject({ outcome: 'applied', verifiedBy: 'read' });
  });

  it('no read shows the buy: the answer’s own description decides (applied, or not applied)', () => {
    const { state, machine } = machineWith('active');
    const pause = machine.acceptChange({ kind: 'pause', requestedBy: 'ops' });
    machine.beginChange(pause);
    machine.applyChangeOutcome(pause, completed({ media_buy_id: 'mb_1', media_buy_status: 'paused' }));
    machine.verifyChange(pause, { error: { code: 'UNSUPPORTED_FEATURE', message: 'no get_media_buys' } });
    expect(machine.changeAnswer(pause)).toMatchObject({ outcome: 'applied', status: 'paused' });
    expect(state.changes[0]).toMatchObject({ verifiedBy: 'answer' });
    const cancel = machine.acceptChange({ kind: 'cancel', requestedBy: 'ops' });
    machine.beginChange(cancel);
    machine.applyChangeOutcome(cancel, completed({ media_buy_id: 'mb_1', media_buy_status: 'paused' }));
    machine.verifyChange(cancel, { note: 'get_media_buys does not list mb_1' });
    expect(machine.changeAnswer(cancel)).toMatchObject({ outcome: 'failed', error: { code: 'CANCEL_NOT_APPLIED' } });
    expect(machine.changeAnswer(cancel)?.error?.message).toContain('answered the buy as "paused", not "canceled"');
  });
});
