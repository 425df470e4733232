/**
 * One gateway over real workflows and scripted sellers, driven over HTTP only: what a buyer's backend sends and reads
 * (`agent_id`, `operation_id`, snake_case views) is the surface the resource tests assert on, so they do not depend on
 * where the code behind it lives. It mounts the operations API, the task-webhook route (RFC 9421, each seller's
 * fixture key), the media-buy API and the sellers API in front of a test stack on the shared dev server.
 *
 *   const gateway = await startResourceGateway({ sellers: { plain: {} }, mediaBuySellers: { life: {} } });
 *   const id = await gateway.operations.start('plain', 'create_media_buy', params);
 *   const view = await gateway.operations.settled(id);
 *   ...
 *   await gateway.close();
 */
import { randomUUID } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProtocolClient } from '@adcp/sdk/advanced';
import { createGateway } from '../../api/app';
import { createMediaBuyRouter } from '../../api/media-buys';
import { createSellerRouter } from '../../api/sellers';
import { createWebhookAuthenticator } from '../../api/webhook-verification';
import { createWebhookRouter } from '../../api/webhooks';
import { MediaBuyClient } from '../../client/media-buy-client';
import { SellerCapabilitiesClient } from '../../client/seller-capabilities-client';
import type { SellerConfig } from '../../config/sellers';
import { SELLER_CAPABILITIES_MEMO, sellerCapabilitiesWorkflowId } from '../../contract/seller-capabilities';
import { type MediaBuySeller, type MediaBuySellerOptions, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { type ScriptedSeller, type ScriptedSellerOptions, startScriptedSeller } from '../fixtures/scripted-seller';
import { type TestStack, eventually, registry, startTestStack } from './temporal';

/** A JSON view as the gateway answers it (its shape is what the tests check). */
export type View = Record<string, any>;

export interface HttpAnswer {
  status: number;
  body: View;
}

const TERMINAL = new Set(['completed', 'failed', 'rejected', 'canceled']);
const MEDIA_BUY_TERMINAL = new Set(['completed', 'rejected', 'canceled', 'create_failed']);

export interface ResourceGatewayOptions {
  /** Scripted sellers by agent id. */
  sellers?: Record<string, ScriptedSellerOptions>;
  /** Media-buy sellers (a buy's whole life) by agent id. */
  mediaBuySellers?: Record<string, MediaBuySellerOptions>;
  /** Register webhooks (ADCP_PUBLIC_BASE_URL is this gateway). Default true. */
  webhooks?: boolean;
  /** One protocol call's bound (ADCP_CALL_TIMEOUT_MS). Default 3 s: lost answers cost this much each. */
  callTimeoutMs?: number;
  /** The worker's circuit breakers (ADCP_CIRCUIT_FAILURES, ADCP_CIRCUIT_COOL_OFF_MS); the defaults when absent. */
  circuitBreaker?: { failureThreshold?: number; coolOffMs?: number };
}

export interface ResourceGateway {
  base: string;
  stack: TestStack;
  sellers: Record<string, ScriptedSeller>;
  mediaBuySellers: Record<string, MediaBuySeller>;
  http(method: 'GET' | 'POST', path: string, body?: unknown): Promise<HttpAnswer>;
  /** The webhook URL the gateway registers for an operation at a seller. */
  webhookUrl(sellerId: string, operationId: string): string;
  operations: {
    start(sellerId: string, task: string, params: Record<string, unknown>, idempotencyKey?: string): Promise<string>;
    view(operationId: string): Promise<View>;
    /** The view once the operation's status is final, or as it is after `timeoutMs` (a failing test shows where it stuck). */
    settled(operationId: string, timeoutMs?: number): Promise<View>;
    /** The first view that satisfies `ready` (throws after `timeoutMs`). */
    waitFor(operationId: string, ready: (view: View) => boolean, timeoutMs?: number): Promise<View>;
  };
  mediaBuys: {
    create(sellerId: string, params: Record<string, unknown>, buyKey?: string): Promise<string>;
    view(id: string): Promise<View>;
    waitFor(id: string, ready: (view: View) => boolean, timeoutMs?: number): Promise<View>;
    change(id: string, change: Record<string, unknown>): Promise<HttpAnswer>;
    refresh(id: string): Promise<HttpAnswer>;
  };
  /** Refreshes a seller's stored capabilities (its get_adcp_capabilities answer) and waits until they are published. */
  storeCapabilities(sellerId: string): Promise<View>;
  /** One tool call to a scripted seller as another client of it would make (a person's tool, an admin flow). */
  callSellerTool(sellerId: string, tool: string, args: Record<string, unknown>): Promise<unknown>;
  close(): Promise<void>;
}

export async function startResourceGateway(options: ResourceGatewayOptions): Promise<ResourceGateway> {
  const sellers: Record<string, ScriptedSeller> = {};
  const mediaBuySellers: Record<string, MediaBuySeller> = {};
  const server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const env: NodeJS.ProcessEnv = {};
  const sellerList: SellerConfig[] = [];
  const tokenEnv = (sellerId: string) => `RESOURCE_${sellerId.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_TOKEN`;
  let stack: TestStack | undefined;
  const started: string[] = [];
  const buysStarted: string[] = [];
  try {
    for (const [sellerId, sellerOptions] of Object.entries(options.sellers ?? {})) {
      const seller = await startScriptedSeller({ a2a: false, ...sellerOptions });
      sellers[sellerId] = seller;
      env[tokenEnv(sellerId)] = seller.authToken;
      sellerList.push({
        id: sellerId,
        name: sellerId,
        url: seller.url,
        protocol: 'mcp',
        token_env: tokenEnv(sellerId),
        webhooks: { scheme: 'rfc9421', jwks: seller.webhookJwks } as never,
      });
    }
    for (const [sellerId, sellerOptions] of Object.entries(options.mediaBuySellers ?? {})) {
      const seller = await startMediaBuySeller({ a2a: false, ...sellerOptions });
      mediaBuySellers[sellerId] = seller;
      env[tokenEnv(sellerId)] = seller.authToken;
      sellerList.push({
        id: sellerId,
        name: sellerId,
        url: seller.url,
        protocol: 'mcp',
        token_env: tokenEnv(sellerId),
        webhooks: { scheme: 'rfc9421', jwks: seller.scripted.webhookJwks } as never,
      });
    }
    const sellerRegistry = registry(sellerList);
    const webhooks = options.webhooks ?? true;
    stack = await startTestStack({
      sellers: sellerRegistry,
      activities: {
        env,
        ...(webhooks ? { publicBaseUrl: base } : {}),
        callTimeoutMs: options.callTimeoutMs ?? 3_000,
        ...(options.circuitBreaker ? { circuitBreaker: options.circuitBreaker } : {}),
      },
    });
    const capabilities = new SellerCapabilitiesClient({
      client: stack.client,
      taskQueue: stack.taskQueue,
      sellers: sellerRegistry,
    });
    const mediaBuyClient = new MediaBuyClient({
      client: stack.client,
      taskQueue: stack.taskQueue,
      knownSeller: (id) => sellerRegistry.has(id),
    });
    server.on(
      'request',
      createGateway({
        orchestrator: stack.orchestrator,
        webhookRouter: createWebhookRouter({
          client: stack.client,
          sellers: sellerRegistry,
          authenticator: createWebhookAuthenticator(),
          publicBaseUrl: base,
          env,
          log: () => undefined,
        }),
        mediaBuyRouter: createMediaBuyRouter({ mediaBuys: mediaBuyClient }),
        campaignRouters: [createSellerRouter({ sellers: capabilities })],
      }),
    );
  } catch (error) {
    await closeAll();
    throw error;
  }
  const running = stack;

  async function closeAll(): Promise<void> {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await stack?.close();
    await Promise.allSettled([
      ...Object.values(sellers).map((seller) => seller.close()),
      ...Object.values(mediaBuySellers).map((seller) => seller.close()),
    ]);
  }

  async function http(method: 'GET' | 'POST', path: string, body?: unknown): Promise<HttpAnswer> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed: View = {};
    try {
      parsed = text ? (JSON.parse(text) as View) : {};
    } catch {
      parsed = { text };
    }
    return { status: response.status, body: parsed };
  }

  async function viewOf(operationId: string): Promise<View> {
    const answer = await http('GET', `/v1/operations/${encodeURIComponent(operationId)}`);
    if (answer.status !== 200)
      throw new Error(`GET operation ${operationId}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  }

  async function buyViewOf(id: string): Promise<View> {
    const answer = await http('GET', `/v1/media-buys/${encodeURIComponent(id)}`);
    if (answer.status !== 200) throw new Error(`GET media buy ${id}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  }

  async function waitForView(read: () => Promise<View>, ready: (view: View) => boolean, timeoutMs: number) {
    return eventually(async () => {
      const view = await read();
      return ready(view) ? view : undefined;
    }, timeoutMs);
  }

  return {
    base,
    stack: running,
    sellers,
    mediaBuySellers,
    http,
    webhookUrl: (sellerId, operationId) => `${base}/webhooks/adcp/${sellerId}/${operationId}`,
    operations: {
      async start(sellerId, task, params, idempotencyKey = randomUUID()) {
        const answer = await http('POST', '/v1/operations', {
          agent_id: sellerId,
          task,
          params,
          idempotency_key: idempotencyKey,
        });
        if (answer.status !== 202 && answer.status !== 200)
          throw new Error(`POST /v1/operations: ${answer.status} ${JSON.stringify(answer.body)}`);
        started.push(String(answer.body.operation_id));
        return String(answer.body.operation_id);
      },
      view: viewOf,
      async settled(operationId, timeoutMs = 45_000) {
        const deadline = Date.now() + timeoutMs;
        let view: View | undefined;
        while (Date.now() < deadline) {
          view = await viewOf(operationId).catch(() => view);
          if (view && TERMINAL.has(String(view.status)) && view.running === false) return view;
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
        if (!view) throw new Error(`Operation ${operationId} has no view after ${timeoutMs} ms.`);
        return view;
      },
      waitFor: (operationId, ready, timeoutMs = 30_000) => waitForView(() => viewOf(operationId), ready, timeoutMs),
    },
    mediaBuys: {
      async create(sellerId, params, buyKey = `resource-${randomUUID()}`) {
        const answer = await http('POST', '/v1/media-buys', {
          buy_key: buyKey,
          agent_id: sellerId,
          params,
          requested_by: 'planner@buyer',
        });
        if (answer.status !== 202 && answer.status !== 200)
          throw new Error(`POST /v1/media-buys: ${answer.status} ${JSON.stringify(answer.body)}`);
        buysStarted.push(String(answer.body.id));
        return String(answer.body.id);
      },
      view: buyViewOf,
      waitFor: (id, ready, timeoutMs = 30_000) => waitForView(() => buyViewOf(id), ready, timeoutMs),
      change: (id, change) =>
        http('POST', `/v1/media-buys/${encodeURIComponent(id)}/changes`, {
          requested_by: 'trafficker@buyer',
          ...change,
        }),
      refresh: (id) =>
        http('POST', `/v1/media-buys/${encodeURIComponent(id)}/refresh`, { requested_by: 'trafficker@buyer' }),
    },
    async storeCapabilities(sellerId) {
      await http('POST', `/v1/sellers/${encodeURIComponent(sellerId)}/capabilities-changed`, {
        requested_by: 'resource test',
      });
      const view = await waitForView(
        async () => (await http('GET', `/v1/sellers/${encodeURIComponent(sellerId)}`)).body,
        (candidate) => candidate.capabilities !== null && candidate.capabilities !== undefined,
        30_000,
      );
      // Workers read the memo the capabilities workflow publishes: wait until it is there.
      await eventually(async () => {
        const description = await running.client.workflow
          .getHandle(sellerCapabilitiesWorkflowId(running.taskQueue, sellerId))
          .describe();
        const memo = description.memo?.[SELLER_CAPABILITIES_MEMO] as { capabilities?: unknown } | undefined;
        return memo?.capabilities ? true : undefined;
      }, 30_000);
      return view;
    },
    async callSellerTool(sellerId, tool, args) {
      const seller = sellers[sellerId] ?? mediaBuySellers[sellerId]?.scripted;
      if (!seller) throw new Error(`No seller ${sellerId} in this gateway.`);
      return ProtocolClient.callTool(seller.agent('mcp', sellerId) as never, tool, args);
    },
    async close() {
      // Leave nothing running on the shared server (a buy's workflow lives as long as its flight).
      await Promise.allSettled(
        [...started, ...buysStarted].map((workflowId) =>
          running.client.workflow.getHandle(workflowId).terminate('resource test cleanup'),
        ),
      );
      await closeAll();
    },
  };
}

export { MEDIA_BUY_TERMINAL, TERMINAL, eventually };
