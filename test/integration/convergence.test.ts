/**
 * Convergence (issue #9): whatever order a real seller's answer, webhooks and reads arrive in, and whichever of them
 * is lost, an operation ends with what the seller actually did: one buy, recorded once, never another operation's.
 * One test per failure observed against real AdCP 3.x sellers, each against the scripted fixture seller playing
 * that seller (test/fixtures/scripted-seller/profiles.ts), through the real gateway and real workflows on the
 * shared Temporal dev server.
 *
 * These describe the REQUIRED behaviour. A test reads the operation's state until it ends (or a bound passes) and
 * then asserts on what a user relies on (status, result, failure, webhooksApplied, refusals, cancellation), so a
 * failure shows the state the operation actually reached.
 *
 * The tests run side by side (test.concurrent): most of their time is spent waiting on the seller, timers and polls,
 * and they share nothing but the worker and the gateway. Each has a seller of its own (the whole flow too, one per
 * profile), so no test consumes another's script, fault or hanging socket, or counts another's calls.
 */
import type { AddressInfo } from 'node:net';
import { type Server, createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createGateway } from '../../api/app';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { createSdkSellerClient, withSellerOverrides } from '../../activities/seller-client';
import type { SellerConfig } from '../../config/sellers';
import type { OperationState } from '../../contract/operation';
import {
  type ScriptStep,
  type ScriptedSeller,
  type ScriptedSellerOptions,
  startScriptedSeller,
} from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

/** The seller's reads keep saying `submitted` (no result): only a webhook can tell the operation. */
const HIDDEN_FROM_READS: ScriptStep['tasksGet'] = { status: 'submitted', result: undefined, completed_at: undefined };
/** Far enough away that a step only begins when the test advances it. */
const MANUAL = 600_000;
/** One protocol call's bound in these tests: lost answers cost this much each. */
const CALL_TIMEOUT_MS = 3_000;
const TERMINAL = new Set(['completed', 'failed', 'rejected', 'canceled']);

type Profiled = Record<string, ScriptedSeller>;
const sellers: Profiled = {};
/** The profiles the whole flow runs against; each flow has its own seller (`<profile>Flow`, same options). */
const FLOW_PROFILES = [
  'plain',
  'answerAfterWebhook',
  'noTasksGet',
  'getTaskStatus',
  'listTasks',
  'mcpTasks',
  'accountScoped',
  'wrapping',
  'adcp31',
] as const;
const flowSeller = (profile: string) => `${profile}Flow`;
/** Sellers whose description (tools/list, MCP capabilities) cannot be read: the worker caches none for 10 minutes. */
const UNDESCRIBED = new Set(['mcpTasksUndescribed']);
const sellerOptions: Record<string, ScriptedSellerOptions> = {
  plain: {},
  unbacked: {},
  // Its default create completes on the first poll after the retry (the test is about the retry, not the polls).
  retry: { pollsToComplete: 1 },
  cancel: {},
  isolation: {},
  isolationHandshake: {},
  answerAfterWebhook: { profile: 'answer-after-webhook' },
  answerCompletedAfterWebhook: { profile: { 'answer-after-webhook': { answer: 'completed' } } },
  lostAnswer: {
    profile: {
      'answer-after-webhook': { answer: 'completed', loseAnswers: 1_000, lostAs: 'hang' },
      'no-tasks-get': true,
    },
  },
  noTasksGet: { profile: 'no-tasks-get' },
  getTaskStatus: { profile: { 'no-tasks-get': { offer: ['get_task_status'] } } },
  listTasks: { profile: { 'no-tasks-get': { offer: ['list_tasks'] } } },
  mcpTasks: { profile: ['no-tasks-get', 'mcp-tasks'] },
  mcpTasksPending: { profile: ['no-tasks-get', 'mcp-tasks'] },
  mcpTasksBesideAdcp: { profile: 'mcp-tasks' },
  mcpTasksUndescribed: { profile: ['no-tasks-get', 'mcp-tasks'] },
  accountScoped: { profile: 'account-scoped-tasks' },
  accountScopedUnseen: { profile: 'account-scoped-tasks' },
  wrapping: { profile: 'completed-wrapping-submitted', pollsToComplete: 2 },
  adcp31: { profile: 'adcp-3.1' },
};
for (const profile of FLOW_PROFILES)
  sellerOptions[flowSeller(profile)] =
    profile === 'wrapping'
      ? // The flow only needs the buy a read confirms: the first read makes it (#9.8 keeps a read that does not).
        { ...sellerOptions.wrapping, pollsToComplete: 1 }
      : sellerOptions[profile];

