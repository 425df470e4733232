/**
 * Request shaping (issue 24, item 5): the field a seller's error names as unsupported, when it is an optional field
 * of a read that the request carried; never an id, never a mutation's field, never a refusal that names no field.
 */
import { type AdcpError, refusedField, shapeRequest, withShaping } from '../../protocol';

const refusal = (extra: Partial<AdcpError> = {}): AdcpError => ({
  code: 'UNSUPPORTED_FEATURE',
  message: 'Omit account',
  recovery: 'correctable',
  ...extra,
});
const read = { media_buy_ids: ['mb_1'], account: { account_id: 'a' } };

test("the error's field names a droppable field the read carried", () => {
  expect(refusedField(refusal({ field: 'account' }), 'get_media_buys', read)).toEqual({
    field: 'account',
    because: 'UNSUPPORTED_FEATURE: Omit account',
  });
});

test('without a field, the message names it ("Omit account", "account is not supported")', () => {
  expect(refusedField(refusal(), 'get_media_buys', read)?.field).toBe('account');
  expect(
    refusedField(refusal({ code: 'INVALID_REQUEST', message: 'account is not supported here' }), 'get_media_buys', read)
      ?.field,
  ).toBe('account');
});

test('never an id, never a field the request did not carry, never another kind of error', () => {
  expect(refusedField(refusal({ field: 'media_buy_ids', message: 'Omit media_buy_ids' }), 'get_media_buys', read)).toBe(
    undefined,
  );
  expect(refusedField(refusal({ field: 'account' }), 'get_media_buys', { media_buy_ids: ['mb_1'] })).toBeUndefined();
  expect(
    refusedField({ code: 'ACCOUNT_NOT_FOUND', message: 'Omit account', recovery: 'terminal' }, 'get_media_buys', read),
  ).toBeUndefined();
});

test("never a mutation's field", () => {
  expect(
    refusedField(refusal({ field: 'account' }), 'create_media_buy', { account: { account_id: 'a' }, packages: [] }),
  ).toBeUndefined();
});

test('a shaped request leaves out what was learned, and only droppable fields', () => {
  const shaping = withShaping(undefined, [
    { tool: 'get_media_buys', omitted: 'account', because: 'x', at: '2026-12-01T00:00:00.000Z' },
    { tool: 'get_media_buys', omitted: 'account', because: 'again', at: '2026-12-01T00:00:01.000Z' },
    { tool: 'get_media_buys', omitted: 'media_buy_ids', because: 'never', at: '2026-12-01T00:00:01.000Z' },
  ]);
  expect(shaping).toEqual({ get_media_buys: ['account', 'media_buy_ids'] });
  expect(shapeRequest('get_media_buys', read, shaping)).toEqual({ media_buy_ids: ['mb_1'] });
  expect(shapeRequest('get_media_buy_delivery', read, shaping)).toBe(read);
});
