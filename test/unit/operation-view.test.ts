/** The operation as HTTP callers see it (api/app.ts operationView): snake_case throughout, and honest about staleness. */
import { operationView, reconciliationReportView } from '../../api/app';
import type { OperationView } from '../../client/orchestrator-client';
import type { OperationState } from '../../contract/operation';

const state: OperationState = {
  operationId: 'adcp-create_media_buy-po-1',
  sellerId: 'seller',
  task: 'create_media_buy',
  status: 'canceled',
  taskId: 'task_1',
  inputRounds: 0,
  webhookRegistered: true,
  pollCount: 2,
  webhooksApplied: 1,
  transitions: [],
  transitionCount: 0,
  anomalies: [],
  startedAt: '2026-11-30T08:00:00.000Z',
  updatedAt: '2026-11-30T08:05:00.000Z',
  deadline: '2026-12-01T08:00:00.000Z',
  replayed: true,
  cancellation: {
    requestedBy: 'ops@buyer',
    reason: 'campaign pulled',
    at: '2026-11-30T08:05:00.000Z',
    sellerNotified: false,
    sellerNote: 'MCP has no task cancel',
    resource: { mediaBuyId: 'mb_1', state: 'live' },
  },
  webhooksRefused: 1,
  refusedWebhooks: [
    {
      at: '2026-11-30T08:04:00.000Z',
      reason: 'task_id_mismatch',
      status: 'completed',
      taskId: 'task_other',
      note: 'not ours',
    },
  ],
};

function keysOf(value: unknown, into: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((item) => keysOf(item, into));
  else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      into.push(key);
      keysOf(item, into);
    }
  }
  return into;
}

test('replayed, the cancellation and refused webhooks are shown in snake_case', () => {
  const view: OperationView = {
    operationId: state.operationId,
    running: false,
    execution: 'COMPLETED',
    state,
    live: true,
    stateSource: 'result',
  };
  const body = operationView(view, {});
  expect(body).toMatchObject({
    replayed: true,
    live: true,
    state_source: 'result',
    cancellation: {
      requested_by: 'ops@buyer',
      reason: 'campaign pulled',
      seller_notified: false,
      seller_note: 'MCP has no task cancel',
      resource: { media_buy_id: 'mb_1', state: 'live' },
    },
    webhooks_refused: 1,
    refused_webhooks: [{ reason: 'task_id_mismatch', task_id: 'task_other' }],
  });
  const { result: _result, ...rest } = body;
  expect(keysOf(rest).filter((key) => /[A-Z]/.test(key))).toEqual([]);
});

test('a state read from the memo says it is not live, and why', () => {
  const view: OperationView = {
    operationId: state.operationId,
    running: true,
    execution: 'RUNNING',
    state: { ...state, status: 'submitted', cancellation: undefined, replayed: undefined },
    live: false,
    stateSource: 'memo',
    staleReason: 'The live state could not be read: no worker answered.',
  };
  const body = operationView(view, {});
  expect(body).toMatchObject({
    live: false,
    state_source: 'memo',
    state_message: 'The live state could not be read: no worker answered.',
    status: 'submitted',
  });
  expect(body).not.toHaveProperty('replayed');
});

test('the reconciliation report is snake_case', () => {
  const body = reconciliationReportView({
    sellerId: 'seller',
    requestedBy: 'ops',
    at: '2026-11-30T08:00:00.000Z',
    openOperations: 2,
    sellerListsTasks: true,
    sellerOpenTasks: 3,
    sellerListTruncated: false,
    adopted: [{ operationId: 'adcp-x-1', taskId: 't1' }],
    unattributed: [{ taskId: 't2', taskType: 'create_media_buy', status: 'submitted' }],
    missingFromSeller: ['adcp-x-2'],
    pollRequested: 2,
    openMediaBuys: 1,
    mediaBuyRefreshRequested: 1,
  });
  expect(body).toMatchObject({
    agent_id: 'seller',
    open_operations: 2,
    adopted: [{ operation_id: 'adcp-x-1', task_id: 't1' }],
    missing_from_seller: ['adcp-x-2'],
    open_media_buys: 1,
    media_buy_refresh_requested: 1,
  });
  expect(keysOf(body).filter((key) => /[A-Z]/.test(key))).toEqual([]);
});

test("an operation the seller failed (a validation error) shows a failure: the seller's error, and the read method", () => {
  const failed: OperationState = {
    ...state,
    status: 'failed',
    cancellation: undefined,
    message: 'packages[0].budget must be positive',
    errors: [
      {
        code: 'VALIDATION_ERROR',
        message: 'packages[0].budget must be positive',
        field: 'packages[0].budget',
        recovery: 'correctable',
      },
    ],
    readMethod: 'tasks/get',
  };
  const body = operationView(
    {
      operationId: failed.operationId,
      running: false,
      execution: 'FAILED',
      state: failed,
      live: true,
      stateSource: 'result',
    },
    {},
  );
  expect(body.failure).toEqual({
    reason: 'seller_failed',
    message: 'packages[0].budget must be positive',
    error: {
      code: 'VALIDATION_ERROR',
      message: 'packages[0].budget must be positive',
      field: 'packages[0].budget',
      recovery: 'correctable',
    },
  });
  expect(body.read_method).toBe('tasks/get');
  // The orchestrator's own reason, when it ended the operation, is kept as it was.
  const timedOut = operationView(
    {
      operationId: failed.operationId,
      running: false,
      execution: 'FAILED',
      state: { ...failed, failure: { reason: 'timed_out', message: 'budget spent' } },
      live: true,
      stateSource: 'result',
    },
    {},
  );
  expect(timedOut.failure).toEqual({ reason: 'timed_out', message: 'budget spent' });
  const running = operationView(
    {
      operationId: state.operationId,
      running: true,
      execution: 'RUNNING',
      state: { ...state, status: 'working' },
      live: true,
      stateSource: 'query',
    },
    {},
  );
  expect(running.failure).toBeNull();
  expect(running.read_method).toBeNull();
});
