/**
 * The media-buy workflow's wiring on the time-skipping server, with a simulated seller (./media-buy-stand-ins.ts):
 * the create, a flight that ends and settles with the lifetime pull, a cancel, a create the seller refuses, reports
 * counted once per event key, and continue-as-new carrying what the buy knows. Days of flight pass in seconds.
 */
import { type WorkflowHandle, WorkflowNotFoundError } from '@temporalio/client';
import {
  type MediaBuyState,
  attachCreativesUpdate,
  changeMediaBuyUpdate,
  mediaBuyStateQuery,
  refreshMediaBuySignal,
  reportReceivedSignal,
} from '../../contract/media-buy';
import { MediaBuyClient } from '../../client/media-buy-client';
import { type MediaBuyStandIns, startMediaBuyStandIns } from './media-buy-stand-ins';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
let stack: MediaBuyStandIns;

beforeAll(async () => {
  stack = await startMediaBuyStandIns();
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

/** The buy's state once `ready` holds (the workflow runs its steps without timers in between). */
async function stateWhen(
  handle: WorkflowHandle,
  ready: (state: MediaBuyState) => boolean,
  timeoutMs = 20_000,
): Promise<MediaBuyState> {
  const deadline = Date.now() + timeoutMs;
  let state: MediaBuyState | undefined;
  while (Date.now() < deadline) {
    state = await handle.query(mediaBuyStateQuery).catch(() => state);
    if (state && ready(state)) return state;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`not reached in ${timeoutMs} ms; last state: ${JSON.stringify(state)?.slice(0, 2_000)}`);
}

/** Whether a run has a workflow task or an activity open in its history. */
async function inFlight(handle: WorkflowHandle): Promise<boolean> {
  const { events } = await handle.fetchHistory();
  let task = false;
  const activities = new Set<string>();
  for (const event of events ?? []) {
    if (event.workflowTaskScheduledEventAttributes) task = true;
    if (
      event.workflowTaskCompletedEventAttributes ||
      event.workflowTaskFailedEventAttributes ||
      event.workflowTaskTimedOutEventAttributes
    )
      task = false;
    if (event.activityTaskScheduledEventAttributes) activities.add(String(event.eventId));
    const closed =
      event.activityTaskCompletedEventAttributes ??
      event.activityTaskFailedEventAttributes ??
      event.activityTaskTimedOutEventAttributes ??
      event.activityTaskCanceledEventAttributes;
    if (closed) activities.delete(String(closed.scheduledEventId));
  }
  return task || activities.size > 0;
}

async function createdBuy(options: { startInMs: number; flightMs: number }) {
  const handle = await stack.start({ params: await stack.seller.createParams(options) });
  const state = await stateWhen(handle, (candidate) => candidate.status !== 'creating');
  return { handle, state, mediaBuyId: state.mediaBuyId!, packageId: Object.keys(state.packages)[0]! };
}

test('the create makes one buy at the seller and the workflow follows it: pending_creatives, its packages', async () => {
  const before = stack.seller.calls.filter((call) => call.task === 'create_media_buy').length;
  const { state, mediaBuyId, packageId } = await createdBuy({ startInMs: DAY, flightMs: 7 * DAY });
  expect(state).toMatchObject({ status: 'pending_creatives', mediaBuyId, revision: 1, run: 1, done: false });
  expect(state.statusHistory.map((move) => [move.from, move.to, move.source])).toEqual([
    ['creating', 'pending_creatives', 'create'],
  ]);
  expect(state.packages[packageId]).toMatchObject({ budget: 1_000, creativeIds: [] });
  expect(stack.seller.calls.filter((call) => call.task === 'create_media_buy')).toHaveLength(before + 1);
  expect(stack.seller.calls.find((call) => call.task === 'create_media_buy')?.params).toMatchObject({
    account: { account_id: 'acct_stand_in' },
  });
});

test('a create the seller refuses ends the buy create_failed, and the workflow with it', async () => {
  stack.seller.failNextCreate = { status: 'failed', code: 'BUDGET_TOO_LOW' };
  const handle = await stack.start({ params: await stack.seller.createParams({ startInMs: DAY, flightMs: DAY }) });
  const state = await handle.result();
  expect(state).toMatchObject({ status: 'create_failed', done: true, failure: { reason: 'call_failed' } });
  expect(state.failure?.error?.code).toBe('BUDGET_TOO_LOW');
  expect(state.reporting.reconciliation).toBeUndefined();
});

test('creatives in, the flight starts and ends by the seller’s clock, and the buy settles with the lifetime pull', async () => {
  const { handle, mediaBuyId, packageId } = await createdBuy({ startInMs: HOUR, flightMs: DAY });
  const attached = await handle.executeUpdate(attachCreativesUpdate, {
    args: [{ creatives: [{ creative_id: 'cr_1' }], assignments: { cr_1: [packageId] }, requestedBy: 'trafficker' }],
  });
  expect(attached.outcome).toBe('applied');
  // The read after a sync sees the seller move the buy on.
  await stateWhen(handle, (state) => state.status === 'pending_start');
  const ended = await handle.result();
  expect(ended.statusHistory.map((move) => move.to)).toEqual([
    'pending_creatives',
    'pending_start',
    'active',
    'completed',
  ]);
  expect(ended.done).toBe(true);
  const buy = stack.seller.buys.get(mediaBuyId)!;
  // No reports were registered: the lifetime pull is the record (the flight's whole hours, 1,000 each).
  const lifetime = await stack.seller.pullDelivery({ sellerId: 'stand-in', mediaBuyId });
  expect(ended.reporting.reconciliation).toMatchObject({ outcome: 'reconciled', replaced: true });
  expect(ended.reporting.totals).toEqual(lifetime.pull!.totals);
  expect(ended.reporting.totals.impressions).toBeGreaterThanOrEqual(23 * 1_000);
  expect(ended.creatives.cr_1).toMatchObject({ action: 'created', status: 'approved', packageIds: [packageId] });
  expect(stack.seller.statusOf(buy, await stack.now())).toBe('completed');
});

test('a cancel is sent, the buy ends canceled and settles at once', async () => {
  const { handle, mediaBuyId } = await createdBuy({ startInMs: DAY, flightMs: 30 * DAY });
  const answer = await handle.executeUpdate(changeMediaBuyUpdate, {
    args: [{ kind: 'cancel', requestedBy: 'ops', reason: 'plan changed' }],
  });
  expect(answer).toMatchObject({ outcome: 'applied', status: 'canceled' });
  const ended = await handle.result();
  expect(ended).toMatchObject({ status: 'canceled', done: true });
  expect(ended.changes.map((change) => [change.kind, change.outcome])).toEqual([['cancel', 'applied']]);
  expect(stack.seller.updates().filter((update) => update.media_buy_id === mediaBuyId)).toEqual([
    expect.objectContaining({ canceled: true, cancellation_reason: 'plan changed' }),
  ]);
  await expect(
    handle.executeUpdate(changeMediaBuyUpdate, { args: [{ kind: 'pause', requestedBy: 'ops' }] }),
  ).rejects.toThrow();
});

test('a report delivered twice under one event key is counted once; one for another buy is refused', async () => {
  const { handle, mediaBuyId, packageId } = await createdBuy({ startInMs: -HOUR, flightMs: 30 * DAY });
  const start = Date.parse(String((await handle.query(mediaBuyStateQuery)).startTime));
  const delivery = (key: string, buy = mediaBuyId) => ({
    eventKey: key,
    receivedAt: new Date(start + 2 * HOUR).toISOString(),
    notification: {
      notificationType: 'scheduled' as const,
      sequenceNumber: 1,
      mediaBuyId: buy,
      period: {
        start: new Date(start).toISOString(),
        end: new Date(start + HOUR - 1_000).toISOString(),
        totals: { impressions: 700 },
        byPackage: { [packageId]: { impressions: 700 } },
      },
    },
  });
  await handle.signal(reportReceivedSignal, delivery('ev-1'));
  await handle.signal(reportReceivedSignal, delivery('ev-1'));
  await handle.signal(reportReceivedSignal, delivery('ev-2', 'mb_someone_else'));
  const state = await stateWhen(
    handle,
    (candidate) => candidate.reporting.reportsReceived >= 1 && candidate.anomalyCount >= 1,
  );
  expect(state.reporting).toMatchObject({ reportsReceived: 1, reportsApplied: 1, duplicates: 1 });
  expect(state.reporting.totals).toEqual({ impressions: 700 });
  expect(state.anomalies.map((anomaly) => anomaly.note)).toContain(
    `report for media buy mb_someone_else refused: this workflow follows ${mediaBuyId}`,
  );
  await handle.terminate('test over');
});

test('continue-as-new carries the buy: its state, its changes, the update IDs it answered', async () => {
  const handle = await stack.start({
    params: await stack.seller.createParams({ startInMs: DAY, flightMs: 30 * DAY }),
    historyEventLimit: 60,
  });
  const firstRunId = (await handle.describe()).runId;
  const created = await stateWhen(handle, (state) => state.status !== 'creating');
  const paused = await handle.executeUpdate(changeMediaBuyUpdate, {
    args: [{ kind: 'pause', requestedBy: 'ops' }],
    updateId: 'pause-before-the-new-run',
  });
  expect(paused.outcome).toBe('applied');
  // Each refresh is a read (an activity): history grows until the run continues as new. One refresh at a time, each
  // once the run has nothing in flight, so the count of refreshes stays small and known, and no query until it has
  // continued: the time-skipping server answered a query that met the continue-as-new only after about 90 s.
  const firstRun = stack.env.client.workflow.getHandle(handle.workflowId, firstRunId);
  const deadline = Date.now() + 60_000;
  let refreshes = 0;
  while ((await firstRun.describe()).status.name === 'RUNNING') {
    if (Date.now() > deadline) throw new Error(`the run did not continue as new after ${refreshes} refreshes`);
    if (await inFlight(firstRun)) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      continue;
    }
    expect(refreshes).toBeLessThan(10);
    refreshes += 1;
    // The run may continue as new between the look at its history and the signal; the loop then sees it has.
    await firstRun.signal(refreshMediaBuySignal, { requestedBy: 'test' }).catch((error: unknown) => {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    });
  }
  const continued = await stateWhen(handle, (state) => state.run >= 2);
  expect(continued).toMatchObject({ mediaBuyId: created.mediaBuyId, status: 'paused', changeCount: 1 });
  expect(continued.changes).toEqual([expect.objectContaining({ kind: 'pause', outcome: 'applied', sequence: 1 })]);
  const updatesBefore = stack.seller.updates().length;
  // The same update ID in the new run answers the first change; nothing more is sent.
  const repeated = await handle.executeUpdate(changeMediaBuyUpdate, {
    args: [{ kind: 'pause', requestedBy: 'ops' }],
    updateId: 'pause-before-the-new-run',
  });
  expect(repeated).toMatchObject({ sequence: 1, outcome: 'applied' });
  expect(stack.seller.updates()).toHaveLength(updatesBefore);
  // A new change continues the sequence.
  const resumed = await handle.executeUpdate(changeMediaBuyUpdate, { args: [{ kind: 'resume', requestedBy: 'ops' }] });
  expect(resumed).toMatchObject({ sequence: 2, outcome: 'applied', status: 'pending_creatives' });
  await handle.terminate('test over');
});

test('a steady stream of changes past the history limit: the run still continues as new, and each change is made once', async () => {
  const LIMIT = 60;
  const CALLERS = 3;
  const CHANGES = 24;
  const busy = await stack.start({
    params: await stack.seller.createParams({ startInMs: DAY, flightMs: 30 * DAY }),
    historyEventLimit: LIMIT,
  });
  const created = await stateWhen(busy, (state) => state.status !== 'creating');
  const pkg = Object.keys(created.packages)[0]!;
  const busyRunId = (await busy.describe()).runId;
  const updatesBefore = stack.seller.updates().length;
  // Three callers, each sending its next change as soon as the last is answered: one change is always queued, and the
  // buy used to take every one into the run it arrived at, continuing as new only once the stream stopped.
  const buys = new MediaBuyClient({ client: stack.env.client, taskQueue: stack.taskQueue, searchAttributes: false });
  let next = 0;
  const sequences: number[] = [];
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      for (let index = next++; index < CHANGES; index = next++) {
        const answer = await buys.change(busy.workflowId, {
          kind: 'budget',
          requestedBy: 'stream',
          budgets: { [pkg]: 1_000 + index },
        });
        expect(['applied', 'sent']).toContain(answer.outcome);
        sequences.push(answer.sequence);
      }
    }),
  );
  // Each change was answered once, with its own sequence, and reached the seller once.
  expect(new Set(sequences).size).toBe(CHANGES);
  expect(stack.seller.updates().length - updatesBefore).toBe(CHANGES);
  const state = await busy.query(mediaBuyStateQuery);
  expect(state.changeCount).toBe(CHANGES);
  expect(state.run).toBeGreaterThanOrEqual(2);
  // The first run continued near its limit: what it had accepted when history filled, not the whole stream.
  const { events } = await stack.env.client.workflow.getHandle(busy.workflowId, busyRunId).fetchHistory();
  expect(events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
  expect(events!.length).toBeLessThan(2 * LIMIT);
  await busy.terminate('test over');
}, 120_000);

