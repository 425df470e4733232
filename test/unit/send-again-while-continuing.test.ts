/**
 * A media buy whose history is full refuses new changes and attachments for now (SERVICE_UNAVAILABLE) until it has
 * continued as new (workflows/media-buy/machine.ts). Its callers send the same request again: the typed client and
 * the campaign's activities through contract/media-buy.ts's sendAgainWhileContinuing, the activities then through
 * their retry policy.
 */
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createCampaignActivities } from '../../activities/campaign';
import { type MediaBuyState, sendAgainWhileContinuing } from '../../contract/media-buy';

const continuing = (error: unknown) => error instanceof Error && error.message === 'later';

test('sends again while refused for now, and stops at the first other answer', async () => {
  let calls = 0;
  const answered = await sendAgainWhileContinuing(continuing, async () => {
    calls += 1;
    if (calls < 3) throw new Error('later');
    return 'taken';
  });
  expect({ answered, calls }).toEqual({ answered: 'taken', calls: 3 });

  calls = 0;
  await expect(
    sendAgainWhileContinuing(continuing, async () => {
      calls += 1;
      throw new Error('INVALID_STATE');
    }),
  ).rejects.toThrow('INVALID_STATE');
  expect(calls).toBe(1);
});

test('past its limit the refusal reaches the caller', async () => {
  let calls = 0;
  await expect(
    sendAgainWhileContinuing(
      continuing,
      async () => {
        calls += 1;
        throw new Error('later');
      },
      500,
    ),
  ).rejects.toThrow('later');
  // 100, 200 ms between sends, then the next wait (400 ms) would pass the limit.
  expect(calls).toBe(3);
});

const buyState = {
  status: 'active',
  mediaBuyId: 'mb_1',
  done: false,
  packages: { pkg_1: { packageId: 'pkg_1', budget: 1_000, creativeIds: [] } },
  creatives: {},
  reporting: { totals: {} },
} as unknown as MediaBuyState;

/** A buy whose first `refusals` Updates are refused for now, as a buy continuing as new refuses them. */
function continuingBuy(refusals: number) {
  const updateIds: string[] = [];
  const client = {
    workflow: {
      getHandle: () => ({
        query: async () => buyState,
        executeUpdate: async (_update: unknown, options: { updateId: string }) => {
          updateIds.push(options.updateId);
          if (updateIds.length <= refusals)
            throw new WorkflowUpdateFailedError(
              'Workflow Update failed',
              new Error('SERVICE_UNAVAILABLE: The media buy is starting its next run (continue-as-new)'),
            );
          return { sequence: 7, outcome: 'applied', status: 'paused' };
        },
      }),
    },
  } as unknown as Client;
  return { client, updateIds };
}

test("a campaign's change refused for now is sent again with the same update ID, and answered as made", async () => {
  const { client, updateIds } = continuingBuy(2);
  const outcome = await new MockActivityEnvironment().run(createCampaignActivities({ client }).changeCampaignBuy, {
    workflowId: 'buy-a',
    kind: 'pause' as const,
    requestedBy: 'ops@buyer',
    updateId: 'k.change-1.a',
  });
  expect(outcome).toMatchObject({ outcome: 'applied', status: 'paused' });
  expect(updateIds).toEqual(['k.change-1.a', 'k.change-1.a', 'k.change-1.a']);
});

test("a campaign's library sync refused for now is sent again too, not reported refused", async () => {
  const { client, updateIds } = continuingBuy(1);
  const outcome = await new MockActivityEnvironment().run(createCampaignActivities({ client }).syncCampaignCreatives, {
    workflowId: 'buy-a',
    creatives: [{ creative_id: 'cr_1' }],
    assignments: { cr_1: ['pkg_1'] },
    requestedBy: 'campaign:k',
    updateId: 'k.library-1.a',
  });
  expect(outcome).toMatchObject({ outcome: 'applied' });
  expect(updateIds).toHaveLength(2);
});

test('still refused when the sends run out: the attempt fails for the retry policy, never "refused"', async () => {
  const { client } = continuingBuy(Number.MAX_SAFE_INTEGER);
  const failure = await new MockActivityEnvironment()
    .run(createCampaignActivities({ client, sendAgainForMs: 300 }).changeCampaignBuy, {
      workflowId: 'buy-a',
      kind: 'pause' as const,
      requestedBy: 'ops@buyer',
      updateId: 'k.change-1.a',
    })
    .catch((error: unknown) => error);
  expect(failure).toBeInstanceOf(ApplicationFailure);
  expect(failure).toMatchObject({ type: 'BuyContinuing', nonRetryable: false });
});
