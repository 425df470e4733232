/**
 * A view that never contradicts itself (issue 24, item 10), without timing: an operation whose state has settled on
 * a final status while its workflow is still closing (it gives up a call in flight, starts a notification) is read
 * with that status, so the same read carries the result and outcome the status stands for.
 */
import { operationView } from '../../api/app';

type View = Parameters<typeof operationView>[0];
type State = NonNullable<View['state']>;

const settled: State = {
  operationId: 'adcp-create_media_buy-po-settled',
  sellerId: 'seller',
  task: 'create_media_buy',
  status: 'completed',
  taskId: 'task_1',
  inputRounds: 0,
  webhookRegistered: true,
  pollCount: 0,
  webhooksApplied: 1,
  transitions: [],
  transitionCount: 1,
  anomalies: [],
  startedAt: '2026-11-30T08:00:00.000Z',
  updatedAt: '2026-11-30T08:00:01.000Z',
  deadline: '2026-12-01T08:00:00.000Z',
  result: { media_buy_id: 'mb_1', status: 'pending_creatives' },
  outcome: 'success',
  resource: { mediaBuyId: 'mb_1' },
};

test('a settled status read while the workflow is still running comes with its result and outcome', () => {
  const body = operationView(
    {
      operationId: settled.operationId,
      running: true,
      execution: 'RUNNING',
      state: settled,
      live: true,
      stateSource: 'query',
    },
    {},
  );
  expect(body.status).toBe('completed');
  expect(body.result).toEqual({ media_buy_id: 'mb_1', status: 'pending_creatives' });
  expect(body.outcome).toBe('success');
});

test('a status that has not settled shows no result yet (the seller may still change it)', () => {
  const body = operationView(
    {
      operationId: settled.operationId,
      running: true,
      execution: 'RUNNING',
      state: { ...settled, status: 'working', result: undefined, outcome: undefined },
      live: true,
      stateSource: 'query',
    },
    {},
  );
  expect(body.status).toBe('working');
  expect(body.result).toBeUndefined();
});
