/**
 * Sellers without windowed pulls, on the time-skipping server: a daily buy no report reaches is pulled for each late
 * day, and its seller answers the windowed pull without `windows` (a seller that does not know `time_granularity`)
 * or refuses it (UNSUPPORTED_GRANULARITY). The buy then pulls each missing day as its own date range, the fallback
 * get_media_buy_delivery names, and fills the day from that range's numbers. Before, such a seller's days were
 * marked unfilled after three windowed pulls each, with an anomaly per day, and the buy's numbers stayed at zero
 * until its lifetime pull at the end. Real fixture sellers on loopback (test/fixtures/media-buy-seller), whose clock
 * is the test server's.
 */
import { randomUUID } from 'node:crypto';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { registry } from '../harness/temporal';
import {
  type TimeSkippingStack,
  answeredWhileTimeMoves,
  followServerClock,
  startTimeSkippingStack,
} from '../harness/time-skipping';
import type { adcpMediaBuy } from '../../workflows/media-buy/workflow';
import { deliveryView } from '../../api/media-buys';
import {
  MEDIA_BUY_WORKFLOW_TYPE,
  type MediaBuyInput,
  type MediaBuyState,
  attachCreativesUpdate,
  mediaBuyStateQuery,
  mediaBuyWorkflowId,
} from '../../contract/media-buy';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let omitting: MediaBuySeller;
let refusing: MediaBuySeller;
let lifetimeOnly: MediaBuySeller;
let stack: TimeSkippingStack;
let stopClock: (() => Promise<void>) | undefined;

beforeAll(async () => {
  omitting = await startMediaBuySeller({ windowedPull: 'omitted' });
  refusing = await startMediaBuySeller({ windowedPull: 'refused' });
  lifetimeOnly = await startMediaBuySeller({ dateRanges: 'refused' });
  stack = await startTimeSkippingStack({
    sellers: registry([
      { id: 'omitting', url: omitting.url, protocol: 'mcp', token_env: 'OMITTING_TOKEN' },
      { id: 'refusing', url: refusing.url, protocol: 'mcp', token_env: 'REFUSING_TOKEN' },
      { id: 'lifetime', url: lifetimeOnly.url, protocol: 'mcp', token_env: 'LIFETIME_TOKEN' },
    ]),
    activities: {
      env: {
        OMITTING_TOKEN: omitting.authToken,
        REFUSING_TOKEN: refusing.authToken,
        LIFETIME_TOKEN: lifetimeOnly.authToken,
      },
    },
  });
  stopClock = await followServerClock(stack, [omitting, refusing, lifetimeOnly]);
});

afterAll(async () => {
  await stopClock?.();
  await stack?.close();
  await omitting?.close();
  await refusing?.close();
  await lifetimeOnly?.close();
});

const answered = <T>(work: Promise<T>): Promise<T> => answeredWhileTimeMoves(stack, work);

async function stateWhen(
  handle: { query: (query: typeof mediaBuyStateQuery) => Promise<MediaBuyState> },
  ready: (state: MediaBuyState) => boolean,
): Promise<MediaBuyState> {
  let state = await handle.query(mediaBuyStateQuery);
  for (let i = 0; i < 200 && !ready(state); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    state = await handle.query(mediaBuyStateQuery);
  }
  return state;
}

/** A daily buy at `sellerId` with its creatives in, registered for reports that never come (a silent seller). */
async function silentDailyBuy(sellerId: string) {
  const t0 = await stack.now();
  const startMs = Math.ceil((t0 + 3 * DAY) / DAY) * DAY;
  const buyKey = `range-fill-${randomUUID()}`;
  const input: MediaBuyInput = {
    buyKey,
    sellerId,
    params: {
      account: { account_id: 'acct_range' },
      brand: { domain: 'acme.example' },
      start_time: new Date(startMs).toISOString(),
      end_time: new Date(startMs + 10 * DAY).toISOString(),
      packages: [
        { product_id: 'display_a', pricing_option_id: 'cpm', budget: 50_000 },
        { product_id: 'display_b', pricing_option_id: 'cpm', budget: 30_000 },
      ],
    },
    // Registered for daily reports that never come: the seller is silent.
    reporting: {
      url: 'https://buyer.example/webhooks/adcp-reporting/x',
      frequency: 'daily',
      productFrequencies: [['daily'], ['daily']],
      expectedDelayMinutes: 60,
    },
    requestedBy: 'planner@buyer',
    indexed: false,
  };
  const handle = await stack.env.client.workflow.start<typeof adcpMediaBuy>(MEDIA_BUY_WORKFLOW_TYPE, {
    workflowId: mediaBuyWorkflowId(buyKey),
    taskQueue: stack.taskQueue,
    args: [input],
  });
  const created = await stateWhen(handle, (state) => !!state.mediaBuyId);
  const mediaBuyId = created.mediaBuyId!;
  const packageIds = Object.keys(created.packages).sort();
  const attached = await answered(
    handle.executeUpdate(attachCreativesUpdate, {
      args: [
        {
          creatives: [{ creative_id: 'cr_1', name: 'Spring 300x250' }],
          assignments: { cr_1: packageIds },
          requestedBy: 'trafficker@buyer',
        },
      ],
      updateId: `${buyKey}-creatives`,
    }),
  );
  expect(attached.outcome).toBe('applied');
  return { handle, startMs, mediaBuyId, packageIds };
}

