/**
 * The fault scenario of the errors issue, shared by its short form in `npm test` and the full form
 * (`npm run fault-test`): N concurrent create_media_buy operations against the scripted seller while a fraction of
 * the seller's answers are 5xx or timeouts (the seller processed the request but answered too late) and the worker
 * process is SIGKILLed and restarted. It reports what a user relies on: every operation ended, and the seller holds
 * exactly one media buy per operation.
 *
 * The convergence faults of issue #9 are opt-in (the full form turns them on):
 * - `hangRate`: a share of requests land on a hanging socket (accepted, never answered; half of them after the
 *   seller acted), so calls and reads time out;
 * - `webhookFirstOperations`: operations at a second seller that acts at once, sends its signed completion webhook
 *   through the real gateway before it answers, and loses the answer (the caller times out) for a share of them;
 * - `cancels`: extra operations at the same sellers, canceled while the others' calls are in flight; they must end
 *   canceled with at most one buy, canceled at the seller or on their record, and must not fail anyone else.
 *
 * The resource faults of issue #24 are opt-in too (the full form turns them on):
 * - `outOfBandApprovals`: operations at a seller that keeps its own task records (`get_task` in its own words, no
 *   webhooks) and holds every create in its own review; a person approves each at the seller, half in its admin flow
 *   (the record only names the buy it made), half through its `complete_task` tool;
 * - `lostWithoutWebhooks`: operations at a seller with no task read, no task listing and no webhooks, whose create
 *   answers are lost after it acted for a share of them; only its media-buy listing can tell what it made.
 *
 * So is `mcpTasks` (the full form turns it on): operations at a seller that serves MCP's own Tasks protocol (no AdCP
 * task read or listing, no webhooks) and keeps each create's MCP task pending for 10 to 20 call timeouts, spread. A
 * call that followed the task to its end would be cut by the call timeout on every attempt; each must instead come
 * back `working` with the MCP task id, and its operation end completed through MCP `tasks/get` reads (read method
 * `mcp-tasks`) with the one buy its task made, across the worker kills.
 *
 * Every buy any seller holds is then counted from both sides: each operation knows at most one buy (its
 * `resource.media_buy_id`), and each buy is known to exactly one operation (`orphanBuys` and `buysKnownTwice`).
 */
import { randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProtocolClient } from '@adcp/sdk/advanced';
import { Client } from '@temporalio/client';
import { idempotencyKeyFor } from '../../activities/idempotency';
import { createGateway } from '../../api/app';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { dataConverter } from '../../client/payload-codec';
import { OperationEndedError } from '../../client/operation-errors';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { type SellerConfig, SellerRegistry } from '../../config/sellers';
import type { ManagedProcess } from '../../scripts/lib/processes';
import type { OperationState } from '../../contract/operation';
import { type Fault, type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { DEFAULT_RETRY_BACKOFF } from '../../activities/transport-errors';
import { createMediaBuyParams } from './demo-requests';
import { startWorkerProcess, writeAgentsFile } from './worker-process';
import { connectGrpc } from '../../config/grpc-connection';

export interface FaultScenario {
  address: string;
  operations: number;
  /** Worker SIGKILLs, spread over the run. */
  kills: number;
  /** Share of seller requests (calls and polls) that fail. */
  faultRate: number;
  /** Per-call timeout of the worker; the "timeout" faults hold the answer longer than this. */
  callTimeoutMs?: number;
  /** Share of seller requests that land on a hanging socket (never answered). Default 0. */
  hangRate?: number;
  /**
   * Operations at a seller that sends its signed final webhook before its answer (answer-after-webhook), on top of
   * `operations`. Default 0.
   */
  webhookFirstOperations?: number;
  /** Share of the webhook-first operations whose answer is lost after the seller acted (the caller times out). */
  lostAnswerRate?: number;
  /** Extra operations, spread over both sellers, canceled while the others run. Default 0. */
  cancels?: number;
  /** Operations at a seller keeping its own task records, each approved at the seller (admin flow or complete_task). */
  outOfBandApprovals?: number;
  /** Operations at a seller with no task read, listing or webhooks; `lostAnswerRate` of their answers are lost. */
  lostWithoutWebhooks?: number;
  /**
   * Operations at a seller serving MCP Tasks (no AdCP task read, no webhooks) whose create tasks stay pending for
   * several call timeouts: they must all complete through MCP `tasks/get` reads. Default 0.
   */
  mcpTasks?: number;
  log?: (line: string) => void;
}

export interface FaultReport {
  /** Operations expected to complete (chaos + webhook-first); canceled ones are counted apart. */
  operations: number;
  ended: Record<string, number>;
  notEnded: string[];
  /** The failure messages of the operations that ended failed (at most 10), to tell load from a bug. */
  failures: string[];
  /**
   * The operations that ended failed, checked from the sellers' side by the keys the operation may have used: how many
   * left nothing at any seller (no buy, no open task that could still become one), how many had a create the seller
   * took without an injected fault, and those a seller holds something from (an orphan risk: listed by ID).
   */
  failedAtSeller: { holdNothing: number; reachedSeller: number; holdSomething: string[] };
  /** Buys of the operations expected to complete, plus buys no operation's key explains. */
  mediaBuys: number;
  operationsWithOneBuy: number;
  /** Operations with more than one buy (or buys no operation's key explains). */
  duplicateBuys: number;
  /**
   * How the canceled operations ended, how many buys they left (at most one each), and how many of those are
   * unaccounted for: neither canceled at the seller nor reported by the operation (as still live or not known).
   */
  canceled: { operations: number; ended: Record<string, number>; buys: number; unaccountedBuys: number };
  faultsInjected: number;
  /** Requests that were never answered (hanging sockets, lost answers). */
  hangingRequests: number;
  /** Webhooks the webhook-first seller sent before answering, and how many the gateway accepted. */
  webhooksFirst: { sent: number; accepted: number };
  /** Tasks approved at the records seller: in its admin flow, through its complete_task tool. */
  approvals: { admin: number; completeTask: number };
  /** Create answers the listing-only seller lost after it acted. */
  lostWithoutWebhooks: number;
  /**
   * The operations at the MCP Tasks seller: how they ended, the buys that seller holds, how many operations know
   * exactly one buy there (their own), how many hold their MCP task's id and were read by MCP `tasks/get`
   * (`readMethod: 'mcp-tasks'`), the create calls it took (one per operation, more where a call was made again:
   * after a worker kill, or when a call waited for the task until its timeout), the MCP `tasks/get` requests it
   * answered, and the span its tasks stayed pending (seconds).
   */
  mcpTasks: {
    operations: number;
    ended: Record<string, number>;
    buys: number;
    oneBuyEach: number;
    readByMcpTasks: number;
    /** The operations that were not (at most 10): what they recorded, and the create calls the seller took. */
    notReadByMcpTasks: string[];
    createCalls: number;
    taskReads: number;
    pendingSeconds: { min: number; max: number };
  };
  /**
   * Both sides of "one buy per operation": buys a seller holds that no operation knows (by its recorded
   * `resource.media_buy_id` or result), buys more than one operation claims, and operations that ended completed
   * knowing no buy.
   */
  buysHeld: number;
  orphanBuys: string[];
  buysKnownTwice: string[];
  completedWithoutBuy: string[];
  /**
   * The reconciliation orphan pass run at the end, per seller: the buys it listed, how many a workflow knows, the
   * orphans it adopted, those left (no workflow knows them) and those claimed twice. `listed: false` where the
   * seller's buys could not be listed.
   */
  reconciliation: Record<
    string,
    {
      listed: boolean;
      count: number;
      known: number;
      adopted: number;
      orphans: string[];
      claimedTwice: string[];
      note?: string;
    }
  >;
  requests: number;
  kills: number;
  seconds: number;
}

async function listenOnLoopback(): Promise<{ server: Server; base: string }> {
  const server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

export async function runFaultScenario(scenario: FaultScenario): Promise<FaultReport> {
  const log = scenario.log ?? (() => undefined);
  const callTimeoutMs = scenario.callTimeoutMs ?? 2_000;
  const webhookFirstOperations = scenario.webhookFirstOperations ?? 0;
  const cancels = scenario.cancels ?? 0;
  const started = Date.now();
  const seller: ScriptedSeller = await startScriptedSeller();
  const lostAnswers = Math.round(webhookFirstOperations * (scenario.lostAnswerRate ?? 0));
  const webhookSeller: ScriptedSeller | undefined =
    webhookFirstOperations > 0 || cancels > 0
      ? await startScriptedSeller({
          profile: { 'answer-after-webhook': { loseAnswers: lostAnswers, lostAs: 'hang' } },
        })
      : undefined;
  const outOfBandApprovals = scenario.outOfBandApprovals ?? 0;
  const lostWithoutWebhooks = scenario.lostWithoutWebhooks ?? 0;
  const recordsSeller: ScriptedSeller | undefined =
    outOfBandApprovals > 0 ? await startScriptedSeller({ profile: 'seller-task-records' }) : undefined;
  const listingSeller: ScriptedSeller | undefined =
    lostWithoutWebhooks > 0
      ? await startScriptedSeller({
          profile: { 'no-tasks-get': true, 'buy-listing': { echo: ['context'], defaultStatusFilter: true } },
        })
      : undefined;
  const lostListingAnswers = Math.round(lostWithoutWebhooks * (scenario.lostAnswerRate ?? 0));
  const mcpTasks = scenario.mcpTasks ?? 0;
  // Its buys are listed as the listing seller's are (3.1: the create's context echoed, AdCP's default status filter),
  // so the reconciliation orphan pass reads them too; no AdCP tasks/get, so only MCP tasks/get can read its tasks.
  const mcpTasksSeller: ScriptedSeller | undefined =
    mcpTasks > 0
      ? await startScriptedSeller({
          a2a: false,
          profile: {
            'mcp-tasks': true,
            'no-tasks-get': true,
            'buy-listing': { echo: ['context'], defaultStatusFilter: true },
          },
        })
      : undefined;
  // Each create's MCP task stays pending for 10 to 20 call timeouts (spread over the group), and sends no webhook:
  // longer than a worker kill's recovery too (the call's 5 s heartbeat timeout, a restart under load, the retry), so
  // a create call made again after a kill still finds its task pending, and only the operation's MCP tasks/get reads
  // can see it complete.
  const mcpTaskPendingMs = Array.from(
    { length: mcpTasks },
    (_, i) => callTimeoutMs * (10 + Math.round((10 * i) / Math.max(1, mcpTasks - 1))),
  );
  if (mcpTasksSeller) {
    for (const pendingMs of mcpTaskPendingMs)
      mcpTasksSeller.script('create_media_buy', [
        { status: 'submitted' },
        { status: 'completed', afterMs: pendingMs, webhook: false },
      ]);
    // A create with a key of its own beyond the scripted ones (none is expected) stays pending the longest.
    mcpTasksSeller.setDefaultScript('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterMs: Math.max(...mcpTaskPendingMs), webhook: false },
    ]);
  }
  if (listingSeller) {
    // Synchronous creates that send no webhook; the first answers are lost after the seller made the buy.
    listingSeller.setDefaultScript('create_media_buy', [{ status: 'completed', webhook: false }]);
    if (lostListingAnswers > 0)
      listingSeller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: lostListingAnswers });
  }
  // A task completes on the seller's own clock (2 s) or at its first read, whichever comes first, as a seller's work
  // does. A task that moved only when read would never show in a listing: an operation whose quick polls a worker kill
  // cut short joins the seller's task watcher, and its 30-minute safety poll was then its only read (one run took an
  // hour that way).
  seller.setDefaultScript('create_media_buy', [
    { status: 'submitted' },
    { status: 'completed', afterPolls: 1, afterMs: 2_000 },
  ]);
  const faults: Fault[] = [
    { kind: 'http-status' as const, status: 500 },
    { kind: 'http-status' as const, status: 503 },
    { kind: 'slow-response' as const, ms: callTimeoutMs + 1_500 },
  ];
  seller.chaos('create_media_buy', { rate: scenario.faultRate, faults });
  seller.chaos('tasks/get', { rate: scenario.faultRate, faults });
  // Chance alone leaves a short run without any fault about one time in twelve (0.9^24): the first create always
  // fails once, so every run exercises a retry.
  if (scenario.faultRate > 0) seller.fault('create_media_buy', { kind: 'http-status', status: 503 }, { times: 1 });
  if (scenario.hangRate && scenario.hangRate > 0) {
    // Hanging sockets on top of the chaos: a request hangs with probability hangRate; half of the hanging creates
    // after the seller acted (the buy exists, the answer never comes), half before.
    const rate = scenario.hangRate;
    seller.hangSockets({ tool: 'create_media_buy', match: () => Math.random() < rate / 2, process: true });
    seller.hangSockets({ tool: 'create_media_buy', match: () => Math.random() < rate / 2 });
    seller.hangSockets({ tool: 'tasks/get', match: () => Math.random() < rate });
  }

  const gateway = webhookSeller ? await listenOnLoopback() : undefined;
  const agents: SellerConfig[] = [
    { id: 'chaos', name: 'chaos', url: seller.url, protocol: 'mcp', token_env: 'CHAOS_SELLER_TOKEN' },
  ];
  if (webhookSeller) {
    agents.push({
      id: 'webhook-first',
      name: 'webhook-first',
      url: webhookSeller.url,
      protocol: 'mcp',
      token_env: 'WEBHOOK_FIRST_SELLER_TOKEN',
      webhooks: { scheme: 'rfc9421', jwks: webhookSeller.webhookJwks } as SellerConfig['webhooks'],
    });
  }
  if (recordsSeller)
    agents.push({
      id: 'records',
      name: 'records',
      url: recordsSeller.url,
      protocol: 'mcp',
      token_env: 'RECORDS_SELLER_TOKEN',
    });
  if (listingSeller)
    agents.push({
      id: 'listing',
      name: 'listing',
      url: listingSeller.url,
      protocol: 'mcp',
      token_env: 'LISTING_SELLER_TOKEN',
    });
  if (mcpTasksSeller)
    agents.push({
      id: 'mcp-tasks',
      name: 'mcp-tasks',
      url: mcpTasksSeller.url,
      protocol: 'mcp',
      token_env: 'MCP_TASKS_SELLER_TOKEN',
    });
  const agentsFile = writeAgentsFile(agents);
  const taskQueue = `faults-${randomUUID()}`;
  const tokens = {
    CHAOS_SELLER_TOKEN: seller.authToken,
    WEBHOOK_FIRST_SELLER_TOKEN: webhookSeller?.authToken ?? '',
    RECORDS_SELLER_TOKEN: recordsSeller?.authToken ?? '',
    LISTING_SELLER_TOKEN: listingSeller?.authToken ?? '',
    MCP_TASKS_SELLER_TOKEN: mcpTasksSeller?.authToken ?? '',
  };
  const workerEnv = {
    ...tokens,
    ADCP_CALL_TIMEOUT_MS: String(callTimeoutMs),
    // The worker's own retry backoff, not the harness's short one: under faults, how far apart retries land decides
    // how often the circuit breaker opens (5 failures in a row), and this run proves the production settings.
    ADCP_RETRY_INITIAL_INTERVAL_MS: String(DEFAULT_RETRY_BACKOFF.initialMs),
    ADCP_RETRY_MAX_INTERVAL_MS: String(DEFAULT_RETRY_BACKOFF.maxMs),
    ADCP_RECONCILE_EVERY: 'off',
    ...(gateway ? { ADCP_PUBLIC_BASE_URL: gateway.base } : {}),
  };
  const connection = await connectGrpc({ address: scenario.address });
  const client = new Client({ connection, dataConverter: dataConverter() });
  const orchestrator = new OrchestratorClient({ client, taskQueue });
  if (gateway) {
    const webhookRouter = createWebhookRouter({
      client,
      sellers: new SellerRegistry(agents, 'fault-run agents'),
      authenticator: createWebhookAuthenticator(),
      publicBaseUrl: gateway.base,
      env: tokens,
      log: () => undefined,
    });
    gateway.server.on('request', createGateway({ orchestrator, webhookRouter }));
  }
  let worker: ManagedProcess | undefined;
  try {
    worker = await startWorkerProcess({ address: scenario.address, taskQueue, agentsFile, env: workerEnv });
    const startOne = async (sellerId: string) =>
      (
        await orchestrator.start({
          sellerId,
          task: 'create_media_buy',
          params: createMediaBuyParams(),
          idempotencyKey: randomUUID(),
        })
      ).operationId;
    const operationIds = await Promise.all([
      ...Array.from({ length: scenario.operations }, () => startOne('chaos')),
      ...Array.from({ length: webhookFirstOperations }, () => startOne('webhook-first')),
      ...Array.from({ length: outOfBandApprovals }, () => startOne('records')),
      ...Array.from({ length: lostWithoutWebhooks }, () => startOne('listing')),
      ...Array.from({ length: mcpTasks }, () => startOne('mcp-tasks')),
    ]);
    // The last `mcpTasks` operations are the MCP Tasks seller's.
    const mcpTaskOperationIds = operationIds.slice(operationIds.length - mcpTasks);
    log(
      `${operationIds.length} operations started (${webhookFirstOperations} at the webhook-first seller, ` +
        `${outOfBandApprovals} approved at the seller, ${lostWithoutWebhooks} without webhooks or task reads, ` +
        `${mcpTasks} at an MCP Tasks seller)`,
    );
    const results = Promise.allSettled(operationIds.map((operationId) => orchestrator.result(operationId)));
    // The approvals stop once every operation has ended: one that failed leaves a task nobody will approve.
    let allEnded = false;
    void results.then(() => (allEnded = true));
    const approving = recordsSeller ? approveAtSeller(recordsSeller, outOfBandApprovals, () => allEnded) : undefined;

    // Operations canceled while the others' calls are in flight at the same sellers.
    const canceledIds = await Promise.all(
      Array.from({ length: cancels }, (_, i) => startOne(i % 2 === 0 || !webhookSeller ? 'chaos' : 'webhook-first')),
    );
    const canceledResults = Promise.allSettled(
      canceledIds.map(async (operationId, i) => {
        await new Promise((resolve) => setTimeout(resolve, 50 + ((i * 97) % 400)));
        // A worker may be SIGKILLed meanwhile, or so busy that the update's 4 s RPC deadline passes before a workflow
        // task runs it (150 operations on a shared 2-core machine): ask again, for up to about a minute.
        for (let attempt = 1; ; attempt += 1) {
          try {
            await orchestrator.cancel(operationId, {
              requestedBy: 'fault-test',
              reason: 'cancel beside running calls',
            });
            break;
          } catch (error) {
            // An earlier attempt was taken (its answer lost to a deadline under load) and the operation has ended.
            if (error instanceof OperationEndedError) break;
            if (attempt >= 12) throw error;
            await new Promise((resolve) => setTimeout(resolve, 2_000));
          }
        }
        return orchestrator.result(operationId);
      }),
    );
    if (cancels > 0) log(`${cancels} operations started to be canceled`);

    const allSellers = [
      seller,
      ...[webhookSeller, recordsSeller, listingSeller, mcpTasksSeller].filter((s) => s !== undefined),
    ];
    const requestCount = () => allSellers.reduce((sum, s) => sum + s.calls.length, 0);
    for (let kill = 1; kill <= scenario.kills; kill += 1) {
      // Kill while calls are in flight: after the seller has seen a share of this round's requests.
      const seen = requestCount();
      const target = seen + Math.max(5, Math.floor(operationIds.length / 2));
      const deadline = Date.now() + 60_000;
      while (requestCount() < target && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      await worker.stop('SIGKILL');
      log(`worker SIGKILLed (${kill}/${scenario.kills}) after ${requestCount()} seller requests`);
      worker = await startWorkerProcess({ address: scenario.address, taskQueue, agentsFile, env: workerEnv });
    }

    const settled = await results;
    const approvals = (await approving) ?? { admin: 0, completeTask: 0 };
    const ended: Record<string, number> = {};
    const notEnded: string[] = [];
    settled.forEach((outcome, index) => {
      if (outcome.status === 'fulfilled') {
        const why = outcome.value.failure ? ` (${outcome.value.failure.reason})` : '';
        ended[`${outcome.value.status}${why}`] = (ended[`${outcome.value.status}${why}`] ?? 0) + 1;
      } else notEnded.push(`${operationIds[index]}: ${String(outcome.reason)}`);
    });
    const failures = settled
      .flatMap((outcome, index) =>
        outcome.status === 'fulfilled' && outcome.value.failure
          ? [`${operationIds[index]}: ${outcome.value.failure.reason}: ${outcome.value.failure.message}`]
          : [],
      )
      .slice(0, 10);
    const states = new Map<string, OperationState>();
    settled.forEach((outcome, index) => {
      if (outcome.status === 'fulfilled') states.set(operationIds[index], outcome.value);
    });
    const canceledEnded: Record<string, number> = {};
    const canceledStates = new Map<string, OperationState>();
    (await canceledResults).forEach((outcome, index) => {
      if (outcome.status === 'fulfilled') canceledStates.set(canceledIds[index], outcome.value);
      const status = outcome.status === 'fulfilled' ? outcome.value.status : `not ended (${String(outcome.reason)})`;
      canceledEnded[status] = (canceledEnded[status] ?? 0) + 1;
      if (outcome.status === 'rejected') notEnded.push(`${canceledIds[index]} (canceled): ${String(outcome.reason)}`);
    });

    // Attribute each buy to its operation through the keys the operation may have used (first key, one fresh key).
    const buys = allSellers.flatMap((s) => s.mediaBuys());
    const owners = [...operationIds, ...canceledIds];
    const operationOfKey = new Map(
      owners.flatMap((operationId) =>
        [idempotencyKeyFor(operationId, 'call'), idempotencyKeyFor(operationId, 'call#1')].map(
          (key) => [key, operationId] as const,
        ),
      ),
    );
    const byOwner = new Map<string, number>(owners.map((operationId) => [operationId, 0]));
    let unaccountedBuys = 0;
    for (const buy of buys) {
      const owner = operationOfKey.get(buy.idempotencyKey ?? '') ?? `unattributed:${buy.mediaBuyId}`;
      byOwner.set(owner, (byOwner.get(owner) ?? 0) + 1);
      const canceledState = canceledStates.get(owner);
      if (canceledIds.includes(owner) && buy.status !== 'canceled') {
        // A buy a canceled operation left live must at least be on its record.
        const resource = canceledState?.cancellation?.resource ?? canceledState?.resource;
        if (resource?.mediaBuyId !== buy.mediaBuyId || resource.state === 'canceled') unaccountedBuys += 1;
      }
    }
    // Failed operations from the sellers' side: nothing bought, nothing waiting in a seller's review to be bought.
    const failedAtSeller: FaultReport['failedAtSeller'] = { holdNothing: 0, reachedSeller: 0, holdSomething: [] };
    const keysOf = (operationId: string) =>
      new Set([idempotencyKeyFor(operationId, 'call'), idempotencyKeyFor(operationId, 'call#1')]);
    for (const [operationId, state] of states) {
      if (state.status !== 'failed' || canceledIds.includes(operationId)) continue;
      const keys = keysOf(operationId);
      const held = buys.filter((buy) => keys.has(buy.idempotencyKey ?? ''));
      const pending = allSellers.flatMap((s) =>
        s
          .tasks()
          .filter(
            (task) =>
              task.tool === 'create_media_buy' &&
              keys.has(task.idempotencyKey ?? '') &&
              !['completed', 'failed', 'canceled', 'rejected'].includes(task.status),
          ),
      );
      const reached = allSellers.some((s) =>
        s.calls.some(
          (call) =>
            call.tool === 'create_media_buy' &&
            keys.has(String(call.args.idempotency_key ?? '')) &&
            call.outcome !== 'fault',
        ),
      );
      if (reached) failedAtSeller.reachedSeller += 1;
      if (held.length === 0 && pending.length === 0) failedAtSeller.holdNothing += 1;
      else
        failedAtSeller.holdSomething.push(
          `${operationId}: ${[...held.map((buy) => buy.mediaBuyId), ...pending.map((task) => `task ${task.taskId} ${task.status}`)].join(', ')}`,
        );
    }
    // The MCP Tasks group from both sides: the one buy its seller holds from each operation, which the operation
    // knows, and the MCP task the operation held and read by MCP tasks/get (not an answer the call waited out).
    const mcpTasksBuys = mcpTasksSeller?.mediaBuys() ?? [];
    const mcpTasksEnded: Record<string, number> = {};
    let mcpTasksOneBuyEach = 0;
    let readByMcpTasks = 0;
    const notReadByMcpTasks: string[] = [];
    for (const operationId of mcpTaskOperationIds) {
      const state = states.get(operationId);
      const status = state ? `${state.status}${state.failure ? ` (${state.failure.reason})` : ''}` : 'not ended';
      mcpTasksEnded[status] = (mcpTasksEnded[status] ?? 0) + 1;
      const keys = keysOf(operationId);
      const own = mcpTasksBuys.filter((buy) => keys.has(buy.idempotencyKey ?? ''));
      if (state && own.length === 1 && own[0].mediaBuyId === buyKnownTo(state)) mcpTasksOneBuyEach += 1;
      const tasks = (mcpTasksSeller?.tasks() ?? []).filter(
        (task) => task.tool === 'create_media_buy' && keys.has(task.idempotencyKey ?? ''),
      );
      if (state?.readMethod === 'mcp-tasks' && tasks.length === 1 && state.taskId === tasks[0].taskId)
        readByMcpTasks += 1;
      else {
        const calls = (mcpTasksSeller?.callsTo('create_media_buy') ?? [])
          .filter((call) => keys.has(String(call.args.idempotency_key ?? '')))
          .map((call) => `${call.at} ${call.outcome}${call.replayed ? ' replayed' : ''}`);
        notReadByMcpTasks.push(
          `${operationId}: ${state?.status ?? 'not ended'}, read method ${state?.readMethod ?? 'none'}, task ${state?.taskId ?? 'none'} (seller: ${tasks.map((task) => `${task.taskId} ${task.status}`).join(', ') || 'none'}); transitions: ${(state?.transitions ?? []).map((t) => `${t.at} ${t.from}->${t.to} by ${t.source}${t.note ? ` (${t.note})` : ''}`).join('; ')}; create calls: ${calls.join('; ')}; reconciliation: ${(state?.reconciliation ?? []).map((r) => `${r.at} ${r.outcome}: ${r.note}`).join('; ') || 'none'}`,
        );
      }
    }
    const canceledSet = new Set(canceledIds);
    const mainCounts = [...byOwner.entries()].filter(([owner]) => !canceledSet.has(owner));
    const canceledBuys = canceledIds.reduce((sum, operationId) => sum + (byOwner.get(operationId) ?? 0), 0);
    const deliveries = webhookSeller?.webhookDeliveries ?? [];

    // The other side: which operation knows each buy, from what the operation itself recorded.
    for (const [operationId, state] of canceledStates) states.set(operationId, state);
    const knownBy = new Map<string, string[]>();
    const completedWithoutBuy: string[] = [];
    for (const [operationId, state] of states) {
      const mediaBuyId = buyKnownTo(state);
      if (!mediaBuyId) {
        if (state.status === 'completed') completedWithoutBuy.push(operationId);
        continue;
      }
      knownBy.set(mediaBuyId, [...(knownBy.get(mediaBuyId) ?? []), operationId]);
    }
    const orphanBuys = buys.filter((buy) => !knownBy.has(buy.mediaBuyId)).map((buy) => buy.mediaBuyId);
    const buysKnownTwice = [...knownBy.entries()]
      .filter(([, operations]) => operations.length > 1)
      .map(([mediaBuyId, operations]) => `${mediaBuyId}: ${operations.join(', ')}`);
    // The orchestrator's own side: each seller's reconciliation compares its listing with the buys workflows know.
    const reconciliation: FaultReport['reconciliation'] = {};
    for (const agent of agents) {
      try {
        const pass = (await orchestrator.reconcile(agent.id, 'fault-test')).buys;
        reconciliation[agent.id] = pass
          ? {
              listed: pass.listed,
              count: pass.count,
              known: pass.known,
              adopted: pass.adopted.length,
              orphans: pass.orphans.map((orphan) => orphan.mediaBuyId),
              claimedTwice: pass.claimedTwice.map((claim) => `${claim.mediaBuyId}: ${claim.owners.join(', ')}`),
              ...(pass.note ? { note: pass.note } : {}),
            }
          : { listed: false, count: 0, known: 0, adopted: 0, orphans: [], claimedTwice: [], note: 'no orphan pass' };
      } catch (error) {
        reconciliation[agent.id] = {
          listed: false,
          count: 0,
          known: 0,
          adopted: 0,
          orphans: [],
          claimedTwice: [],
          note: `reconciliation failed: ${String(error)}`,
        };
      }
      log(`reconciliation of ${agent.id}: ${JSON.stringify(reconciliation[agent.id])}`);
    }
    return {
      reconciliation,
      operations: operationIds.length,
      ended,
      notEnded,
      failures,
      failedAtSeller,
      mediaBuys: mainCounts.reduce((sum, [, count]) => sum + count, 0),
      operationsWithOneBuy: mainCounts.filter(([, count]) => count === 1).length,
      duplicateBuys: [...byOwner.entries()].filter(([owner, count]) => count > 1 || owner.startsWith('unattributed:'))
        .length,
      canceled: { operations: canceledIds.length, ended: canceledEnded, buys: canceledBuys, unaccountedBuys },
      faultsInjected: allSellers.reduce((sum, s) => sum + s.calls.filter((call) => call.fault).length, 0),
      hangingRequests: allSellers.reduce((sum, s) => sum + s.calls.filter((call) => call.hanging).length, 0),
      webhooksFirst: {
        sent: deliveries.length,
        accepted: deliveries.filter((delivery) => delivery.finalStatus !== undefined && delivery.finalStatus < 300)
          .length,
      },
      approvals,
      lostWithoutWebhooks:
        listingSeller?.calls.filter((call) => call.tool === 'create_media_buy' && call.fault).length ?? 0,
      mcpTasks: {
        operations: mcpTaskOperationIds.length,
        ended: mcpTasksEnded,
        buys: mcpTasksBuys.length,
        oneBuyEach: mcpTasksOneBuyEach,
        readByMcpTasks,
        notReadByMcpTasks: notReadByMcpTasks.slice(0, 10),
        createCalls: mcpTasksSeller?.callsTo('create_media_buy').length ?? 0,
        taskReads:
          mcpTasksSeller?.calls.filter(
            (call) => call.transport === 'mcp' && call.method === 'tasks/get' && call.tool === undefined,
          ).length ?? 0,
        pendingSeconds: {
          min: mcpTasks > 0 ? Math.min(...mcpTaskPendingMs) / 1_000 : 0,
          max: mcpTasks > 0 ? Math.max(...mcpTaskPendingMs) / 1_000 : 0,
        },
      },
      buysHeld: buys.length,
      orphanBuys,
      buysKnownTwice,
      completedWithoutBuy,
      requests: requestCount(),
      kills: scenario.kills,
      seconds: Math.round((Date.now() - started) / 100) / 10,
    };
  } finally {
    await worker?.stop('SIGKILL').catch(() => undefined);
    if (gateway) {
      gateway.server.closeAllConnections();
      await new Promise((resolve) => gateway.server.close(resolve));
    }
    await connection.close();
    await seller.close();
    await webhookSeller?.close();
    await recordsSeller?.close();
    await listingSeller?.close();
    await mcpTasksSeller?.close();
  }
}

