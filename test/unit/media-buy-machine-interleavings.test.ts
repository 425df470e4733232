/**
 * The media-buy machine driven as its workflow drives it, against a simulated seller, with thousands of seeded random
 * interleavings of what the outside world does: changes (some refused, some repeated with the same update ID),
 * creative attachments, refresh requests, delivery reports (duplicated, reordered, for another buy), seller answers
 * that fail, time passing through the flight's end, and continue-as-new at random points. After every event the
 * invariants a buyer relies on are checked; a failure names the seed and the trail that broke it.
 */
import type { OperationState } from '../../contract/operation';
import type {
  ChangeAnswer,
  ChangeRequest,
  CreativeAttachment,
  MediaBuyInput,
  MediaBuyLifecycle,
  ReportDelivery,
} from '../../contract/media-buy';
import type { DeliveryPull, MediaBuySnapshot, ReportingNotification } from '../../protocol/media-buy';
import {
  MediaBuyMachine,
  type MediaBuyStep,
  type OperationOutcome,
  type PullOutcome,
  type ReadOutcome,
} from '../../workflows/media-buy/machine';
import { isTerminal } from '../../workflows/media-buy/lifecycle';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const START = Date.UTC(2027, 2, 1);
const FLIGHT_START = START + DAY;
const FLIGHT_END = START + 3 * DAY;
const MEDIA_BUY_ID = 'mb_world';
const PACKAGES = ['p1', 'p2'];
const iso = (ms: number) => new Date(ms).toISOString();

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seller's side of one buy: its status by its own clock, and its delivery as a pure function of the hour. */
class World {
  made = false;
  revision = 0;
  creativesAtMs: number | undefined;
  canceledAtMs: number | undefined;
  endMs = FLIGHT_END;
  pauses: { from: number; to?: number }[] = [];
  budgets: Record<string, number> = { p1: 1_000, p2: 2_000 };
  /** What the seller applied of each change it said it made. */
  applied: string[] = [];

  constructor(
    readonly clock: { now: number },
    /** Sellers as they are met: one answers a pause with success and does not pause, one answers tersely (3.0's
     * affected_packages, no status), one offers no get_media_buys. */
    readonly behaviour: { ignoresPause: boolean; terse: boolean; noReads: boolean },
  ) {}

  paused(atMs: number): boolean {
    return this.pauses.some((pause) => pause.from <= atMs && (pause.to === undefined || atMs < pause.to));
  }

  status(atMs = this.clock.now): MediaBuyLifecycle {
    if (this.canceledAtMs !== undefined && atMs >= this.canceledAtMs) return 'canceled';
    if (atMs >= this.endMs) return 'completed';
    if (this.paused(atMs)) return 'paused';
    if (this.creativesAtMs === undefined || atMs < this.creativesAtMs) return 'pending_creatives';
    if (atMs < FLIGHT_START) return 'pending_start';
    return 'active';
  }

  /** Impressions of one package in the hour starting at `hourMs` (distinct per hour, so a double count shows). */
  delivered(packageId: string, hourMs: number): number {
    const live =
      hourMs >= FLIGHT_START &&
      hourMs < this.endMs &&
      this.creativesAtMs !== undefined &&
      hourMs >= this.creativesAtMs &&
      (this.canceledAtMs === undefined || hourMs < this.canceledAtMs) &&
      !this.paused(hourMs);
    return live ? 100 + ((hourMs / HOUR) % 97) + (packageId === 'p2' ? 1_000 : 0) : 0;
  }

  describe(): Record<string, unknown> {
    const status = this.status();
    return {
      media_buy_id: MEDIA_BUY_ID,
      media_buy_status: status,
      revision: this.revision,
      start_time: iso(FLIGHT_START),
      end_time: iso(this.endMs),
      creative_deadline: iso(FLIGHT_START - 12 * HOUR),
      available_actions: isTerminal(status)
        ? []
        : [status === 'paused' ? 'resume' : 'pause', 'cancel', 'increase_budget', 'decrease_budget', 'extend_flight'],
      packages: PACKAGES.map((packageId) => ({
        package_id: packageId,
        budget: this.budgets[packageId],
        ...(this.creativesAtMs !== undefined ? { creative_assignments: [{ creative_id: 'cr_1' }] } : {}),
      })),
    };
  }

