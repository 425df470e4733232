/**
 * A media buy's history stays bounded however busy the buy is: once history reaches the limit, the machine continues
 * as new ahead of reads and other due work (the next run derives them from the state it carries), so a refresh that
 * arrives during every read (reconciliation, an operator, task webhooks) no longer keeps the run from continuing. A
 * change whose Update waits in this run still runs first. Driven as the workflow's loop drives the machine.
 */
import type { MediaBuyInput } from '../../contract/media-buy';
import type { OperationState } from '../../contract/operation';
import { MediaBuyMachine, type MediaBuyStep } from '../../workflows/media-buy/machine';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.UTC(2027, 2, 1);
const LIMIT = 60;
/** A read as it lands in history: its activity's scheduled, started and completed, and a workflow task. */
const EVENTS_PER_READ = 6;
const iso = (ms: number) => new Date(ms).toISOString();

const input: MediaBuyInput = {
  buyKey: 'busy',
  sellerId: 'seller',
  params: { start_time: iso(NOW - DAY), end_time: iso(NOW + 30 * DAY), packages: [{ product_id: 'p', budget: 100 }] },
  historyEventLimit: LIMIT,
};

function created(clock: { now: number }): MediaBuyMachine {
  const machine = MediaBuyMachine.start(
    input,
    { workflowId: 'adcp-media-buy-busy', nowMs: clock.now },
    {
      now: () => clock.now,
    },
  );
  expect(machine.next(clock.now, { length: 5, continueAsNewSuggested: false })).toEqual({ kind: 'create' });
  machine.applyCreate({
    operation: {
      operationId: 'op',
      sellerId: 'seller',
      task: 'create_media_buy',
      status: 'completed',
      inputRounds: 0,
      result: { media_buy_id: 'mb_busy', status: 'active', packages: [{ package_id: 'p1', product_id: 'p' }] },
    } as unknown as OperationState,
  });
  return machine;
}

/** What the seller says at every read. */
const read = { snapshot: { mediaBuyId: 'mb_busy', status: 'active' as const } };

/**
 * The loop under a refresh that arrives during every read, with time passing so reads fall due as well; returns the
 * steps taken until continue-as-new (or 50 steps, far past the limit).
 */
function busyRun(machine: MediaBuyMachine, clock: { now: number }): { steps: MediaBuyStep['kind'][]; length: number } {
  machine.requestRefresh();
  let length = 10;
  const steps: MediaBuyStep['kind'][] = [];
  for (let guard = 0; guard < 50; guard += 1) {
    const step = machine.next(clock.now, { length, continueAsNewSuggested: false });
    steps.push(step.kind);
    if (step.kind === 'continue-as-new') break;
    expect(step.kind).toBe('read');
    machine.requestRefresh(); // arrives while the read is in flight
    clock.now += 2 * HOUR;
    machine.applyRead(read);
    length += EVENTS_PER_READ;
  }
  return { steps, length };
}

test('steady refreshes past the history limit still lead to continue-as-new, and the next run reads first', () => {
  const clock = { now: NOW };
  const machine = created(clock);
  const { steps, length } = busyRun(machine, clock);
  expect(steps.at(-1)).toBe('continue-as-new');
  // It continues at the first step at or past the limit, not one step later.
  expect(length).toBeGreaterThanOrEqual(LIMIT);
  expect(length - EVENTS_PER_READ).toBeLessThan(LIMIT);
  // The workflow continues as new once nothing is left for this run: the pending refresh is carried, not work here.
  expect(machine.hasWork()).toBe(false);
  const carried = JSON.parse(JSON.stringify(machine.carry())) as MediaBuyInput['carried'];
  expect(carried).toMatchObject({ refreshRequested: true });
  const next = MediaBuyMachine.start(
    { ...input, carried },
    { workflowId: 'adcp-media-buy-busy', nowMs: clock.now },
    {
      now: () => clock.now,
    },
  );
  expect(next.state.run).toBe(2);
  expect(next.hasWork()).toBe(true);
  expect(next.next(clock.now, { length: 5, continueAsNewSuggested: false })).toMatchObject({
    kind: 'read',
    request: { mediaBuyId: 'mb_busy' },
  });
  // Read once, the refresh is done: the new run waits for its next due time.
  next.applyRead(read);
  expect(next.next(clock.now, { length: 10, continueAsNewSuggested: false })).toMatchObject({ kind: 'wait' });
});

test('Temporal’s suggestion counts as the limit too', () => {
  const clock = { now: NOW };
  const machine = created(clock);
  machine.requestRefresh();
  expect(machine.next(clock.now, { length: 10, continueAsNewSuggested: true })).toEqual({ kind: 'continue-as-new' });
  expect(machine.carry().refreshRequested).toBe(true);
});

