/**
 * The operation workflow's wiring on the time-skipping server, with activity stand-ins: the call, the parked wait,
 * webhooks during the call and the polls, reconciliation after a refused or lost answer, questions, credentials,
 * notifications and the deadlines. What stops an activity in flight is in operation-cancel.test.ts.
 *
 * The test server stops skipping time for good once a workflow closes while an activity or a child it started is
 * still running (temporalio/sdk-java#1138): tests that end so, notifications among them, get a server of their own.
 */
import type { temporal } from '@temporalio/proto';
import type { TaskSnapshot } from '../../protocol';
import { credentialsRefreshedUpdate, provideInputUpdate, webhookReceivedSignal } from '../../contract/operation';
import { type WorkflowStack, startWorkflowStack, until } from './harness';
import {
  Gate,
  StandInSeller,
  adcpFailure,
  settled,
  standInActivities,
  startOperation,
  stateWhen,
} from './operation-seller';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

const BUY = { media_buy_id: 'mb_1', status: 'pending_creatives' };
const HOUR = 3_600_000;
let stack: WorkflowStack;
let seller = new StandInSeller();

beforeAll(async () => {
  stack = await startWorkflowStack(standInActivities(() => seller));
});
beforeEach(() => {
  seller = new StandInSeller();
});
afterAll(async () => {
  await stack?.close();
});

async function historyOf(workflowId: string): Promise<HistoryEvent[]> {
  return (await stack.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
}
const scheduled = (events: HistoryEvent[], type: string) =>
  events.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === type);
const receivedAt = new Date(0).toISOString();

test('a synchronous read is one local call: no plan, no poll, no scheduled activity', async () => {
  seller.answer = () => seller.hold({ status: 'completed', result: { products: [] } });
  const handle = await startOperation(stack, { task: 'get_products', params: { brief: 'spring' } });
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'completed', result: { products: [] }, pollCount: 0 });
  expect(seller.plans).toHaveLength(0);
  expect(seller.calls).toMatchObject([{ step: 'call', input: { planInput: { params: { brief: 'spring' } } } }]);
  const events = await historyOf(handle.workflowId);
  expect(events.filter((event) => event.activityTaskScheduledEventAttributes)).toHaveLength(0);
  expect(
    events.filter((event) => event.markerRecordedEventAttributes?.markerName === 'core_local_activity'),
  ).toHaveLength(1);
});

test('submitted, then polls on the cadence in one activity until the task completes', async () => {
  seller.moves = [{ atPoll: 3, to: { status: 'completed', taskId: 't1', result: BUY } }];
  const handle = await startOperation(stack);
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'completed', taskId: 't1', result: BUY, pollCount: 3 });
  expect(seller.plans.map((plan) => plan.step)).toEqual(['call']);
  expect(seller.polls[0]).toMatchObject({
    taskId: 't1',
    since: { status: 'submitted' },
    cadence: { maxIntervalMs: 60_000 },
  });
  const events = await historyOf(handle.workflowId);
  expect(scheduled(events, 'awaitTaskMoveOnCadence')).toHaveLength(1);
  // The wait before the first poll is the activity's retry delay, not a durable timer.
  expect(events.filter((event) => event.timerStartedEventAttributes)).toHaveLength(0);
});

test('a final webhook that beats the call answer is held, then applied once the answer binds the task', async () => {
  const gate = new Gate();
  seller.answer = async () => {
    await gate.pass();
    return seller.hold({ status: 'submitted', taskId: 't1' });
  };
  const handle = await startOperation(stack);
  await until(async () => (gate.waiting ? true : undefined));
  await handle.signal(webhookReceivedSignal, {
    eventKey: 'e1',
    snapshot: { status: 'completed', taskId: 't1', result: BUY },
    receivedAt,
  });
  await stateWhen(handle, (state) => state.heldWebhooks === 1);
  gate.open();
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'completed', result: BUY, webhooksApplied: 1, heldWebhooks: 0 });
  expect(seller.polls).toHaveLength(0);
});

