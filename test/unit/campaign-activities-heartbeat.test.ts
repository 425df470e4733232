/**
 * A campaign's activities wait on its buys' workflows (queries, Updates that wait for the buy's operation). Each
 * heartbeats while such a call is in flight: under the campaign workflow's 5 s heartbeat timeout, an attempt lost with
 * its worker is retried within seconds instead of at the end of its start-to-close timeout (30 s; 5 min for a library
 * sync), as docs/deployment.md promises. A fake Temporal client holds every call until the activity has heartbeated,
 * or gives up after longer than the heartbeat interval; Temporal's MockActivityEnvironment counts the heartbeats.
 */
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createCampaignActivities } from '../../activities/campaign';
import { createCampaignAllocationActivities } from '../../activities/campaign-allocation';
import { HEARTBEAT_EVERY_MS } from '../../activities/heartbeat';
import type { MediaBuyState } from '../../contract/media-buy';

const buyState = {
  status: 'active',
  mediaBuyId: 'mb_1',
  done: false,
  packages: { pkg_1: { packageId: 'pkg_1', budget: 1_000, creativeIds: [] } },
  creatives: {},
  reporting: { totals: {} },
} as unknown as MediaBuyState;

/** One call the activity made to a buy's workflow, and whether the activity heartbeated while it was in flight. */
interface HeldCall {
  call: string;
  heartbeatWhileInFlight: boolean;
}

/** A client whose every query and Update answers once the activity heartbeats, or after two heartbeat intervals. */
function heldClient(environment: MockActivityEnvironment, calls: HeldCall[]): Client {
  const held = async <T>(call: string, answer: () => T): Promise<T> => {
    const heartbeatWhileInFlight = await new Promise<boolean>((resolve) => {
      const onHeartbeat = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        environment.off('heartbeat', onHeartbeat);
        resolve(false);
      }, 2 * HEARTBEAT_EVERY_MS);
      environment.once('heartbeat', onHeartbeat);
    });
    calls.push({ call, heartbeatWhileInFlight });
    return answer();
  };
  const handle = (workflowId: string) => ({
    query: (query: { name: string }) =>
      held(`query ${query.name} ${workflowId}`, () => {
        if (query.name === 'mediaBuyState') return buyState;
        throw new Error(`no ${query.name} here`);
      }),
    executeUpdate: (update: { name: string }) =>
      held(`update ${update.name} ${workflowId}`, () => ({ outcome: 'applied', status: 'active' })),
  });
  return { workflow: { getHandle: handle } } as unknown as Client;
}

/** Runs one activity against the held client; returns the calls it made. */
async function callsOf(
  activity: (client: Client) => (input: never) => Promise<unknown>,
  input: unknown,
): Promise<HeldCall[]> {
  const environment = new MockActivityEnvironment();
  const calls: HeldCall[] = [];
  await environment.run(activity(heldClient(environment, calls)), input as never);
  return calls;
}

test('every campaign activity heartbeats while its call to a buy is in flight', async () => {
  const campaign = (client: Client) => createCampaignActivities({ client });
  const [reads, sync, change, governance] = await Promise.all([
    callsOf((client) => campaign(client).readCampaignBuys, { buys: [{ sellerId: 'a', workflowId: 'buy-a' }] }),
    callsOf((client) => campaign(client).syncCampaignCreatives, {
      workflowId: 'buy-a',
      creatives: [{ creative_id: 'cr_1' }],
      assignments: { cr_1: ['pkg_1'] },
      requestedBy: 'campaign:k',
      updateId: 'k.library-1.a',
    }),
    callsOf((client) => campaign(client).changeCampaignBuy, {
      workflowId: 'buy-a',
      kind: 'pause',
      requestedBy: 'ops@buyer',
      updateId: 'k.change-1.a',
    }),
    callsOf((client) => createCampaignAllocationActivities({ client }).readBuyGovernance, { workflowId: 'buy-a' }),
  ]);
  expect(reads.map((entry) => entry.call)).toEqual(
    expect.arrayContaining(['query mediaBuyState buy-a', expect.stringMatching(/^query sellerCapabilities /)]),
  );
  expect(sync.map((entry) => entry.call)).toEqual(['update attachCreatives buy-a']);
  // The fan-out's change: the read of the buy's state as well as the Update.
  expect(change.map((entry) => entry.call)).toEqual(['query mediaBuyState buy-a', 'update changeMediaBuy buy-a']);
  expect(governance.map((entry) => entry.call)).toEqual(['query mediaBuyState buy-a']);
  for (const entry of [...reads, ...sync, ...change, ...governance])
    expect(entry).toEqual({ call: entry.call, heartbeatWhileInFlight: true });
});
