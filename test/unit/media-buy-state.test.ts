/**
 * The media buy's state machine without a server: lifecycle moves, changes refused or accepted (walked against the
 * conformance storyboard media-buy-state-machine-3.0.6.yaml, copied into test/conformance/), the reporting-frequency
 * choice, and delivery reports: sequence gaps, duplicates, reordering, pulls, adjustments, sealing and reconciliation.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import {
  MEDIA_BUY_STATUSES,
  type ReportingNotification,
  mediaBuySnapshotFrom,
  parseDeliveryPull,
  parseReportingWebhook,
} from '../../protocol/media-buy';
import type { ChangeRequest, MediaBuyLifecycle, MediaBuyState } from '../../contract/media-buy';
import { MediaBuyMachine, newMediaBuyState } from '../../workflows/media-buy/machine';
import { LIFECYCLE_EDGES, isTerminal, reachable } from '../../workflows/media-buy/lifecycle';
import { statusAfterChange, updateParamsFor, validateChange } from '../../workflows/media-buy/changes';
import { MAX_FILL_ATTEMPTS, chooseReportingFrequency } from '../../workflows/media-buy/delivery';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const START = Date.UTC(2027, 2, 1);

interface StoryboardStep {
  id: string;
  task: string;
  expect_error?: boolean;
  sample_request?: Record<string, unknown>;
  validations?: { check: string; value?: string; allowed_values?: string[] }[];
}

const storyboard = parse(
  readFileSync(join(__dirname, '../conformance/media-buy-state-machine-3.0.6.yaml'), 'utf8'),
) as {
  phases: { id: string; steps: StoryboardStep[] }[];
};

function buyState(status: MediaBuyLifecycle, overrides: Partial<MediaBuyState> = {}): MediaBuyState {
  const state = newMediaBuyState({
    buyKey: 'k1',
    workflowId: 'adcp-media-buy-k1',
    sellerId: 'seller',
    createOperationId: 'adcp-create_media_buy-k1',
    nowMs: START - 10 * DAY,
    params: { start_time: new Date(START).toISOString(), end_time: new Date(START + 90 * DAY).toISOString() },
  });
  return { ...state, status, mediaBuyId: status === 'creating' ? undefined : 'mb_1', ...overrides };
}

function changeFromStoryboard(request: Record<string, unknown>): ChangeRequest {
  if (request.canceled === true) return { kind: 'cancel', requestedBy: 'storyboard' };
  if (request.paused === true) return { kind: 'pause', requestedBy: 'storyboard' };
  if (request.paused === false) return { kind: 'resume', requestedBy: 'storyboard' };
  throw new Error(`storyboard request not mapped: ${JSON.stringify(request)}`);
}

describe('lifecycle', () => {
  it('names every status of the 3.1 enum, with completed, rejected and canceled terminal', () => {
    for (const status of MEDIA_BUY_STATUSES) expect(LIFECYCLE_EDGES[status]).toBeDefined();
    expect(MEDIA_BUY_STATUSES.filter((status) => isTerminal(status)).sort()).toEqual([
      'canceled',
      'completed',
      'rejected',
    ]);
    for (const status of ['completed', 'rejected', 'canceled'] as const) expect(LIFECYCLE_EDGES[status]).toEqual([]);
  });

  it('follows the documented moves, and a read that missed a state in between is still a known path', () => {
    expect(reachable('pending_creatives', 'active')).toBe(true); // via pending_start
    expect(reachable('active', 'paused')).toBe(true);
    expect(reachable('paused', 'active')).toBe(true);
    expect(reachable('active', 'pending_creatives')).toBe(false);
    expect(reachable('completed', 'active')).toBe(false);
    expect(reachable('active', 'rejected')).toBe(false); // rejected only before delivery
  });

  it('never leaves a terminal status, records the attempt as an anomaly', () => {
    const state = buyState('active');
    const machine = new MediaBuyMachine(state, { now: () => START });
    machine.observeStatus('completed', 'read');
    machine.observeStatus('active', 'report');
    expect(state.status).toBe('completed');
    expect(state.anomalies.map((anomaly) => anomaly.note).join()).toContain('stays so');
    expect(state.statusHistory).toHaveLength(1);
  });

  it('prefers 3.1 media_buy_status, ignores an older revision', () => {
    const state = buyState('pending_creatives', { revision: 3 });
    const machine = new MediaBuyMachine(state, { now: () => START });
    machine.applySnapshot(
      mediaBuySnapshotFrom({
        media_buy_id: 'mb_1',
        media_buy_status: 'pending_start',
        status: 'pending_start',
        revision: 4,
      }),
      'read',
    );
    expect(state.status).toBe('pending_start');
    machine.applySnapshot(
      mediaBuySnapshotFrom({ media_buy_id: 'mb_1', status: 'pending_creatives', revision: 2 }),
      'read',
    );
    expect(state.status).toBe('pending_start');
    expect(state.revision).toBe(4);
  });
});

describe('request shaping', () => {
  it('a field the seller refused on a read is kept, shown once, and left out of every later read', () => {
    const state = buyState('pending_creatives');
    const machine = new MediaBuyMachine(state, { now: () => START });
    const refused = { tool: 'get_media_buys', omitted: 'account', because: 'Omit account', at: 'x' };
    machine.applyRead({
      snapshot: mediaBuySnapshotFrom({ media_buy_id: 'mb_1', status: 'active' }),
      shaping: [refused],
    });
    machine.applyRead({
      snapshot: mediaBuySnapshotFrom({ media_buy_id: 'mb_1', status: 'active' }),
      shaping: [refused],
    });
    expect(state.requestShaping).toEqual([refused]);
    expect(state.status).toBe('active');
    machine.requestRefresh();
    const step = machine.next(START, { length: 10, continueAsNewSuggested: false });
    expect(step).toMatchObject({ kind: 'read', request: { requestShaping: { get_media_buys: ['account'] } } });
  });
});

describe('changes against the state-machine storyboard', () => {
  const updateSteps = storyboard.phases
    .flatMap((phase) => phase.steps)
    .filter((step) => step.task === 'update_media_buy');

  it('the storyboard has the pause, resume, cancel and terminal-enforcement steps', () => {
    expect(updateSteps.map((step) => step.id)).toEqual([
      'pause_buy',
      'resume_buy',
      'cancel_buy',
      'pause_canceled_buy',
      'resume_canceled_buy',
      'recancel_buy',
    ]);
  });

  it('walks the storyboard: valid moves accepted, and each refusal carries the code the storyboard expects', () => {
    let status: MediaBuyLifecycle = 'active'; // create_buy: "Return an active media buy"
    for (const step of updateSteps) {
      const change = changeFromStoryboard(step.sample_request ?? {});
      const verdict = validateChange(buyState(status), change);
      if (step.expect_error) {
        const codes =
          step.validations
            ?.filter((check) => check.check === 'error_code')
            .flatMap((check) => check.allowed_values ?? (check.value ? [check.value] : [])) ?? [];
        expect(codes.length).toBeGreaterThan(0);
        expect(verdict.ok).toBe(false);
        if (!verdict.ok) expect(codes).toContain(verdict.code);
      } else {
        expect(verdict).toEqual({ ok: true });
        status = statusAfterChange(change.kind, status);
      }
    }
    expect(status).toBe('canceled');
  });

  it.each([
    ['completed', 'pause', 'INVALID_STATE'],
    ['completed', 'budget', 'INVALID_STATE'],
    ['rejected', 'dates', 'INVALID_STATE'],
    ['canceled', 'cancel', 'NOT_CANCELLABLE'],
    ['completed', 'cancel', 'NOT_CANCELLABLE'],
    ['active', 'resume', 'INVALID_STATE'],
    ['paused', 'pause', 'INVALID_STATE'],
    ['creating', 'pause', 'INVALID_STATE'],
  ] as const)('a %s buy refuses %s with %s', (status, kind, code) => {
    const request: ChangeRequest = {
      kind,
      requestedBy: 'ops',
      ...(kind === 'budget' ? { budgets: { p1: 10 } } : {}),
      ...(kind === 'dates' ? { endTime: new Date(START + DAY).toISOString() } : {}),
    };
    const verdict = validateChange(buyState(status), request);
    expect(verdict).toMatchObject({ ok: false, code });
  });

  it('the seller’s available_actions have the last word', () => {
    const verdict = validateChange(buyState('active', { availableActions: ['cancel'] }), {
      kind: 'pause',
      requestedBy: 'ops',
    });
    expect(verdict).toMatchObject({ ok: false, code: 'ACTION_NOT_ALLOWED' });
  });

  it('refuses malformed changes before any state check', () => {
    expect(
      validateChange(buyState('active'), { kind: 'budget', requestedBy: 'ops', budgets: { p1: -1 } }),
    ).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(validateChange(buyState('active'), { kind: 'pause', requestedBy: ' ' })).toMatchObject({
      code: 'INVALID_REQUEST',
    });
    expect(
      validateChange(buyState('active'), {
        kind: 'dates',
        requestedBy: 'ops',
        startTime: '2027-02-01T00:00:00Z',
        endTime: '2027-01-01T00:00:00Z',
      }),
    ).toMatchObject({ code: 'INVALID_REQUEST' });
  });

  it('maps changes to update_media_buy fields (the normative action table)', () => {
    expect(updateParamsFor('mb_1', { kind: 'pause', requestedBy: 'ops' }, { revision: 3 })).toEqual({
      media_buy_id: 'mb_1',
      revision: 3,
      paused: true,
    });
    expect(updateParamsFor('mb_1', { kind: 'resume', requestedBy: 'ops' }, {})).toEqual({
      media_buy_id: 'mb_1',
      paused: false,
    });
    expect(updateParamsFor('mb_1', { kind: 'cancel', requestedBy: 'ops', reason: 'pulled' }, {})).toEqual({
      media_buy_id: 'mb_1',
      canceled: true,
      cancellation_reason: 'pulled',
    });
    expect(updateParamsFor('mb_1', { kind: 'budget', requestedBy: 'ops', budgets: { p1: 5000 } }, {})).toEqual({
      media_buy_id: 'mb_1',
      packages: [{ package_id: 'p1', budget: 5000 }],
    });
  });
});

describe('reporting frequency', () => {
  it('registers the requested frequency when every product supports it, else the finest common one', () => {
    expect(
      chooseReportingFrequency({ frequency: 'hourly', productFrequencies: [['hourly', 'daily'], ['hourly']] }),
    ).toEqual({ frequency: 'hourly' });
    expect(
      chooseReportingFrequency({
        frequency: 'hourly',
        productFrequencies: [
          ['hourly', 'daily'],
          ['daily', 'monthly'],
        ],
      }),
    ).toMatchObject({ frequency: 'daily' });
    expect(
      chooseReportingFrequency({ frequency: 'daily', productFrequencies: [['hourly'], ['monthly']] }).frequency,
    ).toBeUndefined();
  });
});

function hourly(
  sequenceNumber: number,
  hour: number,
  impressions: number,
  overrides: Partial<ReportingNotification> = {},
): ReportingNotification {
  const start = START + hour * HOUR;
  return {
    notificationType: 'scheduled',
    sequenceNumber,
    nextExpectedAt: new Date(start + 2 * HOUR).toISOString(),
    mediaBuyId: 'mb_1',
    period: {
      start: new Date(start).toISOString(),
      end: new Date(start + HOUR - 1000).toISOString(),
      totals: { impressions },
      byPackage: { p1: { impressions, spend: impressions / 100 } },
    },
    ...overrides,
  };
}

function reportingMachine(): { state: MediaBuyState; machine: MediaBuyMachine; clock: { now: number } } {
  const state = buyState('active');
  state.reporting.frequency = 'hourly';
  const clock = { now: START };
  return { state, machine: new MediaBuyMachine(state, { now: () => clock.now }), clock };
}

describe('delivery reports', () => {
  it('counts each period once: duplicates are dropped, reordered reports fill their period', () => {
    const { state, machine, clock } = reportingMachine();
    clock.now = START + 2 * HOUR;
    expect(machine.receiveReport(hourly(1, 0, 100), clock.now)).toBe('applied');
    expect(machine.receiveReport(hourly(3, 2, 300), clock.now)).toBe('applied'); // 2 is late
    expect(state.reporting.sequenceGaps).toBe(1);
    expect(Object.keys(state.reporting.missingPeriods)).toEqual([new Date(START + HOUR).toISOString()]);
    expect(machine.receiveReport(hourly(1, 0, 100), clock.now)).toBe('duplicate');
    expect(machine.receiveReport(hourly(2, 1, 200), clock.now)).toBe('applied');
    expect(state.reporting.reordered).toBe(1);
    expect(state.reporting.missingPeriods).toEqual({});
    expect(state.reporting.totals.impressions).toBe(600);
    expect(state.reporting.duplicates).toBe(1);
    expect(state.reporting.contiguousThrough).toBe(3);
  });

  it('a gap is pulled after the grace for reordered reports, and the pulled window fills it', () => {
    const { state, machine, clock } = reportingMachine();
    machine.receiveReport(hourly(1, 0, 100), START + HOUR);
    machine.receiveReport(hourly(3, 2, 300), START + 3 * HOUR);
    clock.now = START + 3 * HOUR;
    expect(machine.delivery.periodsDueForFill(clock.now)).toEqual([]);
    const missing = new Date(START + HOUR).toISOString();
    expect(machine.delivery.periodsDueForFill(START + 4 * HOUR)).toEqual([missing]);
    const pull = parseDeliveryPull(
      {
        media_buy_deliveries: [
          {
            media_buy_id: 'mb_1',
            totals: {},
            by_package: [],
            windows: [
              {
                window_start: missing,
                window_end: new Date(START + 2 * HOUR).toISOString(),
                totals: { impressions: 200 },
                by_package: [{ package_id: 'p1', impressions: 200, spend: 2 }],
              },
            ],
          },
        ],
      },
      'mb_1',
    )!;
    expect(machine.delivery.applyPull(pull, [missing])).toEqual({ filled: 1, stillMissing: 0 });
    expect(state.reporting.totals).toEqual({ impressions: 600, spend: 6 });
    expect(state.reporting.periodGapsFilled).toBe(1);
    expect(state.reporting.periods[missing].source).toBe('pull');
  });

  it('gives a period up after repeated empty pulls, and counts it if it arrives later', () => {
    const { state, machine } = reportingMachine();
    machine.receiveReport(hourly(1, 0, 100), START + HOUR);
    machine.receiveReport(hourly(3, 2, 300), START + 3 * HOUR);
    const missing = new Date(START + HOUR).toISOString();
    for (let attempt = 0; attempt < MAX_FILL_ATTEMPTS; attempt++)
      machine.delivery.applyPull({ mediaBuyId: 'mb_1', totals: {}, byPackage: {}, windows: [] }, [missing]);
    expect(state.reporting.unfilledPeriods).toEqual([missing]);
    machine.delivery.seal(START + 30 * DAY);
    machine.receiveReport(hourly(2, 1, 200), START + 30 * DAY);
    expect(state.reporting.unfilledPeriods).toEqual([]);
    expect(state.reporting.totals.impressions).toBe(600);
  });

  it('an adjusted or window_update report replaces its period and keeps the change on record', () => {
    const { state, machine } = reportingMachine();
    machine.receiveReport(hourly(1, 0, 100), START + HOUR);
    expect(
      machine.receiveReport(hourly(2, 0, 130, { notificationType: 'adjusted', isAdjusted: true }), START + 5 * HOUR),
    ).toBe('adjusted');
    expect(state.reporting.totals.impressions).toBe(130);
    expect(state.reporting.adjustments[0]).toMatchObject({
      notificationType: 'adjusted',
      before: { impressions: 100 },
      after: { impressions: 130 },
    });
    expect(machine.receiveReport(hourly(3, 0, 150, { notificationType: 'window_update' }), START + 9 * HOUR)).toBe(
      'adjusted',
    );
    expect(state.reporting.totals.impressions).toBe(150);
    expect(state.reporting.adjustmentCount).toBe(2);
  });

  it('a delayed notice moves the expectation without numbers; a report late past it is noticed', () => {
    const { state, machine } = reportingMachine();
    machine.receiveReport(hourly(1, 0, 100), START + HOUR);
    expect(
      machine.receiveReport(
        {
          notificationType: 'delayed',
          sequenceNumber: 2,
          mediaBuyId: 'mb_1',
          nextExpectedAt: new Date(START + 6 * HOUR).toISOString(),
        },
        START + 2 * HOUR,
      ),
    ).toBe('notice');
    expect(state.reporting.delayedNotices).toBe(1);
    expect(machine.delivery.lateAtMs()).toBe(START + 6 * HOUR + 60 * 60_000);
    machine.delivery.noteLate(START + 7 * HOUR);
    expect(Object.keys(state.reporting.missingPeriods).length).toBe(5); // hours 1-5
    expect(Date.parse(state.reporting.nextExpectedAt!)).toBeGreaterThan(START + 7 * HOUR);
  });

  it('before any report, the first is expected at the end of the first period: a buy no report reaches is pulled', () => {
    // A seller that never sends its reports, or a buy that registered no webhook (no public URL): nothing said when
    // the next report was due, so nothing was ever late and delivery was pulled only once the buy ended.
    const { state, machine, clock } = reportingMachine();
    expect(machine.delivery.lateAtMs()).toBe(START + HOUR + 60 * 60_000);
    const history = { length: 10, continueAsNewSuggested: false };
    let pulled: string[] = [];
    for (clock.now = START; clock.now <= START + 12 * HOUR && pulled.length === 0; clock.now += 15 * 60_000) {
      const step = machine.next(clock.now, history);
      if (step.kind === 'pull') pulled = step.periods;
      else if (step.kind === 'read') machine.applyRead({ snapshot: { mediaBuyId: 'mb_1', status: 'active' } });
    }
    // The first hour, pulled once it was late (its report's expected delay past its end, on the late-check grid).
    expect(pulled).toEqual([new Date(START).toISOString()]);
    expect(clock.now).toBeLessThanOrEqual(START + 6 * HOUR + 15 * 60_000);
    // From then on each period is expected in turn.
    expect(Date.parse(state.reporting.nextExpectedAt!)).toBeGreaterThan(START + HOUR);
  });

  it('a buy still pending (creatives or its start) expects no first report; once past that it does', () => {
    const state = buyState('pending_creatives');
    state.reporting.frequency = 'hourly';
    const machine = new MediaBuyMachine(state, { now: () => START });
    expect(machine.delivery.lateAtMs()).toBeUndefined();
    state.status = 'pending_start';
    expect(machine.delivery.lateAtMs()).toBeUndefined();
    state.status = 'active';
    expect(machine.delivery.lateAtMs()).toBe(START + HOUR + 60 * 60_000);
    // A run from before the patch expected the first report while pending, as its history did.
    const before = buyState('pending_creatives');
    before.reporting.frequency = 'hourly';
    const old = new MediaBuyMachine(before, { now: () => START, quietWhilePending: () => false });
    expect(old.delivery.lateAtMs()).toBe(START + HOUR + 60 * 60_000);
  });

  it('a run from before the patch expects nothing before a report says when, as its history did', () => {
    const state = buyState('active');
    state.reporting.frequency = 'hourly';
    const machine = new MediaBuyMachine(state, { now: () => START, expectFirstReport: () => false });
    expect(machine.delivery.lateAtMs()).toBeUndefined();
    // A report that states when the next is due still counts, patch or not.
    machine.receiveReport(hourly(1, 0, 100, { nextExpectedAt: new Date(START + 2 * HOUR).toISOString() }), START);
    expect(machine.delivery.lateAtMs()).toBe(START + 3 * HOUR);
  });

  describe('a seller without windowed pulls', () => {
    /** A daily buy whose first three days are missing, and the machine's first pull for them. */
    function dailyGap(hooks: { rangeFill?: () => boolean } = {}) {
      const state = buyState('active');
      state.reporting.frequency = 'daily';
      const clock = { now: START + 4 * DAY };
      const machine = new MediaBuyMachine(state, { now: () => clock.now, ...hooks });
      machine.delivery.noteMissingThrough(START + 3 * DAY, START);
      const days = [0, 1, 2].map((day) => new Date(START + day * DAY).toISOString());
      const history = { length: 10, continueAsNewSuggested: false };
      const step = () => {
        for (;;) {
          const next = machine.next(clock.now, history);
          if (next.kind !== 'read') return next;
          machine.applyRead({ snapshot: { mediaBuyId: 'mb_1', status: 'active' } });
        }
      };
      return { state, machine, days, step };
    }
    const windowless = (extra: Record<string, unknown> = {}) =>
      parseDeliveryPull(
        {
          reporting_period: { start: new Date(START).toISOString(), end: new Date(START + 3 * DAY).toISOString() },
          media_buy_deliveries: [{ media_buy_id: 'mb_1', totals: { impressions: 900 }, by_package: [], ...extra }],
        },
        'mb_1',
      )!;
    const ranged = (startMs: number, end: string, impressions: number) =>
      parseDeliveryPull(
        {
          reporting_period: { start: new Date(startMs).toISOString(), end },
          media_buy_deliveries: [
            {
              media_buy_id: 'mb_1',
              totals: { impressions },
              by_package: [{ package_id: 'p1', impressions, spend: impressions / 100 }],
            },
          ],
        },
        'mb_1',
      )!;

    it('a windowed pull answered without windows turns the fills into one date range a day, with no attempt counted', () => {
      const { state, machine, days, step } = dailyGap();
      const first = step();
      expect(first).toMatchObject({ kind: 'pull', periods: days, request: { timeGranularity: 'daily' } });
      if (first.kind !== 'pull') throw new Error('no pull');
      expect(windowless().windowed).toBeUndefined();
      machine.applyWindowPull(first, { pull: windowless() });
      expect(state.reporting.rangeFill).toBe(true);
      expect(state.reporting.pulls).toBe(1);
      for (const key of days) expect(state.reporting.missingPeriods[key]).toMatchObject({ attempts: 0 });
      const ends = ['2027-03-02T00:00:00.000Z', '2027-03-02T23:59:59Z', '2027-03-03T23:59:59.999Z'];
      for (const [index, key] of days.entries()) {
        const next = step();
        const startMs = Date.parse(key);
        expect(next).toEqual({
          kind: 'pull',
          periods: [key],
          request: expect.objectContaining({
            startDate: key.slice(0, 10),
            endDate: new Date(startMs + DAY).toISOString().slice(0, 10),
          }),
        });
        if (next.kind !== 'pull') throw new Error('no pull');
        expect(next.request.timeGranularity).toBeUndefined();
        // The day's range, its end written exclusive, as the last second, or as the last millisecond.
        const end = index === 0 ? ends[0] : index === 1 ? ends[1] : ends[2];
        machine.applyWindowPull(next, { pull: ranged(startMs, end, 100 * (index + 1)) });
      }
      expect(state.reporting.missingPeriods).toEqual({});
      expect(state.reporting.periodGapsFilled).toBe(3);
      expect(state.reporting.totals.impressions).toBe(600);
      expect(state.reporting.periods[days[1]]).toMatchObject({ source: 'pull', end: days[2] });
      expect(state.anomalies.filter((anomaly) => anomaly.note.includes('one date range each'))).toHaveLength(1);
    });

    it('an answer for another range (a seller that answers its lifetime) fills nothing and counts an attempt', () => {
      const { state, machine, days, step } = dailyGap();
      const first = step();
      if (first.kind !== 'pull') throw new Error('no pull');
      machine.applyWindowPull(first, { unsupportedGranularity: true, note: 'daily not offered' });
      const next = step();
      if (next.kind !== 'pull') throw new Error('no pull');
      machine.applyWindowPull(next, {
        pull: ranged(START - 10 * DAY, new Date(START + DAY).toISOString(), 5000),
      });
      expect(state.reporting.periods[days[0]]).toBeUndefined();
      expect(state.reporting.missingPeriods[days[0]]).toMatchObject({ attempts: 1 });
    });

    it('a run from before the patch counts the windowless answer as an attempt, as its history did', () => {
      const { state, machine, days, step } = dailyGap({ rangeFill: () => false });
      const first = step();
      if (first.kind !== 'pull') throw new Error('no pull');
      machine.applyWindowPull(first, { pull: windowless() });
      expect(state.reporting.rangeFill).toBeUndefined();
      expect(state.reporting.noFills).toBeUndefined();
      for (const key of days) expect(state.reporting.missingPeriods[key]).toMatchObject({ attempts: 1 });
    });

    it('an hourly buy at such a seller gives its missing hours up at once, and later ones without a pull', () => {
      const { state, machine, clock } = reportingMachine();
      const missing = new Date(START + HOUR).toISOString();
      machine.delivery.noteMissingThrough(START + 2 * HOUR, START);
      machine.applyWindowPull(
        {
          kind: 'pull',
          periods: [missing],
          request: { sellerId: 's', mediaBuyId: 'mb_1', timeGranularity: 'hourly' },
        },
        { pull: windowless() },
      );
      expect(state.reporting.rangeFill).toBeUndefined();
      expect(state.reporting.noFills).toContain('hourly');
      expect(state.reporting.missingPeriods).toEqual({});
      expect(state.reporting.unfilledPeriods).toContain(missing);
      // Later late hours: given up with no pull.
      const history = { length: 10, continueAsNewSuggested: false };
      const kinds: string[] = [];
      for (clock.now = START + 3 * HOUR; clock.now <= START + 12 * HOUR; clock.now += 15 * 60_000) {
        const next = machine.next(clock.now, history);
        kinds.push(next.kind);
        if (next.kind === 'read') machine.applyRead({ snapshot: { mediaBuyId: 'mb_1', status: 'active' } });
      }
      expect(kinds).not.toContain('pull');
      expect(state.reporting.unfilledPeriods.length).toBeGreaterThanOrEqual(5);
      expect(state.anomalies.filter((anomaly) => anomaly.note.includes('not pulled'))).toHaveLength(1);
    });

    it('a seller that refuses date ranges (lifetime only) has its missing days given up at once', () => {
      const { state, machine, days, step } = dailyGap();
      const first = step();
      if (first.kind !== 'pull') throw new Error('no pull');
      machine.applyWindowPull(first, {
        error: { code: 'DATE_RANGE_NOT_SUPPORTED', message: 'lifetime reporting only' },
      });
      expect(state.reporting.noFills).toContain('date ranges');
      expect(state.reporting.missingPeriods).toEqual({});
      expect(state.reporting.unfilledPeriods).toEqual(days);
      expect(state.reporting.pulls).toBe(1);
    });
  });

  it('keeps the state bounded over a 90-day hourly flight: periods older than a week are folded', () => {
    const { state, machine } = reportingMachine();
    for (let hour = 0; hour < 90 * 24; hour++) {
      const now = START + (hour + 1) * HOUR;
      machine.receiveReport(hourly(hour + 1, hour, 10), now);
      machine.delivery.seal(now);
    }
    expect(state.reporting.totals.impressions).toBe(90 * 24 * 10);
    expect(Object.keys(state.reporting.periods).length).toBeLessThanOrEqual(7 * 24 + 1);
    expect(state.reporting.receivedAbove).toEqual([]);
    expect(JSON.stringify(state).length).toBeLessThan(64 * 1024);
  });

  it('reconciles with the seller’s lifetime numbers at the thresholds the reporting page names', () => {
    const { state, machine } = reportingMachine();
    machine.receiveReport(hourly(1, 0, 1000), START + HOUR);
    machine.delivery.reconcile({
      mediaBuyId: 'mb_1',
      totals: { impressions: 1010, spend: 10 },
      byPackage: { p1: { impressions: 1010, spend: 10 } },
      windows: [],
    });
    // Within the thresholds, yet the seller's numbers are the record.
    expect(state.reporting.reconciliation).toMatchObject({ outcome: 'reconciled', replaced: true });
    expect(state.reporting.totals.impressions).toBe(1010);
    machine.delivery.reconcile({
      mediaBuyId: 'mb_1',
      totals: { impressions: 1010, spend: 10 },
      byPackage: { p1: { impressions: 1010, spend: 10 } },
      windows: [],
    });
    expect(state.reporting.reconciliation).toMatchObject({ outcome: 'reconciled', replaced: false });
    machine.delivery.reconcile({
      mediaBuyId: 'mb_1',
      totals: { impressions: 1050, spend: 10 },
      byPackage: { p1: { impressions: 1050, spend: 10 } },
      windows: [],
    });
    expect(state.reporting.reconciliation).toMatchObject({ outcome: 'discrepancy', replaced: true });
    expect(state.reporting.totals.impressions).toBe(1050);
    machine.delivery.reconcile({
      mediaBuyId: 'mb_1',
      totals: { impressions: 2000, spend: 10 },
      byPackage: { p1: { impressions: 2000, spend: 10 } },
      windows: [],
    });
    expect(state.reporting.reconciliation?.outcome).toBe('large_discrepancy');
  });

  it('with no reports at all, the lifetime pull is the record (nothing to compare)', () => {
    const { state, machine } = reportingMachine();
    machine.delivery.reconcile({
      mediaBuyId: 'mb_1',
      totals: { impressions: 500, spend: 5 },
      byPackage: { p1: { impressions: 500, spend: 5 } },
      windows: [],
    });
    expect(state.reporting.reconciliation).toMatchObject({ outcome: 'reconciled', replaced: true });
    expect(state.reporting.totals).toEqual({ impressions: 500, spend: 5 });
    expect(state.anomalies).toEqual([]);
  });
});

