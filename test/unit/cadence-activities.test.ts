/**
 * How the operation's activities keep their own cadence: a read is planned inside its one `sendCall`, and the
 * polls of a wait keep their cadence themselves (`awaitTaskMoveOnCadence`): the first attempt only asks to be retried
 * at the first poll, and each unchanged poll names the delay of the next one, so the retry policy's own short
 * interval only ever applies to an attempt lost with its worker. A fake SellerClient, Temporal's
 * MockActivityEnvironment for the activity context (attempt numbers).
 */
import { ApplicationFailure } from '@temporalio/activity';
import { ActivityFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { callTimeouts, createActivities } from '../../activities';
import type { SellerAnswer, SellerClient, TaskCallRequest } from '../../activities/seller-client';
import { type SellerConfig, SellerRegistry } from '../../config/sellers';
import { POLL_BUDGET_SPENT } from '../../contract/activities';
import { budgetRanOut, pollsBeforeBudgetRanOut } from '../../workflows/operation/activity-options';
import { pollOffsets, planWait } from '../../workflows/operation/cadence';

const sellerRegistry = new SellerRegistry(
  [{ id: 'seller', url: 'http://seller.test/mcp', protocol: 'mcp' } as unknown as SellerConfig],
  'test',
);

function fakeSeller(options: { answer?: SellerAnswer; read?: () => Promise<SellerAnswer> }) {
  const calls: TaskCallRequest[] = [];
  let reads = 0;
  const seller: SellerClient = {
    callTask: async (request) => {
      calls.push(request);
      return options.answer ?? { snapshot: { status: 'completed', result: { products: [] } }, callError: false };
    },
    getTask: async () => ({ status: 'working' }),
    cancelTask: async () => ({ notified: false, note: '' }),
    listTasks: async () => ({ tasks: [], supported: false }),
    describe: async () => ({ tools: ['get_products', 'create_media_buy', 'tasks/get'], mcpTasks: false }),
    readTask: async () => {
      reads += 1;
      return options.read ? options.read() : { snapshot: { status: 'submitted', taskId: 't-1' }, callError: false };
    },
  };
  return { seller, calls, reads: () => reads };
}

function run<P extends unknown[], R>(
  fn: (...args: P) => Promise<R>,
  args: P,
  info: {
    attempt?: number;
    scheduledTimestampMs?: number;
    scheduleToCloseTimeoutMs?: number;
    currentAttemptScheduledTimestampMs?: number;
  } = {},
): Promise<R> {
  const environment: { run(fn: unknown, ...args: unknown[]): Promise<unknown> } = new MockActivityEnvironment(info);
  return environment.run(fn, ...args) as Promise<R>;
}

async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ApplicationFailure) return error;
    throw error;
  }
  throw new Error('expected the activity to fail');
}

const planInput = {
  operationId: 'adcp-get_products-q-1',
  sellerId: 'seller',
  task: 'get_products',
  step: 'call',
  params: { brief: 'video in Paris' },
};

describe('sendCall planned in the call (reads)', () => {
  test('plans and sends a read in one activity and says which timeouts it was planned with', async () => {
    const { seller, calls } = fakeSeller({});
    const activities = createActivities({ sellers: sellerRegistry, seller, callTimeoutMs: 42_000, env: {} });
    const outcome = await run(activities.sendCall, [{ planInput }]);
    expect(outcome).toMatchObject({ snapshot: { status: 'completed' }, timeouts: { callMs: 42_000, readMs: 42_000 } });
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ task: 'get_products', args: { brief: 'video in Paris' } });
    // The same bytes planCall would have recorded: a read carries no idempotency key.
    const plan = await run(activities.planCall, [planInput]);
    expect(calls[0].args).toEqual(plan.args);
    expect(calls[0].args).not.toHaveProperty('idempotency_key');
  });

  test('refuses to plan a mutation inside its call: its key and bytes must be recorded by planCall first', async () => {
    const { seller, calls } = fakeSeller({});
    const activities = createActivities({ sellers: sellerRegistry, seller, env: {} });
    const failure = await failureOf(
      run(activities.sendCall, [{ planInput: { ...planInput, task: 'create_media_buy' } }]),
    );
    expect(failure.type).toBe('ConfigError');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain('planCall');
    expect(calls).toHaveLength(0);
  });
});

