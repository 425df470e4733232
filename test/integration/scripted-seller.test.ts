/**
 * The scripted fixture seller, proven over real HTTP with the client the orchestrator uses
 * (`ProtocolClient.callTool` from @adcp/sdk) and the orchestrator's own parsers (protocol/snapshot.ts).
 */
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeMCPConnections } from '@adcp/sdk';
import { ProtocolClient } from '@adcp/sdk/advanced';
import {
  InMemoryReplayStore,
  InMemoryRevocationStore,
  StaticJwksResolver,
  verifyWebhookSignature,
} from '@adcp/sdk/signing/server';
import {
  snapshotFromA2A,
  snapshotFromFlatResponse,
  snapshotFromMcpToolResult,
  snapshotFromTasksGet,
} from '../../protocol/snapshot';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';

type Json = Record<string, unknown>;

interface ReceivedWebhook {
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: Json;
}

/** A webhook receiver on loopback that records every POST and answers 200. */
async function startReceiver(): Promise<{ url: string; received: ReceivedWebhook[]; close: () => Promise<void> }> {
  const received: ReceivedWebhook[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({
        url: `http://${req.headers.host}${req.url}`,
        headers: req.headers,
        body,
        json: JSON.parse(body) as Json,
      });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks/create_media_buy/scripted/op-1`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let keySeq = 0;
/** A fresh idempotency key matching the 3.x pattern. */
const newKey = () => `scripted-test-key-${Date.now()}-${++keySeq}`;

const createArgs = (idempotencyKey: string, extra: Json = {}): Json => ({
  idempotency_key: idempotencyKey,
  account: { brand: { domain: 'acmeoutdoor.example' }, operator: 'acmeoutdoor.example' },
  brand: { domain: 'acmeoutdoor.example' },
  start_time: '2027-01-01T00:00:00Z',
  end_time: '2027-01-31T00:00:00Z',
  packages: [{ product_id: 'scripted_guaranteed_display', pricing_option_id: 'cpm_guaranteed_fixed', budget: 5000 }],
  ...extra,
});

async function waitFor(predicate: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('Condition not met in time.');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('scripted seller over MCP', () => {
  let seller: ScriptedSeller;
  const call = (tool: string, args: Json) => ProtocolClient.callTool(seller.agent('mcp'), tool, args);
  const poll = async (taskId: string) => {
    const raw = (await call('tasks/get', { task_id: taskId, include_result: true })) as Json;
    return snapshotFromTasksGet(raw.structuredContent as Json);
  };

  beforeAll(async () => {
    seller = await startScriptedSeller();
  });
  afterEach(async () => seller.reset());
  afterAll(async () => {
    await seller?.close();
    await closeMCPConnections();
  });

  test('default create_media_buy: submitted, then tasks/get completes with a media_buy_id on the second poll', async () => {
    const key = newKey();
    const first = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    expect(first).toMatchObject({ status: 'submitted', taskId: expect.stringMatching(/^task_/) });
    expect(seller.mediaBuys()).toHaveLength(0);

    expect(await poll(first.taskId!)).toMatchObject({ status: 'submitted', taskId: first.taskId });
    const done = await poll(first.taskId!);
    expect(done.status).toBe('completed');
    expect(done.result?.media_buy_id).toEqual(expect.stringMatching(/^mb_/));

    const buys = seller.mediaBuys();
    expect(buys).toEqual([
      expect.objectContaining({ mediaBuyId: done.result?.media_buy_id, taskId: first.taskId, idempotencyKey: key }),
    ]);
    expect(seller.task(first.taskId!)?.history.map((h) => [h.status, h.via])).toEqual([
      ['submitted', 'initial'],
      ['completed', 'poll'],
    ]);
    const [createCall] = seller.callsTo('create_media_buy');
    expect(createCall).toMatchObject({
      transport: 'mcp',
      outcome: 'scripted',
      taskId: first.taskId,
      args: { idempotency_key: key },
    });
    expect(createCall.headers.authorization).toBeUndefined();
  });

  test('same idempotency_key and payload replays the original answer (replayed: true) and creates one buy', async () => {
    const key = newKey();
    const first = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    const again = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    expect(again).toMatchObject({ status: 'submitted', taskId: first.taskId, replayed: true });
    expect(first.replayed).toBeUndefined();

    await poll(first.taskId!);
    await poll(first.taskId!);
    expect(seller.tasks()).toHaveLength(1);
    expect(seller.mediaBuys()).toHaveLength(1);
    expect(seller.callsTo('create_media_buy').map((c) => [c.outcome, c.replayed ?? false])).toEqual([
      ['scripted', false],
      ['framework', true],
    ]);
  });

  test('same key with a different payload is IDEMPOTENCY_CONFLICT; a missing key is INVALID_REQUEST', async () => {
    const key = newKey();
    await call('create_media_buy', createArgs(key));
    const conflict = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(key, { po_number: 'changed' })),
    );
    expect(conflict.status).toBe('failed');
    expect(conflict.errors?.[0]).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', recovery: 'correctable' });

    const { idempotency_key: _omitted, ...withoutKey } = createArgs('unused');
    const missing = snapshotFromMcpToolResult(await call('create_media_buy', withoutKey));
    expect(missing.errors?.[0]).toMatchObject({
      code: 'INVALID_REQUEST',
      field: 'idempotency_key',
      recovery: 'correctable',
    });
    expect(seller.tasks()).toHaveLength(1);
  });

  test('scripted input-required, resumed on the same context_id, then working and completed', async () => {
    seller.script('create_media_buy', [
      {
        status: 'input-required',
        reason: 'APPROVAL_REQUIRED',
        message: 'Budget above the auto-approval limit: approve?',
      },
      { status: 'working', progress: { percentage: 50, current_step: 'io_review' } },
      { status: 'completed', afterPolls: 1 },
    ]);
    const asked = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    expect(asked).toMatchObject({
      status: 'input-required',
      message: expect.stringContaining('approve'),
      contextId: expect.any(String),
    });
    expect(asked.result?.reason).toBe('APPROVAL_REQUIRED');

    // Polling an input-required task does not move it.
    expect((await poll(asked.taskId!)).status).toBe('input-required');

    const resumed = snapshotFromMcpToolResult(
      await call('create_media_buy', { idempotency_key: newKey(), context_id: asked.contextId, approved: true }),
    );
    expect(resumed).toMatchObject({
      status: 'working',
      taskId: asked.taskId,
      progress: { percentage: 50, currentStep: 'io_review' },
    });
    expect(seller.task(asked.taskId!)?.inputs).toEqual([
      expect.objectContaining({ approved: true, context_id: asked.contextId }),
    ]);

    const done = await poll(asked.taskId!);
    expect(done.status).toBe('completed');
    expect(seller.mediaBuys()).toHaveLength(1);
    expect(seller.callsTo('create_media_buy').map((c) => c.outcome)).toEqual(['scripted', 'resumed']);
  });

  test('a 503 is retried once inside the SDK client; two in a row reach the caller, and the next call succeeds', async () => {
    seller.fault('create_media_buy', { kind: 'http-status', status: 503 });
    const absorbed = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    expect(absorbed.status).toBe('submitted');
    expect(seller.callsTo('create_media_buy').map((c) => [c.outcome, c.httpStatus])).toEqual([
      ['fault', 503],
      ['scripted', 200],
    ]);

    const key = newKey();
    seller.fault('create_media_buy', { kind: 'http-status', status: 503 }, { times: 2 });
    // The SDK client's error keeps only the body: "MCP error -32603: … Error POSTing to endpoint: 503 Service Unavailable".
    await expect(call('create_media_buy', createArgs(key))).rejects.toThrow(/503 Service Unavailable/);
    const retried = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    expect(retried).toMatchObject({ status: 'submitted', taskId: expect.any(String) });
    expect(retried.replayed).toBeUndefined();
    expect(seller.tasks()).toHaveLength(2);
  });

  test('429 with Retry-After is answered before processing', async () => {
    seller.fault('create_media_buy', { kind: 'rate-limited', retryAfterSeconds: 7 }, { times: 2 });
    await expect(call('create_media_buy', createArgs(newKey()))).rejects.toThrow(/429 Too Many Requests/);
    expect(seller.callsTo('create_media_buy').map((c) => c.httpStatus)).toEqual([429, 429]);
    expect(seller.tasks()).toHaveLength(0);
    expect(seller.callsTo('create_media_buy')[0].fault).toEqual({ kind: 'rate-limited', retryAfterSeconds: 7 });
  });

  test('connection dropped after the seller accepted: a retry with the same key resolves to the one task and one buy', async () => {
    const key = newKey();
    // Two drops: the SDK client's own single retry is dropped too, so the caller sees the failure.
    seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 2 });
    await expect(call('create_media_buy', createArgs(key))).rejects.toThrow();
    const [accepted, sdkRetry] = seller.callsTo('create_media_buy');
    expect(accepted).toMatchObject({ outcome: 'scripted', connectionDropped: true, taskId: expect.any(String) });
    expect(sdkRetry).toMatchObject({ outcome: 'framework', replayed: true, connectionDropped: true });

    const retried = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    expect(retried).toMatchObject({ status: 'submitted', taskId: accepted.taskId, replayed: true });
    await poll(retried.taskId!);
    await poll(retried.taskId!);
    expect(seller.tasks()).toHaveLength(1);
    expect(seller.mediaBuys()).toHaveLength(1);
  });

  test('a slow answer times the caller out while the work is done; the retry replays it', async () => {
    const key = newKey();
    seller.fault('create_media_buy', { kind: 'slow-response', ms: 600 });
    const slow = call('create_media_buy', createArgs(key));
    const outcome = await Promise.race([
      slow.then(() => 'answered'),
      new Promise((resolve) => setTimeout(() => resolve('timed out'), 150)),
    ]);
    expect(outcome).toBe('timed out');
    expect(seller.tasks()).toHaveLength(1);

    const retried = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(key)));
    expect(retried).toMatchObject({ taskId: seller.tasks()[0].taskId, replayed: true });
    await slow; // the held answer arrives in the end
  });

  test('a scripted adcp_error carries code, recovery, field, suggestion and retry_after', async () => {
    seller.script('create_media_buy', [
      {
        status: 'failed',
        adcpError: { code: 'RATE_LIMITED', message: 'Slow down', recovery: 'transient', retry_after: 30 },
      },
    ]);
    seller.script('create_media_buy', [
      {
        status: 'failed',
        bare: true,
        errors: [
          {
            code: 'BUDGET_TOO_LOW',
            message: 'Minimum is 10000',
            recovery: 'correctable',
            field: 'packages[0].budget',
            suggestion: 'Raise the budget',
          },
        ],
      },
    ]);
    const limited = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    expect(limited.errors?.[0]).toMatchObject({ code: 'RATE_LIMITED', recovery: 'transient', retryAfterSeconds: 30 });
    const tooLow = snapshotFromMcpToolResult(await call('create_media_buy', createArgs(newKey())));
    expect(tooLow.status).toBe('failed');
    expect(tooLow.errors?.[0]).toMatchObject({
      code: 'BUDGET_TOO_LOW',
      field: 'packages[0].budget',
      suggestion: 'Raise the budget',
    });
    expect(seller.mediaBuys()).toHaveLength(0);
  });

  test('afterMs steps move on a timer; tasks/list filters by status and context_contains', async () => {
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'working', afterMs: 20 },
      { status: 'completed', afterMs: 20 },
    ]);
    seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 10 }]);
    const timed = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(newKey(), { po_number: 'PO-TIMED' })),
    );
    const stuck = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(newKey(), { po_number: 'PO-STUCK' })),
    );
    await waitFor(() => seller.task(timed.taskId!)?.status === 'completed');
    expect(seller.task(timed.taskId!)?.history.map((h) => h.via)).toEqual(['initial', 'timer', 'timer']);

    const list = async (filters: Json) => {
      const raw = (await call('tasks/list', { filters })) as Json;
      return raw.structuredContent as { tasks: Array<{ task_id: string }>; query_summary: { total_matching: number } };
    };
    expect((await list({ statuses: ['submitted', 'working', 'input-required'] })).tasks.map((t) => t.task_id)).toEqual([
      stuck.taskId,
    ]);
    expect((await list({ context_contains: 'PO-TIMED' })).tasks.map((t) => t.task_id)).toEqual([timed.taskId]);
    expect((await list({})).query_summary.total_matching).toBe(2);
  });

  test('requests without the Bearer token are refused with 401', async () => {
    const response = await fetch(seller.url, {
      method: 'POST',
      headers: { authorization: 'Bearer wrong-token', 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect(seller.unauthorizedRequests).toBe(1);
  });
});

describe('scripted seller webhooks', () => {
  let seller: ScriptedSeller;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const call = (tool: string, args: Json) => ProtocolClient.callTool(seller.agent('mcp'), tool, args);

  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await seller?.close();
    receiver.received.length = 0;
  });
  afterAll(async () => {
    await receiver.close();
    await closeMCPConnections();
  });

  test('RFC 9421-signed webhooks at each scripted state change verify against the seller JWKS', async () => {
    seller = await startScriptedSeller();
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'working', afterMs: 10, progress: { percentage: 40 } },
      { status: 'completed', afterMs: 10 },
    ]);
    const first = snapshotFromMcpToolResult(
      await call('create_media_buy', createArgs(newKey(), { push_notification_config: { url: receiver.url } })),
    );
    await waitFor(() => seller.task(first.taskId!)?.status === 'completed');
    await seller.webhooksSettled();

    expect(receiver.received.map((w) => w.json.status)).toEqual(['working', 'completed']);
    const verify = {
      jwks: new StaticJwksResolver(seller.webhookJwks.keys),
      replayStore: new InMemoryReplayStore(),
      revocationStore: new InMemoryRevocationStore(),
    };
    for (const webhook of receiver.received) {
      expect(webhook.headers['signature-input']).toContain('tag="adcp/webhook-signing/v1"');
      expect(webhook.headers.signature).toBeDefined();
      expect(webhook.headers['content-digest']).toBeDefined();
      const verified = await verifyWebhookSignature(
        { method: 'POST', url: webhook.url, headers: webhook.headers, body: webhook.body },
        verify,
      );
      expect(verified.keyid).toBe(seller.webhookKeyId);
      expect(webhook.json).toMatchObject({
        task_id: first.taskId,
        task_type: 'create_media_buy',
        idempotency_key: expect.any(String),
      });
    }
    const completed = snapshotFromFlatResponse(receiver.received[1].json.result as Json);
    expect(completed.result?.media_buy_id).toBe(seller.mediaBuys()[0].mediaBuyId);
  });

  test('legacy HMAC webhooks; manual sends with duplicates and lost events', async () => {
    seller = await startScriptedSeller({ webhookMode: 'hmac' });
    const secret = 'scripted-test-secret-at-least-32-characters';
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterPolls: 1, webhook: { duplicate: 1 } },
    ]);
    const first = snapshotFromMcpToolResult(
      await call(
        'create_media_buy',
        createArgs(newKey(), {
          push_notification_config: {
            url: receiver.url,
            authentication: { schemes: ['HMAC-SHA256'], credentials: secret },
          },
        }),
      ),
    );
    await call('tasks/get', { task_id: first.taskId });
    await seller.webhooksSettled();

    expect(receiver.received).toHaveLength(2);
    const [original, duplicate] = receiver.received;
    expect(duplicate.body).toBe(original.body); // the same event twice: same idempotency_key
    const timestamp = String(original.headers['x-adcp-timestamp']);
    const expected = `sha256=${createHmac('sha256', secret).update(`${timestamp}.${original.body}`).digest('hex')}`;
    expect(original.headers['x-adcp-signature']).toBe(expected);
    expect(original.headers['signature-input']).toBeUndefined();

    seller.dropNextWebhooks(1);
    const lost = await seller.sendWebhook(first.taskId!, { message: 'lost' });
    const late = await seller.sendWebhook(first.taskId!, { status: 'working' }, { delayMs: 20 });
    expect(lost[0]).toMatchObject({ dropped: true, delivered: false });
    expect(late[0]).toMatchObject({ dropped: false, delivered: true, status: 'working' });
    expect(receiver.received.map((w) => w.json.status)).toEqual(['completed', 'completed', 'working']);
  });
});

describe('scripted seller over A2A', () => {
  let seller: ScriptedSeller;
  afterEach(async () => seller?.close());

  test('SDK A2A adapter: create_media_buy answers a completed transport Task carrying the AdCP submitted envelope; poll with the tasks/get skill', async () => {
    seller = await startScriptedSeller();
    const agent = seller.agent('a2a');
    const raw = (await ProtocolClient.callTool(agent, 'create_media_buy', createArgs(newKey()))) as Json;

    // What ProtocolClient.callTool returns for A2A: the JSON-RPC response, result = the A2A Task.
    expect(raw).toMatchObject({ jsonrpc: '2.0', result: { kind: 'task', status: { state: 'completed' } } });
    const task = raw.result as { artifacts: Array<{ parts: Array<{ kind: string; data: Json }>; metadata?: Json }> };
    const envelope = task.artifacts[0].parts[0].data;
    const submitted = snapshotFromFlatResponse(envelope);
    expect(submitted).toMatchObject({ status: 'submitted', taskId: expect.stringMatching(/^task_/) });
    expect(task.artifacts[0].metadata).toEqual({ adcp_task_id: submitted.taskId });

    const pollOnce = async () => {
      const polled = (await ProtocolClient.callTool(agent, 'tasks/get', {
        task_id: submitted.taskId,
        include_result: true,
      })) as Json;
      const data = (polled.result as typeof task).artifacts[0].parts[0].data;
      return snapshotFromTasksGet(data);
    };
    expect((await pollOnce()).status).toBe('submitted');
    const done = await pollOnce();
    expect(done.status).toBe('completed');
    expect(done.result?.media_buy_id).toBe(seller.mediaBuys()[0].mediaBuyId);
    expect(seller.callsTo('create_media_buy')[0]).toMatchObject({
      transport: 'a2a',
      method: 'message/send',
      outcome: 'scripted',
    });
  });

  test('spec A2A: Task.state is the AdCP status; native tasks/get polls and tasks/cancel cancels', async () => {
    seller = await startScriptedSeller({ a2a: 'spec' });
    const agent = seller.agent('a2a');
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'working', progress: { percentage: 25 } },
      { status: 'completed' },
    ]);
    const created = snapshotFromA2A(await ProtocolClient.callTool(agent, 'create_media_buy', createArgs(newKey())));
    expect(created).toMatchObject({ status: 'submitted', taskId: expect.stringMatching(/^task_/) });

    const rpc = async (method: string, id: string) => {
      const response = await fetch(seller.a2aUrl!, {
        method: 'POST',
        headers: { authorization: `Bearer ${seller.authToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { id } }),
      });
      return snapshotFromA2A(await response.json());
    };
    expect(await rpc('tasks/get', created.taskId!)).toMatchObject({ status: 'working', progress: { percentage: 25 } });
    const done = await rpc('tasks/get', created.taskId!);
    expect(done.status).toBe('completed');
    expect(done.result?.media_buy_id).toBe(seller.mediaBuys()[0].mediaBuyId);

    seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 5 }]);
    const second = snapshotFromA2A(await ProtocolClient.callTool(agent, 'create_media_buy', createArgs(newKey())));
    expect(await rpc('tasks/cancel', second.taskId!)).toMatchObject({ status: 'canceled', taskId: second.taskId });
    expect(await rpc('tasks/cancel', second.taskId!)).toMatchObject({
      status: 'failed',
      errors: [expect.objectContaining({ code: 'JSONRPC_-32002' })],
    });
    expect(seller.mediaBuys()).toHaveLength(1);
  });
});