describe('creatives', () => {
  it('tracks each creative’s action and status, assigns to packages, and alerts before and at the deadline', () => {
    const deadline = new Date(START - DAY).toISOString();
    const state = buyState('pending_creatives', {
      creativeDeadline: deadline,
      packages: { p1: { packageId: 'p1', creativeIds: [] }, p2: { packageId: 'p2', creativeIds: [] } },
    });
    const machine = new MediaBuyMachine(state, { now: () => START });
    const fired = new Set<string>();
    expect(machine.nextCreativeAlertAt(2 * DAY, fired)).toBe(START - 3 * DAY);
    expect(machine.dueCreativeAlerts(START - 3 * DAY, 2 * DAY, fired)).toMatchObject([
      { kind: 'deadline_approaching', packagesLacking: ['p1', 'p2'] },
    ]);
    fired.add(`deadline_approaching:${deadline}`);
    machine.applyCreativeSync(
      {
        creatives: [{ creative_id: 'c1' }, { creative_id: 'bad1' }],
        assignments: { c1: ['p1'], bad1: ['p2'] },
        requestedBy: 'ops',
      },
      {
        creatives: [
          { creative_id: 'c1', action: 'created', status: 'approved' },
          { creative_id: 'bad1', action: 'failed', errors: [{ code: 'INVALID_CREATIVE', message: 'no' }] },
        ],
      },
      'op-1',
    );
    expect(state.creatives.c1).toMatchObject({ action: 'created', status: 'approved', packageIds: ['p1'] });
    expect(state.creatives.bad1).toMatchObject({ action: 'failed', packageIds: [] });
    expect(machine.packagesLackingCreatives()).toEqual(['p2']);
    expect(machine.dueCreativeAlerts(START - DAY, 2 * DAY, fired)).toMatchObject([
      { kind: 'deadline_passed', packagesLacking: ['p2'] },
    ]);
  });
});