let stack: TestStack;
let sellerRegistry: ReturnType<typeof registry>;
let sellerList: SellerConfig[];
let server: Server;
let base: string;
const env: NodeJS.ProcessEnv = {};
const started: { orchestratorOf: () => TestStack; operationId: string }[] = [];

beforeAll(async () => {
  await Promise.all(
    Object.entries(sellerOptions).map(async ([name, options]) => {
      sellers[name] = await startScriptedSeller({ a2a: false, ...options });
    }),
  );
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  sellerList = Object.keys(sellerOptions).map((name) => {
    const seller = sellers[name];
    env[`CONVERGENCE_${name.toUpperCase()}_TOKEN`] = seller.authToken;
    return {
      id: name,
      name,
      url: seller.url,
      protocol: 'mcp' as const,
      token_env: `CONVERGENCE_${name.toUpperCase()}_TOKEN`,
      webhooks: { scheme: 'rfc9421', jwks: seller.webhookJwks } as never,
    };
  });
  sellerRegistry = registry(sellerList);
  const sellerClient = createSdkSellerClient();
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: {
      env,
      publicBaseUrl: base,
      callTimeoutMs: CALL_TIMEOUT_MS,
      // As a seller whose tools/list failed once: the read strategy learns nothing of what it offers.
      seller: withSellerOverrides(sellerClient, {
        describe: (request) =>
          UNDESCRIBED.has(request.agent.id)
            ? Promise.reject(new Error(`tools/list at ${request.agent.id}: 503 Service Unavailable`))
            : sellerClient.describe(request),
      }),
    },
  });
  const webhookRouter = createWebhookRouter({
    client: stack.client,
    sellers: sellerRegistry,
    authenticator: createWebhookAuthenticator(),
    publicBaseUrl: base,
    env,
    log: () => undefined,
  });
  server.on('request', createGateway({ orchestrator: stack.orchestrator, webhookRouter }));
}, 120_000);

afterAll(async () => {
  // Leave nothing waiting on the shared server.
  await Promise.allSettled(
    started.map(async ({ orchestratorOf, operationId }) => {
      const state = (await orchestratorOf().orchestrator.status(operationId)).state;
      if (state && !TERMINAL.has(state.status))
        await orchestratorOf().orchestrator.cancel(operationId, { requestedBy: 'convergence test', reason: 'cleanup' });
    }),
  );
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  await Promise.allSettled(Object.values(sellers).map((seller) => seller.close()));
}, 60_000);

async function start(
  sellerId: string,
  params = createMediaBuyParams(),
  on: () => TestStack = () => stack,
): Promise<string> {
  const { operationId } = await on().orchestrator.start({
    sellerId,
    task: 'create_media_buy',
    params,
    idempotencyKey: randomUUID(),
  });
  started.push({ orchestratorOf: on, operationId });
  sellerOf.set(operationId, sellerId);
  return operationId;
}

async function stateOf(operationId: string, on: TestStack = stack): Promise<OperationState | undefined> {
  return (await on.orchestrator.status(operationId)).state;
}