test('webhooks during the polls: repeats and progress go on, a new status ends them, so does the final one', async () => {
  const handle = await startOperation(stack);
  const cancels = (events: HistoryEvent[]) =>
    events.filter((event) => event.activityTaskCancelRequestedEventAttributes);
  const push = async (key: number, snapshot: TaskSnapshot) => {
    await handle.signal(webhookReceivedSignal, { eventKey: `e${key}`, snapshot, receivedAt });
    return stateWhen(handle, (state) => state.webhooksApplied === key);
  };
  await until(async () =>
    scheduled(await historyOf(handle.workflowId), 'awaitTaskMoveOnCadence').length === 1 ? true : undefined,
  );
  await push(1, { status: 'submitted', taskId: 't1', message: 'queued' });
  const progressed = await push(2, { status: 'submitted', taskId: 't1', progress: { percentage: 20 } });
  expect(progressed).toMatchObject({ status: 'submitted', message: 'queued', progress: { percentage: 20 } });
  let events = await historyOf(handle.workflowId);
  expect(scheduled(events, 'awaitTaskMoveOnCadence')).toHaveLength(1);
  expect(cancels(events)).toHaveLength(0);

  seller.task = { status: 'working', taskId: 't1', progress: { percentage: 40 } };
  await push(3, seller.task);
  await until(async () =>
    scheduled(await historyOf(handle.workflowId), 'awaitTaskMoveOnCadence').length === 2 ? true : undefined,
  );
  await push(4, { status: 'working', taskId: 't1', progress: { percentage: 70 } });
  await push(5, { status: 'completed', taskId: 't1', result: BUY });
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'completed', result: BUY, webhooksApplied: 5 });
  events = await historyOf(handle.workflowId);
  // One cancel when the status moved to working, one when it completed: none for the webhooks between.
  expect(cancels(events)).toHaveLength(2);
  expect(scheduled(events, 'awaitTaskMoveOnCadence')).toHaveLength(2);
  expect(seller.polls.every((poll) => poll.since.status === 'submitted' || poll.cadence.maxIntervalMs === 5_000)).toBe(
    true,
  );
});

test('a key the seller refused: reconciliation finds no task from it, then one new key', async () => {
  seller.answer = (_input, step) => {
    if (step === 'call')
      throw adcpFailure({ code: 'IDEMPOTENCY_CONFLICT', message: 'key reused', recovery: 'correctable' });
    return seller.hold({ status: 'completed', taskId: 't2', result: BUY });
  };
  const handle = await startOperation(stack);
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'completed', taskId: 't2', result: BUY });
  expect(seller.plans.map((plan) => plan.step)).toEqual(['call', 'call#1']);
  expect(seller.lookups).toMatchObject([{ step: 'call', account: { account_id: 'acc_1' } }]);
  expect(state.reconciliation?.[0]).toMatchObject({
    outcome: 'not_found',
    trigger: 'IDEMPOTENCY_CONFLICT on call step call',
  });
});

test('a lost answer with reconciliation that finds the task: it is adopted, not called again', async () => {
  seller.answer = () => {
    throw adcpFailure({ code: 'TIMEOUT', message: 'no answer', recovery: 'transient' }, false);
  };
  seller.lookup = () => {
    seller.task = { status: 'completed', taskId: 't3', result: BUY };
    return { supported: true, snapshot: seller.task, note: 'found by key' };
  };
  const handle = await startOperation(stack, { retry: { maximumAttempts: 2, initialIntervalMs: 100 } });
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'completed', taskId: 't3' });
  expect(seller.calls).toHaveLength(2);
  expect(seller.plans).toHaveLength(1);
});

test('no terminal status within the budget: one last poll at the deadline, then timed_out', async () => {
  const handle = await startOperation(stack, { budgetMs: HOUR });
  const state = await settled(handle);
  expect(state.failure).toMatchObject({ reason: 'timed_out' });
  expect(state.failure?.message).toContain('last status submitted');
  expect(seller.reads).toHaveLength(1);
  expect(Date.parse(state.updatedAt) - Date.parse(state.startedAt)).toBeGreaterThanOrEqual(HOUR);
});

test('auth-required waits for refreshed credentials, then reads the task; without them, auth_timed_out', async () => {
  seller.answer = () => seller.hold({ status: 'auth-required', taskId: 't1' });
  const refreshed = await startOperation(stack);
  await stateWhen(refreshed, (state) => state.status === 'auth-required');
  seller.task = { status: 'completed', taskId: 't1', result: BUY };
  await refreshed.executeUpdate(credentialsRefreshedUpdate, { args: [{ refreshedBy: 'ops' }] });
  expect((await settled(refreshed)).status).toBe('completed');
  expect(seller.reads.map((read) => read.taskId)).toEqual(['t1']);

  seller = new StandInSeller();
  seller.answer = () => seller.hold({ status: 'auth-required', taskId: 't1' });
  const abandoned = await settled(await startOperation(stack, { authDeadlineMs: 2 * HOUR }));
  expect(abandoned.failure?.reason).toBe('auth_timed_out');
  const tookMs = Date.parse(abandoned.updatedAt) - Date.parse(abandoned.startedAt);
  expect(tookMs).toBeGreaterThanOrEqual(2 * HOUR);
  expect(tookMs).toBeLessThan(2 * HOUR + 60_000);
});

