/**
 * Every AdCP task status, and the spellings real sellers use, driven through a real Temporal server by the scripted
 * seller over MCP, plus the lifecycle over A2A. Each test asserts the operation's final status and the recorded
 * transitions with their sources, as the status query shows them.
 */
import { randomUUID } from 'node:crypto';
import { type ScriptStep, type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

let seller: ScriptedSeller;
let stack: TestStack;

beforeAll(async () => {
  seller = await startScriptedSeller({ a2a: 'spec' });
  stack = await startTestStack({
    sellers: registry([
      { id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' },
      { id: 'fixture-a2a', url: seller.a2aUrl!, protocol: 'a2a', token_env: 'FIXTURE_TOKEN' },
    ]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
  await sdkA2aSeller?.close();
});

let sdkA2aSeller: ScriptedSeller | undefined;

async function run(
  steps: ScriptStep[],
  options: { sellerId?: string; interaction?: { deadlineMs?: number; maxRounds?: number } } = {},
) {
  seller.script('create_media_buy', steps);
  const { operationId } = await stack.orchestrator.start({
    sellerId: options.sellerId ?? 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
    ...(options.interaction ? { interaction: options.interaction } : {}),
  });
  return operationId;
}

const path = (transitions: { from: string; to: string; source: string }[]) =>
  transitions.map((t) => `${t.from}>${t.to}:${t.source}`);

test.each<[string, ScriptStep[], string, string[]]>([
  ['completed at once', [{ status: 'completed' }], 'completed', ['pending>completed:call']],
  [
    'completed at once, as an SDK handler answers (media buy status pending_creatives)',
    [{ status: 'completed', bare: true }],
    'completed',
    ['pending>completed:call'],
  ],
  [
    'submitted, working, completed',
    [{ status: 'submitted' }, { status: 'working', afterPolls: 1 }, { status: 'completed', afterPolls: 1 }],
    'completed',
    ['pending>submitted:call', 'submitted>working:poll', 'working>completed:poll'],
  ],
  [
    'failed by the seller',
    [
      { status: 'submitted' },
      {
        status: 'failed',
        afterPolls: 1,
        errors: [{ code: 'PRODUCT_UNAVAILABLE', message: 'Sold out', recovery: 'correctable' }],
      },
    ],
    'failed',
    ['pending>submitted:call', 'submitted>failed:poll'],
  ],
  [
    'rejected by the seller',
    [
      { status: 'submitted' },
      { status: 'rejected', afterPolls: 1, message: 'Policy review rejected the creative theme' },
    ],
    'rejected',
    ['pending>submitted:call', 'submitted>rejected:poll'],
  ],
  [
    'canceled by the seller',
    [{ status: 'working' }, { status: 'canceled', afterPolls: 1, message: 'Canceled by the sales team' }],
    'canceled',
    ['pending>working:call', 'working>canceled:poll'],
  ],
  [
    'pending_approval is submitted',
    [{ status: 'pending_approval' }, { status: 'completed', afterPolls: 1 }],
    'completed',
    ['pending>submitted:call', 'submitted>completed:poll'],
  ],
  [
    'unknown: an immediate tasks/get learns the truth',
    [{ status: 'unknown' }, { status: 'completed', afterPolls: 1 }],
    'completed',
    ['pending>unknown:call', 'unknown>completed:poll'],
  ],
])('%s', async (_name, steps, finalStatus, transitions) => {
  const state = await stack.orchestrator.result(await run(steps));
  expect(state.status).toBe(finalStatus);
  expect(path(state.transitions)).toEqual(transitions);
  if (finalStatus === 'failed')
    expect(state.errors?.[0]).toMatchObject({
      code: 'PRODUCT_UNAVAILABLE',
      message: 'Sold out',
      recovery: 'correctable',
    });
  if (finalStatus === 'rejected') expect(state.message).toContain('Policy review');
});

test.each([['input-required'], ['input_required']] as const)(
  '%s pauses for an answer, then resumes',
  async (spelling) => {
    const operationId = await run([
      { status: spelling, reason: 'CLARIFICATION_NEEDED', message: 'Which flight dates?' },
      { status: 'completed' },
    ]);
    const waiting = await eventually(async () => {
      const view = await stack.orchestrator.status(operationId);
      return view.state?.status === 'input-required' ? view.state : undefined;
    });
    expect(waiting.inputRequest).toMatchObject({ reason: 'CLARIFICATION_NEEDED', round: 1 });
    const description = await stack.client.workflow.getHandle(operationId).describe();
    expect(description.searchAttributes.AdcpInputReason).toEqual(['CLARIFICATION_NEEDED']);
    expect(description.searchAttributes.AdcpStatus).toEqual(['input-required']);
    await stack.orchestrator.provideInput(operationId, { input: { flight: 'March' }, idempotencyKey: randomUUID() });
    const state = await stack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(path(state.transitions)).toEqual([
      'pending>input-required:call',
      'input-required>input-required:orchestrator',
      'input-required>completed:call',
    ]);
  },
);

test('input-required more often than the round limit ends the operation with input_rounds_exhausted', async () => {
  const ask = (round: number): ScriptStep => ({
    status: 'input-required',
    reason: 'BUDGET_EXCEEDS_LIMIT',
    message: `Round ${round}: lower the budget`,
  });
  const operationId = await run([ask(1), ask(2), ask(3), { status: 'completed' }], { interaction: { maxRounds: 2 } });
  for (const round of [1, 2]) {
    await eventually(async () =>
      (await stack.orchestrator.status(operationId)).state?.inputRequest?.round === round ? true : undefined,
    );
    await stack.orchestrator.provideInput(operationId, {
      input: { budget: 10_000 - round },
      idempotencyKey: `answer-${round}-${operationId}`,
    });
  }
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('failed');
  expect(state.failure).toMatchObject({ reason: 'input_rounds_exhausted' });
  expect(state.failure?.message).toContain('limit is 2');
  expect(seller.mediaBuys().filter((buy) => buy.taskId === state.taskId)).toHaveLength(0);
});

test('auth-required pauses until the credentials are refreshed, then the task is looked up again', async () => {
  const operationId = await run([
    { status: 'submitted' },
    { status: 'auth-required', afterPolls: 1, message: 'Token expired' },
    { status: 'completed', afterPolls: 1 },
  ]);
  const paused = await eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return view.state?.status === 'auth-required' ? view.state : undefined;
  });
  expect(paused.authRequired?.deadline).toBeDefined();
  const pollsWhilePaused = seller.task(paused.taskId!)!.polls;
  await stack.orchestrator.credentialsRefreshed(operationId, 'ops@buyer');
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  expect(seller.task(paused.taskId!)!.polls).toBe(pollsWhilePaused + 1);
  expect(path(state.transitions)).toEqual([
    'pending>submitted:call',
    'submitted>auth-required:poll',
    'auth-required>completed:poll',
  ]);
});

test('A2A: create_media_buy goes submitted → completed over A2A, and a cancel reaches the seller through tasks/cancel', async () => {
  const completed = await stack.orchestrator.result(
    await run([{ status: 'submitted' }, { status: 'completed', afterPolls: 1 }], { sellerId: 'fixture-a2a' }),
  );
  expect(completed.status).toBe('completed');
  expect(typeof completed.result?.media_buy_id).toBe('string');
  expect(seller.callsTo('create_media_buy').at(-1)?.transport).toBe('a2a');

  const operationId = await run([{ status: 'submitted' }, { status: 'completed', afterPolls: 1_000 }], {
    sellerId: 'fixture-a2a',
  });
  const submitted = await eventually(async () => {
    const view = await stack.orchestrator.status(operationId);
    return view.state?.status === 'submitted' ? view.state : undefined;
  });
  await stack.orchestrator.cancel(operationId, { requestedBy: 'ops@buyer', reason: 'flight moved' });
  const canceled = await stack.orchestrator.result(operationId);
  expect(canceled.status).toBe('canceled');
  expect(canceled.cancellation).toMatchObject({ sellerNotified: true });
  expect(seller.task(submitted.taskId!)?.status).toBe('canceled');
});

test("A2A through @adcp/sdk's own adapter (a transport Task carrying the AdCP envelope): submitted → completed", async () => {
  sdkA2aSeller = await startScriptedSeller({ a2a: 'sdk-adapter' });
  const sdkStack = await startTestStack({
    sellers: registry([{ id: 'sdk-a2a', url: sdkA2aSeller.a2aUrl!, protocol: 'a2a', token_env: 'FIXTURE_TOKEN' }]),
    activities: { env: { FIXTURE_TOKEN: sdkA2aSeller.authToken } },
  });
  try {
    sdkA2aSeller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'working', afterPolls: 1 },
      { status: 'completed', afterPolls: 1 },
    ]);
    const { operationId } = await sdkStack.orchestrator.start({
      sellerId: 'sdk-a2a',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: randomUUID(),
    });
    const state = await sdkStack.orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(state.taskId).toBe(sdkA2aSeller.tasks()[0].taskId);
    expect(path(state.transitions)).toEqual([
      'pending>submitted:call',
      'submitted>working:poll',
      'working>completed:poll',
    ]);
    expect(state.result?.media_buy_id).toBe(sdkA2aSeller.mediaBuys()[0].mediaBuyId);
  } finally {
    await sdkStack.close();
  }
});
