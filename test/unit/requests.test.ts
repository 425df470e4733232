/** The request rules shared by the HTTP API, the typed client, ADCP_TASKS_FILE and the workflow's validators. */
import {
  checkMediaBuyParams,
  providedInputSchema,
  retryPolicySchema,
  retrySettingsFrom,
  retrySettingsSchema,
} from '../../protocol/requests';

test('a retry policy has the same bounds in both shapes, and converts seconds to milliseconds', () => {
  expect(retryPolicySchema.safeParse({ max_attempts: 0 }).success).toBe(false);
  expect(retrySettingsSchema.safeParse({ maximumAttempts: 0 }).success).toBe(false);
  expect(retryPolicySchema.safeParse({ initial_interval_seconds: 3601 }).success).toBe(false);
  expect(retrySettingsSchema.safeParse({ initialIntervalMs: 3_601_000 }).success).toBe(false);
  expect(retryPolicySchema.safeParse({ maxAttempts: 2 }).success).toBe(false); // strict: camelCase is not the HTTP name
  const policy = retryPolicySchema.parse({ max_attempts: 4, initial_interval_seconds: 0.5 });
  const settings = retrySettingsFrom(policy);
  expect(settings).toEqual({ maximumAttempts: 4, initialIntervalMs: 500 });
  expect(retrySettingsSchema.parse(settings)).toEqual(settings);
});

test('an input answer must be a non-empty object; who answered is optional but not empty', () => {
  expect(providedInputSchema.safeParse({ input: { approved: true }, providedBy: 'ops@buyer' }).success).toBe(true);
  expect(providedInputSchema.safeParse({ input: {} }).success).toBe(false);
  expect(providedInputSchema.safeParse({ input: [] }).success).toBe(false);
  expect(providedInputSchema.safeParse({ input: { a: 1 }, providedBy: '' }).success).toBe(false);
  expect(providedInputSchema.safeParse({ input: { a: 1 }, surprise: true }).success).toBe(false);
});

describe('checkMediaBuyParams: what no seller should get', () => {
  const now = Date.parse('2026-06-01T00:00:00Z');
  test.each([
    [{ start_time: '2026-07-02T00:00:00Z', end_time: '2026-07-01T00:00:00Z' }, 'params.end_time'],
    [{ start_time: '2026-07-01T00:00:00Z', end_time: '2026-07-01T00:00:00Z' }, 'params.end_time'],
    [{ start_time: 'asap', end_time: '2026-05-01T00:00:00Z' }, 'params.end_time'],
    [{ packages: [{ budget: 10 }, { budget: -1 }] }, 'params.packages.1.budget'],
    [{ budget: { total: -5, currency: 'USD' } }, 'params.budget'],
    [{ total_budget: -0.01 }, 'params.total_budget'],
  ])('%j is refused at %s', (params, field) => {
    expect(checkMediaBuyParams('create_media_buy', params, now)).toMatchObject({ field });
    expect(checkMediaBuyParams('update_media_buy', params, now)).toMatchObject({ field });
  });

  test('a sound flight and budgets pass, other tasks are not judged, and what the seller judges is left to it', () => {
    const sound = {
      start_time: 'asap',
      end_time: '2026-07-01T00:00:00Z',
      packages: [{ budget: 0 }, { budget: { total: 100 } }, { budget: 'whatever the seller makes of it' }],
    };
    expect(checkMediaBuyParams('create_media_buy', sound, now)).toBeUndefined();
    expect(checkMediaBuyParams('get_products', { packages: [{ budget: -1 }] }, now)).toBeUndefined();
    expect(checkMediaBuyParams('create_media_buy', { start_time: 'tomorrow', end_time: 3 }, now)).toBeUndefined();
  });
});
