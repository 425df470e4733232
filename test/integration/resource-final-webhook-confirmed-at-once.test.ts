/**
 * A verified final webhook before the call's answer (issue 24, item 3): the seller acts at once, its signed
 * `completed` arrives about 50 ms after the request, and the call's answer is lost (the connection is held, never
 * answered). The webhook names a task the operation has not bound yet (3.0: no operation_id), so it is held; a read
 * of that task (or of the buy it names) beside the call in flight confirms it at once, the operation ends, and the
 * call is given up: it never waits out the call's timeout, let alone its retries.
 *
 * The call timeout here is 20 s (three attempts: a minute), so an operation that waits for the call cannot end within
 * the bound the test reads for.
 */
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, startResourceGateway } from '../harness/resource-gateway';

const SELLER = 'webhook-first';
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    sellers: {
      [SELLER]: {
        profile: {
          'answer-after-webhook': {
            answer: 'completed',
            delayMs: { min: 50, max: 50 },
            loseAnswers: 1_000,
            lostAs: 'hang',
          },
        },
      },
    },
    callTimeoutMs: 20_000,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

test('the operation ends on the confirmed webhook while the first call attempt is still unanswered', async () => {
  const seller = gateway.sellers[SELLER];
  const operationId = await gateway.operations.start(SELLER, 'create_media_buy', createMediaBuyParams());
  const url = gateway.webhookUrl(SELLER, operationId);
  const mine = () =>
    seller
      .callsTo('create_media_buy')
      .filter((call) => JSON.stringify(call.args.push_notification_config ?? {}).includes(operationId));

  const view = await gateway.operations.settled(operationId, 30_000);
  const buys = seller.mediaBuys().filter((buy) => JSON.stringify(buy.request).includes(operationId));

  expect(seller.webhookDeliveries.find((delivery) => delivery.url === url)?.finalStatus).toBe(200);
  expect(view.status).toBe('completed');
  expect(view.result?.media_buy_id).toBe(buys[0]?.mediaBuyId);
  expect(buys).toHaveLength(1);
  // The call was given up after its first attempt: no attempt after a 20 s timeout was ever made.
  expect(mine()).toHaveLength(1);
}, 90_000);