test('input-required: the question waits for an answer, which resumes the task on its own call step', async () => {
  seller.answer = (_input, step) =>
    step === 'call'
      ? seller.hold({
          status: 'input-required',
          taskId: 't1',
          message: 'approve?',
          result: { reason: 'APPROVAL_REQUIRED' },
        })
      : seller.hold({ status: 'completed', taskId: 't1', result: BUY });
  const handle = await startOperation(stack);
  const asked = await stateWhen(handle, (state) => state.status === 'input-required');
  expect(asked.inputRequest).toMatchObject({ reason: 'APPROVAL_REQUIRED', round: 1 });
  await expect(handle.executeUpdate(provideInputUpdate, { args: [{ input: {} }] })).rejects.toMatchObject({
    cause: { message: expect.stringMatching(/must not be empty/) },
  });
  expect(
    await handle.executeUpdate(provideInputUpdate, {
      args: [{ input: { approved: true }, providedBy: 'ops', principal: 'acme/ops' }],
      updateId: 'answer-1',
    }),
  ).toEqual({ accepted: true, round: 1 });
  const state = await settled(handle);
  expect(state).toMatchObject({
    status: 'completed',
    result: BUY,
    audit: [{ action: 'input_provided', principal: 'acme/ops' }],
  });
  expect(seller.plans.map((plan) => [plan.step, plan.params.approved])).toEqual([
    ['call', undefined],
    ['input-1', true],
  ]);
});

test('input-required with no answer fails input_timed_out at its deadline, without a poll', async () => {
  seller.answer = () =>
    seller.hold({
      status: 'input-required',
      taskId: 't1',
      message: 'Sign-off needed',
      result: { reason: 'APPROVAL_REQUIRED' },
    });
  const handle = await startOperation(stack, { interaction: { deadlineMs: 4 * HOUR } });
  const state = await settled(handle);
  expect(state.failure?.reason).toBe('input_timed_out');
  expect(state.failure?.message).toContain('APPROVAL_REQUIRED');
  const tookMs = Date.parse(state.updatedAt) - Date.parse(state.startedAt);
  expect(tookMs).toBeGreaterThanOrEqual(4 * HOUR);
  expect(tookMs).toBeLessThan(4 * HOUR + 60_000);
  expect(state.pollCount).toBe(0); // nobody polls a question
  expect(seller.polls).toHaveLength(0);
});

test('a seller that asks more often than the round limit ends the operation with input_rounds_exhausted', async () => {
  seller.answer = (_input, step) =>
    seller.hold({ status: 'input-required', taskId: 't1', message: `${step}: lower the budget` });
  const handle = await startOperation(stack, { interaction: { maxRounds: 2 } });
  for (const round of [1, 2]) {
    await stateWhen(handle, (state) => state.inputRequest?.round === round);
    await handle.executeUpdate(provideInputUpdate, { args: [{ input: { budget: 10_000 - round } }] });
  }
  const state = await settled(handle);
  expect(state.failure).toMatchObject({ reason: 'input_rounds_exhausted' });
  expect(state.failure?.message).toContain('limit is 2');
  expect(seller.calls.map((call) => call.step)).toEqual(['call', 'input-1', 'input-2']);
});

describe('notifications to the buyer (adcpNotification children, which outlive the operation)', () => {
  let own: WorkflowStack;
  beforeEach(async () => {
    own = await startWorkflowStack(standInActivities(() => seller));
  });
  afterEach(async () => {
    await own?.close();
  });

  test('a question and the completion are each notified once, the completion with its media buy', async () => {
    seller.answer = (_input, step) =>
      step === 'call'
        ? seller.hold({ status: 'input-required', taskId: 't1', result: { reason: 'APPROVAL_REQUIRED' } })
        : seller.hold({ status: 'completed', taskId: 't1', result: BUY });
    const handle = await startOperation(own, { tenant: 'acme', notify: true });
    await stateWhen(handle, (state) => state.status === 'input-required');
    await handle.executeUpdate(provideInputUpdate, { args: [{ input: { approved: true } }] });
    expect((await settled(handle)).status).toBe('completed');
    const notified = await until(async () => (seller.notifications.length === 2 ? seller.notifications : undefined));
    expect(notified.map((notification) => [notification.event, notification.tenant])).toEqual([
      ['input_required', 'acme'],
      ['completed', 'acme'],
    ]);
    expect(notified[0]).toMatchObject({
      idempotency_key: `${handle.workflowId}:input_required:1`,
      input_request: { round: 1 },
    });
    expect(notified[1]?.resource).toEqual({ media_buy_id: 'mb_1' });
  });

  test('a question nobody answers is notified, then its timeout', async () => {
    seller.answer = () => seller.hold({ status: 'input-required', taskId: 't1' });
    const handle = await startOperation(own, { tenant: 'acme', notify: true, interaction: { deadlineMs: 3_600_000 } });
    expect((await settled(handle)).failure?.reason).toBe('input_timed_out');
    const notified = await until(async () => (seller.notifications.length === 2 ? seller.notifications : undefined));
    expect(notified.map((notification) => notification.event)).toEqual(['input_required', 'timed_out']);
    expect(notified[1]?.failure).toMatchObject({ reason: 'input_timed_out' });
  });
});