test('a buy whose seller sends no reports is pulled once its first day is late, and each day after', async () => {
  // No reporting webhook here (no public URL), as at a seller that never sends the reports it was registered for:
  // before, nothing said when a report was due, so the buy pulled delivery only once it had ended.
  const handle = await stack.start({
    params: await stack.seller.createParams({ startInMs: HOUR, flightMs: 10 * DAY }),
    reporting: { frequency: 'daily' },
  });
  const { mediaBuyId, packages } = await stateWhen(handle, (state) => state.status !== 'creating');
  const attached = await handle.executeUpdate(attachCreativesUpdate, {
    args: [
      { creatives: [{ creative_id: 'cr_1' }], assignments: { cr_1: Object.keys(packages) }, requestedBy: 'trafficker' },
    ],
  });
  expect(attached.outcome).toBe('applied');
  await stack.env.sleep(4 * DAY);
  const state = await handle.query(mediaBuyStateQuery);
  expect(state.status).toBe('active');
  const pulls = stack.seller.calls.filter(
    (call) => call.task === 'get_media_buy_delivery' && call.params.mediaBuyId === mediaBuyId,
  );
  // The days that are over and late (a day's report is expected an hour after it ends) are missing, and pulled.
  expect(state.reporting.periodGapsDetected).toBeGreaterThanOrEqual(3);
  expect(pulls.length).toBeGreaterThanOrEqual(3);
  expect(state.reporting.pulls).toBe(pulls.length);
  expect(state.reporting.reportsReceived).toBe(0);
  await handle.terminate('test over');
}, 60_000);

test('a buy still pending its creatives is not pulled: it cannot deliver, so no report is late', async () => {
  const handle = await stack.start({
    params: await stack.seller.createParams({ startInMs: HOUR, flightMs: 10 * DAY }),
    reporting: { frequency: 'daily' },
  });
  const { mediaBuyId } = await stateWhen(handle, (state) => state.status !== 'creating');
  await stack.env.sleep(4 * DAY);
  const state = await handle.query(mediaBuyStateQuery);
  expect(state.status).toBe('pending_creatives');
  // Before: several pulls a day (this seller lists no windows, so each day was pulled and given up).
  const pulls = stack.seller.calls.filter(
    (call) => call.task === 'get_media_buy_delivery' && call.params.mediaBuyId === mediaBuyId,
  );
  expect(pulls).toEqual([]);
  expect(state.reporting.periodGapsDetected).toBe(0);
  await handle.terminate('test over');
}, 60_000);
