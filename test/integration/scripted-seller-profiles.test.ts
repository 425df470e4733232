/**
 * The scripted seller's profiles (test/fixtures/scripted-seller/profiles.ts): each one a way a real AdCP 3.x seller
 * behaved that broke the orchestrator (issue #9), proven over real HTTP with @adcp/sdk's own client, so the
 * convergence tests can rely on the fixture doing exactly what the profile says.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { ProtocolClient } from '@adcp/sdk/advanced';
import {
  InMemoryReplayStore,
  InMemoryRevocationStore,
  StaticJwksResolver,
  verifyWebhookSignature,
} from '@adcp/sdk/signing/server';
import { raceSignal } from '../../activities/mcp-connection';
import { createSdkSellerClient } from '../../activities/seller-client';
import { snapshotFromMcpToolResult, snapshotFromTasksGet } from '../../protocol/snapshot';
import { type ScriptedSeller, type ScriptedSellerOptions, startScriptedSeller } from '../fixtures/scripted-seller';

type Json = Record<string, unknown>;

interface ReceivedWebhook {
  url: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: Json;
  at: number;
}

/** A webhook receiver on loopback that records every POST (any path) and answers 200. */
async function startReceiver(): Promise<{ base: string; received: ReceivedWebhook[]; close: () => Promise<void> }> {
  const received: ReceivedWebhook[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({
        url: `http://${req.headers.host}${req.url}`,
        path: req.url ?? '',
        headers: req.headers,
        body,
        json: JSON.parse(body) as Json,
        at: Date.now(),
      });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let keySeq = 0;
const newKey = () => `profile-test-key-${Date.now()}-${++keySeq}`;
const ACME = { brand: { domain: 'acmeoutdoor.example' }, operator: 'acmeoutdoor.example' };
const GLOBEX = { brand: { domain: 'globex.example' }, operator: 'globex.example' };

const createArgs = (idempotencyKey: string, extra: Json = {}): Json => ({
  idempotency_key: idempotencyKey,
  account: ACME,
  brand: { domain: 'acmeoutdoor.example' },
  start_time: '2027-01-01T00:00:00Z',
  end_time: '2027-01-31T00:00:00Z',
  packages: [{ product_id: 'scripted_guaranteed_display', pricing_option_id: 'cpm_guaranteed_fixed', budget: 5000 }],
  ...extra,
});

/** What a call came to: its MCP result, or the error the SDK client threw. */
async function settle(promise: Promise<unknown>): Promise<{ result?: Json; error?: string }> {
  try {
    return { result: (await promise) as Json };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

/** The error code of a refused tool call, wherever the SDK put it (adcp_error, errors[], or the thrown message). */
function errorCodeOf(outcome: { result?: Json; error?: string }): string | undefined {
  if (outcome.error) return outcome.error;
  const structured = outcome.result?.structuredContent as Json | undefined;
  const adcp = structured?.adcp_error as Json | undefined;
  if (adcp?.code) return String(adcp.code);
  const text = JSON.stringify(outcome.result);
  return outcome.result?.isError === true ? text : undefined;
}

async function verifies(seller: ScriptedSeller, webhook: ReceivedWebhook): Promise<boolean> {
  const verified = await verifyWebhookSignature(
    { method: 'POST', url: webhook.url, headers: webhook.headers, body: webhook.body },
    {
      jwks: new StaticJwksResolver(seller.webhookJwks.keys),
      replayStore: new InMemoryReplayStore(),
      revocationStore: new InMemoryRevocationStore(),
    },
  );
  return verified.keyid === seller.webhookKeyId;
}

/** Over a fresh MCP client: MCP's own task methods (protocol methods, not AdCP tools). */
async function withMcpClient<T>(target: ScriptedSeller, use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ name: 'profile-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(target.url), {
      requestInit: { headers: { authorization: `Bearer ${target.authToken}` } },
    }),
  );
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}

const mcpTaskStatus = (target: ScriptedSeller, taskId: string) =>
  withMcpClient(target, (client) => client.experimental.tasks.getTask(taskId));

async function waitFor(predicate: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('Condition not met in time.');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

let seller: ScriptedSeller | undefined;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const call = (tool: string, args: Json) => ProtocolClient.callTool(seller!.agent('mcp'), tool, args) as Promise<Json>;
async function sellerWith(options: ScriptedSellerOptions): Promise<ScriptedSeller> {
  seller = await startScriptedSeller({ a2a: false, ...options });
  return seller;
}

beforeAll(async () => {
  receiver = await startReceiver();
});
afterEach(async () => {
  await seller?.close();
  seller = undefined;
  receiver.received.length = 0;
});
afterAll(async () => {
  await receiver.close();
  await closeMCPConnections();
});

describe('answer-after-webhook', () => {
  test('the signed completed webhook arrives before the answer, which says submitted with the same task id', async () => {
    const s = await sellerWith({ profile: 'answer-after-webhook' });
    const url = `${receiver.base}/webhooks/adcp/op-a`;
    const sentAt = Date.now();
    const answer = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(newKey(), { push_notification_config: { url } })),
    );
    const answeredAt = Date.now();

    expect(receiver.received).toHaveLength(1);
    const [webhook] = receiver.received;
    expect(webhook.at).toBeLessThanOrEqual(answeredAt);
    expect(webhook.at).toBeGreaterThanOrEqual(sentAt);
    expect(webhook.json).toMatchObject({
      status: 'completed',
      task_id: answer.taskId,
      result: { media_buy_id: s.mediaBuys()[0].mediaBuyId },
    });
    expect(await verifies(s, webhook)).toBe(true);
    expect(answer).toMatchObject({ status: 'submitted', taskId: expect.any(String) });
    expect(s.mediaBuys()).toHaveLength(1);
    expect(s.task(answer.taskId!)?.status).toBe('completed');
  });

  test("answer: 'completed' answers the result; lost answers leave the buy made and the webhook delivered", async () => {
    const s = await sellerWith({ profile: { 'answer-after-webhook': { answer: 'completed', loseAnswers: 2 } } });
    const url = `${receiver.base}/webhooks/adcp/op-b`;
    const key = newKey();
    // Two lost answers: the request and the SDK client's own single retry (an idempotent replay).
    const lost = await settle(call('create_media_buy', createArgs(key, { push_notification_config: { url } })));
    expect(lost.error).toBeDefined();
    expect(s.mediaBuys()).toHaveLength(1);
    await waitFor(() => receiver.received.length === 1);
    expect(receiver.received[0].json).toMatchObject({
      status: 'completed',
      result: { media_buy_id: s.mediaBuys()[0].mediaBuyId },
    });
    expect(s.callsTo('create_media_buy').map((c) => c.connectionDropped)).toEqual([true, true]);

    const retried = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(key, { push_notification_config: { url } })),
    );
    expect(retried).toMatchObject({ status: 'completed', replayed: true });
    expect(retried.result?.media_buy_id).toBe(s.mediaBuys()[0].mediaBuyId);
    expect(s.mediaBuys()).toHaveLength(1);
  });

  test("lostAs: 'hang' never answers: the caller times out after the seller acted and its webhook was delivered", async () => {
    const s = await sellerWith({ profile: { 'answer-after-webhook': { loseAnswers: 1, lostAs: 'hang' } } });
    const url = `${receiver.base}/webhooks/adcp/op-c`;
    const pending = settle(call('create_media_buy', createArgs(newKey(), { push_notification_config: { url } })));
    await waitFor(() => receiver.received.length === 1);
    const outcome = await Promise.race([
      pending.then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('no answer'), 400)),
    ]);
    expect(outcome).toBe('no answer');
    expect(s.callsTo('create_media_buy')[0]).toMatchObject({ outcome: 'scripted', hanging: true });
    expect(s.mediaBuys()).toHaveLength(1);
  });
});

