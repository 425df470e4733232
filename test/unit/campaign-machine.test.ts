/**
 * The campaign machine (workflows/campaign/machine.ts) driven without Temporal: a fake clock, made-up discoveries,
 * digests and activity answers, and seeded random interleavings of Updates, buy events, polls and loop steps (a
 * continue-as-new hands the state to a fresh machine, as the workflow does). After every fact: the guard holds, the
 * phase only moves along the lifecycle's edges, the change queue runs in order and answers every accepted change
 * once, alerts stay one per key and bounded. The same seed gives the same campaign.
 */
import {
  CampaignMachine,
  type CampaignStep,
  DEFAULT_HISTORY_EVENT_LIMIT,
  FIRST_POLL_MS,
  type QueuedChange,
} from '../../workflows/campaign/machine';
import { guardedTotal } from '../../workflows/campaign/rules';
import type {
  BuyDigest,
  CampaignChangeRequest,
  CampaignInput,
  CampaignPhase,
  CampaignState,
} from '../../contract/campaign';
import type { DiscoveryState } from '../../contract/discovery';
import type { RankedEntry } from '../../protocol/catalogue';
import type { MediaBuyState } from '../../contract/media-buy';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2026-03-01T00:00:00Z');

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

function entry(sellerId: string, rank: number): RankedEntry {
  return {
    sellerId,
    productId: `${sellerId}_display`,
    channels: ['display'],
    formats: ['display_300x250'],
    pricingOptions: [{ pricingOptionId: 'cpm_fixed', pricingModel: 'cpm', price: 10, fixed: true, currency: 'USD' }],
    reportingFrequencies: ['daily'],
    raw: {},
    rank,
    score: 1 / rank,
    reasons: [],
  } as RankedEntry;
}

function discoveryOf(sellers: string[], failed: string[] = []): DiscoveryState {
  return {
    discoveryKey: 'k',
    brief: 'b',
    status: 'completed',
    partial: failed.length > 0,
    startedAt: new Date(T0).toISOString(),
    deadline: new Date(T0 + 10_000).toISOString(),
    sellers: Object.fromEntries([
      ...sellers.map((sellerId) => [sellerId, { sellerId, status: 'answered' as const, productCount: 1 }]),
      ...failed.map((sellerId) => [
        sellerId,
        { sellerId, status: 'failed' as const, error: { code: 'SERVICE_UNAVAILABLE', message: 'down' } },
      ]),
    ]),
    catalogue: sellers.map((sellerId, index) => entry(sellerId, index + 1)),
    proposals: [],
    incomplete: [],
  };
}

function inputOf(overrides: Partial<CampaignInput> = {}): CampaignInput {
  return {
    campaignKey: 'spring',
    brief: 'Display in spring',
    totalBudget: 10_000,
    flight: { startTime: new Date(T0).toISOString(), endTime: new Date(T0 + 30 * DAY).toISOString() },
    sellerIds: ['a', 'b', 'c'],
    timeBudgetMs: 5_000,
    requestedBy: 'planner@buyer',
    ...overrides,
  };
}

function digest(sellerId: string, workflowId: string, fields: Partial<BuyDigest> = {}): BuyDigest {
  return { sellerId, workflowId, found: true, packages: [], creatives: {}, ...fields };
}

function endedBuy(status: string, spend = 0): MediaBuyState {
  return {
    status,
    done: true,
    packages: {},
    creatives: {},
    reporting: { totals: { spend } },
  } as unknown as MediaBuyState;
}

/** Which phase may follow which (a change that leaves the phase as it was is no move). */
const EDGES: Record<CampaignPhase, CampaignPhase[]> = {
  discovering: ['selecting', 'awaiting_approval'],
  selecting: ['awaiting_approval', 'canceled'],
  awaiting_approval: ['buying', 'canceled'],
  buying: ['live', 'canceled'],
  live: ['paused', 'canceled', 'ended'],
  paused: ['live', 'canceled', 'ended'],
  canceled: [],
  ended: [],
};

interface Run {
  machine: CampaignMachine;
  clock: { t: number };
  accepted: Map<number, CampaignChangeRequest>;
  answered: Map<number, string>;
  finishedOrder: number[];
  loopOrder: number[];
  phases: CampaignPhase[];
  runs: number;
}

