/**
 * The operation list without a server: the visibility query each filter builds (and refuses to build), and paging
 * when the `updated` range leaves rows of a visibility page out (the cursor then points inside a page). The fake
 * visibility below serves pages of real protobuf WorkflowExecutionInfo messages, as the server would.
 */
import type { Client } from '@temporalio/client';
import { encodeUnifiedSearchAttributes } from '@temporalio/common/lib/converter/payload-search-attributes';
import { loadDataConverter } from '@temporalio/common/lib/internal-non-workflow';
import { temporal } from '@temporalio/proto';
import { dataConverter } from '../../client/payload-codec';
import {
  OperationListFilterError,
  buildVisibilityQuery,
  listOperations,
  operationListFiltersSchema,
  parseOperationListQuery,
  quoteQueryValue,
} from '../../client/operation-list';
import { SA_SELLER, SA_STATUS, SA_TASK } from '../../config/search-attributes';

const converter = loadDataConverter(dataConverter());

test('each filter becomes one quoted clause of a query scoped to the operation workflow type', () => {
  const filters = operationListFiltersSchema.parse({
    status: ['failed', 'rejected'],
    sellerId: 'demo-seller',
    task: 'create_media_buy',
    waiting: true,
    createdAfter: new Date('2026-11-01T00:00:00Z'),
    createdBefore: new Date('2026-11-02T00:00:00Z'),
    updatedAfter: new Date('2026-11-01T12:00:00Z'),
  });
  expect(buildVisibilityQuery(filters)).toBe(
    [
      'WorkflowType = "adcpOperation"',
      'AdcpStatus IN ("failed", "rejected")',
      'AdcpAgent = "demo-seller"',
      'AdcpTask = "create_media_buy"',
      '(AdcpInputReason IS NOT NULL OR AdcpStatus IN ("input-required", "auth-required") OR (AdcpTask IN ("check_governance") AND AdcpStatus IN ("submitted", "working")))',
      'StartTime >= "2026-11-01T00:00:00.000Z"',
      'StartTime < "2026-11-02T00:00:00.000Z"',
      '(ExecutionStatus = "Running" OR CloseTime >= "2026-11-01T12:00:00.000Z")',
    ].join(' AND '),
  );
  expect(buildVisibilityQuery(operationListFiltersSchema.parse({ waiting: false }))).toBe(
    'WorkflowType = "adcpOperation" AND AdcpInputReason IS NULL AND AdcpStatus NOT IN ("input-required", "auth-required") AND (AdcpTask NOT IN ("check_governance") OR AdcpStatus NOT IN ("submitted", "working"))',
  );
});

test('a value that could leave its quotes is refused, never escaped into the query', () => {
  for (const value of ['a" OR "1"="1', "a' OR 1=1", 'a\\"', 'a)', 'a b', 'a\n']) {
    expect(() => quoteQueryValue(value)).toThrow(OperationListFilterError);
  }
  expect(quoteQueryValue('2026-11-01T00:00:00.000Z')).toBe('"2026-11-01T00:00:00.000Z"');
});