describe('no-tasks-get', () => {
  test('tasks/get and tasks/list are unknown tools', async () => {
    await sellerWith({ profile: 'no-tasks-get' });
    const created = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    expect(created.status).toBe('submitted');
    const get = await settle(call('tasks/get', { task_id: created.taskId }));
    expect(errorCodeOf(get)).toMatch(/tasks\/get|not found|unknown/i);
    const list = await settle(call('tasks/list', {}));
    expect(errorCodeOf(list)).toMatch(/tasks\/list|not found|unknown/i);
  });

  test('offering get_task_status and list_tasks instead', async () => {
    await sellerWith({ profile: { 'no-tasks-get': { offer: ['get_task_status', 'list_tasks'] } } });
    const created = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    expect(errorCodeOf(await settle(call('tasks/get', { task_id: created.taskId })))).toBeDefined();
    const status = await call('get_task_status', { task_id: created.taskId });
    expect(snapshotFromTasksGet(status.structuredContent as Json)).toMatchObject({
      taskId: created.taskId,
      status: 'submitted',
    });
    const listed = await call('list_tasks', { filters: { task_ids: [created.taskId] } });
    expect((listed.structuredContent as { tasks: Json[] }).tasks).toEqual([
      expect.objectContaining({ task_id: created.taskId, status: 'submitted' }),
    ]);
  });
});