/** The operation's state once it has ended, or as it is after `timeoutMs` (so a failing test shows where it stuck). */
async function settledState(operationId: string, timeoutMs = 45_000, on: TestStack = stack): Promise<OperationState> {
  const deadline = Date.now() + timeoutMs;
  let state: OperationState | undefined;
  while (Date.now() < deadline) {
    state = await stateOf(operationId, on).catch(() => state);
    if (state && TERMINAL.has(state.status)) return state;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  if (!state) throw new Error(`Operation ${operationId} has no state after ${timeoutMs} ms.`);
  return state;
}

async function waitForState(
  operationId: string,
  ready: (state: OperationState) => boolean,
  timeoutMs = 30_000,
): Promise<OperationState> {
  return eventually(async () => {
    const state = await stateOf(operationId);
    return state && ready(state) ? state : undefined;
  }, timeoutMs);
}

/** Which seller each started operation went to: push URLs name it (/webhooks/adcp/<seller>/<operation>). */
const sellerOf = new Map<string, string>();
const urlOf = (operationId: string) => `${base}/webhooks/adcp/${sellerOf.get(operationId)}/${operationId}`;

/** Waits until the seller has sent a webhook to the operation's URL and knows how the gateway answered it. */
async function webhookSent(seller: ScriptedSeller, operationId: string): Promise<void> {
  await eventually(async () => (seller.webhookDeliveries.some((d) => d.url === urlOf(operationId)) ? true : undefined));
  await seller.webhooksSettled();
}
const callsFor = (seller: ScriptedSeller, operationId: string, tool = 'create_media_buy') =>
  seller.callsTo(tool).filter((call) => JSON.stringify(call.args.push_notification_config ?? {}).includes(operationId));
const buysOf = (seller: ScriptedSeller, operationId: string) =>
  seller.mediaBuys().filter((buy) => JSON.stringify(buy.request.push_notification_config ?? {}).includes(operationId));

describe('#9.1 a signed webhook that arrives while the call is in flight is applied, not dropped when the call answers', () => {
  test.concurrent(
    'the call then answers completed (as observed): the webhook still counts as applied',
    async () => {
      const seller = sellers.answerCompletedAfterWebhook;
      const operationId = await start('answerCompletedAfterWebhook');
      await webhookSent(seller, operationId);
      expect(seller.webhookDeliveries.find((d) => d.url === urlOf(operationId))?.finalStatus).toBe(200);

      const state = await settledState(operationId, 30_000);
      const [buy] = buysOf(seller, operationId);
      expect(state.status).toBe('completed');
      expect(state.result?.media_buy_id).toBe(buy.mediaBuyId);
      expect(state.webhooksApplied).toBeGreaterThanOrEqual(1);
      expect(state.failure).toBeUndefined();
    },
    60_000,
  );

  test.concurrent(
    'the call then answers submitted, and reads never show the result: only the webhook completes it',
    async () => {
      const seller = sellers.answerAfterWebhook;
      // The seller completes at once and sends its signed completion 10-110 ms after the request, before it answers
      // `submitted`; its reads keep saying submitted, so only that webhook can complete the operation.
      seller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', tasksGet: HIDDEN_FROM_READS },
      ]);
      const operationId = await start('answerAfterWebhook');
      await webhookSent(seller, operationId);
      expect(seller.webhookDeliveries.find((d) => d.url === urlOf(operationId))?.finalStatus).toBe(200);

      const state = await settledState(operationId, 30_000);
      const [buy] = buysOf(seller, operationId);
      expect(state.status).toBe('completed');
      expect(state.webhooksApplied).toBeGreaterThanOrEqual(1);
      expect(state.result?.media_buy_id).toBe(buy.mediaBuyId);
      expect(state.failure).toBeUndefined();
    },
    60_000,
  );
});

test.concurrent(
  '#9.2 a lost answer with a delivered result: the seller made the buy, every answer timed out, its signed webhook carried the media_buy_id: completed with it, one buy',
  async () => {
    const seller = sellers.lostAnswer;
    const operationId = await start('lostAnswer');
    const state = await settledState(operationId, 60_000);
    const buys = buysOf(seller, operationId);

    expect(callsFor(seller, operationId).length).toBeGreaterThanOrEqual(1);
    expect(seller.webhookDeliveries.find((d) => d.url === urlOf(operationId))?.finalStatus).toBe(200);
    expect(buys).toHaveLength(1);
    expect(state.status).toBe('completed');
    expect(state.failure).toBeUndefined();
    expect(state.result?.media_buy_id).toBe(buys[0].mediaBuyId);
  },
  90_000,
);

test.concurrent(
  '#9.3 a call retried on a worker restarted without ADCP_PUBLIC_BASE_URL re-sends byte-identical args (same key, same push_notification_config)',
  async () => {
    const seller = sellers.retry;
    const taskQueue = `convergence-retry-${randomUUID()}`;
    let workerA: TestStack | undefined = await startTestStack({
      sellers: sellerRegistry,
      taskQueue,
      activities: { env, publicBaseUrl: base, callTimeoutMs: CALL_TIMEOUT_MS },
    });
    let workerB: TestStack | undefined;
    try {
      // The first attempt reaches the seller, which records it and acts, and then never answers.
      seller.hangSockets({ tool: 'create_media_buy', times: 1, process: true });
      const operationId = await start('retry', createMediaBuyParams(), () => workerB ?? workerA!);
      const [recorded] = await eventually(async () => {
        const calls = callsFor(seller, operationId);
        return calls.length > 0 ? calls : undefined;
      });
      await workerA.close();
      workerA = undefined;
      workerB = await startTestStack({
        sellers: sellerRegistry,
        taskQueue,
        activities: { env, callTimeoutMs: CALL_TIMEOUT_MS },
      });

      const key = recorded.args.idempotency_key;
      const sameKey = () => seller.callsTo('create_media_buy').filter((c) => c.args.idempotency_key === key);
      await eventually(async () => (sameKey().length >= 2 ? true : undefined), 60_000);
      const [first, ...retries] = sameKey();
      expect(first.args.push_notification_config).toMatchObject({ url: urlOf(operationId) });
      for (const retry of retries) expect(JSON.stringify(retry.args)).toBe(JSON.stringify(first.args));

      const state = await settledState(operationId, 45_000, workerB);
      expect(state.status).toBe('completed');
      expect(buysOf(seller, operationId)).toHaveLength(1);
    } finally {
      await workerA?.close();
      await workerB?.close();
    }
  },
  150_000,
);

