/**
 * A webhook is applied only to the operation it belongs to (issue #9 item 13, gateway side), and an operation can be
 * read while no worker runs (item 10). Real gateway, real Temporal, the scripted fixture seller; the webhooks are
 * signed with RFC 9421 by a key the seller's JWKS lists, so every refusal here is about routing, not the signature.
 */
import type { AddressInfo } from 'node:net';
import { type Server, createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createGateway } from '../../api/app';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { WebhookRefusalCounter, createWebhookRouter } from '../../api/webhooks';
import type { OperationState } from '../../contract/operation';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { type SignedWebhook, mintWebhookSigningKey, signWebhookRequest } from '../fixtures/webhook-signing';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const webhookKey = mintWebhookSigningKey(`routing-test-key-${randomUUID()}`);
const refusals = new WebhookRefusalCounter();
let seller: ScriptedSeller;
let stack: TestStack;
let server: Server;
let base: string;

beforeAll(async () => {
  seller = await startScriptedSeller({ webhookMode: 'rfc9421' });
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const sellerRegistry = registry([
    {
      id: 'fixture',
      url: seller.url,
      protocol: 'mcp',
      token_env: 'FIXTURE_TOKEN',
      webhooks: { scheme: 'rfc9421', jwks: { keys: [...seller.webhookJwks.keys, webhookKey.publicJwk] } } as never,
    },
  ]);
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: { env: { FIXTURE_TOKEN: seller.authToken }, publicBaseUrl: base },
  });
  const webhookRouter = createWebhookRouter({
    client: stack.client,
    sellers: sellerRegistry,
    authenticator: createWebhookAuthenticator(),
    publicBaseUrl: base,
    refusals,
    log: () => undefined,
  });
  server.on('request', createGateway({ orchestrator: stack.orchestrator, webhookRouter }));
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  await seller?.close();
});

async function post(signed: SignedWebhook) {
  const response = await fetch(signed.url, { method: 'POST', headers: signed.headers, body: signed.body });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

async function submittedOperation(): Promise<{ operationId: string; state: OperationState }> {
  seller.script('create_media_buy', [
    { status: 'submitted' },
    { status: 'completed', afterMs: 600_000, webhook: false },
  ]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const state = await eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return view.state?.status === 'submitted' && view.state.taskId ? view.state : undefined;
  });
  return { operationId, state };
}

function completion(fields: Record<string, unknown>) {
  return {
    idempotency_key: `evt_${randomUUID()}`,
    task_type: 'create_media_buy',
    status: 'completed',
    timestamp: new Date().toISOString(),
    ...fields,
  };
}

test('a signed completion of operation B posted to operation A’s URL is refused 409 and A is unchanged', async () => {
  const a = await submittedOperation();
  const b = await submittedOperation();
  const before = refusals.get('operation_id_mismatch');

  // B's own completion (B's operation_id, B's task, B's buy) sent to A's webhook URL.
  const misrouted = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/${a.operationId}`,
      key: webhookKey.signerKey,
      body: completion({ operation_id: b.operationId, task_id: b.state.taskId, result: { media_buy_id: 'mb_of_b' } }),
    }),
  );
  expect(misrouted.status).toBe(409);
  expect(misrouted.body.error).toMatchObject({
    code: 'WEBHOOK_OPERATION_MISMATCH',
    reason: 'operation_id_mismatch',
    operation_id: b.operationId,
    expected_operation_id: a.operationId,
  });
  expect(refusals.get('operation_id_mismatch')).toBe(before + 1);

  const view = await stack.orchestrator.status(a.operationId);
  expect(view.state).toMatchObject({ status: 'submitted', webhooksApplied: 0, taskId: a.state.taskId });
  await stack.orchestrator.cancel(a.operationId, { requestedBy: 'test', reason: 'cleanup' });
  await stack.orchestrator.cancel(b.operationId, { requestedBy: 'test', reason: 'cleanup' });
});

test('a signed webhook whose task_id is not the operation’s task is refused 409; the right one is applied', async () => {
  const a = await submittedOperation();
  const before = refusals.get('task_id_mismatch');
  const url = `${base}/webhooks/adcp/${a.operationId}`;

  // No operation_id (a 3.0 seller): the task id is what tells. A made-up task first.
  const madeUp = await post(
    signWebhookRequest({
      url,
      key: webhookKey.signerKey,
      body: completion({ task_id: 'task_made_up', result: { media_buy_id: 'mb_x' } }),
    }),
  );
  expect(madeUp.status).toBe(409);
  expect(madeUp.body.error).toMatchObject({
    code: 'WEBHOOK_TASK_MISMATCH',
    reason: 'task_id_mismatch',
    task_id: 'task_made_up',
    expected_task_id: a.state.taskId,
  });
  expect(refusals.get('task_id_mismatch')).toBe(before + 1);
  expect((await stack.orchestrator.status(a.operationId)).state).toMatchObject({
    status: 'submitted',
    webhooksApplied: 0,
  });

  // The operation's own completion, with its operation_id echoed as 3.1 sellers do, is applied.
  const own = await post(
    signWebhookRequest({
      url,
      key: webhookKey.signerKey,
      body: completion({
        operation_id: a.operationId,
        notification_id: `ntf_${randomUUID()}`,
        task_id: a.state.taskId,
        result: { media_buy_id: 'mb_of_a' },
      }),
    }),
  );
  expect(own).toMatchObject({ status: 200, body: { status: 'accepted' } });
  const final = await stack.orchestrator.result(a.operationId);
  expect(final).toMatchObject({ status: 'completed', result: { media_buy_id: 'mb_of_a' } });
});

test('with the worker down, GET /v1/operations/:id answers from the state the operation last published', async () => {
  // A stack of its own, so stopping its worker leaves the other tests alone.
  const own = await startTestStack({
    sellers: registry([{ id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
  const gateway = await new Promise<Server>((resolve) => {
    const listening = createGateway({ orchestrator: own.orchestrator }).listen(0, '127.0.0.1', () =>
      resolve(listening),
    );
  });
  const gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
  let operationId = '';
  try {
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'completed', afterMs: 600_000, webhook: false },
    ]);
    ({ operationId } = await own.orchestrator.start({
      sellerId: 'fixture',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    }));
    const live = await eventually(async () => {
      const body = (await (await fetch(`${gatewayUrl}/v1/operations/${operationId}`)).json()) as Record<string, any>;
      return body.status === 'submitted' && body.live === true ? body : undefined;
    });
    expect(live).toMatchObject({ live: true, state_source: 'query' });

    own.worker.shutdown();
    await eventually(async () => (own.worker.getState() === 'STOPPED' ? true : undefined));

    const response = await fetch(`${gatewayUrl}/v1/operations/${operationId}`);
    expect(response.status).toBe(200);
    const stale = (await response.json()) as Record<string, any>;
    expect(stale).toMatchObject({
      operation_id: operationId,
      running: true,
      live: false,
      state_source: 'memo',
      status: 'submitted',
      task_id: live.task_id,
      agent_id: 'fixture',
    });
    expect(stale.state_message).toMatch(/live state could not be read.*no worker answered/);
  } finally {
    await new Promise((resolve) => gateway.close(resolve));
    if (operationId)
      await own.client.workflow
        .getHandle(operationId)
        .terminate('test cleanup')
        .catch(() => undefined);
    await own.close();
  }
});