describe('account-scoped-tasks', () => {
  test('tasks/get answers REFERENCE_NOT_FOUND unless the account matches the one the task was created with', async () => {
    await sellerWith({ profile: 'account-scoped-tasks' });
    const created = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    expect(errorCodeOf(await settle(call('tasks/get', { task_id: created.taskId })))).toBe('REFERENCE_NOT_FOUND');
    expect(errorCodeOf(await settle(call('tasks/get', { task_id: created.taskId, account: GLOBEX })))).toBe(
      'REFERENCE_NOT_FOUND',
    );
    const seen = await call('tasks/get', { task_id: created.taskId, account: ACME });
    expect(snapshotFromTasksGet(seen.structuredContent as Json)).toMatchObject({ taskId: created.taskId });
  });

  test('with adcp-3.1, get_task_status is scoped the same way', async () => {
    await sellerWith({ profile: ['adcp-3.1', 'account-scoped-tasks'] });
    const created = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    expect(errorCodeOf(await settle(call('get_task_status', { task_id: created.taskId })))).toBe('REFERENCE_NOT_FOUND');
    const seen = await call('get_task_status', { task_id: created.taskId, account: ACME });
    expect(snapshotFromTasksGet(seen.structuredContent as Json)).toMatchObject({ taskId: created.taskId });
  });
});

describe('completed-wrapping-submitted', () => {
  test('a webhook says completed but carries {status: submitted, task_id} and no media_buy_id; a read finds the buy later', async () => {
    const s = await sellerWith({ profile: 'completed-wrapping-submitted', pollsToComplete: 1 });
    const url = `${receiver.base}/webhooks/adcp/op-w`;
    const created = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(newKey(), { push_notification_config: { url } })),
    );
    await waitFor(() => receiver.received.length === 1);
    const [webhook] = receiver.received;
    expect(webhook.json).toMatchObject({
      status: 'completed',
      task_id: created.taskId,
      result: { status: 'submitted', task_id: created.taskId },
    });
    expect(JSON.stringify(webhook.json)).not.toContain('media_buy_id');
    expect(await verifies(s, webhook)).toBe(true);
    expect(s.mediaBuys()).toHaveLength(0);

    const read = snapshotFromTasksGet(
      ((await call('tasks/get', { task_id: created.taskId })) as Json).structuredContent as Json,
    );
    expect(read.status).toBe('completed');
    expect(read.result?.media_buy_id).toBe(s.mediaBuys()[0].mediaBuyId);
    await s.webhooksSettled();
    expect(receiver.received).toHaveLength(1);
  });
});

describe('shared-task-id', () => {
  test('every buy of an account gets the same task_id; another account another one', async () => {
    const s = await sellerWith({ profile: 'shared-task-id' });
    const first = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    const second = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    const other = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey(), { account: GLOBEX })));
    expect(second.taskId).toBe(first.taskId);
    expect(other.taskId).not.toBe(first.taskId);
    expect(s.tasks()).toHaveLength(3);
    expect(new Set(s.tasks().map((task) => task.taskId)).size).toBe(2);
  });
});