/** The media buy an operation knows: the resource it recorded (or its cancellation did), else its result's id. */
function buyKnownTo(state: OperationState): string | undefined {
  return (
    state.resource?.mediaBuyId ??
    state.cancellation?.resource?.mediaBuyId ??
    (typeof state.result?.media_buy_id === 'string' ? state.result.media_buy_id : undefined)
  );
}

/**
 * A person at the seller approves every create the seller holds in its own review, as it reaches the review: in
 * turns, in the seller's admin flow (the record then names only the buy it made) and through its complete_task tool
 * (with the media_buy_id it assigns). Resolves when `count` tasks were approved, or `stop()` says every operation has ended.
 */
async function approveAtSeller(
  seller: ScriptedSeller,
  count: number,
  stop: () => boolean,
): Promise<{ admin: number; completeTask: number }> {
  const approved = new Set<string>();
  let admin = 0;
  let completeTask = 0;
  const deadline = Date.now() + 10 * 60_000;
  while (approved.size < count && Date.now() < deadline && !stop()) {
    for (const task of seller.tasks()) {
      if (approved.has(task.taskId) || task.tool !== 'create_media_buy' || task.recordStatus !== 'requires_approval')
        continue;
      approved.add(task.taskId);
      if (approved.size % 2 === 1) {
        seller.approveInAdmin(task.taskId);
        admin += 1;
      } else {
        await ProtocolClient.callTool(seller.agent('mcp', 'records') as never, 'complete_task', {
          task_id: task.taskId,
          status: 'completed',
          response_data: { media_buy_id: `mb_approved_${randomUUID().slice(0, 8)}` },
        });
        completeTask += 1;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { admin, completeTask };
}