test.each([
  { sellerId: 'omitting', what: 'answers without windows' },
  { sellerId: 'refusing', what: 'refuses the granularity' },
] as const)(
  'a seller that $what: each missing day is pulled as its own date range and filled',
  async ({ sellerId }) => {
    const seller = sellerId === 'omitting' ? omitting : refusing;
    const { handle, startMs, mediaBuyId, packageIds } = await silentDailyBuy(sellerId);

    // Four days of flight with no report: the first three are over, late and pulled.
    await stack.env.sleep(startMs + 4 * DAY + 3 * HOUR - (await stack.now()));
    const state = await handle.query(mediaBuyStateQuery);
    const days = [0, 1, 2].map((day) => startMs + day * DAY);
    const keys = days.map((dayMs) => new Date(dayMs).toISOString());

    // The seller was asked once with a granularity, then for each day as a date range without one.
    const pulls = seller.scripted.calls
      .filter((call) => call.tool === 'get_media_buy_delivery')
      .map((call) => call.args)
      .filter((args) => JSON.stringify(args.media_buy_ids) === JSON.stringify([mediaBuyId]));
    expect(pulls.filter((args) => args.time_granularity !== undefined)).toHaveLength(1);
    const ranges = pulls.filter((args) => args.time_granularity === undefined && args.start_date !== undefined);
    for (const dayMs of days)
      expect(ranges).toContainEqual(
        expect.objectContaining({
          start_date: new Date(dayMs).toISOString().slice(0, 10),
          end_date: new Date(dayMs + DAY).toISOString().slice(0, 10),
        }),
      );

    // Each day holds the seller's numbers for that day, package by package; none was given up on.
    expect(state.reporting.rangeFill).toBe(true);
    expect(deliveryView(state).pulls).toMatchObject({ fills_by: 'date_ranges', no_fills_reason: null });
    expect(state.reporting.unfilledPeriods).toEqual([]);
    expect(state.reporting.periodGapsFilled).toBeGreaterThanOrEqual(3);
    for (const [index, key] of keys.entries()) {
      const expected = seller.periodNumbers(mediaBuyId, days[index], DAY);
      const period = state.reporting.periods[key];
      expect(period).toBeDefined();
      for (const packageId of packageIds) {
        expect(expected[packageId].impressions).toBeGreaterThan(0);
        expect(period.byPackage[packageId]?.impressions).toBe(expected[packageId].impressions);
      }
    }
    expect(state.anomalies.filter((anomaly) => anomaly.note.includes('could not be filled'))).toEqual([]);
    expect(state.anomalies.filter((anomaly) => anomaly.note.includes('one date range each'))).toHaveLength(1);
    await handle.terminate('test over');
  },
  120_000,
);

test('a seller whose products report lifetime only: missing days are given up at once, not pulled again', async () => {
  const { handle, startMs, mediaBuyId } = await silentDailyBuy('lifetime');
  await stack.env.sleep(startMs + 4 * DAY + 3 * HOUR - (await stack.now()));
  const state = await handle.query(mediaBuyStateQuery);
  const withDates = lifetimeOnly.scripted.calls.filter(
    (call) =>
      call.tool === 'get_media_buy_delivery' &&
      JSON.stringify(call.args.media_buy_ids) === JSON.stringify([mediaBuyId]) &&
      call.args.start_date !== undefined,
  );
  // One pull found out; the days after it were given up without one (before: three pulls a day, each refused).
  expect(withDates).toHaveLength(1);
  expect(state.reporting.noFills).toContain('date ranges');
  expect(deliveryView(state).pulls).toMatchObject({ fills_by: 'none', no_fills_reason: state.reporting.noFills });
  expect(state.reporting.missingPeriods).toEqual({});
  expect(state.reporting.unfilledPeriods).toEqual(
    expect.arrayContaining([0, 1, 2].map((day) => new Date(startMs + day * DAY).toISOString())),
  );
  await handle.terminate('test over');
}, 120_000);