  snapshot(): MediaBuySnapshot {
    const row = this.describe();
    return {
      mediaBuyId: MEDIA_BUY_ID,
      status: row.media_buy_status as MediaBuySnapshot['status'],
      revision: this.revision,
      startTime: iso(FLIGHT_START),
      endTime: iso(this.endMs),
      packages: PACKAGES.map((packageId) => ({
        packageId,
        budget: this.budgets[packageId],
        ...(this.creativesAtMs !== undefined ? { creativeIds: ['cr_1'] } : {}),
      })),
    };
  }

  /** update_media_buy at the seller: applied, or refused as the storyboard wants. */
  update(
    request: ChangeRequest,
  ): { errors: { code: string; message: string }[] } | { described: Record<string, unknown>; made: boolean } {
    const now = this.clock.now;
    const status = this.status();
    if (isTerminal(status)) return { errors: [{ code: 'INVALID_STATE', message: `the buy is ${status}` }] };
    if (request.kind === 'resume' && status !== 'paused')
      return { errors: [{ code: 'INVALID_STATE', message: 'not paused' }] };
    const made = !(request.kind === 'pause' && this.behaviour.ignoresPause);
    if (request.kind === 'pause' && made) this.pauses.push({ from: now });
    if (request.kind === 'resume') this.pauses.find((pause) => pause.to === undefined)!.to = now;
    if (request.kind === 'cancel') this.canceledAtMs = now;
    if (request.kind === 'budget') Object.assign(this.budgets, request.budgets);
    if (request.kind === 'dates' && request.endTime) this.endMs = Date.parse(request.endTime);
    this.revision += 1;
    if (made) this.applied.push(request.kind);
    if (this.behaviour.terse)
      return {
        made,
        described: {
          media_buy_id: MEDIA_BUY_ID,
          revision: this.revision,
          implementation_date: iso(now),
          affected_packages: PACKAGES.map((packageId) => ({ package_id: packageId })),
        },
      };
    return { made, described: this.describe() };
  }

  periodNumbers(startMs: number): Record<string, number> {
    return Object.fromEntries(PACKAGES.map((packageId) => [packageId, this.delivered(packageId, startMs)]));
  }
}

function operation(status: OperationState['status'], fields: Partial<OperationState> = {}): OperationOutcome {
  return {
    operation: {
      operationId: 'op',
      sellerId: 'seller',
      task: 't',
      status,
      inputRounds: 0,
      ...fields,
    } as OperationState,
  };
}

interface Run {
  seed: number;
  random: () => number;
  clock: { now: number };
  world: World;
  machine: MediaBuyMachine;
  input: MediaBuyInput;
  trail: string[];
  /** Every change sequence accepted, with its update ID and the answer first seen for it. */
  accepted: Map<number, { updateId?: string; answer?: ChangeAnswer }>;
  attachments: Map<number, { repeated: boolean; answer?: ChangeAnswer }>;
  stepsRun: MediaBuyStep['kind'][];
  /** Whether the seller made each change it answered success for. */
  made: Map<number, boolean>;
  lastChangeSequence: number;
  reportsSent: number;
}

function fail(run: Run, message: string): never {
  throw new Error(`seed ${run.seed}: ${message}\n  trail: ${run.trail.slice(-40).join(' → ')}`);
}

const failure = (code: string): { error: { code: string; message: string } } => ({
  error: { code, message: `${code} from the simulated seller` },
});