function check(run: Run, where: string): void {
  const { state } = run.machine;
  const context = `${where} (phase ${state.phase})`;
  expect([context, guardedTotal(state.buys) <= state.totalBudget]).toEqual([context, true]);
  for (const buy of Object.values(state.buys)) {
    expect([context, buy.committedBudget >= 0]).toEqual([context, true]);
    if (buy.pendingBudget !== undefined)
      expect([context, buy.pendingBudget > buy.committedBudget]).toEqual([context, true]);
  }
  const last = run.phases[run.phases.length - 1];
  if (state.phase !== last) {
    expect([context, last, EDGES[last].includes(state.phase)]).toEqual([context, last, true]);
    run.phases.push(state.phase);
  }
  const open = state.alerts.filter((alert) => !alert.clearedAt).map((alert) => alert.key);
  expect(new Set(open).size).toBe(open.length);
  expect(state.alerts.length).toBeLessThanOrEqual(50);
  expect(state.changes.length).toBeLessThanOrEqual(50);
}

/** One loop step, as the workflow runs it, with random activity answers. */
function step(run: Run, random: () => number, historyLength: number): CampaignStep {
  const { machine } = run;
  const next = machine.nextStep({ length: historyLength, continueAsNewSuggested: false });
  if (next.kind === 'change') {
    runChange(run, next.change, random);
  } else if (next.kind === 'poll') {
    const digests = machine.pollTargets().map(({ sellerId, workflowId }) => {
      const roll = random();
      const status = roll < 0.1 ? 'pending_creatives' : roll < 0.8 ? 'active' : roll < 0.9 ? 'paused' : 'completed';
      return digest(sellerId, workflowId, {
        status,
        mediaBuyId: `mb_${sellerId}`,
        done: status === 'completed',
        totals: { spend: Math.round(random() * 1000), impressions: Math.round(random() * 100_000) },
        ...(random() < 0.1
          ? { seller: { reachable: random() < 0.5, circuit: random() < 0.5 ? 'open' : 'closed' } }
          : {}),
      });
    });
    const changed = machine.read(digests);
    const syncs = machine.librarySyncs();
    for (const sync of syncs) machine.librarySynced(sync, { outcome: random() < 0.8 ? 'applied' : 'failed' });
    machine.evaluate();
    machine.polled(changed || syncs.length > 0);
  } else if (next.kind === 'continue_as_new') {
    if (machine.readyToContinueAsNew()) {
      const carried = machine.carried();
      run.machine = new CampaignMachine(
        { ...machine.input, carried: JSON.parse(JSON.stringify(carried)) as typeof carried },
        { now: () => run.clock.t },
      );
      run.runs += 1;
    }
  } else if (next.kind === 'wait') {
    run.clock.t = next.untilMs ?? run.clock.t + HOUR;
  }
  return next;
}

function runChange(run: Run, change: QueuedChange, random: () => number): void {
  const { machine } = run;
  machine.changeStarted(change);
  const outcomes: Record<string, { outcome: 'applied' | 'failed' | 'refused' | 'not_needed' }> = {};
  for (const sellerId of machine.changeTargets(change)) {
    const settled = machine.settledWithoutCall(change, sellerId);
    if (settled) {
      outcomes[sellerId] = settled as { outcome: 'not_needed' };
      continue;
    }
    const roll = random();
    outcomes[sellerId] = { outcome: roll < 0.75 ? 'applied' : roll < 0.9 ? 'failed' : 'refused' };
  }
  const before = machine.state.phase;
  machine.changeFinished(change, outcomes);
  // What a change does to the phase: pause and resume when at least one buy took them, cancel always.
  const took = Object.values(outcomes).some((entry) => entry.outcome === 'applied' || entry.outcome === 'not_needed');
  const expected =
    change.request.kind === 'cancel'
      ? 'canceled'
      : change.request.kind === 'pause' && took
        ? 'paused'
        : change.request.kind === 'resume' && took
          ? 'live'
          : before;
  expect([change.request.kind, machine.state.phase]).toEqual([change.request.kind, expected]);
  const answer = machine.changeAnswer(change.record.sequence)!;
  run.loopOrder.push(answer.sequence);
  run.answered.set(answer.sequence, answer.outcome);
}

function randomChange(random: () => number, sellers: string[]): CampaignChangeRequest {
  // Cancels are rare: a campaign that cancels early has little left to interleave.
  const roll = random();
  const pick = roll < 0.02 ? 'cancel' : roll < 0.25 ? 'pause' : roll < 0.5 ? 'resume' : 'budget';
  return {
    kind: pick,
    requestedBy: random() < 0.02 ? '' : 'ops@buyer',
    ...(pick === 'budget'
      ? {
          sellerId: random() < 0.05 ? 'nobody' : sellers[Math.floor(random() * sellers.length)],
          budget: Math.round(random() * 8_000 * 100) / 100,
        }
      : {}),
  };
}