describe('hanging-socket', () => {
  test('the first N matching calls are accepted and never answered; the next one is', async () => {
    const s = await sellerWith({ profile: { 'hanging-socket': { tool: 'get_products', times: 1 } } });
    const hanging = settle(call('get_products', { buying_mode: 'brief', brief: 'x' }));
    const outcome = await Promise.race([
      hanging.then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('no answer'), 400)),
    ]);
    expect(outcome).toBe('no answer');
    expect(s.callsTo('get_products')[0]).toMatchObject({ outcome: 'fault', hanging: true });
    const answered = await call('get_products', { buying_mode: 'brief', brief: 'x' });
    expect((answered.structuredContent as { products: unknown[] }).products).toHaveLength(1);
  });

  test('calls naming one task hang; the same call for another task is answered', async () => {
    const s = await sellerWith({});
    const a = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    const b = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    s.hangSockets({ tool: 'tasks/get', taskId: a.taskId });
    const hanging = settle(call('tasks/get', { task_id: a.taskId }));
    const answered = await call('tasks/get', { task_id: b.taskId });
    expect(snapshotFromTasksGet(answered.structuredContent as Json).taskId).toBe(b.taskId);
    const outcome = await Promise.race([
      hanging.then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('no answer'), 300)),
    ]);
    expect(outcome).toBe('no answer');
  });

  test('anyRequest: even the MCP handshake hangs, until the rule is spent', async () => {
    const s = await sellerWith({});
    s.hangSockets({ anyRequest: true, times: 1 });
    const hanging = settle(call('get_products', { buying_mode: 'brief', brief: 'x' }));
    const outcome = await Promise.race([
      hanging.then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('no answer'), 400)),
    ]);
    expect(outcome).toBe('no answer');
    expect(s.calls).toEqual([expect.objectContaining({ method: 'POST /mcp', hanging: true })]);
    expect(s.callsTo('get_products')).toHaveLength(0);
    // The rule is spent: once the held handshake is dropped, the SDK's reconnect is answered. (Left hanging, the
    // call would outlive the seller and fall back to SSE against a closed port, retrying for ever.)
    expect(s.dropHangingRequests()).toBe(1);
    expect((await hanging).error).toBeUndefined();
    expect(s.callsTo('get_products')).toHaveLength(1);
  });

  test('process: true acts, then never answers', async () => {
    const s = await sellerWith({
      profile: { 'hanging-socket': { tool: 'create_media_buy', times: 1, process: true } },
    });
    s.script('create_media_buy', [{ status: 'completed' }]);
    const hanging = settle(call('create_media_buy', createArgs(newKey())));
    await waitFor(() => s.mediaBuys().length === 1);
    const outcome = await Promise.race([
      hanging.then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('no answer'), 300)),
    ]);
    expect(outcome).toBe('no answer');
    expect(s.callsTo('create_media_buy')[0]).toMatchObject({ outcome: 'scripted', hanging: true });
  });
});