test.concurrent(
  '#9.5 cancel during a call does not lose the buy: the media_buy_id is recorded, and the state says whether it still exists and what was done',
  async () => {
    const seller = sellers.cancel;
    // A synchronous create: the seller makes the buy while the call is in flight, and that answer never comes.
    seller.script('create_media_buy', [{ status: 'completed' }]);
    seller.hangSockets({ tool: 'create_media_buy', times: 1, process: true });
    const operationId = await start('cancel');
    await eventually(async () => (buysOf(seller, operationId).length === 1 ? true : undefined));
    const [buy] = buysOf(seller, operationId);

    const cancel = stack.orchestrator.cancel(operationId, { requestedBy: 'ops@buyer', reason: 'campaign pulled' }).then(
      (answer) => answer,
      (error: unknown) => ({ refused: String(error) }),
    );
    const state = await settledState(operationId, 60_000);

    expect(await cancel).toMatchObject({ accepted: true });
    // The cancel is on record, and not as "nothing to cancel": the seller had made the buy.
    expect(state.cancellation).toMatchObject({ requestedBy: 'ops@buyer', reason: 'campaign pulled' });
    expect(state.cancellation?.sellerNote ?? '').not.toMatch(/no seller task existed/i);
    // The buy the call made is on record...
    const recorded =
      state.cancellation?.resource?.mediaBuyId ?? state.resource?.mediaBuyId ?? state.result?.media_buy_id;
    expect(recorded).toBe(buy.mediaBuyId);
    // ...and what became of it is said, and true: this seller supports update_media_buy canceled: true.
    const cancelCalls = seller
      .callsTo('update_media_buy')
      .filter((c) => c.args.media_buy_id === buy.mediaBuyId && c.args.canceled === true);
    expect(cancelCalls.length).toBeGreaterThanOrEqual(1);
    expect(state.cancellation?.resource ?? state.resource).toMatchObject({
      mediaBuyId: buy.mediaBuyId,
      state: 'canceled',
    });
    expect(seller.mediaBuys().find((b) => b.mediaBuyId === buy.mediaBuyId)?.status).toBe('canceled');
    expect(state.status).toBe('canceled');
    expect(buysOf(seller, operationId)).toHaveLength(1);
  },
  90_000,
);