/** A random campaign from creation to close; returns the final state. */
function simulate(seed: number): { state: CampaignState; run: Run } {
  const random = mulberry32(seed);
  const clock = { t: T0 - DAY };
  const count = 1 + Math.floor(random() * 4);
  const sellers = ['a', 'b', 'c', 'd'].slice(0, count);
  const withPolicy = random() < 0.3;
  const input = inputOf({
    sellerIds: sellers,
    totalBudget: 1_000 + Math.round(random() * 20_000),
    ...(withPolicy ? { allocation: { kind: 'top_ranked' as const } } : {}),
    ...(random() < 0.5
      ? { creatives: [{ creative_id: 'cr_1', format_id: { id: random() < 0.5 ? 'display_300x250' : 'video' } }] }
      : {}),
    monitoring: { intervalMs: HOUR * (1 + Math.floor(random() * 6)), underDeliveryGraceMs: 0 },
    historyEventLimit: 500,
  });
  const run: Run = {
    machine: new CampaignMachine(input, { now: () => clock.t }),
    clock,
    accepted: new Map(),
    answered: new Map(),
    finishedOrder: [],
    loopOrder: [],
    phases: ['discovering'],
    runs: 1,
  };
  const request = (change: CampaignChangeRequest) => {
    try {
      run.machine.validateChange(change);
    } catch {
      return; // refused before history
    }
    const { sequence, answer } = run.machine.requestChange(change);
    run.accepted.set(sequence, change);
    if (answer) {
      run.answered.set(sequence, answer.outcome);
      run.finishedOrder.push(sequence);
    }
  };
  check(run, 'created');
  if (random() < 0.05) request({ kind: 'cancel', requestedBy: 'ops@buyer' });
  run.machine.discovered(discoveryOf(sellers, random() < 0.3 ? ['failing'] : []));
  check(run, 'discovered');
  if (!withPolicy || random() < 0.3) {
    const budgets = sellers.map(() => Math.round(random() * (input.totalBudget / count) * 1.2 * 100) / 100 + 1);
    const selection = {
      selectedBy: 'planner@buyer',
      lines: sellers.map((sellerId, index) => ({ sellerId, productId: `${sellerId}_display`, budget: budgets[index] })),
    };
    try {
      run.machine.validateSelection(selection);
      run.machine.select(selection);
    } catch {
      // over budget: refused; the policy's selection (if any) stands
    }
  }
  check(run, 'selected');
  if (random() < 0.05) request({ kind: 'cancel', requestedBy: 'ops@buyer' });
  if (run.machine.state.phase === 'awaiting_approval' && !run.machine.cancelRequested) {
    run.machine.validateApproval({ approvedBy: 'cfo@buyer' });
    run.machine.approve({ approvedBy: 'cfo@buyer' });
  } else if (!run.machine.cancelRequested) request({ kind: 'cancel', requestedBy: 'ops@buyer' });
  expect(run.machine.approvedOrCanceled()).toBe(true);
  const buys = run.machine.startBuying();
  check(run, 'buying');
  if (buys) {
    for (const buy of buys) run.machine.buyStarted(buy.sellerId);
    run.machine.buyingStarted();
  }
  check(run, 'bought');
  clock.t = T0;
  let history = 0;
  for (let i = 0; i < 400; i += 1) {
    const roll = random();
    const ids = Object.keys(run.machine.state.buys);
    if (roll < 0.25) request(randomChange(random, ids.length > 0 ? ids : sellers));
    else if (roll < 0.3 && ids.length > 0) {
      const sellerId = ids[Math.floor(random() * ids.length)];
      if (!run.machine.state.buys[sellerId].finalStatus) {
        const status = random() < 0.5 ? 'rejected' : 'completed';
        run.machine.buyEnded(sellerId, endedBuy(status));
      }
    } else if (roll < 0.33) {
      const library = {
        creatives: [{ creative_id: `cr_${i}`, format_id: { id: 'display_300x250' } }],
        requestedBy: 'x',
      };
      try {
        run.machine.validateLibrary(library);
        run.machine.setLibrary(library);
      } catch {
        // ended: refused
      }
    } else if (roll < 0.35) clock.t += Math.floor(random() * DAY);
    else {
      history += 20;
      const taken = step(run, random, history % (DEFAULT_HISTORY_EVENT_LIMIT / 4));
      if (taken.kind === 'continue_as_new') history = 0;
      if (taken.kind === 'close') break;
    }
    check(run, `step ${i}`);
  }
  // Drain: every accepted change is answered once the loop has run it or the campaign has closed.
  for (let i = 0; i < 200; i += 1) {
    const taken = step(run, random, 0);
    check(run, `drain ${i}`);
    if (taken.kind === 'close') break;
    if (taken.kind === 'wait') {
      // Nothing queued: end every buy so the campaign can close.
      for (const sellerId of Object.keys(run.machine.state.buys))
        if (!run.machine.state.buys[sellerId].finalStatus) run.machine.buyEnded(sellerId, endedBuy('completed'));
    }
  }
  run.machine.close();
  for (const sequence of run.accepted.keys())
    if (!run.answered.has(sequence)) run.answered.set(sequence, run.machine.changeAnswer(sequence)?.outcome ?? 'none');
  check(run, 'closed');
  return { state: run.machine.state, run };
}

