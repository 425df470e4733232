/**
 * The operation list against the real dev server's visibility: operations with two sellers, two tasks and four
 * endings (completed, rejected, waiting for input, completed later), filtered by seller, status, task, "waiting on a
 * person", created and updated time, and paged with the cursor. Filter values that could change the visibility query
 * are refused before a query is built.
 */
import { randomUUID } from 'node:crypto';
import {
  OperationListFilterError,
  type OperationListFilters,
  type OperationListRow,
  listOperations,
  parseOperationListQuery,
} from '../../client/operation-list';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams, getProductsParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let seller: ScriptedSeller;
let stack: TestStack;
// Seller ids unique to this run: the dev server is shared with the other test files.
const suffix = randomUUID().slice(0, 8);
const sellerA = `list-a-${suffix}`;
const sellerB = `list-b-${suffix}`;
const ids = { a1: '', a2: '', b1: '', b2: '' };
let createdBetween: Date;
let updatedBetween: Date;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A moment strictly between two operations, safe from millisecond ties. */
async function moment(): Promise<Date> {
  await pause(50);
  const at = new Date();
  await pause(50);
  return at;
}

beforeAll(async () => {
  seller = await startScriptedSeller();
  stack = await startTestStack({
    sellers: registry([
      { id: sellerA, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' },
      { id: sellerB, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' },
    ]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
  const start = (sellerId: string, task: string, params: Record<string, unknown>) =>
    stack.orchestrator
      .start({ sellerId, task, params, idempotencyKey: randomUUID() })
      .then((started) => started.operationId);

  // One at a time, so each call takes the script queued for it.
  seller.script('create_media_buy', [{ status: 'completed' }]);
  ids.a1 = await start(sellerA, 'create_media_buy', createMediaBuyParams());
  await stack.orchestrator.result(ids.a1);
  createdBetween = await moment();
  seller.script('create_media_buy', [{ status: 'rejected', message: 'Policy review rejected the creative theme' }]);
  ids.a2 = await start(sellerA, 'create_media_buy', createMediaBuyParams());
  await stack.orchestrator.result(ids.a2);
  seller.script('create_media_buy', [
    { status: 'input-required', reason: 'APPROVAL_REQUIRED', message: 'Approve the budget?' },
    { status: 'completed' },
  ]);
  ids.b1 = await start(sellerB, 'create_media_buy', createMediaBuyParams());
  await eventually(async () =>
    (await stack.orchestrator.status(ids.b1)).state?.status === 'input-required' ? true : undefined,
  );
  updatedBetween = await moment();
  ids.b2 = await start(sellerB, 'get_products', getProductsParams);
  await stack.orchestrator.result(ids.b2);
  // Visibility is eventually consistent: wait until it shows every operation's latest status.
  await eventually(async () => {
    const rows = [...(await list({ sellerId: sellerA })).operations, ...(await list({ sellerId: sellerB })).operations];
    const statuses = Object.fromEntries(rows.map((row) => [row.operation_id, row.status]));
    return statuses[ids.a1] === 'completed' &&
      statuses[ids.a2] === 'rejected' &&
      statuses[ids.b1] === 'input-required' &&
      statuses[ids.b2] === 'completed'
      ? true
      : undefined;
  }, 30_000);
}, 180_000);

afterAll(async () => {
  if (ids.b1)
    await stack?.orchestrator
      .cancel(ids.b1, { requestedBy: 'operation-list.test', reason: 'test over' })
      .catch(() => undefined);
  await stack?.close();
  await seller?.close();
});

function list(filters: OperationListFilters) {
  return listOperations(stack.client, filters);
}

const idsOf = (rows: OperationListRow[]) => rows.map((row) => row.operation_id).sort();
const sorted = (...values: string[]) => [...values].sort();

test('rows carry what visibility indexes: seller, task, status, seller task id, question, times and execution status', async () => {
  const { operations } = await list({ sellerId: sellerB });
  const waiting = operations.find((row) => row.operation_id === ids.b1);
  expect(waiting).toMatchObject({
    task: 'create_media_buy',
    agent_id: sellerB,
    status: 'input-required',
    input_reason: 'APPROVAL_REQUIRED',
    execution_status: 'RUNNING',
    closed_at: null,
    waiting: true,
  });
  expect(waiting?.task_id).toEqual(expect.any(String));
  const done = operations.find((row) => row.operation_id === ids.b2);
  expect(done).toMatchObject({
    task: 'get_products',
    status: 'completed',
    input_reason: null,
    waiting: false,
    execution_status: 'COMPLETED',
  });
  expect(Date.parse(done!.closed_at!)).toBeGreaterThanOrEqual(Date.parse(done!.started_at));
  expect(idsOf(operations)).toEqual(sorted(ids.b1, ids.b2));
});

test('filters by seller, status, task and "waiting on a person"', async () => {
  expect(idsOf((await list({ sellerId: sellerA })).operations)).toEqual(sorted(ids.a1, ids.a2));
  expect(idsOf((await list({ sellerId: sellerA, status: ['rejected'] })).operations)).toEqual([ids.a2]);
  expect(idsOf((await list({ sellerId: sellerA, status: ['rejected', 'completed'] })).operations)).toEqual(
    sorted(ids.a1, ids.a2),
  );
  expect(idsOf((await list({ sellerId: sellerB, task: 'get_products' })).operations)).toEqual([ids.b2]);
  expect(idsOf((await list({ sellerId: sellerB, waiting: true })).operations)).toEqual([ids.b1]);
  expect(idsOf((await list({ sellerId: sellerB, waiting: false })).operations)).toEqual([ids.b2]);
  expect(idsOf((await list({ sellerId: sellerA, waiting: true })).operations)).toEqual([]);
  // The HTTP query string parses to the same filters.
  const fromQuery = parseOperationListQuery({ seller: sellerA, status: 'failed,rejected' });
  expect(idsOf((await list(fromQuery)).operations)).toEqual([ids.a2]);
});

test('filters by created and updated time', async () => {
  expect(idsOf((await list({ sellerId: sellerA, createdAfter: createdBetween })).operations)).toEqual([ids.a2]);
  expect(idsOf((await list({ sellerId: sellerA, createdBefore: createdBetween })).operations)).toEqual([ids.a1]);
  // b1 last changed (to input-required) before the moment and still runs; b2 started and ended after it.
  expect(idsOf((await list({ sellerId: sellerB, updatedAfter: updatedBetween })).operations)).toEqual([ids.b2]);
  expect(idsOf((await list({ sellerId: sellerB, updatedBefore: updatedBetween })).operations)).toEqual([ids.b1]);
  const b1 = (await list({ sellerId: sellerB, updatedBefore: updatedBetween })).operations[0];
  expect(Date.parse(b1.updated_at)).toBeLessThan(updatedBetween.getTime());
});

test('pages with an opaque cursor until next_cursor is null, each operation once', async () => {
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 5; page++) {
    const result = await list({ sellerId: sellerA, limit: 1, ...(cursor ? { cursor } : {}) });
    expect(result.operations.length).toBeLessThanOrEqual(1);
    seen.push(...result.operations.map((row) => row.operation_id));
    if (!result.next_cursor) break;
    expect(result.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    cursor = result.next_cursor;
  }
  expect(seen).toEqual([ids.a2, ids.a1]);
  // With the updated range, rows are checked one by one; paging still returns each operation once.
  const until = new Date();
  const onePage = await list({ sellerId: sellerB, updatedBefore: until, limit: 10 });
  expect(idsOf(onePage.operations)).toEqual(sorted(ids.b1, ids.b2));
  const paged: string[] = [];
  cursor = undefined;
  for (let page = 0; page < 5; page++) {
    const result = await list({ sellerId: sellerB, updatedBefore: until, limit: 1, ...(cursor ? { cursor } : {}) });
    paged.push(...result.operations.map((row) => row.operation_id));
    if (!result.next_cursor) break;
    cursor = result.next_cursor;
  }
  expect(paged).toEqual(onePage.operations.map((row) => row.operation_id));
});

test('a cursor is refused with other filters, or when it is not a cursor', async () => {
  const first = await list({ sellerId: sellerA, limit: 1 });
  expect(first.next_cursor).not.toBeNull();
  await expect(list({ sellerId: sellerB, limit: 1, cursor: first.next_cursor! })).rejects.toMatchObject({
    field: 'cursor',
    message: expect.stringContaining('other filters'),
  });
  await expect(list({ sellerId: sellerA, cursor: 'not-a-cursor' })).rejects.toMatchObject({ field: 'cursor' });
  // The page size may change between pages; the filters may not.
  const second = await list({ sellerId: sellerA, limit: 5, cursor: first.next_cursor! });
  expect(second.operations.map((row) => row.operation_id)).toEqual([ids.a1]);
});

test('filter values that could change the visibility query are refused, naming the filter', async () => {
  const injections: [OperationListFilters, string][] = [
    [{ sellerId: `${sellerA}" OR WorkflowType != "x` }, 'seller'],
    [{ task: "create_media_buy' OR 1=1" }, 'task'],
    [{ status: ['completed) OR (AdcpStatus IS NOT NULL' as never] }, 'status'],
  ];
  for (const [filters, field] of injections) {
    const error = await list(filters).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OperationListFilterError);
    expect(error).toMatchObject({ field });
  }
  expect(() => parseOperationListQuery({ sellr: sellerA })).toThrow(/Unknown filter "sellr"/);
  expect(() => parseOperationListQuery({ created_after: 'yesterday' })).toThrow(
    expect.objectContaining({ field: 'created_after' }),
  );
  expect(() => parseOperationListQuery({ limit: '0' })).toThrow(/limit/);
  expect(() => parseOperationListQuery({ status: 'done' })).toThrow(/status.*must be one of/);
  await expect(
    list({ createdAfter: new Date('2026-02-01T00:00:00Z'), createdBefore: new Date('2026-01-01T00:00:00Z') }),
  ).rejects.toMatchObject({ field: 'created_before' });
});
