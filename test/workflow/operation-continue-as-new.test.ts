/**
 * Continue-as-new on the time-skipping server, with activity stand-ins. The test server suggests it after about
 * 4,000 history events; a task whose progress moves at every poll makes each wait an activity of its own (a few
 * events), so after some 700 polls the operation continues as new, carrying everything.
 */
import { webhookReceivedSignal } from '../../contract/operation';
import { type WorkflowStack, startWorkflowStack, until } from './harness';
import { StandInSeller, settled, standInActivities, startOperation } from './operation-seller';

const BUY = { media_buy_id: 'mb_1', status: 'pending_creatives' };
let stack: WorkflowStack;
const seller = new StandInSeller();

beforeAll(async () => {
  stack = await startWorkflowStack(standInActivities(() => seller));
});
afterAll(async () => {
  await stack?.close();
});

test('continued as new, an operation keeps its task, its counts and its webhook dedupe set', async () => {
  seller.moves = Array.from({ length: 5_000 }, (_, index) => ({
    atPoll: index + 1,
    to: { status: 'working' as const, taskId: 't1', progress: { percentage: index % 100 } },
  }));
  const handle = await startOperation(stack);
  const firstRunId = (await handle.describe()).runId;
  const event = {
    eventKey: 'evt-1',
    snapshot: { status: 'working' as const, taskId: 't1', progress: { percentage: 5 } },
    receivedAt: new Date(0).toISOString(),
  };
  await handle.signal(webhookReceivedSignal, event);
  // Awaiting the result lets the server skip the time between polls.
  const result = settled(handle);
  await until(async () => ((await handle.describe()).runId !== firstRunId ? true : undefined), 60_000);
  // The same event again, to the new run; then the task completes a few polls later.
  await handle.signal(webhookReceivedSignal, event);
  const completesAt = seller.polls.length + 3;
  seller.moves = [{ atPoll: completesAt, to: { status: 'completed', taskId: 't1', result: BUY } }];
  const state = await result;

  expect(state).toMatchObject({ status: 'completed', result: BUY, webhooksApplied: 1, pollCount: completesAt });
  expect(state.transitions[0]).toMatchObject({ from: 'pending', to: 'submitted', source: 'call' });
  expect(state.transitionCount).toBe(state.transitions.length);
  expect((await stack.client.workflow.getHandle(handle.workflowId, firstRunId).describe()).status.name).toBe(
    'CONTINUED_AS_NEW',
  );
  // One call in all the runs: the new run follows the carried task.
  expect(seller.calls).toHaveLength(1);
}, 120_000);
