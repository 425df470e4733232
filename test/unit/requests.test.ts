/** The request rules shared by the HTTP API, the typed client, ADCP_TASKS_FILE and the workflow's validators. */
import {
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