describe('mcp-tasks', () => {
  test("create_media_buy is an MCP task tool: @adcp/sdk's client creates an MCP task, polls MCP tasks/get, and gets the result", async () => {
    const s = await sellerWith({ profile: 'mcp-tasks' });
    s.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 2 }]);
    const key = newKey();
    const done = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    const [task] = s.tasks();
    expect(done.status).toBe('completed');
    expect(done.result?.media_buy_id).toBe(s.mediaBuys()[0].mediaBuyId);
    expect(task.history.map((h) => [h.status, h.via])).toEqual([
      ['submitted', 'initial'],
      ['completed', 'poll'],
    ]);
    const mcpReads = s.calls.filter((c) => c.transport === 'mcp' && c.method === 'tasks/get' && c.tool === undefined);
    expect(mcpReads.length).toBeGreaterThanOrEqual(2);
    expect(mcpReads.every((c) => c.args.taskId === task.taskId)).toBe(true);
    expect(await mcpTaskStatus(s, task.taskId)).toMatchObject({
      taskId: task.taskId,
      status: 'completed',
    });

    // The same idempotency_key answers the same task: no second buy.
    const again = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    expect(again.result?.media_buy_id).toBe(done.result?.media_buy_id);
    expect(s.tasks()).toHaveLength(1);
    expect(s.mediaBuys()).toHaveLength(1);
  });

  test("our seller client reads a completed MCP task's result (tasks/get, then tasks/result) into the snapshot", async () => {
    const s = await sellerWith({ profile: 'mcp-tasks' });
    s.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1 }]);
    await call('create_media_buy', createArgs(newKey()));
    const [task] = s.tasks();
    expect(await mcpTaskStatus(s, task.taskId)).toMatchObject({ status: 'completed' });
    const answer = await createSdkSellerClient().readTask({
      agent: { id: 'scripted', url: s.url, protocol: 'mcp' },
      token: s.authToken,
      signal: AbortSignal.timeout(15_000),
      method: 'mcp-tasks',
      task: 'create_media_buy',
      taskId: task.taskId,
    });
    expect(answer.callError).toBe(false);
    expect(answer.snapshot).toMatchObject({ status: 'completed', taskId: task.taskId });
    expect(answer.snapshot.result?.media_buy_id).toBe(s.mediaBuys()[0].mediaBuyId);
  });

  test('our seller client answers a call whose MCP task stays working with working and the task id, within the call bound', async () => {
    const s = await sellerWith({ profile: 'mcp-tasks' });
    // The task moves on only when the test is long over: MCP's own polling would wait for it for ever.
    s.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
    const callBoundMs = 3_000;
    const agent = { id: 'scripted', url: s.url, protocol: 'mcp' as const };
    // Bounded as an operation's call is (activities/seller-call.ts): the attempt ends when its signal fires.
    const signal = AbortSignal.timeout(callBoundMs);
    const answer = await raceSignal(signal, () =>
      createSdkSellerClient().callTask({
        agent,
        token: s.authToken,
        signal,
        timeoutMs: callBoundMs,
        task: 'create_media_buy',
        args: createArgs(newKey()),
      }),
    );
    const [task] = s.tasks();
    expect(s.tasks()).toHaveLength(1);
    expect(answer.callError).toBe(false);
    expect(answer.snapshot).toMatchObject({ status: 'working', taskId: task.taskId });
    // The call knows the id it answers with is MCP's task: the operation reads it by MCP tasks/get on that word.
    expect(answer.mcpTaskId).toBe(task.taskId);
    expect(s.mediaBuys()).toHaveLength(0);
    // The id is MCP's task id: MCP tasks/get (the `mcp-tasks` read method) reads that task.
    const read = await createSdkSellerClient().readTask({
      agent,
      token: s.authToken,
      signal: AbortSignal.timeout(15_000),
      method: 'mcp-tasks',
      task: 'create_media_buy',
      taskId: answer.snapshot.taskId!,
    });
    expect(read).toMatchObject({ callError: false, snapshot: { status: 'working', taskId: task.taskId } });
  });

  test('our seller client does not name an MCP task in the answer of a call whose MCP task ended within it', async () => {
    const s = await sellerWith({ profile: 'mcp-tasks' });
    s.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1 }]);
    const answer = await createSdkSellerClient().callTask({
      agent: { id: 'scripted', url: s.url, protocol: 'mcp' },
      token: s.authToken,
      signal: AbortSignal.timeout(15_000),
      timeoutMs: 10_000,
      task: 'create_media_buy',
      args: createArgs(newKey()),
    });
    // The result names the task (the fixture's AdCP task id is its MCP task id); the task ended, so no MCP task mark.
    expect(answer.snapshot).toMatchObject({ status: 'completed', taskId: s.tasks()[0].taskId });
    expect(answer.mcpTaskId).toBeUndefined();
  });

  test('a failed scripted task is a failed MCP task whose result carries the AdCP error', async () => {
    const s = await sellerWith({ profile: 'mcp-tasks' });
    s.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'rejected', afterPolls: 1, errors: [{ code: 'POLICY_VIOLATION', message: 'Not allowed' }] },
    ]);
    const outcome = await settle(call('create_media_buy', createArgs(newKey())));
    expect(outcome.error).toBeDefined(); // @adcp/sdk's client turns a failed MCP task into an error
    const [task] = s.tasks();
    expect(await mcpTaskStatus(s, task.taskId)).toMatchObject({ status: 'failed' });
    const result = await withMcpClient(s, (client) =>
      client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema),
    );
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ status: 'rejected', errors: [{ code: 'POLICY_VIOLATION' }] });
    expect(s.mediaBuys()).toHaveLength(0);
  });
});