describe('#9.6 a seller without tasks/get: a submitted operation does not fail at its first read', () => {
  test.concurrent(
    'it completes by webhook',
    async () => {
      const seller = sellers.noTasksGet;
      // Completed (and its webhook sent) only once the operation has read the task twice and is still waiting.
      seller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', afterMs: MANUAL, webhook: true },
      ]);
      const operationId = await start('noTasksGet');
      const submitted = await waitForState(operationId, (s) => s.status === 'submitted' && s.taskId !== undefined);
      const taskId = submitted.taskId!;
      const readsOfTask = () =>
        seller.calls.filter((call) => call.tool !== 'create_media_buy' && JSON.stringify(call.args).includes(taskId));
      await eventually(async () => (readsOfTask().length >= 2 ? true : undefined), 30_000);
      const meanwhile = await stateOf(operationId);
      expect(meanwhile?.status).toBe('submitted');
      expect(meanwhile?.failure).toBeUndefined();
      seller.advanceTask(taskId);
      const state = await settledState(operationId, 45_000);
      const [buy] = buysOf(seller, operationId);
      expect(state.failure).toBeUndefined();
      expect(state.status).toBe('completed');
      expect(state.result?.media_buy_id).toBe(buy.mediaBuyId);
    },
    120_000,
  );

  test.concurrent(
    'it completes by get_task_status reads where the seller offers them',
    async () => {
      const seller = sellers.getTaskStatus;
      seller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', afterPolls: 2, webhook: false },
      ]);
      const operationId = await start('getTaskStatus');
      const state = await settledState(operationId, 45_000);
      const [buy] = buysOf(seller, operationId);
      expect(state.failure).toBeUndefined();
      expect(state.status).toBe('completed');
      expect(state.result?.media_buy_id).toBe(buy.mediaBuyId);
      expect(seller.callsTo('get_task_status').length).toBeGreaterThanOrEqual(2);
    },
    60_000,
  );

  test.concurrent(
    "it completes through MCP's own Tasks where the seller speaks them (MCP tasks/get, tasks/result)",
    async () => {
      const seller = sellers.mcpTasks;
      // Longer than a call's bound: the call must come back with the MCP task, and reads must finish the job.
      seller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', afterMs: CALL_TIMEOUT_MS + 1_000 },
      ]);
      const operationId = await start('mcpTasks');
      const state = await settledState(operationId, 45_000);
      const buys = buysOf(seller, operationId);
      expect(state.failure).toBeUndefined();
      expect(state.status).toBe('completed');
      expect(buys).toHaveLength(1);
      expect(state.result?.media_buy_id).toBe(buys[0].mediaBuyId);
    },
    60_000,
  );

  test.concurrent(
    'an MCP task that stays pending far longer than the call bound: the call comes back working with its id, reads finish it, one task, one buy',
    async () => {
      const seller = sellers.mcpTasksPending;
      // The task moves on only when the test says: MCP's own polling inside the call would wait for it for ever.
      seller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', afterMs: MANUAL, webhook: false },
      ]);
      const operationId = await start('mcpTasksPending');
      // Shown as it is when it never gets there, so a failure says where the operation stuck.
      const tracking = await waitForState(
        operationId,
        (state) => state.taskId !== undefined || TERMINAL.has(state.status),
        4 * CALL_TIMEOUT_MS,
      ).catch(async () => (await stateOf(operationId))!);
      const [task] = seller.tasks();
      expect(tracking.failure).toBeUndefined();
      expect(tracking.taskId).toBe(task.taskId);
      // Pending for several call bounds more: the operation holds the task and keeps reading it.
      await new Promise((resolve) => setTimeout(resolve, 3 * CALL_TIMEOUT_MS));
      expect(TERMINAL.has((await stateOf(operationId))!.status)).toBe(false);
      seller.advanceTask(task.taskId);

      const state = await settledState(operationId, 45_000);
      const buys = buysOf(seller, operationId);
      expect(state.failure).toBeUndefined();
      expect(state.status).toBe('completed');
      expect(buys).toHaveLength(1);
      expect(state.result?.media_buy_id).toBe(buys[0].mediaBuyId);
      // One create task at the seller, read by MCP tasks/get.
      expect(seller.tasks()).toHaveLength(1);
      expect(state.readMethod).toBe('mcp-tasks');
    },
    90_000,
  );

  test.concurrent(
    'it completes by list_tasks reads where the seller offers them',
    async () => {
      const seller = sellers.listTasks;
      // list_tasks carries no result: the buy becomes known by a later read of the resource (get_media_buys) or a webhook.
      seller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', afterMs: 4_000, webhook: false },
      ]);
      const operationId = await start('listTasks');
      const state = await settledState(operationId, 45_000);
      expect(state.failure).toBeUndefined();
      expect(state.status).not.toBe('failed');
      expect(seller.callsTo('list_tasks').length).toBeGreaterThanOrEqual(1);
    },
    60_000,
  );
});

test.concurrent(
  "where the seller's AdCP tasks/get does not know MCP's task ids (REFERENCE_NOT_FOUND), the reads reach MCP tasks/get",
  async () => {
    const seller = sellers.mcpTasksBesideAdcp;
    // As @adcp/sdk's platform server answers an id from its MCP task store: its AdCP task registry has no such task.
    const unknown = { code: 'REFERENCE_NOT_FOUND', message: 'Task not found', field: 'task_id' };
    seller.fault('tasks/get', { kind: 'adcp-error', error: unknown }, { times: 1_000 });
    seller.fault('tasks/list', { kind: 'adcp-error', error: unknown }, { times: 1_000 });
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterMs: 3 * CALL_TIMEOUT_MS, webhook: false },
    ]);
    const operationId = await start('mcpTasksBesideAdcp');
    const state = await settledState(operationId, 45_000);
    const buys = buysOf(seller, operationId);
    expect(state.failure).toBeUndefined();
    expect(state.status).toBe('completed');
    expect(buys).toHaveLength(1);
    expect(state.result?.media_buy_id).toBe(buys[0].mediaBuyId);
    expect(seller.tasks()).toHaveLength(1);
    expect(state.readMethod).toBe('mcp-tasks');
  },
  60_000,
);

