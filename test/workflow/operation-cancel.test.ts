/**
 * What stops the operation's work in flight, on the time-skipping server with activity stand-ins: a final webhook or
 * an adoption stops the call; a cancel waits for the call, then tells the seller what to cancel; a cancel through
 * Temporal interrupts a wait and ends the workflow Canceled. Each test has a server of its own: these workflows close
 * with an activity still running, after which the test server no longer skips time (temporalio/sdk-java#1138).
 */
import { CancelledFailure, WorkflowFailedError } from '@temporalio/client';
import { adoptTaskSignal, cancelOperationUpdate, webhookReceivedSignal } from '../../contract/operation';
import { type WorkflowStack, startWorkflowStack, until } from './harness';
import { Gate, StandInSeller, settled, standInActivities, startOperation, stateWhen } from './operation-seller';

const BUY = { media_buy_id: 'mb_1', status: 'pending_creatives' };
const receivedAt = new Date(0).toISOString();
let stack: WorkflowStack;
let seller = new StandInSeller();

beforeEach(async () => {
  seller = new StandInSeller();
  stack = await startWorkflowStack(standInActivities(() => seller));
});
afterEach(async () => {
  await stack?.close();
});

/** The call waits on a gate the test opens, answering `then` (the seller made what it says). */
function gatedCall(then = () => seller.hold({ status: 'submitted', taskId: 't1' })): Gate {
  const gate = new Gate();
  seller.answer = async () => {
    await gate.pass();
    return then();
  };
  return gate;
}

test('a final webhook naming this operation stops the call in flight: its answer would add nothing', async () => {
  const gate = gatedCall();
  const handle = await startOperation(stack);
  await until(async () => (gate.waiting ? true : undefined));
  await handle.signal(webhookReceivedSignal, {
    eventKey: 'e1',
    operationId: handle.workflowId,
    snapshot: { status: 'completed', taskId: 't1', result: BUY },
    receivedAt,
  });
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'completed', result: BUY });
  expect(state.transitions.at(-1)?.note).toMatch(/call call stopped: the operation already ended completed/);
  const events = (await handle.fetchHistory()).events ?? [];
  expect(events.filter((event) => event.activityTaskCancelRequestedEventAttributes)).toHaveLength(1);
});

test('an adoption during the call stops it and reads the adopted task', async () => {
  const gate = gatedCall();
  const handle = await startOperation(stack);
  await until(async () => (gate.waiting ? true : undefined));
  seller.task = { status: 'completed', taskId: 't9', result: BUY };
  await handle.signal(adoptTaskSignal, { taskId: 't9', requestedBy: 'reconciliation' });
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'completed', taskId: 't9', result: BUY });
  expect(state.reconciliation?.[0]).toMatchObject({ outcome: 'adopted', taskId: 't9' });
  expect(seller.reads.map((read) => read.taskId)).toEqual(['t9']);
});

test('a cancel during the call waits for its answer, then cancels at the seller the buy the call made', async () => {
  const gate = gatedCall(() => seller.hold({ status: 'completed', taskId: 't1', result: BUY }));
  const handle = await startOperation(stack);
  await until(async () => (gate.waiting ? true : undefined));
  const answer = await handle.executeUpdate(cancelOperationUpdate, {
    args: [{ requestedBy: 'ops@buyer', reason: 'campaign pulled', principal: 'acme/ops' }],
  });
  expect(answer).toEqual({ accepted: true, status: 'pending' });
  // The cancel did not stop the call: the seller is still working on it.
  expect(gate.waiting).toBe(true);
  gate.open();
  const state = await settled(handle);
  expect(seller.cancels).toMatchObject([{ taskId: 't1', mediaBuyId: 'mb_1', account: { account_id: 'acc_1' } }]);
  expect(state).toMatchObject({
    status: 'canceled',
    result: BUY,
    cancellation: {
      requestedBy: 'ops@buyer',
      principal: 'acme/ops',
      sellerNotified: true,
      resource: { mediaBuyId: 'mb_1', state: 'canceled' },
    },
  });
  await expect(
    handle.executeUpdate(cancelOperationUpdate, { args: [{ requestedBy: 'ops', reason: 'again' }] }),
  ).rejects.toThrow();
});

test('a cancel while parked, also through Temporal as the typed client does: the seller is told, the workflow ends Canceled', async () => {
  const handle = await startOperation(stack);
  await stateWhen(handle, (state) => state.status === 'submitted');
  await handle.executeUpdate(cancelOperationUpdate, { args: [{ requestedBy: 'ops', reason: 'not needed' }] });
  await handle.cancel();
  const failure = await handle.result().then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(failure).toBeInstanceOf(WorkflowFailedError);
  const cause = (failure as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(CancelledFailure);
  const state = await settled(handle);
  expect(state).toMatchObject({ status: 'canceled', cancellation: { requestedBy: 'ops', sellerNotified: true } });
  expect(seller.cancels).toMatchObject([{ taskId: 't1' }]);
});

test('a cancel through Temporal alone during the call: the answer is awaited, then the buy it made is canceled', async () => {
  const gate = gatedCall(() => seller.hold({ status: 'completed', taskId: 't1', result: BUY }));
  const handle = await startOperation(stack);
  await until(async () => (gate.waiting ? true : undefined));
  await handle.cancel();
  // The workflow has seen the cancel (a workflow task completed after it) while the call was still in flight.
  await until(async () => {
    const events = (await handle.fetchHistory()).events ?? [];
    const requested = events.findIndex((event) => event.workflowExecutionCancelRequestedEventAttributes);
    const seen = events.slice(requested + 1).some((event) => event.workflowTaskCompletedEventAttributes);
    return requested >= 0 && seen ? true : undefined;
  });
  expect(gate.waiting).toBe(true);
  gate.open();
  const state = await settled(handle);
  expect(state).toMatchObject({
    status: 'canceled',
    result: BUY,
    cancellation: { requestedBy: 'temporal', resource: { mediaBuyId: 'mb_1', state: 'canceled' } },
  });
  expect(seller.cancels).toMatchObject([{ mediaBuyId: 'mb_1' }]);
});
