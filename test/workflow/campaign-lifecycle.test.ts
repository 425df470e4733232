/**
 * The campaign workflow's wiring on the time-skipping server, with stand-ins for its children and activities
 * (stand-ins/campaign-env.ts): the phases from brief to end, the budget guard in the Update's validator, changes fanned
 * out with update IDs from the change's sequence, the library synced to every buy, a cancel at the approval gate that
 * buys nothing, and continue-as-new carrying the campaign while time passes.
 */
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import {
  approveCampaignUpdate,
  campaignStateQuery,
  campaignWorkflowId,
  changeCampaignUpdate,
  selectProductsUpdate,
  setCampaignCreativesUpdate,
  type CampaignInput,
  type CampaignState,
} from '../../contract/campaign';
import type { MediaBuyState } from '../../contract/media-buy';
import { standInBuyEndedSignal } from './stand-ins/campaign-workflows';
import { type StandInEnv, campaignInputOf, discoveryFor, startStandInEnv, waiting } from './stand-ins/campaign-env';

const HOUR = 3_600_000;
let harness: StandInEnv;
const until = <T>(probe: () => Promise<T | undefined>) => waiting(harness).until(probe);
const answered = <T>(work: Promise<T>) => waiting(harness).answered(work);

// A server per test: each test's clock and time-skipping lock are its own.
beforeEach(async () => {
  harness = await startStandInEnv();
  harness.discovery = (input) => discoveryFor(input);
}, 120_000);

afterEach(async () => {
  await harness?.close();
});

async function start(input: CampaignInput) {
  return harness.env.client.workflow.start('adcpCampaign', {
    workflowId: campaignWorkflowId(input.campaignKey),
    taskQueue: harness.taskQueue,
    args: [input],
  });
}

type Handle = Awaited<ReturnType<typeof start>>;

async function phase(handle: Handle, wanted: CampaignState['phase']): Promise<CampaignState> {
  return until(async () => {
    const state = await handle.query(campaignStateQuery);
    return state.phase === wanted ? state : undefined;
  });
}

function ended(status: string): MediaBuyState {
  return { status, done: true, packages: {}, creatives: {}, reporting: { totals: {} } } as unknown as MediaBuyState;
}

async function toLive(input: CampaignInput): Promise<Handle> {
  const handle = await start(input);
  await phase(handle, 'selecting');
  await answered(
    handle.executeUpdate(selectProductsUpdate, {
      args: [
        {
          selectedBy: 'planner@buyer',
          lines: input.sellerIds.map((sellerId) => ({ sellerId, productId: `${sellerId}_display`, budget: 4_000 })),
        },
      ],
    }),
  );
  await answered(handle.executeUpdate(approveCampaignUpdate, { args: [{ approvedBy: 'cfo@buyer' }] }));
  await phase(handle, 'live');
  return handle;
}

test('brief to end: selection, approval, one buy per seller, the guard, fan-out, library, every buy ended', async () => {
  const input = campaignInputOf({ sellerIds: ['a', 'b'] });
  const handle = await toLive(input);
  const live = await handle.query(campaignStateQuery);
  expect(Object.keys(live.buys).sort()).toEqual(['a', 'b']);
  // One buy per seller, under a key from the campaign and the seller, with the line's budget.
  for (const sellerId of ['a', 'b']) {
    const buy = await until(async () => harness.ledger.bySeller(sellerId));
    expect(buy.input.buyKey).toBe(`${input.campaignKey}.${sellerId}`);
    expect(buy.input.requestedBy).toBe('cfo@buyer');
    expect(buy.budget).toBe(4_000);
  }

  // The guard refuses a raise past the campaign budget before it enters history; one within it is applied.
  await expect(
    answered(
      handle.executeUpdate(changeCampaignUpdate, {
        args: [{ kind: 'budget', sellerId: 'a', budget: 6_500, requestedBy: 'ops@buyer' }],
      }),
    ),
  ).rejects.toThrow(WorkflowUpdateFailedError);
  const raised = await answered(
    handle.executeUpdate(changeCampaignUpdate, {
      args: [{ kind: 'budget', sellerId: 'a', budget: 5_500, requestedBy: 'ops@buyer' }],
    }),
  );
  expect(raised).toMatchObject({ outcome: 'applied', committedBudget: 9_500 });
  expect(harness.ledger.bySeller('a')!.changes).toEqual([
    { updateId: `${input.campaignKey}.change-1.a`, kind: 'budget', budget: 5_500, outcome: 'applied' },
  ]);

  // A pause goes to every buy, and the campaign is paused once one took it.
  const paused = await answered(
    handle.executeUpdate(changeCampaignUpdate, { args: [{ kind: 'pause', requestedBy: 'ops' }] }),
  );
  expect(paused).toMatchObject({ sequence: 2, outcome: 'applied' });
  expect((await handle.query(campaignStateQuery)).phase).toBe('paused');
  expect(harness.ledger.bySeller('b')!.changes.map((change) => change.updateId)).toEqual([
    `${input.campaignKey}.change-2.b`,
  ]);

  // The library reaches every buy on the next poll.
  await answered(
    handle.executeUpdate(setCampaignCreativesUpdate, {
      args: [{ creatives: [{ creative_id: 'cr_1', format_id: { id: 'display_300x250' } }], requestedBy: 'ops' }],
    }),
  );
  const synced = await until(async () => {
    const state = await handle.query(campaignStateQuery);
    return Object.values(state.buys).every((buy) => buy.creativeSync?.outcome === 'applied') ? state : undefined;
  });
  expect(synced.buys.a.coverage).toEqual({
    required: ['display_300x250'],
    covered: ['display_300x250'],
    missing: [],
  });

  // Every buy ends: the campaign ends with them.
  for (const sellerId of ['a', 'b'])
    await harness.env.client.workflow
      .getHandle(harness.ledger.bySeller(sellerId)!.workflowId)
      .signal(standInBuyEndedSignal, ended('completed'));
  const final = (await handle.result()) as CampaignState;
  expect(final.phase).toBe('ended');
  expect(Object.values(final.buys).map((buy) => buy.finalStatus)).toEqual(['completed', 'completed']);
  expect(final.changes.map((change) => [change.sequence, change.kind, change.outcome])).toEqual([
    [1, 'budget', 'applied'],
    [2, 'pause', 'applied'],
  ]);

  // Every read, change and sync of a buy was scheduled with a heartbeat timeout of at most 5 s: an attempt lost with
  // its worker is retried within it (docs/deployment.md), not at the end of its start-to-close timeout.
  const scheduled = ((await handle.fetchHistory()).events ?? []).flatMap((event) => {
    const attributes = event.activityTaskScheduledEventAttributes;
    return attributes
      ? [{ activity: attributes.activityType?.name, heartbeatMs: optionalTsToMs(attributes.heartbeatTimeout) }]
      : [];
  });
  expect(new Set(scheduled.map((entry) => entry.activity))).toEqual(
    new Set(['readCampaignBuys', 'changeCampaignBuy', 'syncCampaignCreatives']),
  );
  for (const entry of scheduled) expect(entry).toEqual({ activity: entry.activity, heartbeatMs: 5_000 });
});

