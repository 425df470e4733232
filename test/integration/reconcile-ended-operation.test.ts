/**
 * `POST /v1/operations/:id/reconcile` once the operation has ended. A create that failed after reading the seller's
 * media buys without finding one from it (every attempt lost in transport) is reopened: its workflow is reset to just
 * before that read, reads the buys again, and adopts a buy the seller made since (a request it processed late), so
 * the buy is known to exactly one operation and the buyer sees it. Otherwise a 409 problem with a clear code, not a
 * 5xx or a hang. A create refused after an earlier attempt that made its buy (the answer lost) does not fail: the
 * refusal does not prove nothing was made, so it reads the seller's buys and ends completed with that one. A create
 * refused at its first attempt fails at once, and its failure names the seller's reconciliation.
 */
import type { ScriptedSellerOptions } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, type View, startResourceGateway } from '../harness/resource-gateway';

const LISTING_ONLY: ScriptedSellerOptions = {
  profile: { 'no-tasks-get': true, 'buy-listing': { echo: ['context'], defaultStatusFilter: true } },
};

let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    // Each test has a seller of its own: faults another test queued and did not use never reach it, and the tests
    // run side by side (the reopen test waits out the operation's rounds of calling again, 5, 10 and 20 s).
    sellers: { completed: LISTING_ONLY, ended: LISTING_ONLY, reopen: LISTING_ONLY },
    webhooks: false,
    callTimeoutMs: 3_000,
    // Every create attempt of the reopen test fails: the breaker must not turn that into an hour of cool-offs.
    circuitBreaker: { failureThreshold: 1000 },
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

test.concurrent(
  'reconcile on a completed operation answers 409 OPERATION_ENDED as problem+json',
  async () => {
    gateway.sellers.completed.script('create_media_buy', [{ status: 'completed' }]);
    const operationId = await gateway.operations.start('completed', 'create_media_buy', createMediaBuyParams());
    expect((await gateway.operations.settled(operationId, 60_000)).status).toBe('completed');
    const response = await fetch(`${gateway.base}/v1/operations/${operationId}/reconcile`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ requested_by: 'ops@buyer' }),
    });
    expect(response.status).toBe(409);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    const problem = (await response.json()) as View;
    expect(problem).toMatchObject({ status: 409, code: 'OPERATION_ENDED' });
  },
  120_000,
);

test.concurrent(
  'a create whose retry was refused after its first attempt made the buy: it ends completed with that buy, no orphan; a create refused at its first attempt answers reconcile 409',
  async () => {
    const seller = gateway.sellers.ended;
    seller.script('create_media_buy', [{ status: 'completed' }]);
    // The first attempt makes the buy and its answer is lost; the retry is refused for good (a 400).
    seller.fault('create_media_buy', { kind: 'drop-after-processing' });
    seller.fault('create_media_buy', { kind: 'http-status', status: 400 });
    const before = seller.mediaBuys().length;
    const operationId = await gateway.operations.start('ended', 'create_media_buy', createMediaBuyParams());
    const view = await gateway.operations.settled(operationId, 60_000);
    expect(seller.mediaBuys()).toHaveLength(before + 1);
    const buy = seller.mediaBuys().at(-1)!;
    // The refusal came after an attempt that may have reached the seller: its buys were read, and this one adopted.
    expect(view.status).toBe('completed');
    expect(view.result?.media_buy_id).toBe(buy.mediaBuyId);
    const report = await gateway.http('POST', '/v1/sellers/ended/reconcile', { requested_by: 'ops@buyer' });
    expect(report.status).toBe(200);
    expect(report.body.seller_buys.orphans).not.toContainEqual(
      expect.objectContaining({ media_buy_id: buy.mediaBuyId }),
    );

    // Refused at its first attempt: nothing reached the seller before the refusal, nothing to go back to.
    seller.fault('create_media_buy', { kind: 'http-status', status: 400 });
    const refusedAtOnce = await gateway.operations.start('ended', 'create_media_buy', createMediaBuyParams());
    const failed = await gateway.operations.settled(refusedAtOnce, 60_000);
    expect(failed.status).toBe('failed');
    expect(failed.failure?.reason).toBe('call_failed');
    expect(seller.mediaBuys()).toHaveLength(before + 1);
    expect(String(failed.failure?.message)).toContain('/v1/sellers/ended/reconcile');
    const refused = await gateway.http('POST', `/v1/operations/${refusedAtOnce}/reconcile`, {
      requested_by: 'ops@buyer',
    });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('OPERATION_ENDED');
  },
  120_000,
);

test.concurrent(
  'a create that failed with nothing at the seller, whose buy the seller made later: reconcile reopens it, it adopts the buy and ends completed, known to exactly one workflow',
  async () => {
    const seller = gateway.sellers.reopen;
    seller.script('create_media_buy', [{ status: 'completed' }]);
    // Every attempt, in every round, is answered 503 before the seller acts.
    seller.chaos('create_media_buy', { rate: 1, faults: [{ kind: 'http-status', status: 503 }] });
    const operationId = await gateway.operations.start('reopen', 'create_media_buy', createMediaBuyParams());
    const failed = await gateway.operations.settled(operationId, 150_000);
    seller.chaos('create_media_buy', undefined);
    expect(failed).toMatchObject({
      status: 'failed',
      failure: { reason: 'call_failed' },
      resource: { state: 'absent' },
    });
    const attempts = seller.callsTo('create_media_buy');
    // The same call was sent again, with the same key, after the listing showed nothing bought.
    expect(new Set(attempts.map((call) => call.args.idempotency_key)).size).toBe(1);
    expect(seller.mediaBuys().filter((buy) => buy.idempotencyKey === attempts[0].args.idempotency_key)).toHaveLength(0);

    // The seller processes one of those requests late: it now holds the buy, its context naming the operation.
    seller.script('create_media_buy', [{ status: 'completed' }]);
    await gateway.callSellerTool('reopen', 'create_media_buy', attempts.at(-1)!.args);
    const buy = seller.mediaBuys().find((entry) => entry.idempotencyKey === attempts[0].args.idempotency_key);
    expect(buy).toBeDefined();

    const answer = await gateway.http('POST', `/v1/operations/${operationId}/reconcile`, { requested_by: 'ops@buyer' });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ found: true, media_buy_id: buy!.mediaBuyId, status: 'completed' });
    expect(typeof answer.body.reopened_from_run_id).toBe('string');

    // The buyer sees the operation completed with the buy.
    const view = await gateway.operations.settled(operationId, 60_000);
    expect(view.status).toBe('completed');
    expect(view.resource).toMatchObject({ media_buy_id: buy!.mediaBuyId });
    expect(view.result?.media_buy_id).toBe(buy!.mediaBuyId);

    // The seller's reconciliation finds the buy known to exactly one workflow (the two runs are one owner).
    const report = await gateway.http('POST', '/v1/sellers/reopen/reconcile', { requested_by: 'ops@buyer' });
    expect(report.status).toBe(200);
    const pass = report.body.seller_buys;
    expect(pass.orphans.map((orphan: View) => orphan.media_buy_id)).not.toContain(buy!.mediaBuyId);
    expect(pass.claimed_twice).toEqual([]);

    // Asked again, the operation has ended knowing its buy: nothing to reopen.
    const again = await gateway.http('POST', `/v1/operations/${operationId}/reconcile`, { requested_by: 'ops@buyer' });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('OPERATION_ENDED');
  },
  300_000,
);
