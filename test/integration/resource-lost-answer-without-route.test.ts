/**
 * A lost create answer with no other route (issue 24, item 2): no webhooks (no public base URL), a seller without any
 * task read or listing, and the create's answer lost on every attempt after the seller made the buy. The operation
 * must not end `failed` while the seller holds the buy: it reads the resource, get_media_buys, and matches the
 * listing by what it sent: the context the seller echoes (3.1 requires it on read surfaces), the po_number, and
 * only as a last resort packages + budget + flight, saying which in `resource.matched_by`. When the listing cannot be
 * read either, the operation says it cannot know yet (not a failure) and `POST /v1/operations/:id/reconcile`, the
 * route its message names, reads the listing and adopts the buy. A seller that made the buy, lost the answer, and then
 * refuses the same create as a duplicate has not shown that nothing was made: the buy is looked for there too.
 */
import { randomUUID } from 'node:crypto';
import type { ScriptedSellerOptions } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, startResourceGateway } from '../harness/resource-gateway';

/** No task read, no task listing; get_media_buys rows echo what `echo` names. */
const noRoute = (echo: Array<'context' | 'po_number'>): ScriptedSellerOptions => ({
  profile: { 'no-tasks-get': true, 'buy-listing': { echo, defaultStatusFilter: true } },
});

let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    sellers: {
      'echo-context': noRoute(['context']),
      'echo-po': noRoute(['po_number']),
      'echo-none': noRoute([]),
      'listing-down': noRoute(['context']),
      'refuses-duplicate': noRoute(['po_number']),
    },
    webhooks: false,
    callTimeoutMs: 3_000,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

/** The seller makes the buy at once and every answer to the create (retries and replays included) is lost. */
function loseEveryCreateAnswer(sellerId: string): void {
  const seller = gateway.sellers[sellerId];
  seller.script('create_media_buy', [{ status: 'completed' }]);
  seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 50 });
}

// Each test has a seller of its own, so they run side by side: the packages_budget_flight one waits out the operation's
// rounds of calling again (5, 10 and 20 s, workflows/operation/machine.ts) before it adopts on shape alone, and the
// others need not wait behind it.
test.concurrent.each([
  { sellerId: 'echo-context', matchedBy: 'context', extra: {} },
  { sellerId: 'echo-po', matchedBy: 'po_number', extra: { po_number: `PO-${randomUUID().slice(0, 8)}` } },
  { sellerId: 'echo-none', matchedBy: 'packages_budget_flight', extra: {} },
])(
  'the listing echoes $matchedBy: the operation ends completed with the buy the seller holds, matched_by saying how it was found',
  async ({ sellerId, matchedBy, extra }) => {
    loseEveryCreateAnswer(sellerId);
    const seller = gateway.sellers[sellerId];
    const operationId = await gateway.operations.start(sellerId, 'create_media_buy', {
      ...createMediaBuyParams(),
      ...extra,
    });
    const view = await gateway.operations.settled(operationId, 60_000);
    const buys = seller.mediaBuys();

    expect(buys).toHaveLength(1);
    expect(view.status).toBe('completed');
    expect(view.result?.media_buy_id).toBe(buys[0].mediaBuyId);
    expect(view.resource).toMatchObject({ media_buy_id: buys[0].mediaBuyId, matched_by: matchedBy });
    // Nothing was bought twice: every create the seller saw carried the one key.
    const keys = new Set(seller.callsTo('create_media_buy').map((call) => call.args.idempotency_key));
    expect(keys.size).toBe(1);
  },
  90_000,
);

test.concurrent(
  'when the listing cannot be read either: "cannot know yet", not failed, and POST /v1/operations/:id/reconcile adopts the buy',
  async () => {
    const sellerId = 'listing-down';
    const seller = gateway.sellers[sellerId];
    loseEveryCreateAnswer(sellerId);
    seller.chaos('get_media_buys', { rate: 1, faults: [{ kind: 'http-status', status: 503 }] });
    const operationId = await gateway.operations.start(sellerId, 'create_media_buy', createMediaBuyParams());

    // The calls are over (every attempt lost); the operation has either ended or says it cannot know.
    const waiting = await gateway.operations.waitFor(
      operationId,
      (view) => view.running === false || (view.status === 'unknown' && !view.call_in_flight),
      60_000,
    );
    expect(waiting.status).toBe('unknown');
    expect(waiting.running).toBe(true);
    expect(waiting.failure).toBeNull();
    expect(String(waiting.message)).toContain(`/v1/operations/${operationId}/reconcile`);

    seller.chaos('get_media_buys', undefined);
    const reconciled = await gateway.http('POST', `/v1/operations/${operationId}/reconcile`, {
      requested_by: 'ops@buyer',
    });
    expect(reconciled.status).toBe(200);
    const [buy] = seller.mediaBuys();
    expect(reconciled.body).toMatchObject({ media_buy_id: buy.mediaBuyId, matched_by: 'context' });

    const view = await gateway.operations.settled(operationId, 30_000);
    expect(view.status).toBe('completed');
    expect(view.result?.media_buy_id).toBe(buy.mediaBuyId);
    expect(seller.mediaBuys()).toHaveLength(1);
  },
  120_000,
);

test.concurrent(
  'refused as a duplicate after an attempt whose answer was lost: the buy that attempt made is adopted, not failed',
  async () => {
    const sellerId = 'refuses-duplicate';
    const seller = gateway.sellers[sellerId];
    const poNumber = `PO-${randomUUID().slice(0, 8)}`;
    seller.script('create_media_buy', [{ status: 'completed' }]);
    // The first attempt makes the buy and its answer is lost; the second is refused as a duplicate order.
    seller.fault('create_media_buy', { kind: 'drop-after-processing' });
    seller.fault('create_media_buy', {
      kind: 'adcp-error',
      error: {
        code: 'CONFLICT',
        message: `a media buy with po_number ${poNumber} already exists`,
        recovery: 'correctable',
      },
    });
    const operationId = await gateway.operations.start(sellerId, 'create_media_buy', {
      ...createMediaBuyParams(),
      po_number: poNumber,
    });
    const view = await gateway.operations.settled(operationId, 60_000);
    const buys = seller.mediaBuys();

    expect(buys).toHaveLength(1);
    // The first was processed and its answer dropped; the second was refused.
    const calls = seller.callsTo('create_media_buy');
    expect(calls.map((call) => [call.outcome, call.connectionDropped === true])).toEqual([
      ['scripted', true],
      ['fault', false],
    ]);
    expect(view.status).toBe('completed');
    expect(view.result?.media_buy_id).toBe(buys[0].mediaBuyId);
    expect(view.resource).toMatchObject({ media_buy_id: buys[0].mediaBuyId, matched_by: 'po_number' });
  },
  90_000,
);
