/**
 * The gateway only verifies, parses and signals; the operation's workflow alone judges whether a verified webhook is
 * its own. Real gateway, real Temporal, the scripted fixture seller; the webhooks are signed with RFC 9421 by keys
 * the sellers' JWKS list, so every refusal here is about routing, not the signature. The gateway's Temporal client
 * counts its calls (a gRPC interceptor): a verified webhook to a running operation is one call, the signal. Also: an
 * operation can be read while no worker runs.
 */
import type { AddressInfo } from 'node:net';
import { type Server, createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { createGateway } from '../../api/app';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { dataConverter } from '../../client/payload-codec';
import type { OperationState } from '../../contract/operation';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { type SignedWebhook, mintWebhookSigningKey, signWebhookRequest } from '../fixtures/webhook-signing';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack, testAddress } from '../harness/temporal';
import { connectGrpc } from '../../config/grpc-connection';

const webhookKey = mintWebhookSigningKey(`routing-test-key-${randomUUID()}`);
/** Another seller the buyer also works with, with a key of its own. */
const otherKey = mintWebhookSigningKey(`routing-other-seller-key-${randomUUID()}`);
let seller: ScriptedSeller;
let stack: TestStack;
let server: Server;
let base: string;
let gatewayConnection: Connection;
/** The Temporal RPCs the gateway's client made, by method name, since the last reset. */
let calls: string[] = [];

type GrpcInterceptor = NonNullable<NonNullable<Parameters<typeof Connection.connect>[0]>['interceptors']>[number];
const countCalls: GrpcInterceptor = (options, nextCall) => {
  calls.push(options.method_definition.path.split('/').pop()!);
  // The pass-through interceptor; the call nextCall makes is the one grpc-js would have made (its type is narrower).
  return nextCall(options) as ReturnType<GrpcInterceptor>;
};

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
    {
      id: 'other',
      url: seller.url,
      protocol: 'mcp',
      token_env: 'FIXTURE_TOKEN',
      webhooks: { scheme: 'rfc9421', jwks: { keys: [otherKey.publicJwk] } } as never,
    },
  ]);
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: { env: { FIXTURE_TOKEN: seller.authToken }, publicBaseUrl: base },
  });
  gatewayConnection = await connectGrpc({
    address: testAddress(),
    interceptors: [countCalls, makeGrpcRetryInterceptor(defaultGrpcRetryOptions())],
  });
  const webhookRouter = createWebhookRouter({
    client: new Client({ connection: gatewayConnection, dataConverter: dataConverter() }),
    sellers: sellerRegistry,
    authenticator: createWebhookAuthenticator(),
    publicBaseUrl: base,
    log: () => undefined,
  });
  server.on('request', createGateway({ orchestrator: stack.orchestrator, webhookRouter }));
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await gatewayConnection?.close();
  await stack?.close();
  await seller?.close();
});

/** Posts a signed webhook and returns the answer with the Temporal calls the gateway made for it. */
async function post(signed: SignedWebhook) {
  calls = [];
  const response = await fetch(signed.url, { method: 'POST', headers: signed.headers, body: signed.body });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, any>,
    temporalCalls: [...calls],
  };
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

/** The operation's state once it has recorded `count` refused webhooks. */
function refusedBy(operationId: string, count: number) {
  return eventually(async () => {
    const state = (await stack.orchestrator.status(operationId)).state;
    return (state?.webhooksRefused ?? 0) >= count ? state : undefined;
  });
}