describe('adcp-3.1', () => {
  test('media_buy_status beside status, get_task_status instead of tasks/get, webhooks with operation_id and notification_id', async () => {
    const s = await sellerWith({ profile: 'adcp-3.1', pollsToComplete: 1 });
    const url = `${receiver.base}/webhooks/adcp/op-31`;
    const created = snapshotFromMcpToolResult(
      await call(
        'create_media_buy',
        createArgs(newKey(), { push_notification_config: { url, operation_id: 'op-31' } }),
      ),
    );
    expect(errorCodeOf(await settle(call('tasks/get', { task_id: created.taskId })))).toBeDefined();
    const done = snapshotFromTasksGet(
      ((await call('get_task_status', { task_id: created.taskId })) as Json).structuredContent as Json,
    );
    expect(done.status).toBe('completed');
    expect(done.result).toMatchObject({ status: 'pending_creatives', media_buy_status: 'pending_creatives' });
    await waitFor(() => receiver.received.length === 1);
    expect(receiver.received[0].json).toMatchObject({
      status: 'completed',
      operation_id: 'op-31',
      notification_id: expect.any(String),
    });

    const updated = await call('update_media_buy', {
      idempotency_key: newKey(),
      account: ACME,
      media_buy_id: s.mediaBuys()[0].mediaBuyId,
      paused: true,
    });
    expect(updated.structuredContent).toMatchObject({ status: 'paused', media_buy_status: 'paused' });
  });

  test('IDEMPOTENCY_IN_FLIGHT while the first request with the key is processed; then replayed: true', async () => {
    const s = await sellerWith({ profile: 'adcp-3.1' });
    s.fault('create_media_buy', { kind: 'hang', ms: 400 });
    const key = newKey();
    const first = call('create_media_buy', createArgs(key));
    await waitFor(() => s.callsTo('create_media_buy').length === 1);
    const second = await settle(call('create_media_buy', createArgs(key)));
    expect(errorCodeOf(second)).toBe('IDEMPOTENCY_IN_FLIGHT');
    const original = snapshotFromMcpToolResult(await first);
    const replay = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    expect(replay).toMatchObject({ taskId: original.taskId, replayed: true });
  });

  test('AUTH_MISSING without credentials, AUTH_INVALID with rejected ones', async () => {
    const s = await sellerWith({ profile: 'adcp-3.1' });
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const missing = await fetch(s.url, { method: 'POST', headers, body });
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as { adcp_error: Json }).adcp_error).toMatchObject({ code: 'AUTH_MISSING' });
    const invalid = await fetch(s.url, { method: 'POST', headers: { ...headers, authorization: 'Bearer nope' }, body });
    expect(invalid.status).toBe(401);
    expect(((await invalid.json()) as { adcp_error: Json }).adcp_error).toMatchObject({ code: 'AUTH_INVALID' });
  });
});

describe('misrouting', () => {
  test("B's correctly signed completion posted to A's URL, and a webhook with a made-up task_id", async () => {
    const s = await sellerWith({ pollsToComplete: 1 });
    const urlA = `${receiver.base}/webhooks/adcp/op-A`;
    const urlB = `${receiver.base}/webhooks/adcp/op-B`;
    s.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1, webhook: false }]);
    s.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1, webhook: false }]);
    const a = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(newKey(), { push_notification_config: { url: urlA } })),
    );
    const b = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(newKey(), { push_notification_config: { url: urlB } })),
    );
    await call('tasks/get', { task_id: b.taskId });

    await s.misrouteWebhook(b.taskId!, urlA);
    await s.sendUnbackedWebhook(urlA, { task_id: 'task_made_up', result: { media_buy_id: 'mb_made_up' } });
    expect(receiver.received.map((w) => [w.path, w.json.task_id, w.json.status])).toEqual([
      ['/webhooks/adcp/op-A', b.taskId, 'completed'],
      ['/webhooks/adcp/op-A', 'task_made_up', 'completed'],
    ]);
    expect((receiver.received[0].json.result as Json).media_buy_id).toBe(s.task(b.taskId!)?.mediaBuyId);
    for (const webhook of receiver.received) expect(await verifies(s, webhook)).toBe(true);
    expect(a.taskId).not.toBe(b.taskId);
  });
});