describe('awaitTaskMoveOnCadence', () => {
  const plan = planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false });
  const cadence = {
    firstPollAfterMs: plan.firstPollAfterMs,
    initialIntervalMs: plan.initialIntervalMs,
    maxIntervalMs: plan.maxIntervalMs,
  };
  const pollInput = {
    operationId: 'op',
    sellerId: 'seller',
    task: 'create_media_buy',
    taskId: 't-1',
    readMethod: 'tasks/get' as const,
    timeouts: callTimeouts(5_000),
    since: { status: 'submitted', progress: null },
    cadence,
  };

  test('the first attempt does not poll: it asks to be retried when the first poll is due', async () => {
    const fake = fakeSeller({});
    const activities = createActivities({ sellers: sellerRegistry, seller: fake.seller, env: {} });
    const failure = await failureOf(run(activities.awaitTaskMoveOnCadence, [pollInput], { attempt: 1 }));
    expect(failure.type).toBe('TaskPollDue');
    expect(failure.category).toBe('BENIGN');
    expect(failure.nextRetryDelay).toBe(plan.firstPollAfterMs);
    expect(failure.details?.[0]).toMatchObject({ polls: 0 });
    expect(fake.reads()).toBe(0);
  });

  test('an attempt scheduled after the budget ended ends the activity as its timeout would, without a poll', async () => {
    // Temporal ends the activity at its schedule-to-close timeout; where a server scheduled another attempt past it
    // anyway, the attempt ends it, non-retryable, with the polls made so far.
    const fake = fakeSeller({});
    const activities = createActivities({ sellers: sellerRegistry, seller: fake.seller, env: {} });
    const budget = { scheduledTimestampMs: 1_000_000, scheduleToCloseTimeoutMs: 120_000 };
    const late = await failureOf(
      run(activities.awaitTaskMoveOnCadence, [pollInput], {
        ...budget,
        attempt: 26,
        currentAttemptScheduledTimestampMs: 1_125_000,
      }),
    );
    expect(late.type).toBe(POLL_BUDGET_SPENT);
    expect(late.nonRetryable).toBe(true);
    expect(late.details?.[0]).toMatchObject({ polls: 24 });
    expect(late.message).toMatch(/attempt 26 came 5000 ms after the polling budget ended/);
    expect(fake.reads()).toBe(0);
    // Within the budget (to its last millisecond) the attempt polls as usual.
    const inTime = await failureOf(
      run(activities.awaitTaskMoveOnCadence, [pollInput], {
        ...budget,
        attempt: 26,
        currentAttemptScheduledTimestampMs: 1_120_000,
      }),
    );
    expect(inTime.type).toBe('TaskUnchanged');
    expect(fake.reads()).toBe(1);
  });

  test('the workflow reads that end as the budget running out, with its polls, and other failures as failures', () => {
    const spent = ApplicationFailure.create({ type: POLL_BUDGET_SPENT, nonRetryable: true, details: [{ polls: 24 }] });
    const ended = new ActivityFailure('failed', 'awaitTaskMoveOnCadence', '7', 'NON_RETRYABLE_FAILURE', 'w', spent);
    expect(budgetRanOut(ended)).toBe(true);
    expect(pollsBeforeBudgetRanOut(ended)).toBe(24);
    const refused = ApplicationFailure.create({ type: 'ConfigurationError', nonRetryable: true });
    expect(budgetRanOut(new ActivityFailure('failed', 'x', '8', 'NON_RETRYABLE_FAILURE', 'w', refused))).toBe(false);
  });

  test('each unchanged poll asks for the next interval of the cadence, so the polls fall where pollOffsets says', async () => {
    const fake = fakeSeller({});
    const activities = createActivities({ sellers: sellerRegistry, seller: fake.seller, env: {} });
    // Attempt 1 waits for the first poll; attempt n + 1 is poll n.
    let at = (await failureOf(run(activities.awaitTaskMoveOnCadence, [pollInput], { attempt: 1 })))
      .nextRetryDelay as number;
    const pollsAt: number[] = [];
    for (let attempt = 2; attempt <= 9; attempt++) {
      const failure = await failureOf(run(activities.awaitTaskMoveOnCadence, [pollInput], { attempt }));
      expect(failure.type).toBe('TaskUnchanged');
      expect(failure.details?.[0]).toMatchObject({ polls: attempt - 1 });
      pollsAt.push(at);
      at += failure.nextRetryDelay as number;
    }
    expect(pollsAt).toEqual(pollOffsets(plan, pollsAt[pollsAt.length - 1]));
    expect(fake.reads()).toBe(8);
  });

  test('a settled cadence (a watched wait) makes its quick polls, then keeps the settled interval', async () => {
    const fake = fakeSeller({});
    const activities = createActivities({ sellers: sellerRegistry, seller: fake.seller, env: {} });
    const settled = { ...pollInput, cadence: { ...cadence, settle: { afterPolls: 5, intervalMs: 1_800_000 } } };
    let at = (await failureOf(run(activities.awaitTaskMoveOnCadence, [settled], { attempt: 1 })))
      .nextRetryDelay as number;
    const pollsAt: number[] = [];
    for (let attempt = 2; attempt <= 8; attempt++) {
      const failure = await failureOf(run(activities.awaitTaskMoveOnCadence, [settled], { attempt }));
      pollsAt.push(at);
      at += failure.nextRetryDelay as number;
    }
    expect(pollsAt).toEqual([2_000, 6_000, 14_000, 30_000, 62_000, 1_862_000, 3_662_000]);
  });

  test('a settled cadence with a cap backs its safety poll off: 30 min, then 1 h, then every 2 h, where pollOffsets says', async () => {
    const fake = fakeSeller({});
    const activities = createActivities({ sellers: sellerRegistry, seller: fake.seller, env: {} });
    const settle = { afterPolls: 5, intervalMs: 1_800_000, maxIntervalMs: 7_200_000 };
    const settled = { ...pollInput, cadence: { ...cadence, settle } };
    let at = (await failureOf(run(activities.awaitTaskMoveOnCadence, [settled], { attempt: 1 })))
      .nextRetryDelay as number;
    const pollsAt: number[] = [];
    for (let attempt = 2; attempt <= 10; attempt++) {
      const failure = await failureOf(run(activities.awaitTaskMoveOnCadence, [settled], { attempt }));
      pollsAt.push(at);
      at += failure.nextRetryDelay as number;
    }
    const quick = [2_000, 6_000, 14_000, 30_000, 62_000];
    const safety = [30, 90, 210, 330, 450].map((minutes) => 62_000 + minutes * 60_000);
    expect(pollsAt).toEqual([...quick, ...safety.slice(0, 4)]);
    // The workflow's own account of the plan (its budgets and docs) agrees with the activity.
    expect(pollOffsets({ ...plan, settle }, pollsAt[pollsAt.length - 1]!)).toEqual(pollsAt);
  });

  test('a moved task ends the wait with the polls made', async () => {
    const fake = fakeSeller({
      read: async () => ({
        snapshot: { status: 'completed', taskId: 't-1', result: { media_buy_id: 'mb' } },
        callError: false,
      }),
    });
    const activities = createActivities({ sellers: sellerRegistry, seller: fake.seller, env: {} });
    const outcome = await run(activities.awaitTaskMoveOnCadence, [pollInput], { attempt: 4 });
    expect(outcome).toMatchObject({ snapshot: { status: 'completed' }, polls: 3 });
  });

  test('a failed poll is retried at the cadence, or later when the seller asked for later', async () => {
    const rateLimited = fakeSeller({
      read: async () => ({
        snapshot: {
          status: 'failed',
          errors: [{ code: 'RATE_LIMITED', message: 'slow down', recovery: 'transient', retryAfterSeconds: 90 }],
        },
        callError: true,
      }),
    });
    const activities = createActivities({ sellers: sellerRegistry, seller: rateLimited.seller, env: {} });
    const failure = await failureOf(run(activities.awaitTaskMoveOnCadence, [pollInput], { attempt: 2 }));
    expect(failure.type).toBe('TaskPollFailed');
    expect(failure.category).toBe('BENIGN');
    expect(failure.nextRetryDelay).toBe(90_000);

    const broken = fakeSeller({
      read: async () => {
        throw new Error('socket hang up');
      },
    });
    const failing = createActivities({ sellers: sellerRegistry, seller: broken.seller, env: {} });
    const again = await failureOf(run(failing.awaitTaskMoveOnCadence, [pollInput], { attempt: 3 }));
    expect(again.type).toBe('TaskPollFailed');
    expect(again.nextRetryDelay).toBe(plan.initialIntervalMs * 2);
  });
});