describe('campaign machine: seeded interleavings', () => {
  const seeds = Array.from({ length: 300 }, (_, index) => index + 1);

  test.each(seeds)('seed %i: guard, phases, queue order and answers hold', (seed) => {
    const { state, run } = simulate(seed);
    expect(['canceled', 'ended']).toContain(state.phase);
    // Every accepted change has exactly one answer, none left unanswered.
    for (const [sequence] of run.accepted)
      expect([sequence, run.answered.get(sequence)]).not.toEqual([sequence, 'none']);
    // The loop runs changes one at a time, in the order they were accepted, each once.
    expect(run.loopOrder).toEqual([...run.loopOrder].sort((a, b) => a - b));
    expect(new Set(run.loopOrder).size).toBe(run.loopOrder.length);
    // A canceled campaign started nothing after its cancel and commits nothing for buys that bought nothing.
    for (const buy of Object.values(state.buys))
      if (buy.finalStatus === 'rejected') expect(buy.committedBudget).toBe(0);
  });

  test('the same seed gives the same campaign', () => {
    for (const seed of [3, 17, 99])
      expect(JSON.stringify(simulate(seed).state)).toBe(JSON.stringify(simulate(seed).state));
  });
});

describe('campaign machine: the rules one at a time', () => {
  function live(totalBudget = 10_000) {
    const clock = { t: T0 };
    const machine = new CampaignMachine(inputOf({ totalBudget }), { now: () => clock.t });
    machine.discovered(discoveryOf(['a', 'b']));
    const lines = [
      { sellerId: 'a', productId: 'a_display', budget: 4_000 },
      { sellerId: 'b', productId: 'b_display', budget: 4_000 },
    ];
    machine.validateSelection({ lines, selectedBy: 'p' });
    machine.select({ lines, selectedBy: 'p' });
    machine.approve({ approvedBy: 'cfo' });
    for (const buy of machine.startBuying()!) machine.buyStarted(buy.sellerId);
    machine.buyingStarted();
    return { machine, clock };
  }

  test('a raise is reserved when accepted, so a second one is checked against it', () => {
    const { machine } = live();
    machine.requestChange({ kind: 'budget', sellerId: 'a', budget: 5_500, requestedBy: 'x' });
    expect(machine.state.buys.a.pendingBudget).toBe(5_500);
    expect(() => machine.validateChange({ kind: 'budget', sellerId: 'b', budget: 5_000, requestedBy: 'y' })).toThrow(
      /BUDGET_EXCEEDED/,
    );
    expect(() =>
      machine.validateChange({ kind: 'budget', sellerId: 'b', budget: 4_500, requestedBy: 'y' }),
    ).not.toThrow();
  });

  test('a refused raise releases its reservation; a later raise still queued keeps its own', () => {
    const { machine } = live();
    machine.requestChange({ kind: 'budget', sellerId: 'a', budget: 5_000, requestedBy: 'x' });
    machine.requestChange({ kind: 'budget', sellerId: 'a', budget: 4_500, requestedBy: 'x' });
    const first = machine.nextStep({ length: 0, continueAsNewSuggested: false });
    if (first.kind !== 'change') throw new Error(first.kind);
    machine.changeFinished(first.change, { a: { outcome: 'refused' } });
    expect(machine.state.buys.a).toMatchObject({ committedBudget: 4_000, pendingBudget: 4_500 });
    const second = machine.nextStep({ length: 0, continueAsNewSuggested: false });
    if (second.kind !== 'change') throw new Error(second.kind);
    machine.changeFinished(second.change, { a: { outcome: 'applied' } });
    expect(machine.state.buys.a.committedBudget).toBe(4_500);
    expect(machine.state.buys.a.pendingBudget).toBeUndefined();
  });

  test('the poll cadence: soon after a change, doubling while quiet, capped at the interval', () => {
    const { machine, clock } = live();
    const waits: number[] = [];
    let polls = 0;
    for (let i = 0; i < 60; i += 1) {
      const next = machine.nextStep({ length: 0, continueAsNewSuggested: false });
      if (next.kind === 'wait') {
        waits.push(next.untilMs! - clock.t);
        clock.t = next.untilMs!;
        continue;
      }
      expect(next.kind).toBe('poll');
      polls += 1;
      machine.polled(polls === 20);
    }
    expect(waits.slice(0, 4)).toEqual([FIRST_POLL_MS, 2 * FIRST_POLL_MS, 4 * FIRST_POLL_MS, 8 * FIRST_POLL_MS]);
    expect(Math.max(...waits)).toBe(HOUR);
    // The poll after a change (the twentieth) comes at the first interval again, then doubles anew.
    expect(waits[19]).toBe(HOUR);
    expect(waits[20]).toBe(FIRST_POLL_MS);
    expect(waits[21]).toBe(2 * FIRST_POLL_MS);
  });

  test('continue-as-new waits for history past the limit, and carries the state and the change sequence', () => {
    const { machine } = live();
    machine.polled(false);
    machine.requestChange({ kind: 'pause', requestedBy: 'x' });
    expect(machine.nextStep({ length: 5_000, continueAsNewSuggested: false }).kind).toBe('change');
    const change = machine.nextStep({ length: 0, continueAsNewSuggested: false });
    if (change.kind !== 'change') throw new Error(change.kind);
    machine.changeFinished(change.change, { a: { outcome: 'applied' }, b: { outcome: 'applied' } });
    expect(machine.state.phase).toBe('paused');
    expect(machine.nextStep({ length: 10, continueAsNewSuggested: false }).kind).toBe('wait');
    expect(machine.nextStep({ length: DEFAULT_HISTORY_EVENT_LIMIT, continueAsNewSuggested: false }).kind).toBe(
      'continue_as_new',
    );
    const next = new CampaignMachine({ ...machine.input, carried: machine.carried() }, { now: () => T0 });
    expect(next.state.run).toBe(2);
    expect(next.nextStep({ length: 0, continueAsNewSuggested: false }).kind).toBe('poll');
    expect(next.requestChange({ kind: 'resume', requestedBy: 'x' }).sequence).toBe(2);
  });

  test('a cancel before any buy: nothing is bought, the cancel is applied, later changes are answered failed', () => {
    const machine = new CampaignMachine(inputOf(), { now: () => T0 });
    const { sequence } = machine.requestChange({ kind: 'cancel', requestedBy: 'x' });
    machine.discovered(discoveryOf(['a']));
    expect(machine.approvedOrCanceled()).toBe(true);
    expect(machine.startBuying()).toBeUndefined();
    const next = machine.nextStep({ length: 0, continueAsNewSuggested: false });
    if (next.kind !== 'change') throw new Error(next.kind);
    machine.changeFinished(next.change, {});
    expect(machine.changeAnswer(sequence)).toMatchObject({ outcome: 'applied' });
    expect(machine.state.phase).toBe('canceled');
    expect(machine.nextStep({ length: 0, continueAsNewSuggested: false }).kind).toBe('close');
  });

  test('a seller down raises seller_unavailable once; reachable again clears it', () => {
    const { machine } = live();
    const buy = machine.state.buys.a;
    const down = digest('a', buy.workflowId, { status: 'active', seller: { reachable: false, error: 'HTTP 503' } });
    machine.read([down]);
    machine.read([down]);
    expect(
      machine.state.alerts.filter((alert) => alert.kind === 'seller_unavailable' && !alert.clearedAt),
    ).toHaveLength(1);
    machine.read([digest('a', buy.workflowId, { status: 'active', seller: { reachable: true } })]);
    expect(machine.state.alerts.find((alert) => alert.kind === 'seller_unavailable')?.clearedAt).toBeDefined();
  });

  test('a rejected buy releases its budget to the guard', () => {
    const { machine } = live();
    machine.buyEnded('b', endedBuy('rejected'));
    expect(machine.state.buys.b).toMatchObject({ finalStatus: 'rejected', committedBudget: 0 });
    expect(() =>
      machine.validateChange({ kind: 'budget', sellerId: 'a', budget: 9_000, requestedBy: 'x' }),
    ).not.toThrow();
  });
});
