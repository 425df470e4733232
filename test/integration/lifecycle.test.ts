/**
 * Task lifecycle paths through a real Temporal server with the scripted fixture seller: a human answering
 * input-required (and a malformed answer refused before it enters history), cancellation mid-wait, and
 * progress visible through the status query.
 */
import { randomUUID } from 'node:crypto';
import { OperationRequestError } from '../../client/operation-errors';
import { provideInputUpdate } from '../../contract/operation';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let seller: ScriptedSeller;
let stack: TestStack;

beforeAll(async () => {
  seller = await startScriptedSeller();
  stack = await startTestStack({
    sellers: registry([{ id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
});

async function waitForStatus(operationId: string, status: string) {
  return eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return view.state?.status === status ? view.state : undefined;
  });
}

test('input-required: the question is exposed, a bad answer is refused, a good one resumes the task on its context', async () => {
  seller.script('create_media_buy', [
    { status: 'input-required', reason: 'APPROVAL_REQUIRED', message: 'Budget above 50k needs sign-off' },
    { status: 'completed' },
  ]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  const waiting = await waitForStatus(operationId, 'input-required');
  expect(waiting.inputRequest).toMatchObject({
    reason: 'APPROVAL_REQUIRED',
    message: 'Budget above 50k needs sign-off',
    round: 1,
  });
  expect(waiting.pollCount).toBe(0); // input-required is not polled

  // Refused before it reaches Temporal (the typed client applies the workflow validator's own rule)...
  await expect(
    stack.orchestrator.provideInput(operationId, { input: {}, idempotencyKey: 'bad-answer' }),
  ).rejects.toThrow(OperationRequestError);
  // ...and by the workflow's validator when a caller sends it straight to the update.
  const direct = await stack.client.workflow
    .getHandle(operationId)
    .executeUpdate(provideInputUpdate, { args: [{ input: {} }], updateId: 'bad-answer-direct' })
    .then(
      () => 'accepted',
      (error: unknown) => String((error as { cause?: unknown }).cause ?? error),
    );
  expect(direct).toMatch(/must not be empty/);
  const history = await stack.client.workflow.getHandle(operationId).fetchHistory();
  expect(JSON.stringify(history)).not.toContain('bad-answer');

  await stack.orchestrator.provideInput(operationId, {
    input: { approved: true },
    idempotencyKey: 'approval-1',
    providedBy: 'trader@buyer',
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(typeof state.result?.media_buy_id).toBe('string');
  const calls = seller.callsTo('create_media_buy');
  const resume = calls[calls.length - 1];
  expect(resume.args).toMatchObject({ approved: true, context_id: waiting.contextId });
  expect(state.transitions.some((t) => t.note?.includes('trader@buyer'))).toBe(true);
});

test('cancel mid-wait: the operation ends canceled with who asked and why', async () => {
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  });
  await waitForStatus(operationId, 'submitted');
  await stack.orchestrator.cancel(operationId, { requestedBy: 'ops@buyer', reason: 'campaign pulled' });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('canceled');
  expect(state.cancellation).toMatchObject({
    requestedBy: 'ops@buyer',
    reason: 'campaign pulled',
    sellerNotified: false,
  });
  expect(state.cancellation?.sellerNote).toMatch(/not told/);
});

test('progress from working payloads is visible through the status query', async () => {
  seller.script('sync_creatives', [
    { status: 'working', progress: { percentage: 20, current_step: 'transcoding', total_steps: 4, step_number: 1 } },
    {
      status: 'working',
      progress: { percentage: 60, current_step: 'policy review', total_steps: 4, step_number: 3 } as never,
      afterPolls: 2,
    },
    {
      status: 'completed',
      payload: {
        creatives: [
          { creative_id: 'c1', action: 'created' },
          { creative_id: 'c2', action: 'failed', errors: [{ code: 'INVALID_FORMAT', message: 'bad size' }] },
        ],
      },
      afterMs: 8_000,
    },
  ]);
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'sync_creatives',
    params: { account: { account_id: 'a1' }, creatives: [] },
    idempotencyKey: randomUUID(),
  });
  const midway = await eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return view.state?.progress?.percentage === 60 ? view.state : undefined;
  });
  expect(midway.progress).toEqual({ percentage: 60, currentStep: 'policy review', totalSteps: 4, stepNumber: 3 });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(state.outcome).toBe('partial');
  expect(state.outcomeNotes?.join(' ')).toContain('c2');
});