test.concurrent(
  "an MCP task the call came back working with is read by MCP tasks/get though the seller's description could not be read (no mcpTasks cached)",
  async () => {
    const seller = sellers.mcpTasksUndescribed;
    // Pending past the call's answer window, no webhook: only reads of the MCP task can finish the operation.
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterMs: 3 * CALL_TIMEOUT_MS, webhook: false },
    ]);
    const operationId = await start('mcpTasksUndescribed');
    const state = await settledState(operationId, 45_000);
    const buys = buysOf(seller, operationId);
    expect(state.failure).toBeUndefined();
    expect(state.status).toBe('completed');
    expect(buys).toHaveLength(1);
    expect(state.result?.media_buy_id).toBe(buys[0].mediaBuyId);
    expect(seller.tasks()).toHaveLength(1);
    // The call said its task is MCP's; the reads went to MCP tasks/get on that word alone.
    expect(state.mcpTaskId).toBe(seller.tasks()[0].taskId);
    expect(state.readMethod).toBe('mcp-tasks');
  },
  60_000,
);

test.concurrent(
  '#9.7 account-scoped tasks/get: reads pass the request account',
  async () => {
    const seller = sellers.accountScoped;
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterPolls: 1, webhook: false },
    ]);
    const params = createMediaBuyParams();
    const operationId = await start('accountScoped', params);
    const state = await settledState(operationId, 45_000);
    const [buy] = buysOf(seller, operationId);
    expect(state.failure).toBeUndefined();
    expect(state.status).toBe('completed');
    expect(state.result?.media_buy_id).toBe(buy.mediaBuyId);
    // Only a read that names the account sees the task (and moves it): the result came from one.
    expect(seller.callsTo('tasks/get').length).toBeGreaterThanOrEqual(1);
    for (const read of seller.callsTo('tasks/get')) expect(read.args.account).toEqual(params.account);
  },
  60_000,
);

test.concurrent(
  '#9.7 account-scoped tasks/get: REFERENCE_NOT_FOUND on a task we hold means "cannot see it now", not failed',
  async () => {
    const seller = sellers.accountScopedUnseen;
    // A task the operation holds, that the seller cannot show for a while: the operation keeps waiting.
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterMs: MANUAL, webhook: true },
    ]);
    seller.fault(
      'tasks/get',
      { kind: 'adcp-error', error: { code: 'REFERENCE_NOT_FOUND', message: 'Task not found', field: 'task_id' } },
      { times: 50 },
    );
    const waiting = await start('accountScopedUnseen', createMediaBuyParams());
    const submitted = await waitForState(waiting, (s) => s.status === 'submitted' && s.taskId !== undefined);
    await eventually(
      async () =>
        seller.callsTo('tasks/get').filter((c) => c.args.task_id === submitted.taskId && c.outcome === 'fault')
          .length >= 2
          ? true
          : undefined,
      30_000,
    );
    const meanwhile = await stateOf(waiting);
    expect(meanwhile?.status).toBe('submitted');
    expect(meanwhile?.failure).toBeUndefined();
    seller.advanceTask(submitted.taskId!);
    const done = await settledState(waiting, 30_000);
    expect(done.status).toBe('completed');
    expect(done.result?.media_buy_id).toBe(buysOf(seller, waiting)[0].mediaBuyId);
  },
  120_000,
);

test.concurrent(
  '#9.8 a webhook "completed" wrapping {status: submitted, task_id} with no media_buy_id is not a successful create; a read confirms the buy',
  async () => {
    const seller = sellers.wrapping;
    const operationId = await start('wrapping');
    await webhookSent(seller, operationId);
    // Right after the wrapping webhook, before any read could find the buy: not a success.
    const early = await stateOf(operationId);
    expect(early?.outcome).not.toBe('success');
    if (early?.status === 'completed') expect(early.result?.media_buy_id).toBeDefined();

    const state = await settledState(operationId, 45_000);
    const buys = buysOf(seller, operationId);
    expect(buys).toHaveLength(1);
    expect(state.status).toBe('completed');
    expect(state.result?.media_buy_id).toBe(buys[0].mediaBuyId);
    expect(seller.callsTo('tasks/get').length + seller.callsTo('get_media_buys').length).toBeGreaterThanOrEqual(1);
  },
  60_000,
);

