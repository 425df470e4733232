/**
 * Stored capabilities drive calls (#14 item 1): once a seller's capabilities workflow holds its
 * `get_adcp_capabilities` answer, an operation's reads use the read method it names (no tools/list, no probing of
 * methods the seller lacks) and its calls are shaped for the wire version it names (a 3.1 seller gets the 3.1
 * envelope, `adcp_version: "3.1"`). Real Temporal dev server, scripted sellers on loopback over real MCP; the worker's
 * SellerClient is the real one, wrapped only to count the tool-list requests it makes.
 */
import { randomUUID } from 'node:crypto';
import { type SellerClient, createSdkSellerClient } from '../../activities/seller-client';
import { SellerCapabilitiesClient } from '../../client/seller-capabilities-client';
import { SELLER_CAPABILITIES_MEMO, sellerCapabilitiesWorkflowId } from '../../contract/seller-capabilities';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let statusOnly: ScriptedSeller;
let listOnly: ScriptedSeller;
let seller31: ScriptedSeller;
let stack: TestStack;
let sellers: SellerCapabilitiesClient;
/** tools/list requests the worker made, by seller. */
const describes = new Map<string, number>();

function counting(seller: SellerClient): SellerClient {
  return new Proxy(seller, {
    get(target, property) {
      if (property === 'describe')
        return (request: Parameters<SellerClient['describe']>[0]) => {
          describes.set(request.agent.id, (describes.get(request.agent.id) ?? 0) + 1);
          return target.describe(request);
        };
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

beforeAll(async () => {
  [statusOnly, listOnly, seller31] = await Promise.all([
    startScriptedSeller({ a2a: false, profile: { 'no-tasks-get': { offer: ['get_task_status'] } } }),
    startScriptedSeller({ a2a: false, profile: { 'no-tasks-get': { offer: ['list_tasks'] } } }),
    startScriptedSeller({ a2a: false, profile: 'adcp-3.1', supportedVersions: ['3.0', '3.1'] }),
  ]);
  const sellerRegistry = registry([
    { id: 'status-only', url: statusOnly.url, protocol: 'mcp', token_env: 'STATUS_ONLY_TOKEN' },
    { id: 'list-only', url: listOnly.url, protocol: 'mcp', token_env: 'LIST_ONLY_TOKEN' },
    { id: 'seller-31', url: seller31.url, protocol: 'mcp', token_env: 'SELLER_31_TOKEN' },
  ]);
  stack = await startTestStack({
    sellers: sellerRegistry,
    activities: {
      seller: counting(createSdkSellerClient()),
      env: {
        STATUS_ONLY_TOKEN: statusOnly.authToken,
        LIST_ONLY_TOKEN: listOnly.authToken,
        SELLER_31_TOKEN: seller31.authToken,
      },
    },
  });
  sellers = new SellerCapabilitiesClient({ client: stack.client, taskQueue: stack.taskQueue, sellers: sellerRegistry });
  for (const id of ['status-only', 'list-only', 'seller-31']) {
    await sellers.refreshed(id);
    // The worker reads the published memo (no worker needed to answer it): wait until it is there.
    await eventually(async () => {
      const description = await stack.client.workflow
        .getHandle(sellerCapabilitiesWorkflowId(stack.taskQueue, id))
        .describe();
      const memo = description.memo?.[SELLER_CAPABILITIES_MEMO] as { capabilities?: unknown } | undefined;
      return memo?.capabilities ? true : undefined;
    }, 30_000);
  }
}, 180_000);

afterAll(async () => {
  await stack?.close();
  await Promise.all([statusOnly?.close(), listOnly?.close(), seller31?.close()]);
});

/** A create_media_buy the seller answers `submitted` and completes a few seconds later: the operation must read it. */
async function createPolled(sellerId: string, seller: ScriptedSeller) {
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 3_000 }]);
  const describesBefore = describes.get(sellerId) ?? 0;
  const { operationId } = await stack.orchestrator.start({
    sellerId,
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  return { state, toolListsDuringOperation: (describes.get(sellerId) ?? 0) - describesBefore };
}

/** The tools the seller was called with, in order (AdCP tool calls and MCP task methods). */
const toolsCalled = (seller: ScriptedSeller) => seller.calls.map((call) => call.tool ?? call.method);

test('stored capabilities name the read method: get_task_status only, read with it from the first read, nothing probed', async () => {
  const capabilities = await sellers.refreshed('status-only');
  // Every @adcp/sdk server also declares MCP Tasks; of the AdCP read tools it offers only get_task_status.
  expect(capabilities.capabilities?.readMethods).toContain('get_task_status');
  expect(capabilities.capabilities?.readMethods).not.toContain('tasks/get');
  expect(capabilities.capabilities?.readMethods).not.toContain('list_tasks');
  const { state, toolListsDuringOperation } = await createPolled('status-only', statusOnly);
  expect(state.status).toBe('completed');
  expect(state.readMethod).toBe('get_task_status');
  const tools = toolsCalled(statusOnly).filter((tool) => tool !== 'get_adcp_capabilities');
  expect(tools[0]).toBe('create_media_buy');
  expect(new Set(tools.slice(1))).toEqual(new Set(['get_task_status']));
  expect(tools.length).toBeGreaterThanOrEqual(2); // the create, then its reads: it was completed by polling
  expect(toolListsDuringOperation).toBe(0);
});

test('stored capabilities name the read method: list_tasks only, read by listing from the first read', async () => {
  const { state, toolListsDuringOperation } = await createPolled('list-only', listOnly);
  expect(state.status).toBe('completed');
  expect(state.readMethod).toBe('list_tasks');
  const tools = toolsCalled(listOnly).filter((tool) => tool !== 'get_adcp_capabilities');
  expect(tools[0]).toBe('create_media_buy');
  expect(new Set(tools.slice(1))).toEqual(new Set(['list_tasks']));
  expect(toolListsDuringOperation).toBe(0);
});

test('a seller declaring 3.1 gets 3.1 shapes: the 3.1 envelope on every call, read by get_task_status', async () => {
  const capabilities = await sellers.refreshed('seller-31');
  expect(capabilities.capabilities?.wireVersion).toBe('3.1');
  const { state } = await createPolled('seller-31', seller31);
  expect(state.status).toBe('completed');
  expect(state.readMethod).toBe('get_task_status');
  const calls = seller31.calls.filter((call) => call.tool && call.tool !== 'get_adcp_capabilities');
  expect(calls.length).toBeGreaterThanOrEqual(2);
  for (const call of calls) expect(call.args).toMatchObject({ adcp_version: '3.1', adcp_major_version: 3 });
  // A 3.0 seller keeps the 3.0 envelope: the integer only.
  const status30 = statusOnly.calls.filter((call) => call.tool === 'create_media_buy');
  expect(status30.length).toBeGreaterThan(0);
  for (const call of status30) {
    expect(call.args.adcp_major_version).toBe(3);
    expect(call.args).not.toHaveProperty('adcp_version');
  }
});
