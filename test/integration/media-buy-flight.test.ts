/**
 * A media buy's whole life on the time-skipping server: a 30-day flight (MEDIA_BUY_FLIGHT_DAYS for longer) in about a
 * minute of wall time. The buy is created,
 * its creatives synced, it goes active at its start, is paused and resumed, its budget changed, and it completes at
 * its end; hourly delivery reports arrive with about 5% dropped, 2% duplicated and some reordered. Every dropped
 * period must be filled by a windowed pull, the totals must equal the seller's, the final report must be recorded,
 * and every run of the workflow must stay under 4,096 history events. The run's event limit is lowered (a third of the
 * default for a 30-day flight), so the flight crosses several continue-as-new boundaries as a 90-day one does at the
 * default, with reports, pulls and changes carried across each.
 *
 * The reports reach the workflow by signal, as the gateway's reporting route would deliver them (a seller's real-time
 * clock cannot follow skipped time); every seller call (create, sync_creatives, update, get_media_buys,
 * get_media_buy_delivery) goes to a real fixture seller on loopback whose clock is the test server's.
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
import { parseReportingWebhook } from '../../protocol/media-buy';
import type { adcpMediaBuy } from '../../workflows/media-buy/workflow';
import {
  MEDIA_BUY_WORKFLOW_TYPE,
  type MediaBuyInput,
  type MediaBuyState,
  attachCreativesUpdate,
  changeMediaBuyUpdate,
  mediaBuyStateQuery,
  mediaBuyWorkflowId,
  reportReceivedSignal,
} from '../../contract/media-buy';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const FLIGHT_DAYS = Number(process.env.MEDIA_BUY_FLIGHT_DAYS ?? 30);
/** The default limit (3,000) for a 90-day flight, scaled down with a shorter one: the same number of runs. */
const HISTORY_EVENT_LIMIT = Math.max(500, Math.min(3_000, Math.round((3_000 * FLIGHT_DAYS) / 90)));

let seller: MediaBuySeller;
let stack: TimeSkippingStack;
let stopClock: (() => Promise<void>) | undefined;

/** A small seeded generator, so a failing run can be replayed. */
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

beforeAll(async () => {
  seller = await startMediaBuySeller();
  stack = await startTimeSkippingStack({
    sellers: registry([{ id: 'life', url: seller.url, protocol: 'mcp', token_env: 'LIFE_TOKEN' }]),
    activities: { env: { LIFE_TOKEN: seller.authToken } },
  });
  // The seller's clock is the test server's (skipped time included), refreshed continuously.
  stopClock = await followServerClock(stack, [seller]);
});

afterAll(async () => {
  await stopClock?.();
  await stack?.close();
  await seller?.close();
});

/** Events per run, and how many runs left a near-due timer to fire rather than cancel it (the patch's marker). */
async function historyOfEveryRun(
  workflowId: string,
  firstRunId: string,
): Promise<{ counts: number[]; keptTimerRuns: number }> {
  const counts: number[] = [];
  let keptTimerRuns = 0;
  let runId: string | undefined = firstRunId;
  while (runId) {
    const history: {
      events?:
        | {
            workflowExecutionContinuedAsNewEventAttributes?: { newExecutionRunId?: string | null } | null;
            markerRecordedEventAttributes?: {
              details?: Record<string, { payloads?: { data?: Uint8Array | null }[] | null }> | null;
            } | null;
          }[]
        | null;
    } = await stack.env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    const events = history.events ?? [];
    counts.push(events.length);
    const markers = events.flatMap((event) =>
      Object.values(event.markerRecordedEventAttributes?.details ?? {}).flatMap((details) =>
        (details.payloads ?? []).map((payload) => Buffer.from(payload.data ?? new Uint8Array()).toString()),
      ),
    );
    if (markers.some((marker) => marker.includes('media-buy-keep-due-timer'))) keptTimerRuns += 1;
    runId = events[events.length - 1]?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
  }
  return { counts, keptTimerRuns };
}

