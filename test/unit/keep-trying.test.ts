/**
 * The worker's start-up chores beside polling (workers/keep-trying.ts): the sellers' capabilities workflows are
 * ensured until that succeeds, each failure logged with the pause before the next attempt, and no attempt is made
 * once the worker stops.
 */
import { keepTrying } from '../../workers/keep-trying';

function recordingLogger() {
  const warnings: { fields: Record<string, unknown>; message: string }[] = [];
  return {
    warnings,
    logger: {
      warn: (fields: object, message: string) => {
        warnings.push({ fields: fields as Record<string, unknown>, message });
      },
    },
  };
}

test('a chore that fails is tried again, with a doubling pause up to the maximum, until it succeeds', async () => {
  const { logger, warnings } = recordingLogger();
  let attempts = 0;
  const result = await keepTrying(
    async () => {
      attempts++;
      if (attempts < 5) throw new Error(`Temporal unavailable (${attempts})`);
      return ['seller-a', 'seller-b'];
    },
    {
      what: 'Ensuring capabilities',
      logger,
      signal: new AbortController().signal,
      initialDelayMs: 1,
      maxDelayMs: 4,
    },
  );
  expect(result).toEqual(['seller-a', 'seller-b']);
  expect(attempts).toBe(5);
  expect(warnings.map((warning) => [warning.fields.attempts, warning.fields.retryInMs])).toEqual([
    [1, 1],
    [2, 2],
    [3, 4],
    [4, 4],
  ]);
  expect(warnings[0]!.message).toMatch(/^Ensuring capabilities failed; trying again/);
  expect((warnings[3]!.fields.err as Error).message).toBe('Temporal unavailable (4)');
});

test('once the worker stops, no further attempt is made and the chore resolves undefined', async () => {
  const { logger, warnings } = recordingLogger();
  const stopping = new AbortController();
  let attempts = 0;
  const result = await keepTrying(
    async () => {
      attempts++;
      // The worker stops while the first attempt is failing: the pause is cut short, nothing is retried.
      setImmediate(() => stopping.abort());
      throw new Error('still down');
    },
    { what: 'Ensuring capabilities', logger, signal: stopping.signal, initialDelayMs: 60_000 },
  );
  expect(result).toBeUndefined();
  expect(attempts).toBe(1);
  expect(warnings).toHaveLength(1);
});

test('a chore whose worker already stopped is not attempted', async () => {
  const { logger } = recordingLogger();
  const stopping = new AbortController();
  stopping.abort();
  const attempt = jest.fn(async () => 'done');
  expect(await keepTrying(attempt, { what: 'x', logger, signal: stopping.signal })).toBeUndefined();
  expect(attempt).not.toHaveBeenCalled();
});