describe('#9.13 a misrouted webhook never completes another operation', () => {
  async function twoSubmitted(sellerId: string) {
    const seller = sellers[sellerId];
    for (let i = 0; i < 2; i++)
      seller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', afterMs: MANUAL, webhook: false, tasksGet: HIDDEN_FROM_READS },
      ]);
    const a = await start(sellerId);
    const b = await start(sellerId);
    const stateA = await waitForState(a, (s) => s.status === 'submitted' && s.taskId !== undefined);
    const stateB = await waitForState(b, (s) => s.status === 'submitted' && s.taskId !== undefined);
    seller.advanceTask(stateB.taskId!); // B's task is completed at the seller (its buy made), its webhook not sent
    return { seller, a, b, taskA: stateA.taskId!, taskB: stateB.taskId! };
  }

  function refusedVisibly(state: OperationState | undefined, taskId: string): boolean {
    return (
      (state?.refusedWebhooks ?? []).some((entry) => entry.taskId === taskId || entry.note.includes(taskId)) ||
      (state?.anomalies ?? []).some((entry) => entry.source === 'webhook' && entry.note.includes(taskId))
    );
  }

  // The gateway verifies and signals; the operation judges whether the event is its own (one rule, in its machine),
  // so a verified misrouted webhook is answered 200 and refused by the workflow, visibly in its state.
  test.concurrent(
    "B's correctly signed completion posted to A's URL is refused by A's workflow, visible in A's state",
    async () => {
      const { seller, a, taskB } = await twoSubmitted('plain');
      const [delivery] = await seller.misrouteWebhook(taskB, urlOf(a));
      expect(delivery.finalStatus).toBe(200);
      const stateA = await eventually(async () => {
        const state = await stateOf(a);
        return refusedVisibly(state, taskB) ? state : undefined;
      });
      expect(stateA?.status).toBe('submitted');
      expect(stateA?.result?.media_buy_id).toBeUndefined();
      expect(stateA?.webhooksApplied).toBe(0);
      expect(refusedVisibly(stateA, taskB)).toBe(true);
    },
    60_000,
  );

  test.concurrent(
    '3.1: the operation_id of B in the payload is refused by A',
    async () => {
      const { seller, a, b, taskB } = await twoSubmitted('adcp31');
      const [delivery] = await seller.misrouteWebhook(taskB, urlOf(a));
      expect(delivery.payload.operation_id).toBe(b);
      expect(delivery.finalStatus).toBe(200);
      const stateA = await eventually(async () => {
        const state = await stateOf(a);
        return (state?.refusedWebhooks ?? []).length > 0 ? state : undefined;
      });
      expect(stateA?.status).toBe('submitted');
      expect(stateA?.webhooksApplied).toBe(0);
    },
    60_000,
  );

  test.concurrent(
    'a correctly signed webhook with a made-up task_id is refused and does not complete A',
    async () => {
      const { seller, a } = await twoSubmitted('unbacked');
      const [delivery] = await seller.sendUnbackedWebhook(urlOf(a), {
        task_id: 'task_made_up',
        result: { media_buy_id: 'mb_made_up' },
      });
      expect(delivery.finalStatus).toBe(200);
      const stateA = await eventually(async () => {
        const state = await stateOf(a);
        return refusedVisibly(state, 'task_made_up') ? state : undefined;
      });
      expect(stateA?.status).toBe('submitted');
      expect(stateA?.result?.media_buy_id).toBeUndefined();
      expect(refusedVisibly(stateA, 'task_made_up')).toBe(true);
    },
    60_000,
  );
});

