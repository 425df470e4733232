/**
 * Reads of the media buy itself (issue 24, items 2 and 5), with a fake SellerClient: by id, by a listing of every
 * status and page matched by what the create sent, and shaped: a read the seller refuses for a field it does not take
 * is sent again without it, once, and the refusal is reported for the workflow to keep.
 */
import { ShapingMemory, callShaped } from '../../activities/request-shaping';
import { ResourceReadRefusedForNow, readResource } from '../../activities/resource';
import type { SellerAnswer, SellerClient, TaskCallRequest } from '../../activities/seller-client';
import type { SellerConfig } from '../../config/sellers';
import { contextWithOperation, sentCreateFrom } from '../../protocol';

const agent = { id: 'seller', url: 'http://seller.test/mcp', protocol: 'mcp' } as SellerConfig;
const context = { agent, token: 't', signal: new AbortController().signal };
const at = () => '2026-12-01T10:00:00.000Z';

function fakeSeller(answer: (request: TaskCallRequest) => SellerAnswer) {
  const calls: TaskCallRequest[] = [];
  const seller: SellerClient = {
    callTask: async (request) => {
      calls.push(request);
      return answer(request);
    },
    getTask: async () => {
      throw new Error('not used');
    },
    cancelTask: async () => ({ notified: false, note: '' }),
    listTasks: async () => ({ tasks: [], supported: false }),
    describe: async () => undefined,
    readTask: async () => {
      throw new Error('not used');
    },
  };
  return { seller, calls };
}

const listing = (buys: Record<string, unknown>[], pagination?: Record<string, unknown>): SellerAnswer => ({
  snapshot: { status: 'completed', result: { media_buys: buys, ...(pagination ? { pagination } : {}) } },
  callError: false,
});
const refusal = (code: string, message: string, field?: string): SellerAnswer => ({
  snapshot: {
    status: 'failed',
    message,
    errors: [
      { code, message, recovery: code === 'RATE_LIMITED' ? 'transient' : 'correctable', ...(field ? { field } : {}) },
    ],
  },
  callError: true,
});

const operationId = 'op-1';
const sent = sentCreateFrom(
  {
    idempotency_key: 'k',
    context: contextWithOperation(undefined, operationId),
    packages: [{ product_id: 'p1', budget: 1234 }],
  },
  operationId,
);

test('by id: the buy row is the outcome, matched by its media_buy_id', async () => {
  const fake = fakeSeller(() => listing([{ media_buy_id: 'mb_1', status: 'active' }]));
  const outcome = await readResource(fake.seller, context, { mediaBuyId: 'mb_1', account: { account_id: 'a' } }, at);
  expect(outcome).toMatchObject({ found: true, mediaBuyId: 'mb_1', matchedBy: 'media_buy_id', shaping: [] });
  expect(fake.calls[0].args).toEqual({ media_buy_ids: ['mb_1'], account: { account_id: 'a' } });
});

test('by id: a buy the answer does not hold is absent for certain', async () => {
  const fake = fakeSeller(() => listing([]));
  expect(await readResource(fake.seller, context, { mediaBuyId: 'mb_1' }, at)).toMatchObject({
    found: false,
    absent: true,
  });
});

test('by listing: every status, every page, matched by the echoed context', async () => {
  const fake = fakeSeller((request) =>
    (request.args.pagination as { cursor?: string }).cursor === 'page-2'
      ? listing([{ media_buy_id: 'mb_mine', context: contextWithOperation(undefined, operationId) }])
      : listing([{ media_buy_id: 'mb_other' }], { has_more: true, cursor: 'page-2' }),
  );
  const outcome = await readResource(fake.seller, context, { sent }, at);
  expect(outcome).toMatchObject({ found: true, mediaBuyId: 'mb_mine', matchedBy: 'context' });
  expect(fake.calls).toHaveLength(2);
  expect(fake.calls[0].args.status_filter).toEqual([
    'pending_creatives',
    'pending_start',
    'active',
    'paused',
    'completed',
    'rejected',
    'canceled',
  ]);
});

test('by listing: pages left unread make "not found" uncertain', async () => {
  const fake = fakeSeller(() => listing([], { has_more: true, cursor: 'more' }));
  const outcome = await readResource(fake.seller, context, { sent, maxPages: 2 }, at);
  expect(outcome).toMatchObject({ found: false, absent: false });
  expect(outcome.note).toContain('only the first 2 pages');
});

test('a read refused for a field the seller does not take is sent again without it, and the refusal reported', async () => {
  const fake = fakeSeller((request) =>
    request.args.account !== undefined
      ? refusal('UNSUPPORTED_FEATURE', 'Omit account', 'account')
      : listing([{ media_buy_id: 'mb_1', status: 'canceled' }]),
  );
  const outcome = await readResource(fake.seller, context, { mediaBuyId: 'mb_1', account: { account_id: 'a' } }, at);
  expect(outcome).toMatchObject({ found: true, row: { status: 'canceled' } });
  expect(outcome.shaping).toEqual([
    { tool: 'get_media_buys', omitted: 'account', because: 'UNSUPPORTED_FEATURE: Omit account', at: at() },
  ]);
  expect(fake.calls.map((call) => call.args.account)).toEqual([{ account_id: 'a' }, undefined]);
});

test('a refusal that names no droppable field is unreadable, and a "not now" is thrown for a retry', async () => {
  const denied = fakeSeller(() => refusal('PERMISSION_DENIED', 'no'));
  expect(await readResource(denied.seller, context, { mediaBuyId: 'mb_1' }, at)).toMatchObject({
    found: false,
    unreadable: { code: 'PERMISSION_DENIED' },
  });
  const busy = fakeSeller(() => refusal('RATE_LIMITED', 'slow down'));
  await expect(readResource(busy.seller, context, { mediaBuyId: 'mb_1' }, at)).rejects.toBeInstanceOf(
    ResourceReadRefusedForNow,
  );
});

test('what the workflow recorded is left out without a refused round trip; what the process learned is reported once', async () => {
  const fake = fakeSeller((request) =>
    request.args.account !== undefined ? refusal('UNSUPPORTED_FEATURE', 'Omit account', 'account') : listing([]),
  );
  const memory = new ShapingMemory();
  const call = { tool: 'get_media_buys', args: { media_buy_ids: ['x'], account: { account_id: 'a' } }, at };
  const recorded = await callShaped(fake.seller, context, { ...call, shaping: { get_media_buys: ['account'] } });
  expect(recorded.shaping).toEqual([]);
  expect(fake.calls).toHaveLength(1);

  const first = await callShaped(fake.seller, context, call, memory);
  expect(first.shaping.map((record) => record.omitted)).toEqual(['account']);
  expect(fake.calls).toHaveLength(3); // refused, then without the field
  // Another workflow on this worker: no refused round trip, and told what was left out so it records it too.
  const second = await callShaped(fake.seller, context, call, memory);
  expect(fake.calls).toHaveLength(4);
  expect(second.shaping.map((record) => record.omitted)).toEqual(['account']);
  expect(second.sent).toEqual({ media_buy_ids: ['x'] });
});