const progress = (line: string) => {
  if (process.env.MEDIA_BUY_FLIGHT_PROGRESS) console.info(`${new Date().toISOString()} ${line}`);
};

const answered = <T>(work: Promise<T>): Promise<T> => answeredWhileTimeMoves(stack, work);

async function sleepUntil(targetMs: number): Promise<void> {
  const now = await stack.now();
  if (targetMs > now) await stack.env.sleep(targetMs - now);
}

test(`a ${FLIGHT_DAYS}-day flight with hourly reports: lifecycle, changes, gaps filled, totals equal the seller's, bounded history`, async () => {
  const random = mulberry32(11);
  const t0 = await stack.now();
  const startMs = Math.ceil((t0 + 5 * DAY) / HOUR) * HOUR;
  const endMs = startMs + FLIGHT_DAYS * DAY;
  const buyKey = `flight-${randomUUID()}`;
  const input: MediaBuyInput = {
    buyKey,
    sellerId: 'life',
    params: {
      account: { account_id: 'acct_life' },
      brand: { domain: 'acme.example' },
      start_time: new Date(startMs).toISOString(),
      end_time: new Date(endMs).toISOString(),
      packages: [
        { product_id: 'display_a', pricing_option_id: 'cpm', budget: 50_000 },
        { product_id: 'display_b', pricing_option_id: 'cpm', budget: 30_000 },
      ],
    },
    reporting: {
      url: 'https://buyer.example/webhooks/adcp-reporting/x',
      frequency: 'hourly',
      productFrequencies: [['hourly', 'daily'], ['hourly']],
      expectedDelayMinutes: 60,
    },
    creativeAlertLeadMs: DAY,
    requestedBy: 'planner@buyer',
    indexed: false,
    historyEventLimit: HISTORY_EVENT_LIMIT,
  };
  const handle = await stack.env.client.workflow.start<typeof adcpMediaBuy>(MEDIA_BUY_WORKFLOW_TYPE, {
    workflowId: mediaBuyWorkflowId(buyKey),
    taskQueue: stack.taskQueue,
    args: [input],
  });
  const firstRunId = handle.firstExecutionRunId;
  progress(`workflow ${handle.workflowId}`);

  // Created: pending_creatives, with the seller's media_buy_id and packages.
  let state: MediaBuyState = await handle.query(mediaBuyStateQuery);
  for (let i = 0; i < 200 && !state.mediaBuyId; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    state = await handle.query(mediaBuyStateQuery);
  }
  progress(`created: ${state.status}`);
  expect(state.status).toBe('pending_creatives');
  const mediaBuyId = state.mediaBuyId!;
  const packageIds = Object.keys(state.packages).sort();
  expect(packageIds).toHaveLength(2);
  expect(state.reporting.registered).toMatchObject({ frequency: 'hourly' });
  expect(seller.buy(mediaBuyId)!.request.reporting_webhook).toMatchObject({ reporting_frequency: 'hourly' });

  // Creatives synced and assigned: the seller moves the buy to pending_start.
  const attached = await answered(
    handle.executeUpdate(attachCreativesUpdate, {
      args: [
        {
          creatives: [{ creative_id: 'cr_1', name: 'Spring 300x250' }],
          assignments: { cr_1: packageIds },
          requestedBy: 'trafficker@buyer',
        },
      ],
      updateId: `${buyKey}-creatives-1`,
    }),
  );
  progress(`creatives: ${attached.outcome}`);
  expect(attached.outcome).toBe('applied');
  state = await handle.query(mediaBuyStateQuery);
  for (let i = 0; i < 100 && state.status !== 'pending_start'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    state = await handle.query(mediaBuyStateQuery);
  }
  expect(state.status).toBe('pending_start');
  expect(state.creatives.cr_1).toMatchObject({ action: 'created', status: 'approved', packageIds });

  // The flight, hour by hour. Report h covers [start + h, start + h + 1) and is sent five minutes after its end.
  const hours = FLIGHT_DAYS * 24;
  const pauseAt = Math.floor(hours / 3);
  const resumeAt = pauseAt + 36;
  const budgetAt = Math.max(Math.floor(hours / 2), resumeAt + 6);
  const dropped: number[] = [];
  let duplicated = 0;
  let reordered = 0;
  let held: { body: Record<string, unknown>; sequence: number } | undefined;
  let sequence = 0;
  const adjustOpenAt = Math.floor(hours * 0.6);
  // Ten days after the resume, so the revised period (ten days back) had delivery to revise.
  const adjustSealedAt = Math.max(Math.floor(hours * 0.7), resumeAt + 11 * 24);
  const delayedAt = Math.floor(hours * 0.8);
  const send = async (body: Record<string, unknown>) => {
    const parsed = parseReportingWebhook(body);
    await handle.signal(reportReceivedSignal, {
      eventKey: parsed.eventKey!,
      notification: parsed.notifications[0],
      receivedAt: new Date(await stack.now()).toISOString(),
      verifiedBy: 'test',
    });
  };
  for (let hour = 0; hour < hours; hour++) {
    const periodStartMs = startMs + hour * HOUR;
    if (hour % 240 === 0) progress(`hour ${hour}`);
    await sleepUntil(periodStartMs + HOUR + 5 * 60_000);
    if (hour === 1) expect((await handle.query(mediaBuyStateQuery)).status).toBe('active');
    if (hour === pauseAt || hour === resumeAt || hour === budgetAt) {
      const request =
        hour === pauseAt
          ? { kind: 'pause' as const, requestedBy: 'optimizer@buyer', reason: 'creative refresh' }
          : hour === resumeAt
            ? { kind: 'resume' as const, requestedBy: 'optimizer@buyer' }
            : { kind: 'budget' as const, requestedBy: 'planner@buyer', budgets: { [packageIds[0]]: 65_000 } };
      progress(`change ${request.kind} at hour ${hour}`);
      const answer = await answered(
        handle.executeUpdate(changeMediaBuyUpdate, { args: [request], updateId: `${buyKey}-change-${hour}` }),
      );
      progress(`change ${request.kind}: ${answer.outcome}`);
      expect(answer.outcome).toBe('applied');
      expect(answer.status).toBe(hour === pauseAt ? 'paused' : 'active');
    }
    const last = hour === hours - 1;
    // Off-cadence fires take sequence numbers too: a revision of a period still open (two days back), one of a
    // period already folded away (ten days back, settled by the end-of-flight pull), and a delayed notice.
    const revised = periodStartMs - (hour === adjustOpenAt ? 2 : 10) * DAY;
    if ((hour === adjustOpenAt || hour === adjustSealedAt) && revised >= startMs) {
      seller.adjustPeriod(mediaBuyId, revised, 1.05);
      await send(
        seller.reportEnvelope(mediaBuyId, {
          sequenceNumber: ++sequence,
          periodStartMs: revised,
          notificationType: 'adjusted',
          atMs: periodStartMs + HOUR,
        }),
      );
    }
    if (hour === delayedAt) {
      await send(
        seller.reportEnvelope(mediaBuyId, {
          sequenceNumber: ++sequence,
          periodStartMs,
          notificationType: 'delayed',
          atMs: periodStartMs + HOUR,
        }),
      );
    }
    const body = seller.reportEnvelope(mediaBuyId, {
      sequenceNumber: ++sequence,
      periodStartMs,
      notificationType: last ? 'final' : 'scheduled',
    });
    const roll = random();
    if (!last && hour > 0 && roll < 0.05) {
      dropped.push(hour);
      continue;
    }
    if (!last && !held && roll < 0.08) {
      held = { body, sequence }; // sent after the next one
      continue;
    }
    await send(body);
    if (roll > 0.98) {
      await send(body); // at-least-once: the same fire again
      duplicated += 1;
    }
    if (held) {
      await send(held.body);
      held = undefined;
      reordered += 1;
    }
  }
  if (held) await send(held.body);

  progress('awaiting the result');
  const final = await handle.result();
  progress('result');
  const sellerTotals = seller.lifetime(mediaBuyId, endMs + DAY);

  // Lifecycle.
  expect(final.status).toBe('completed');
  expect(final.statusHistory.map((move) => move.to)).toEqual([
    'pending_creatives',
    'pending_start',
    'active',
    'paused',
    'active',
    'completed',
  ]);
  expect(final.changes.map((change) => [change.kind, change.outcome, change.requestedBy])).toEqual([
    ['pause', 'applied', 'optimizer@buyer'],
    ['resume', 'applied', 'optimizer@buyer'],
    ['budget', 'applied', 'planner@buyer'],
  ]);
  expect(final.packages[packageIds[0]].budget).toBe(65_000);
  expect(seller.buy(mediaBuyId)!.updates.map((update) => update.outcome)).toEqual(['applied', 'applied', 'applied']);

  // Reporting: every dropped period filled, nothing missing, totals equal to the seller's, the final report recorded.
  const reporting = final.reporting;
  expect(dropped.length).toBeGreaterThan(0);
  expect(reporting.periodGapsFilled).toBeGreaterThanOrEqual(dropped.length);
  expect(reporting.missingPeriods).toEqual({});
  expect(reporting.unfilledPeriods).toEqual([]);
  expect(reporting.periodsCounted).toBe(hours);
  expect(reporting.duplicates).toBeGreaterThanOrEqual(duplicated);
  expect(reporting.reordered).toBeGreaterThan(0);
  expect(reporting.finalReport).toBeDefined();
  expect(reporting.totals.impressions).toBe(sellerTotals.impressions);
  expect(reporting.totals.spend).toBeCloseTo(sellerTotals.spend, 4);
  for (const packageId of packageIds) {
    expect(reporting.byPackage[packageId].impressions).toBe(sellerTotals.byPackage[packageId].impressions);
  }
  // The revision of a folded period is settled by the end-of-flight pull: within the thresholds, and the record.
  expect(reporting.adjustmentCount).toBeGreaterThanOrEqual(2);
  expect(
    reporting.adjustments.some(
      (adjustment) => adjustment.notificationType === 'adjusted' && adjustment.before !== undefined,
    ),
  ).toBe(true);
  const sealedRevision = adjustSealedAt < hours - 1 && adjustSealedAt * HOUR - 10 * DAY >= 0;
  expect(reporting.sealedAdjustments).toBe(sealedRevision ? 1 : 0);
  expect(reporting.delayedNotices).toBe(1);
  expect(reporting.reconciliation).toMatchObject({ outcome: 'reconciled', replaced: sealedRevision });
  expect(final.done).toBe(true);

  // Bounded: every run under 4,096 events, a state of bounded size.
  const { counts: runs, keptTimerRuns } = await historyOfEveryRun(handle.workflowId, firstRunId);
  const stateBytes = JSON.stringify(final).length;
  console.log(
    `${FLIGHT_DAYS}-day flight: ${hours} hourly periods, ${dropped.length} dropped, ${duplicated} duplicated, ${reordered} reordered; ` +
      `${reporting.pulls} pulls filled ${reporting.periodGapsFilled} periods; ${final.reads} reads; ` +
      `${runs.length} runs, events per run ${runs.join(', ')} (largest ${Math.max(...runs)}); final state ${stateBytes} bytes; ` +
      `${keptTimerRuns} runs left a near-due timer to fire instead of cancelling it`,
  );
  expect(Math.max(...runs)).toBeLessThan(4_096);
  // Several runs: the state crossed each boundary (the totals above prove nothing was lost on the way).
  expect(runs.length).toBeGreaterThanOrEqual(3);
  expect(stateBytes).toBeLessThan(128 * 1024);
}, 1_800_000);