/** One step, as the workflow runs it, answered by the world (or by a fault). */
function runStep(run: Run, step: MediaBuyStep): void {
  const { machine, world, random, clock } = run;
  switch (step.kind) {
    case 'create': {
      const roll = random();
      if (roll < 0.08) {
        machine.applyCreate(failure('SERVICE_UNAVAILABLE'));
      } else if (roll < 0.14) {
        machine.applyCreate(operation('rejected', { message: 'policy' }));
      } else {
        world.made = true;
        world.revision = 1;
        const params = machine.createParams();
        if (!params.reporting_webhook) fail(run, 'the create registers no reporting webhook');
        machine.applyCreate(operation('completed', { result: world.describe() }));
      }
      return;
    }
    case 'change': {
      const begun = machine.beginChange(step.sequence);
      if (!begun) return;
      if (step.sequence <= run.lastChangeSequence)
        fail(run, `change ${step.sequence} ran after ${run.lastChangeSequence}`);
      run.lastChangeSequence = step.sequence;
      const roll = random();
      if (roll < 0.07) {
        machine.applyChangeOutcome(step.sequence, failure('CHILD_FAILED'));
        return;
      }
      const answer = world.update(begun.request);
      if ('errors' in answer) {
        machine.applyChangeOutcome(
          step.sequence,
          operation('failed', { errors: answer.errors.map((error) => ({ ...error, recovery: 'correctable' })) }),
        );
        return;
      }
      run.made.set(step.sequence, answer.made);
      const verify = machine.applyChangeOutcome(step.sequence, operation('completed', { result: answer.described }));
      if (!verify) fail(run, `change ${step.sequence} answered success and is not verified by a read`);
      const read = random();
      machine.verifyChange(
        step.sequence,
        world.behaviour.noReads || read < 0.1
          ? failure('UNSUPPORTED_FEATURE')
          : read < 0.13
            ? { note: 'not listed' }
            : { snapshot: world.snapshot() },
      );
      const answered = machine.changeAnswer(step.sequence)!;
      if (answered.outcome === 'applied' && !answer.made)
        fail(run, `an ignored ${begun.request.kind} answered applied`);
      if (answered.error?.code.endsWith('_NOT_APPLIED') && answer.made)
        fail(run, `a ${begun.request.kind} the seller made answered ${answered.error.code}`);
      if (answered.outcome === 'sent' && !world.behaviour.terse)
        fail(run, `a ${begun.request.kind} answered in full ended sent`);
      if (answered.outcome === 'sent' && !world.behaviour.noReads && read >= 0.13)
        fail(run, `a ${begun.request.kind} a read could show ended sent`);
      return;
    }
    case 'attach': {
      const begun = machine.beginAttachment(step.sequence);
      if (!begun) return;
      if (random() < 0.1) {
        machine.applyAttachment(step.sequence, failure('CHILD_FAILED'));
        return;
      }
      world.creativesAtMs ??= clock.now;
      world.revision += 1;
      machine.applyAttachment(
        step.sequence,
        operation('completed', {
          result: { creatives: [{ creative_id: 'cr_1', action: 'created', status: 'approved' }] },
        }),
      );
      return;
    }
    case 'read': {
      if (step.request.mediaBuyId !== MEDIA_BUY_ID) fail(run, `read of ${step.request.mediaBuyId}`);
      const roll = random();
      // A confused seller: an answer from a replica that lags (an older revision), or one with no revision at all.
      const hostile: MediaBuySnapshot | undefined =
        roll > 0.95
          ? { mediaBuyId: MEDIA_BUY_ID, status: 'active', ...(roll > 0.975 ? { revision: 0 } : {}) }
          : undefined;
      const outcome: ReadOutcome =
        roll < 0.1
          ? failure('SERVICE_UNAVAILABLE')
          : roll < 0.13
            ? { note: 'not listed' }
            : { snapshot: hostile ?? world.snapshot() };
      const terminalBefore = machine.terminal;
      machine.applyRead(outcome);
      if (hostile) return;
      if ('snapshot' in outcome && outcome.snapshot && !terminalBefore && machine.state.status !== world.status())
        fail(run, `a read of ${world.status()} left the buy ${machine.state.status}`);
      return;
    }
    case 'pull': {
      const from = Date.parse(`${step.request.startDate}T00:00:00Z`);
      const to = Date.parse(`${step.request.endDate}T00:00:00Z`);
      if (!(from < to)) fail(run, `pull window ${step.request.startDate}..${step.request.endDate}`);
      if (random() < 0.15) {
        machine.applyWindowPull(step, failure('SERVICE_UNAVAILABLE'));
        return;
      }
      const windows = [];
      for (let hour = from; hour < to && hour + HOUR <= clock.now; hour += HOUR) {
        const numbers = world.periodNumbers(hour);
        windows.push({
          start: iso(hour),
          end: iso(hour + HOUR),
          totals: { impressions: Object.values(numbers).reduce((sum, value) => sum + value, 0) },
          byPackage: Object.fromEntries(Object.entries(numbers).map(([id, value]) => [id, { impressions: value }])),
        });
      }
      const pull: DeliveryPull = { mediaBuyId: MEDIA_BUY_ID, totals: {}, byPackage: {}, windows };
      machine.applyWindowPull(step, { pull } satisfies PullOutcome);
      return;
    }
    case 'lifetime-pull': {
      if (random() < 0.15) {
        machine.applyLifetimePull(failure('SERVICE_UNAVAILABLE'));
        return;
      }
      const byPackage: Record<string, { impressions: number }> = {};
      for (const packageId of PACKAGES) {
        let impressions = 0;
        for (let hour = FLIGHT_START; hour < world.endMs && hour + HOUR <= clock.now; hour += HOUR)
          impressions += world.delivered(packageId, hour);
        byPackage[packageId] = { impressions };
      }
      machine.applyLifetimePull({ pull: { mediaBuyId: MEDIA_BUY_ID, totals: {}, byPackage, windows: [] } });
      return;
    }
    default:
      return;
  }
}