test.concurrent(
  "#9.4 one operation's cancel does not fail another's call in flight at the same seller",
  async () => {
    const seller = sellers.isolation;
    // D's and C's first creates land on hanging sockets (accepted, never answered); every later one completes.
    seller.hangSockets({ tool: 'create_media_buy', times: 2 });
    seller.setDefaultScript('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1 }]);
    const d = await start('isolation');
    await eventually(async () => (callsFor(seller, d).some((call) => call.hanging) ? true : undefined));
    const c = await start('isolation');
    await eventually(async () => (callsFor(seller, c).some((call) => call.hanging) ? true : undefined));

    // C is canceled while both calls are in flight; D's call must not notice.
    const cancel = stack.orchestrator
      .cancel(c, { requestedBy: 'ops@buyer', reason: 'isolation test' })
      .catch((error: unknown) => ({ refused: String(error) }));
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const meanwhile = await stateOf(d);
    expect(meanwhile?.failure).toBeUndefined();
    expect(meanwhile?.status).not.toBe('failed');

    expect(await cancel).toMatchObject({ accepted: true });
    expect((await settledState(c, 30_000)).status).toBe('canceled');
    // D waits for its own timeout, retries with the same key, and completes.
    const state = await settledState(d, 60_000);
    expect(state.failure).toBeUndefined();
    expect(state.status).toBe('completed');
    expect(buysOf(seller, d)).toHaveLength(1);
  },
  120_000,
);

test.concurrent(
  "#9.4 one operation's cancel does not fail another's call waiting on the same seller's connection (a socket that never answers the handshake)",
  async () => {
    const seller = sellers.isolationHandshake;
    // Every request to the seller hangs (MCP handshake included) until a second after C is canceled.
    let hangUntil = Number.POSITIVE_INFINITY;
    seller.hangSockets({ anyRequest: true, match: () => Date.now() < hangUntil });
    seller.setDefaultScript('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1 }]);
    const d = await start('isolationHandshake');
    await eventually(async () => (seller.calls.some((call) => call.hanging) ? true : undefined));
    const c = await start('isolationHandshake');
    await new Promise((resolve) => setTimeout(resolve, 500));

    const cancel = stack.orchestrator
      .cancel(c, { requestedBy: 'ops@buyer', reason: 'isolation test' })
      .catch((error: unknown) => ({ refused: String(error) }));
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    hangUntil = Date.now();
    const meanwhile = await stateOf(d);
    expect(meanwhile?.failure).toBeUndefined();
    expect(meanwhile?.status).not.toBe('failed');

    expect(await cancel).toMatchObject({ accepted: true });
    expect((await settledState(c, 30_000)).status).toBe('canceled');
    const state = await settledState(d, 60_000);
    expect(state.failure).toBeUndefined();
    expect(state.status).toBe('completed');
    expect(buysOf(seller, d)).toHaveLength(1);
  },
  120_000,
);

/** A follow-up operation on the buy (sync_creatives, update_media_buy, get_media_buy_delivery) at one seller. */
async function followUp(sellerId: string, task: string, params: Record<string, unknown>): Promise<OperationState> {
  const { operationId } = await stack.orchestrator.start({ sellerId, task, params, idempotencyKey: randomUUID() });
  started.push({ orchestratorOf: () => stack, operationId });
  return settledState(operationId, 45_000);
}

describe('the whole flow (create → sync_creatives → update → delivery) against the fixture in each seller profile', () => {
  test.concurrent.each(FLOW_PROFILES)(
    '%s',
    async (profile) => {
      const sellerId = flowSeller(profile);
      const seller = sellers[sellerId];
      // Completion by webhook after a moment, readable where the profile lets reads see it: each profile then decides
      // which route (answer, webhook, which read) carries the result.
      seller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', afterMs: 1_500, webhook: true },
      ]);
      const operationId = await start(sellerId);
      const created = await settledState(operationId, 45_000);
      const [buy] = buysOf(seller, operationId);
      expect({ status: created.status, failure: created.failure }).toEqual({ status: 'completed', failure: undefined });
      expect(created.result?.media_buy_id).toBe(buy.mediaBuyId);
      const mediaBuyId = buy.mediaBuyId;
      const account = createMediaBuyParams().account;

      const synced = await followUp(sellerId, 'sync_creatives', { account, creatives: [] });
      expect(synced.status).toBe('completed');

      const updated = await followUp(sellerId, 'update_media_buy', { account, media_buy_id: mediaBuyId, paused: true });
      expect({ status: updated.status, failure: updated.failure }).toEqual({ status: 'completed', failure: undefined });
      expect(seller.mediaBuys().find((candidate) => candidate.mediaBuyId === mediaBuyId)?.status).toBe('paused');

      const delivery = await followUp(sellerId, 'get_media_buy_delivery', { account, media_buy_ids: [mediaBuyId] });
      expect(delivery.status).toBe('completed');
      const rows = delivery.result?.media_buy_deliveries as { media_buy_id?: string }[] | undefined;
      expect(rows?.map((row) => row.media_buy_id)).toContain(mediaBuyId);
      expect(buysOf(seller, operationId)).toHaveLength(1);
    },
    180_000,
  );
});
