/**
 * A clean recovery records no conflict (issue 24, item 4): the create's answer is lost on every attempt, the seller's
 * signed webhook carried the result, and a get_media_buys read of the buy confirms it (the seller has no task read).
 * The buy record and the create's answer differ in shape (`created_at`, `currency` on the record; `confirmed_at` on
 * the answer) for the same media_buy_id: that is the resource confirming the task's result, not a second, different
 * final result.
 */
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, startResourceGateway } from '../harness/resource-gateway';

const SELLER = 'lost-answer';
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    sellers: {
      [SELLER]: {
        profile: {
          'answer-after-webhook': { answer: 'completed', loseAnswers: 1_000, lostAs: 'hang' },
          'no-tasks-get': true,
        },
      },
    },
    callTimeoutMs: 3_000,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

test("the buy read by get_media_buys confirms the webhook's result: completed, no conflict", async () => {
  const seller = gateway.sellers[SELLER];
  const operationId = await gateway.operations.start(SELLER, 'create_media_buy', createMediaBuyParams());
  const view = await gateway.operations.settled(operationId, 60_000);
  const buys = seller.mediaBuys().filter((buy) => JSON.stringify(buy.request).includes(operationId));

  expect(buys).toHaveLength(1);
  expect(view.status).toBe('completed');
  expect(view.result?.media_buy_id).toBe(buys[0].mediaBuyId);
  // The resource was read (the seller has no task read), and it is the same buy.
  expect(seller.callsTo('get_media_buys').some((call) => JSON.stringify(call.args).includes(buys[0].mediaBuyId))).toBe(
    true,
  );
  expect(view.conflicts ?? []).toEqual([]);
  expect(view.resource?.media_buy_id).toBe(buys[0].mediaBuyId);
}, 90_000);