function randomChange(random: () => number, clock: { now: number }): ChangeRequest {
  const roll = random();
  if (roll < 0.25) return { kind: 'pause', requestedBy: 'ops' };
  if (roll < 0.5) return { kind: 'resume', requestedBy: 'ops' };
  if (roll < 0.65) return { kind: 'budget', requestedBy: 'ops', budgets: { p1: 500 + Math.floor(random() * 2_000) } };
  if (roll < 0.75)
    return {
      kind: 'dates',
      requestedBy: 'ops',
      endTime: iso(Math.max(clock.now, FLIGHT_START) + Math.floor(random() * 2 * DAY) + HOUR),
    };
  if (roll < 0.8) return { kind: 'budget', requestedBy: 'ops', budgets: { nope: 10 } };
  return { kind: 'cancel', requestedBy: 'ops', reason: 'random' };
}

/** A reporting webhook for an hour that has ended: the world's numbers, its sequence number the hour's index. */
function report(run: Run, hourMs: number, eventKey: string, mediaBuyId = MEDIA_BUY_ID): ReportDelivery {
  const numbers = run.world.periodNumbers(hourMs);
  const sequenceNumber = Math.round((hourMs - FLIGHT_START) / HOUR) + 1;
  const notification: ReportingNotification = {
    notificationType: 'scheduled',
    sequenceNumber,
    mediaBuyId,
    // The buy's status when the report was fired (a late report states an old one).
    status: run.world.status(hourMs + HOUR) as ReportingNotification['status'],
    nextExpectedAt: iso(hourMs + 2 * HOUR),
    timestamp: iso(hourMs + HOUR),
    period: {
      start: iso(hourMs),
      end: iso(hourMs + HOUR - 1_000),
      totals: { impressions: Object.values(numbers).reduce((sum, value) => sum + value, 0) },
      byPackage: Object.fromEntries(Object.entries(numbers).map(([id, value]) => [id, { impressions: value }])),
    },
  };
  return { eventKey, notification, receivedAt: iso(run.clock.now) };
}