describe('reporting webhook parsing', () => {
  it('reads the MCP envelope with the report under result, one notification per buy', () => {
    const parsed = parseReportingWebhook({
      idempotency_key: 'whk_1',
      status: 'completed',
      result: {
        notification_type: 'scheduled',
        sequence_number: 5,
        next_expected_at: '2024-02-06T08:00:00Z',
        reporting_period: { start: '2024-02-05T00:00:00Z', end: '2024-02-05T23:59:59Z' },
        media_buy_deliveries: [
          {
            media_buy_id: 'mb_001',
            status: 'active',
            totals: { impressions: 125000, spend: 5625, ctr: 0.002 },
            by_package: [{ package_id: 'p1', impressions: 125000, spend: 5625, pacing_index: 0.9 }],
          },
          { media_buy_id: 'mb_002', status: 'paused', totals: { impressions: 1 }, by_package: [] },
        ],
      },
    });
    expect(parsed.eventKey).toBe('whk_1');
    expect(parsed.notifications).toHaveLength(2);
    expect(parsed.notifications[0]).toMatchObject({
      notificationType: 'scheduled',
      sequenceNumber: 5,
      mediaBuyId: 'mb_001',
      status: 'active',
    });
    // Rates and indexes are not summed.
    expect(parsed.notifications[0].period?.byPackage.p1).toEqual({ impressions: 125000, spend: 5625 });
  });

  it('refuses a body that is not a delivery report, naming the field', () => {
    expect(() => parseReportingWebhook({ result: { notification_type: 'nope' } })).toThrow(/notification_type/);
    expect(() => parseReportingWebhook({ result: { notification_type: 'scheduled' } })).toThrow(/media_buy_deliveries/);
  });
});