test('the HTTP query string: lists by comma or repetition, booleans, times, limits, unknown parameters', () => {
  expect(
    parseOperationListQuery({
      status: ['failed', 'rejected,canceled'],
      seller: 'demo-seller',
      waiting: 'true',
      limit: '50',
    }),
  ).toEqual({
    status: ['failed', 'rejected', 'canceled'],
    sellerId: 'demo-seller',
    waiting: true,
    limit: 50,
  });
  expect(parseOperationListQuery({ agent_id: 'demo-seller' })).toEqual({ sellerId: 'demo-seller' });
  expect(parseOperationListQuery({ created_after: '2026-11-01T09:00:00+01:00' })).toEqual({
    createdAfter: new Date('2026-11-01T08:00:00Z'),
  });
  const refusals: [Record<string, unknown>, string][] = [
    [{ status: 'done' }, 'status'],
    [{ seller: ['a', 'b'] }, 'seller'],
    [{ waiting: 'yes' }, 'waiting'],
    [{ created_after: '2026-11-01' }, 'created_after'],
    [{ limit: '500' }, 'limit'],
    [{ limit: '-1' }, 'limit'],
    [{ seller: 'x" OR 1=1' }, 'seller'],
    [{ sort: 'asc' }, 'sort'],
    [{ seller: 'a', agent_id: 'b' }, 'agent_id'],
  ];
  for (const [query, field] of refusals) {
    let error: unknown;
    try {
      parseOperationListQuery(query);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(OperationListFilterError);
    expect(error).toMatchObject({ field });
  }
});

/** An operation as visibility returns it; `updatedAt` goes into the memo the workflow publishes. */
function execution(id: number, updatedAt: string, status = 'completed', task = 'create_media_buy') {
  const seconds = Date.parse('2026-11-30T08:00:00Z') / 1000 + id;
  return temporal.api.workflow.v1.WorkflowExecutionInfo.fromObject({
    execution: { workflowId: `adcp-${task}-op${id}`, runId: `run-${id}` },
    type: { name: 'adcpOperation' },
    startTime: { seconds, nanos: 0 },
    closeTime: { seconds: seconds + 1, nanos: 0 },
    status: 2,
    historyLength: 12,
    searchAttributes: {
      indexedFields: encodeUnifiedSearchAttributes(undefined, [
        { key: SA_STATUS, value: status },
        { key: SA_SELLER, value: 'demo-seller' },
        { key: SA_TASK, value: task },
      ]),
    },
    memo: { fields: { adcp_state: converter.payloadConverter.toPayload({ status, updatedAt }) } },
  });
}

/** Visibility over a fixed list: pages of `pageSize`, the token is the offset. */
function fakeVisibility(executions: temporal.api.workflow.v1.IWorkflowExecutionInfo[]) {
  const requests: { query: string; pageSize: number; offset: number }[] = [];
  const client = {
    options: { namespace: 'default', loadedDataConverter: converter },
    withDeadline: <T>(_deadline: number, run: () => Promise<T>) => run(),
    workflowService: {
      async listWorkflowExecutions(request: { query: string; pageSize: number; nextPageToken: Uint8Array }) {
        const offset = request.nextPageToken.length > 0 ? Number(Buffer.from(request.nextPageToken).toString()) : 0;
        requests.push({ query: request.query, pageSize: request.pageSize, offset });
        const end = offset + request.pageSize;
        return {
          executions: executions.slice(offset, end),
          nextPageToken: end < executions.length ? Buffer.from(String(end)) : Buffer.alloc(0),
        };
      },
    },
  } as unknown as Client;
  return { client, requests };
}

test('with an updated range, pages are exactly `limit` rows and the cursor resumes inside a visibility page', async () => {
  const early = '2026-11-30T08:00:00.000Z';
  const late = '2026-11-30T10:00:00.000Z';
  // Rows 0..6; the odd ones changed early and are filtered out by updated_after 09:00.
  const executions = [0, 1, 2, 3, 4, 5, 6].map((id) => execution(id, id % 2 === 1 ? early : late));
  const { client, requests } = fakeVisibility(executions);
  const filters = { updatedAfter: new Date('2026-11-30T09:00:00Z'), limit: 2 };
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 6; page++) {
    const result = await listOperations(client, { ...filters, ...(cursor ? { cursor } : {}) });
    expect(result.operations.length).toBeLessThanOrEqual(2);
    seen.push(...result.operations.map((row) => row.operation_id));
    if (!result.next_cursor) break;
    cursor = result.next_cursor;
  }
  expect(seen).toEqual(['op0', 'op2', 'op4', 'op6'].map((id) => `adcp-create_media_buy-${id}`));
  expect(requests.every((request) => request.pageSize === 2)).toBe(true);
  // The second request resumes within the page at offset 2 (op2 was returned, op3 not yet looked at).
  expect(requests.map((request) => request.offset)).toContain(2);
});

test('rows read the indexed attributes and the published last change', async () => {
  const { client } = fakeVisibility([execution(1, '2026-11-30T08:30:00.000Z', 'rejected')]);
  const { operations, next_cursor } = await listOperations(client, {});
  expect(next_cursor).toBeNull();
  expect(operations).toEqual([
    {
      operation_id: 'adcp-create_media_buy-op1',
      task: 'create_media_buy',
      agent_id: 'demo-seller',
      status: 'rejected',
      task_id: null,
      input_reason: null,
      started_at: '2026-11-30T08:00:01.000Z',
      updated_at: '2026-11-30T08:30:00.000Z',
      closed_at: '2026-11-30T08:00:02.000Z',
      execution_status: 'COMPLETED',
      waiting: false,
    },
  ]);
});

test('a governance check in human review (submitted or working) is listed as waiting on a person', async () => {
  const { client } = fakeVisibility([
    execution(1, '2026-11-30T08:30:00.000Z', 'submitted', 'check_governance'),
    execution(2, '2026-11-30T08:30:00.000Z', 'submitted', 'create_media_buy'),
    execution(3, '2026-11-30T08:30:00.000Z', 'completed', 'check_governance'),
  ]);
  const { operations } = await listOperations(client, {});
  expect(operations.map((row) => [row.task, row.status, row.waiting])).toEqual([
    ['check_governance', 'submitted', true],
    ['create_media_buy', 'submitted', false],
    ['check_governance', 'completed', false],
  ]);
});

test('a running operation whose memo this client cannot decode is a state_unreadable row, not a crash', async () => {
  // As visibility answers for a running workflow: no close time, history length left at its default (absent on the
  // wire), and a memo encrypted with a key this client does not hold.
  const running = temporal.api.workflow.v1.WorkflowExecutionInfo.fromObject({
    execution: { workflowId: 'adcp-create_media_buy-running', runId: 'run-r' },
    type: { name: 'adcpOperation' },
    startTime: { seconds: Date.parse('2026-11-30T08:00:00Z') / 1000, nanos: 0 },
    status: 1,
    searchAttributes: {
      indexedFields: encodeUnifiedSearchAttributes(undefined, [
        { key: SA_STATUS, value: 'submitted' },
        { key: SA_TASK, value: 'create_media_buy' },
      ]),
    },
    memo: {
      fields: {
        adcp_state: {
          metadata: {
            encoding: Buffer.from('binary/encrypted'),
            'encryption-key-id': Buffer.from('k-unknown'),
          },
          data: Buffer.from('ciphertext this client cannot read'),
        },
      },
    },
  });
  const { client } = fakeVisibility([running]);
  const { operations } = await listOperations(client, {});
  expect(operations).toEqual([
    expect.objectContaining({
      operation_id: 'adcp-create_media_buy-running',
      status: 'submitted',
      execution_status: 'RUNNING',
      state_unreadable: true,
    }),
  ]);
});