/** Something the outside world does between two steps. */
function externalEvent(run: Run): void {
  const { random, machine, clock } = run;
  const roll = random();
  if (roll < 0.3) {
    const request = randomChange(random, clock);
    const repeat = random() < 0.15 && run.accepted.size > 0;
    const updateId = repeat
      ? [...run.accepted.values()][Math.floor(random() * run.accepted.size)]!.updateId
      : `u-${run.trail.length}`;
    const wasTerminal = machine.terminal;
    const verdict = machine.checkChange(request, updateId);
    run.trail.push(`change ${request.kind}${repeat ? ' (repeat)' : ''} ${verdict.ok ? 'accepted' : verdict.code}`);
    if (wasTerminal && verdict.ok && !repeat) fail(run, `a ${machine.state.status} buy accepted ${request.kind}`);
    if (!verdict.ok) return;
    const before = run.accepted.size;
    const sequence = machine.acceptChange(request, updateId);
    if (repeat && updateId && run.accepted.has(sequence) && run.accepted.size !== before)
      fail(run, 'a repeated update ID made a second change');
    if (!run.accepted.has(sequence)) run.accepted.set(sequence, { updateId });
    return;
  }
  if (roll < 0.38) {
    const attachment: CreativeAttachment = {
      creatives: [{ creative_id: 'cr_1' }],
      assignments: { cr_1: ['p1', 'p2'] },
      requestedBy: 'trafficker',
    };
    const verdict = machine.checkAttachment(attachment, `a-${run.trail.length}`);
    run.trail.push(`attach ${verdict.ok ? 'accepted' : verdict.code}`);
    if (verdict.ok) {
      const accepted = machine.acceptAttachment(attachment, `a-${run.trail.length}`);
      run.attachments.set(accepted.sequence, { repeated: accepted.repeated });
    }
    return;
  }
  if (roll < 0.45) {
    run.trail.push('refresh');
    machine.requestRefresh();
    return;
  }
  if (roll < 0.7) {
    // A report for an hour that ended, maybe one already reported (a retry with its key, or a new key), maybe late.
    const hours = Math.floor((Math.min(clock.now, run.world.endMs) - FLIGHT_START) / HOUR);
    if (hours <= 0 || !run.world.made) return;
    const hour = FLIGHT_START + Math.floor(random() * hours) * HOUR;
    const other = random() < 0.05;
    const key = random() < 0.2 ? `ev-${hour}` : `ev-${hour}-${run.reportsSent}`;
    run.reportsSent += 1;
    run.trail.push(other ? 'report (another buy)' : `report ${iso(hour).slice(5, 13)}`);
    machine.recordReport(report(run, hour, key, other ? 'mb_other' : MEDIA_BUY_ID));
    return;
  }
  const jump = random() < 0.2 ? Math.floor(random() * 12 * HOUR) : Math.floor(random() * 40 * 60_000);
  clock.now += jump;
  run.trail.push(`+${Math.round(jump / 60_000)}min`);
}

function checkInvariants(run: Run): void {
  const { machine } = run;
  const state = machine.state;
  // A terminal status is never left, and reached at most once.
  const moves = state.statusHistory;
  const terminalMoves = moves.filter((move) => isTerminal(move.to));
  if (terminalMoves.length > 1) fail(run, `two terminal moves: ${terminalMoves.map((move) => move.to).join(', ')}`);
  if (terminalMoves.length === 1 && state.status !== terminalMoves[0]!.to)
    fail(run, `left ${terminalMoves[0]!.to} for ${state.status}`);
  // Nothing for another buy is applied, and the buy is the one the seller made.
  if (state.mediaBuyId !== undefined && state.mediaBuyId !== MEDIA_BUY_ID) fail(run, `follows ${state.mediaBuyId}`);
  // Every answer is final and never changes once given.
  for (const [sequence, seen] of run.accepted) {
    const answer = machine.changeAnswer(sequence);
    if (!answer) continue;
    if (answer.outcome === 'queued' || answer.outcome === 'running')
      fail(run, `change ${sequence} answered ${answer.outcome}`);
    // A change sent and not confirmed may be confirmed by a later read; nothing else moves.
    if (seen.answer?.outcome === 'sent' && answer.outcome === 'applied') seen.answer = answer;
    if (seen.answer && seen.answer.outcome !== answer.outcome)
      fail(run, `change ${sequence} answer moved from ${seen.answer.outcome} to ${answer.outcome}`);
    seen.answer ??= answer;
  }
  // An attachment's answer lives in the run that ran it (the update handler returns before continue-as-new).
  for (const [sequence, seen] of run.attachments) seen.answer ??= machine.attachmentAnswer(sequence, seen.repeated);
  // Bounded state, whatever happens.
  if (state.anomalies.length > 50 || state.changes.length > 50 || state.statusHistory.length > 50)
    fail(run, 'unbounded lists');
  // Delivery: totals are the sum of the periods counted, each counted once with the seller's numbers (until the
  // reconciliation, after which the seller's lifetime numbers are the record).
  const reporting = state.reporting;
  if (!reporting.reconciliation) {
    let expected = 0;
    for (const key of Object.keys(reporting.periods)) {
      const hour = Date.parse(key);
      for (const packageId of PACKAGES) expected += run.world.delivered(packageId, hour);
    }
    if ((reporting.totals.impressions ?? 0) !== expected)
      fail(
        run,
        `totals ${reporting.totals.impressions} ≠ ${expected} over ${Object.keys(reporting.periods).length} periods`,
      );
  }
}

