/**
 * The call activities of the contract: planCall decides the bytes once (no secrets), sendCall
 * sends exactly them, IDEMPOTENCY_IN_FLIGHT retries the same key as late as the seller asked, the call timeout is
 * hard, and readTask / awaitTaskMoveOnCadence treat an unreadable task as "no news". A fake SellerClient, Temporal's
 * MockActivityEnvironment for the activity context.
 */
import { once } from 'node:events';
import { ApplicationFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { callTimeouts, createActivities } from '../../activities';
import { idempotencyKeyFor } from '../../activities/idempotency';
import type { SellerAnswer, SellerClient, TaskCallRequest } from '../../activities/seller-client';
import { type SellerConfig, SellerRegistry } from '../../config/sellers';

function fakeSeller(answer: (request: TaskCallRequest) => Promise<SellerAnswer>) {
  const calls: TaskCallRequest[] = [];
  const seller: SellerClient = {
    callTask: async (request) => {
      calls.push(request);
      return answer(request);
    },
    getTask: async () => ({ status: 'working' }),
    cancelTask: async () => ({ notified: false, note: '' }),
    listTasks: async () => ({ tasks: [], supported: false }),
    describe: async () => ({ tools: ['get_products', 'create_media_buy'], mcpTasks: false }),
    readTask: async () => ({
      snapshot: {
        status: 'failed',
        errors: [{ code: 'INVALID_REQUEST', message: 'Unknown tool: tasks/get', recovery: 'correctable' }],
      },
      callError: true,
    }),
  };
  return { seller, calls };
}

const hmacSeller = {
  id: 'seller',
  url: 'http://seller.test/mcp',
  protocol: 'mcp',
  webhooks: { scheme: 'hmac-sha256', secret_env: 'SELLER_WEBHOOK_SECRET' },
} as unknown as SellerConfig;
const sellerRegistry = new SellerRegistry([hmacSeller], 'test');
const secret = 'a-webhook-secret-of-at-least-32-characters';
const createInput = {
  operationId: 'adcp-create_media_buy-po-1',
  sellerId: 'seller',
  task: 'create_media_buy',
  step: 'call',
  params: { brand: { domain: 'acme.example' } },
};

/** Runs an activity in a mock activity context, keeping its types. */
function run<P extends unknown[], R>(
  fn: (...args: P) => Promise<R>,
  args: P,
  info: { attempt?: number } = {},
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

describe('planCall', () => {
  test('decides key, push config with operation_id, credential by reference and timeouts; holds no secret', async () => {
    const { seller } = fakeSeller(async () => ({ snapshot: { status: 'completed' }, callError: false }));
    const activities = createActivities({
      sellers: sellerRegistry,
      seller,
      publicBaseUrl: 'https://buyer.example',
      callTimeoutMs: 90_000,
      env: { SELLER_WEBHOOK_SECRET: secret },
    });
    const plan = await run(activities.planCall, [createInput]);
    expect(plan.args).toMatchObject({
      brand: { domain: 'acme.example' },
      idempotency_key: idempotencyKeyFor(createInput.operationId, 'call'),
      push_notification_config: {
        url: 'https://buyer.example/webhooks/adcp/seller/adcp-create_media_buy-po-1',
        operation_id: createInput.operationId,
        authentication: { schemes: ['HMAC-SHA256'] },
      },
    });
    expect(plan.webhookCredentialRef).toEqual({ env: 'SELLER_WEBHOOK_SECRET' });
    expect(plan.timeouts).toEqual({ callMs: 90_000, readMs: 90_000 });
    expect(JSON.stringify(plan)).not.toContain(secret);
  });

  test('reads are bounded by the call timeout and by 120 s', () => {
    expect(callTimeouts(30_000)).toEqual({ callMs: 30_000, readMs: 30_000 });
    expect(callTimeouts(600_000)).toEqual({ callMs: 600_000, readMs: 120_000 });
  });
});

describe('sendCall', () => {
  test('sends the plan as decided, even from a worker whose environment changed since (no ADCP_PUBLIC_BASE_URL)', async () => {
    const planner = createActivities({
      sellers: sellerRegistry,
      seller: fakeSeller(async () => ({ snapshot: { status: 'completed' }, callError: false })).seller,
      publicBaseUrl: 'https://buyer.example',
      env: {},
    });
    const plan = await run(planner.planCall, [createInput]);
    // A restarted worker without a public base URL sends the same body for the same key.
    const { seller, calls } = fakeSeller(async () => ({
      snapshot: { status: 'submitted', taskId: 't-1' },
      callError: false,
    }));
    const sender = createActivities({ sellers: sellerRegistry, seller, env: { SELLER_WEBHOOK_SECRET: secret } });
    const outcome = await run(sender.sendCall, [{ plan }]);
    expect(outcome).toMatchObject({ snapshot: { status: 'submitted', taskId: 't-1' }, webhookRegistered: true });
    expect(calls[0].args).toEqual({
      ...plan.args,
      push_notification_config: {
        ...plan.pushNotificationConfig,
        authentication: { schemes: ['HMAC-SHA256'], credentials: secret },
      },
    });
  });

  test('IDEMPOTENCY_IN_FLIGHT is retried with the same plan after retry_after, never refused as a key problem', async () => {
    const { seller } = fakeSeller(async () => ({
      snapshot: {
        status: 'failed',
        errors: [
          { code: 'IDEMPOTENCY_IN_FLIGHT', message: 'still processing', recovery: 'transient', retryAfterSeconds: 7 },
        ],
      },
      callError: true,
    }));
    const activities = createActivities({ sellers: sellerRegistry, seller, env: {} });
    const plan = await run(activities.planCall, [createInput]);
    const failure = await failureOf(run(activities.sendCall, [{ plan }]));
    expect(failure.type).toBe('SellerTransientError');
    expect(failure.nonRetryable).toBeFalsy();
    expect(failure.nextRetryDelay).toBe(7_000);
  });

  test("without a retry_after, a failed call waits the worker's retry backoff (retryBackoff), attempt by attempt", async () => {
    const retryBackoff = { initialMs: 50, maxMs: 1_000, coefficient: 2, jitter: 0 };
    // A transport failure (the seller unreachable) and a seller's transient refusal without retry_after.
    const unreachable = fakeSeller(async () => {
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    });
    const busy = fakeSeller(async () => ({
      snapshot: {
        status: 'failed',
        errors: [{ code: 'SERVICE_UNAVAILABLE', message: 'busy', recovery: 'transient' }],
      },
      callError: true,
    }));
    for (const { seller } of [unreachable, busy]) {
      const activities = createActivities({
        sellers: sellerRegistry,
        seller,
        env: {},
        retryBackoff,
        random: () => 0.5,
      });
      const plan = await run(activities.planCall, [createInput]);
      const delays: unknown[] = [];
      for (const attempt of [1, 2, 6])
        delays.push((await failureOf(run(activities.sendCall, [{ plan }], { attempt }))).nextRetryDelay);
      expect(delays).toEqual([50, 100, 1_000]);
    }
    // The worker's default is §4.4's: 1 s, then 2 s.
    const defaults = createActivities({ sellers: sellerRegistry, seller: busy.seller, env: {}, random: () => 0.5 });
    const plan = await run(defaults.planCall, [createInput]);
    expect((await failureOf(run(defaults.sendCall, [{ plan }], { attempt: 2 }))).nextRetryDelay).toBe(2_000);
  });

  test('the call timeout is hard: the attempt ends when the seller client ignores the abort', async () => {
    const { seller } = fakeSeller(() => new Promise<never>(() => undefined)); // never settles, ignores the signal
    const activities = createActivities({ sellers: sellerRegistry, seller, callTimeoutMs: 300, env: {} });
    const plan = await run(activities.planCall, [createInput]);
    const failure = await failureOf(run(activities.sendCall, [{ plan }]));
    expect(failure.type).toBe('TransportError');
    expect((failure.details?.[0] as { code: string }).code).toBe('TRANSPORT_TIMEOUT');
  });

  test('a long call heartbeats as an ordinary activity and never as a local one (the core refuses those)', async () => {
    /** Runs sendCall with a seller that answers once `done` says so; returns how many heartbeats the context sent. */
    const heartbeatsOf = async (isLocal: boolean, done: (environment: MockActivityEnvironment) => Promise<void>) => {
      const environment = new MockActivityEnvironment({ isLocal });
      let heartbeats = 0;
      environment.on('heartbeat', () => heartbeats++);
      const { seller } = fakeSeller(async () => {
        await done(environment);
        return { snapshot: { status: 'completed' }, callError: false };
      });
      const activities = createActivities({ sellers: sellerRegistry, seller, env: {} });
      const plan = await run(activities.planCall, [{ ...createInput, task: 'get_products' }]);
      await environment.run(activities.sendCall, { plan });
      return heartbeats;
    };
    // The ordinary activity answers at its first heartbeat (every 2 s); the local one after longer than that.
    const ordinary = await heartbeatsOf(false, (environment) => once(environment, 'heartbeat').then(() => undefined));
    const local = await heartbeatsOf(true, () => new Promise((resolve) => setTimeout(resolve, 2_500)));
    expect(ordinary).toBeGreaterThanOrEqual(1);
    expect(local).toBe(0);
  });

  test('an answer too large to keep even compressed fails for good with ANSWER_TOO_LARGE', async () => {
    const noise = Array.from({ length: 120_000 }, (_, i) => Math.random().toString(36).slice(2) + i).join('');
    const { seller } = fakeSeller(async () => ({
      snapshot: { status: 'completed', result: { products: [{ description: noise }] } },
      callError: false,
    }));
    const activities = createActivities({ sellers: sellerRegistry, seller, env: {}, maxAnswerBytes: 500_000 });
    const plan = await run(activities.planCall, [{ ...createInput, task: 'get_products' }]);
    const failure = await failureOf(run(activities.sendCall, [{ plan }]));
    expect(failure.nonRetryable).toBe(true);
    expect((failure.details?.[0] as { code: string }).code).toBe('ANSWER_TOO_LARGE');
  });
});

describe('reads', () => {
  const readInput = {
    operationId: 'op',
    sellerId: 'seller',
    task: 'create_media_buy',
    taskId: 't-1',
    timeouts: callTimeouts(5_000),
  };

  test('a seller without any task read: readTask answers unreadable instead of failing the operation', async () => {
    const { seller } = fakeSeller(async () => ({ snapshot: { status: 'completed' }, callError: false }));
    const activities = createActivities({ sellers: sellerRegistry, seller, env: {} });
    const outcome = await run(activities.readTask, [readInput]);
    expect(outcome).toMatchObject({ readMethod: 'none', unreadable: { code: 'TASK_UNREADABLE' } });
  });

  test('awaitTaskMoveOnCadence counts an unreadable task as no change: a benign failure carrying the poll count', async () => {
    const { seller } = fakeSeller(async () => ({ snapshot: { status: 'completed' }, callError: false }));
    const activities = createActivities({ sellers: sellerRegistry, seller, env: {} });
    const since = { status: 'submitted', progress: null };
    // No wait before the first poll: attempt n is poll n.
    const cadence = { firstPollAfterMs: 0, initialIntervalMs: 2_000, maxIntervalMs: 60_000 };
    const failure = await failureOf(
      run(activities.awaitTaskMoveOnCadence, [{ ...readInput, since, cadence }], { attempt: 4 }),
    );
    expect(failure.type).toBe('TaskUnchanged');
    expect(failure.category).toBe('BENIGN');
    expect(failure.details?.[0]).toMatchObject({ polls: 4 });
  });
});