test('a signed completion of operation B posted to operation A’s URL: one signal, and A’s workflow refuses it', async () => {
  const a = await submittedOperation();
  const b = await submittedOperation();

  // B's own completion (B's operation_id, B's task, B's buy) sent to A's webhook URL.
  const misrouted = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/fixture/${a.operationId}`,
      key: webhookKey.signerKey,
      body: completion({ operation_id: b.operationId, task_id: b.state.taskId, result: { media_buy_id: 'mb_of_b' } }),
    }),
  );
  expect(misrouted).toMatchObject({ status: 200, body: { status: 'accepted' } });
  expect(misrouted.temporalCalls).toEqual(['SignalWorkflowExecution']);

  const state = await refusedBy(a.operationId, 1);
  expect(state).toMatchObject({ status: 'submitted', webhooksApplied: 0, taskId: a.state.taskId });
  expect(state.refusedWebhooks).toEqual([
    expect.objectContaining({ reason: 'operation_id_mismatch', operationId: b.operationId, status: 'completed' }),
  ]);
  await stack.orchestrator.cancel(a.operationId, { requestedBy: 'test', reason: 'cleanup' });
  await stack.orchestrator.cancel(b.operationId, { requestedBy: 'test', reason: 'cleanup' });
});

test('a signed webhook whose task_id is not the operation’s task is refused by the workflow; the right one is applied', async () => {
  const a = await submittedOperation();
  const url = `${base}/webhooks/adcp/fixture/${a.operationId}`;

  // No operation_id (a 3.0 seller): the task id is what tells. A made-up task first.
  const madeUp = await post(
    signWebhookRequest({
      url,
      key: webhookKey.signerKey,
      body: completion({ task_id: 'task_made_up', result: { media_buy_id: 'mb_x' } }),
    }),
  );
  expect(madeUp).toMatchObject({ status: 200, body: { status: 'accepted' } });
  expect(madeUp.temporalCalls).toEqual(['SignalWorkflowExecution']);
  const refused = await refusedBy(a.operationId, 1);
  expect(refused).toMatchObject({ status: 'submitted', webhooksApplied: 0 });
  expect(refused.refusedWebhooks).toEqual([
    expect.objectContaining({ reason: 'task_id_mismatch', taskId: 'task_made_up' }),
  ]);

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
  expect(own).toMatchObject({ status: 200, body: { status: 'accepted' }, temporalCalls: ['SignalWorkflowExecution'] });
  const final = await stack.orchestrator.result(a.operationId);
  expect(final).toMatchObject({ status: 'completed', result: { media_buy_id: 'mb_of_a' } });

  // Ended: the signal finds no running workflow, and one look tells the seller its operation has finished.
  const late = await post(
    signWebhookRequest({ url, key: webhookKey.signerKey, body: completion({ task_id: a.state.taskId }) }),
  );
  expect(late).toMatchObject({ status: 200, body: { status: 'ignored' } });
  expect(late.temporalCalls).toEqual(['SignalWorkflowExecution', 'DescribeWorkflowExecution']);
});

test('another seller’s verified webhook to this seller’s operation is refused by the workflow and its key not kept', async () => {
  const a = await submittedOperation();
  const idempotencyKey = `evt_${randomUUID()}`;
  // Signed by seller "other" with its own key, at the URL naming "other": it verifies, but the operation is fixture's.
  const foreign = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/other/${a.operationId}`,
      key: otherKey.signerKey,
      body: completion({
        idempotency_key: idempotencyKey,
        operation_id: a.operationId,
        task_id: a.state.taskId,
        result: { media_buy_id: 'mb_forged' },
      }),
    }),
  );
  expect(foreign).toMatchObject({
    status: 200,
    body: { status: 'accepted' },
    temporalCalls: ['SignalWorkflowExecution'],
  });
  const refused = await refusedBy(a.operationId, 1);
  expect(refused).toMatchObject({ status: 'submitted', webhooksApplied: 0 });
  expect(refused.refusedWebhooks).toEqual([expect.objectContaining({ reason: 'seller_mismatch', sellerId: 'other' })]);

  // The operation's own seller then sends its event under the same idempotency key: applied, not a duplicate.
  const own = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/fixture/${a.operationId}`,
      key: webhookKey.signerKey,
      body: completion({
        idempotency_key: idempotencyKey,
        task_id: a.state.taskId,
        result: { media_buy_id: 'mb_of_a' },
      }),
    }),
  );
  expect(own).toMatchObject({ status: 200, body: { status: 'accepted' } });
  expect(await stack.orchestrator.result(a.operationId)).toMatchObject({
    status: 'completed',
    result: { media_buy_id: 'mb_of_a' },
  });

  // Once it has ended, the other seller hears 404 (as for an operation that never existed), its own seller 200 ignored.
  const afterEnd = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/other/${a.operationId}`,
      key: otherKey.signerKey,
      body: completion({ task_id: a.state.taskId }),
    }),
  );
  expect(afterEnd).toMatchObject({ status: 404, body: { error: { code: 'OPERATION_NOT_FOUND' } } });
});

test('Temporal calls per webhook: none before verification, one signal for a running operation, 404 only verified', async () => {
  const missing = `adcp-create_media_buy-${randomUUID()}`;
  const body = JSON.stringify(completion({ task_id: 'task_nobody_has' }));
  const headers = { 'content-type': 'application/json' };

  // Unsigned, at an operation that exists or not: 401 and not one call (nothing to learn about which exist).
  const a = await submittedOperation();
  for (const operationId of [a.operationId, missing]) {
    calls = [];
    const unsigned = await fetch(`${base}/webhooks/adcp/fixture/${operationId}`, { method: 'POST', headers, body });
    expect(unsigned.status).toBe(401);
    expect(calls).toEqual([]);
  }

  // Verified, no such operation: 404, after the signal and one look.
  const unknown = await post(
    signWebhookRequest({
      url: `${base}/webhooks/adcp/fixture/${missing}`,
      key: webhookKey.signerKey,
      body: completion({ task_id: 'task_nobody_has' }),
    }),
  );
  expect(unknown).toMatchObject({ status: 404, body: { error: { code: 'OPERATION_NOT_FOUND' } } });
  expect(unknown.temporalCalls).toEqual(['SignalWorkflowExecution', 'DescribeWorkflowExecution']);

  // Verified, running: the signal and nothing else, on the first webhook of the operation and on the next ones.
  for (const status of ['submitted', 'working']) {
    const event = await post(
      signWebhookRequest({
        url: `${base}/webhooks/adcp/fixture/${a.operationId}`,
        key: webhookKey.signerKey,
        body: completion({ status, task_id: a.state.taskId }),
      }),
    );
    expect(event).toMatchObject({ status: 200, body: { status: 'accepted' } });
    expect(event.temporalCalls).toEqual(['SignalWorkflowExecution']);
  }
  await stack.orchestrator.cancel(a.operationId, { requestedBy: 'test', reason: 'cleanup' });
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