/** The loop of the workflow, one step at a time, with the outside world acting in between. */
function drive(seed: number): Run {
  const random = mulberry32(seed);
  const clock = { now: START };
  const world = new World(clock, {
    ignoresPause: seed % 5 === 1,
    terse: seed % 3 === 2,
    noReads: seed % 7 === 3,
  });
  const input: MediaBuyInput = {
    buyKey: `k${seed}`,
    sellerId: 'seller',
    params: {
      start_time: iso(FLIGHT_START),
      end_time: iso(FLIGHT_END),
      packages: PACKAGES.map((id) => ({ product_id: `prod_${id}`, budget: 1_000 })),
    },
    reporting: { url: 'https://gateway.example/webhooks/adcp-reporting/x', frequency: 'hourly' },
  };
  const hooks = { now: () => clock.now };
  const run: Run = {
    seed,
    random,
    clock,
    world,
    machine: MediaBuyMachine.start(input, { workflowId: `adcp-media-buy-k${seed}`, nowMs: clock.now }, hooks),
    input,
    trail: [],
    accepted: new Map(),
    attachments: new Map(),
    stepsRun: [],
    made: new Map(),
    lastChangeSequence: 0,
    reportsSent: 0,
  };
  for (let event = 0; event < 400; event += 1) {
    if (random() < 0.45) {
      externalEvent(run);
    } else {
      const suggested = random() < 0.03;
      const step = run.machine.next(clock.now, { length: 100, continueAsNewSuggested: suggested });
      run.trail.push(
        step.kind === 'wait'
          ? `wait ${step.untilMs === undefined ? '∞' : `+${Math.round((step.untilMs - clock.now) / 60_000)}min`}`
          : step.kind,
      );
      run.stepsRun.push(step.kind);
      if (step.kind === 'done') break;
      if (step.kind === 'wait') {
        if (step.untilMs !== undefined && step.untilMs <= clock.now && !run.machine.hasWork())
          fail(run, `waits for a time already passed (${iso(step.untilMs)})`);
        if (!run.machine.hasWork()) clock.now = Math.max(clock.now, step.untilMs ?? clock.now + HOUR);
      } else if (step.kind === 'continue-as-new') {
        if (!run.machine.hasWork()) {
          const carried = JSON.parse(JSON.stringify(run.machine.carry()));
          run.machine = MediaBuyMachine.start({ ...input, carried }, { workflowId: 'x', nowMs: clock.now }, hooks);
          if (run.machine.state.run < 2) fail(run, 'a continued run kept its run number');
        }
      } else {
        runStep(run, step);
      }
    }
    checkInvariants(run);
  }
  return run;
}

describe('media-buy machine: randomized interleavings', () => {
  const RUNS = 1_500;

  it(`keeps its invariants over ${RUNS} seeded random interleavings of changes, reports, reads, faults and time`, () => {
    const kinds = new Map<string, number>();
    let settled = 0;
    for (let seed = 1; seed <= RUNS; seed += 1) {
      const run = drive(seed);
      for (const kind of run.stepsRun) kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      if (run.machine.state.done) settled += 1;
    }
    // The runs cover every step the loop has (a test that never reaches the settle proves nothing about it).
    for (const kind of [
      'create',
      'change',
      'attach',
      'read',
      'pull',
      'lifetime-pull',
      'continue-as-new',
      'wait',
      'done',
    ])
      expect([kind, kinds.get(kind) ?? 0]).not.toEqual([kind, 0]);
    expect(settled).toBeGreaterThan(RUNS / 10);
  });

  it('answers every accepted change once the loop has run, in the order they were accepted', () => {
    for (let seed = 1; seed <= 300; seed += 1) {
      const run = drive(seed);
      // Let the loop finish what it accepted: run steps, with no new events, until it waits with nothing to do.
      for (let guard = 0; guard < 200; guard += 1) {
        const step = run.machine.next(run.clock.now, { length: 100, continueAsNewSuggested: false });
        if (step.kind === 'done' || (step.kind === 'wait' && !run.machine.hasWork())) break;
        if (step.kind !== 'wait' && step.kind !== 'continue-as-new') runStep(run, step);
      }
      for (const sequence of run.accepted.keys()) {
        const answer = run.machine.changeAnswer(sequence);
        if (!answer) throw new Error(`seed ${seed}: change ${sequence} has no answer`);
      }
      checkInvariants(run);
      for (const [sequence, attachment] of run.attachments) {
        if (!attachment.answer) throw new Error(`seed ${seed}: attachment ${sequence} has no answer`);
      }
    }
  });
});