test('a cancel at the approval gate buys nothing and ends the campaign canceled', async () => {
  const input = campaignInputOf({ sellerIds: ['c'] });
  const handle = await start(input);
  await phase(handle, 'selecting');
  const answer = await answered(
    handle.executeUpdate(changeCampaignUpdate, {
      args: [{ kind: 'cancel', requestedBy: 'ops@buyer', reason: 'brief withdrawn' }],
    }),
  );
  expect(answer).toMatchObject({ outcome: 'applied', committedBudget: 0 });
  const final = (await handle.result()) as CampaignState;
  expect(final.phase).toBe('canceled');
  expect(final.buys).toEqual({});
  expect(harness.ledger.bySeller('c')).toBeUndefined();
});

test('a rejected buy releases its budget, and a buy the seller rejected raises an alert', async () => {
  const input = campaignInputOf({ sellerIds: ['d', 'e'] });
  const handle = await toLive(input);
  await until(async () => harness.ledger.bySeller('e'));
  await harness.env.client.workflow
    .getHandle(harness.ledger.bySeller('e')!.workflowId)
    .signal(standInBuyEndedSignal, ended('rejected'));
  const state = await until(async () => {
    const current = await handle.query(campaignStateQuery);
    return current.buys.e.finalStatus === 'rejected' ? current : undefined;
  });
  expect(state.committedBudget).toBe(4_000);
  // Pacing alerts depend on how much time the server skipped while the test waited (more on a loaded machine): only
  // the rejection's own alert is this test's subject.
  const notPacing = state.alerts.filter((alert) => alert.kind !== 'under_delivery');
  expect(notPacing).toEqual([expect.objectContaining({ kind: 'buy_rejected', sellerId: 'e' })]);
  await answered(handle.executeUpdate(changeCampaignUpdate, { args: [{ kind: 'cancel', requestedBy: 'ops' }] }));
  expect(harness.ledger.bySeller('d')!.changes.map((change) => change.kind)).toEqual(['cancel']);
  // The canceled buy's own workflow ends too (a stand-in left waiting would let the server skip to its run timeout).
  await harness.env.client.workflow
    .getHandle(harness.ledger.bySeller('d')!.workflowId)
    .signal(standInBuyEndedSignal, ended('canceled'));
  expect(((await handle.result()) as CampaignState).phase).toBe('canceled');
});

test('continue-as-new while time passes: the next run carries the state and the change sequence, and follows the buys', async () => {
  const input = campaignInputOf({
    sellerIds: ['f'],
    historyEventLimit: 150,
    monitoring: { intervalMs: HOUR, underDeliveryGraceMs: 0 },
  });
  const handle = await toLive(input);
  await answered(handle.executeUpdate(changeCampaignUpdate, { args: [{ kind: 'pause', requestedBy: 'ops' }] }));
  const buy = await until(async () => harness.ledger.bySeller('f'));
  buy.spend = 1_234;
  // Two days of polls: the history passes the limit, the campaign continues as new (and polls on at its cadence).
  await harness.env.sleep(2 * 24 * HOUR);
  const continued = await until(async () => {
    const state = await handle.query(campaignStateQuery);
    return (state.run ?? 1) >= 2 ? state : undefined;
  });
  expect(continued.phase).toBe('paused');
  expect(continued.buys.f.delivery?.spend).toBe(1_234);
  // The cadence goes on across runs: about one poll an hour, not a fresh ramp from two seconds at every run.
  expect(continued.monitoring!.polls).toBeGreaterThan(20);
  expect(continued.monitoring!.polls).toBeLessThan(100);
  const resumed = await answered(
    handle.executeUpdate(changeCampaignUpdate, { args: [{ kind: 'resume', requestedBy: 'ops' }] }),
  );
  expect(resumed.sequence).toBe(2);
  // The continued run has no child handle: the buy's settled digest ends it for the campaign.
  buy.status = 'completed';
  await harness.env.sleep(2 * HOUR);
  const final = (await harness.env.client.workflow.getHandle(handle.workflowId).result()) as CampaignState;
  expect(final.phase).toBe('ended');
  expect(final.buys.f.finalStatus).toBe('completed');
});
