/**
 * A failure that ends a call after earlier attempts says how many came before it (`earlierAttempts` on the error),
 * so the operation knows a refusal at the last attempt does not prove that nothing reached the seller.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { afterEarlierAttempts } from '../../activities/seller-call';
import type { AdcpError } from '../../protocol';

const refusal: AdcpError = {
  code: 'CONFLICT',
  message: 'a media buy with po_number PO-1 exists',
  recovery: 'correctable',
};
const refused = () =>
  ApplicationFailure.create({ type: 'SellerError', message: 'CONFLICT', nonRetryable: true, details: [refusal] });

test('a refusal at the third attempt names two earlier attempts, keeping its type, message and retryability', () => {
  const failure = afterEarlierAttempts(refused(), 3);
  expect(failure.type).toBe('SellerError');
  expect(failure.message).toBe('CONFLICT');
  expect(failure.nonRetryable).toBe(true);
  expect(failure.details?.[0]).toEqual({ ...refusal, earlierAttempts: 2 });
});

test('a refusal at the first attempt, and a transient failure at any, are passed on unchanged', () => {
  const first = refused();
  expect(afterEarlierAttempts(first, 1)).toBe(first);
  const transient = ApplicationFailure.create({
    type: 'SellerTransientError',
    message: 'RATE_LIMITED',
    details: [{ code: 'RATE_LIMITED', message: 'slow down', recovery: 'transient' }],
  });
  expect(afterEarlierAttempts(transient, 4)).toBe(transient);
  const bare = ApplicationFailure.create({ type: 'X', message: 'no details', nonRetryable: true });
  expect(afterEarlierAttempts(bare, 4)).toBe(bare);
});