test('a change whose Update waits in this run runs before continue-as-new', () => {
  const clock = { now: NOW };
  const machine = created(clock);
  const sequence = machine.acceptChange({ kind: 'pause', requestedBy: 'ops' }, 'pause-1');
  machine.requestRefresh();
  expect(machine.next(clock.now, { length: LIMIT + 10, continueAsNewSuggested: false })).toEqual({
    kind: 'change',
    sequence,
  });
});

test('a run from before the patch (continueAsNewFirst false) reads first, as its history did', () => {
  const clock = { now: NOW };
  const machine = created(clock);
  let asked = 0;
  const before = () => {
    asked += 1;
    return false;
  };
  // Short of the limit the patch is not asked: a run that never gets there records no marker.
  machine.requestRefresh();
  expect(
    machine.next(clock.now, { length: 10, continueAsNewSuggested: false, continueAsNewFirst: before }),
  ).toMatchObject({ kind: 'read' });
  expect(asked).toBe(0);
  machine.applyRead(read);
  machine.requestRefresh();
  expect(
    machine.next(clock.now, { length: LIMIT, continueAsNewSuggested: false, continueAsNewFirst: before }),
  ).toMatchObject({ kind: 'read' });
  machine.applyRead(read);
  expect(machine.next(clock.now, { length: LIMIT, continueAsNewSuggested: false, continueAsNewFirst: before })).toEqual(
    { kind: 'continue-as-new' },
  );
  expect(asked).toBe(2);
});

test('once history is full, new changes and attachments are refused for now, so a stream of them cannot hold the run', () => {
  // Each accepted change is answered in this run (its Update waits here), and changes run before continue-as-new:
  // accepting every one that arrives would let a steady stream keep the run from ever continuing.
  const clock = { now: NOW };
  const machine = created(clock);
  const short = { length: 10, continueAsNewSuggested: false };
  const full = { length: LIMIT, continueAsNewSuggested: false };
  const pause = { kind: 'pause' as const, requestedBy: 'ops' };
  const resume = { kind: 'resume' as const, requestedBy: 'ops' };
  const attachment = { creatives: [{ creative_id: 'cr_1' }], requestedBy: 'ops' };
  expect(machine.checkChange(pause, 'pause-1', short)).toEqual({ ok: true });
  const first = machine.acceptChange(pause, 'pause-1');

  // History full: a new change or attachment waits for the next run (the clients send it again) ...
  expect(machine.checkChange(resume, 'resume-1', full)).toMatchObject({ ok: false, code: 'SERVICE_UNAVAILABLE' });
  expect(machine.checkAttachment(attachment, 'attach-1', full)).toMatchObject({
    ok: false,
    code: 'SERVICE_UNAVAILABLE',
  });
  // ... and so at Temporal's own suggestion.
  expect(machine.checkChange(resume, 'resume-1', { length: 10, continueAsNewSuggested: true })).toMatchObject({
    ok: false,
    code: 'SERVICE_UNAVAILABLE',
  });
  // The same update sent again answers what it made; a change wrong in itself is told so, not to come back later.
  expect(machine.checkChange(pause, 'pause-1', full)).toEqual({ ok: true });
  expect(machine.checkChange({ kind: 'budget', requestedBy: 'ops' }, 'budget-1', full)).toMatchObject({
    ok: false,
    code: 'INVALID_REQUEST',
  });
  // Without history to go by (a caller that does not say), nothing is refused for it.
  expect(machine.checkChange(resume, 'resume-1')).toEqual({ ok: true });

  // The run finishes what it accepted, then continues as new with nothing queued.
  expect(machine.next(clock.now, full)).toEqual({ kind: 'change', sequence: first });
  expect(machine.beginChange(first)).toBeDefined();
  machine.applyChangeOutcome(first, { error: { code: 'SERVICE_UNAVAILABLE', message: 'the seller is down' } });
  expect(machine.next(clock.now, full)).toEqual({ kind: 'continue-as-new' });
  const carried = JSON.parse(JSON.stringify(machine.carry())) as MediaBuyInput['carried'];
  expect(carried?.queuedChanges).toEqual([]);

  // The next run takes changes again.
  const next = MediaBuyMachine.start(
    { ...input, carried },
    { workflowId: 'adcp-media-buy-busy', nowMs: clock.now },
    { now: () => clock.now },
  );
  expect(next.checkChange({ ...pause, reason: 'sent again' }, 'pause-2', short)).toEqual({ ok: true });
  expect(next.checkAttachment(attachment, 'attach-1', short)).toEqual({ ok: true });
});
