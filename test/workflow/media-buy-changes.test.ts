/**
 * Changes to a media buy through its Updates, on the time-skipping server with a simulated seller
 * (./media-buy-stand-ins.ts): the validator refuses what the buy's status does not allow before it enters history,
 * accepted changes run one at a time in the order they were accepted, an update ID answers once, and each change's
 * outcome is what the seller's buy shows afterwards.
 */
import { WorkflowUpdateFailedError, WorkflowUpdateStage, type WorkflowHandle } from '@temporalio/client';
import {
  type ChangeRequest,
  type MediaBuyState,
  changeMediaBuyUpdate,
  mediaBuyStateQuery,
} from '../../contract/media-buy';
import { type MediaBuyStandIns, startMediaBuyStandIns } from './media-buy-stand-ins';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
let stack: MediaBuyStandIns;
const handles: WorkflowHandle[] = [];

beforeAll(async () => {
  stack = await startMediaBuyStandIns();
}, 120_000);

beforeEach(() => {
  stack.seller.behaviour = {};
});

afterAll(async () => {
  await Promise.allSettled(handles.map((handle) => handle.terminate('test over')));
  await stack?.close();
});

async function stateWhen(handle: WorkflowHandle, ready: (state: MediaBuyState) => boolean): Promise<MediaBuyState> {
  const deadline = Date.now() + 20_000;
  let state: MediaBuyState | undefined;
  while (Date.now() < deadline) {
    state = await handle.query(mediaBuyStateQuery).catch(() => state);
    if (state && ready(state)) return state;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`not reached; last state: ${JSON.stringify(state)?.slice(0, 2_000)}`);
}

async function liveBuy(budgets = [1_000]) {
  const handle = await stack.start({
    params: await stack.seller.createParams({ startInMs: DAY, flightMs: 30 * DAY, budgets }),
  });
  handles.push(handle);
  const state = await stateWhen(handle, (candidate) => candidate.status !== 'creating');
  return { handle, mediaBuyId: state.mediaBuyId!, packageIds: Object.keys(state.packages) };
}

function change(handle: WorkflowHandle, request: Omit<ChangeRequest, 'requestedBy'>, updateId?: string) {
  return handle.executeUpdate(changeMediaBuyUpdate, {
    args: [{ requestedBy: 'ops@buyer', ...request } as ChangeRequest],
    ...(updateId ? { updateId } : {}),
  });
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(WorkflowUpdateFailedError);
  return ((error as WorkflowUpdateFailedError).cause as Error).message;
}

test('pause and resume are sent and applied; the buy follows the seller', async () => {
  const { handle, mediaBuyId } = await liveBuy();
  expect(await change(handle, { kind: 'pause' })).toMatchObject({ sequence: 1, outcome: 'applied', status: 'paused' });
  expect(await change(handle, { kind: 'resume' })).toMatchObject({
    sequence: 2,
    outcome: 'applied',
    status: 'pending_creatives',
  });
  const updates = stack.seller.updates().filter((update) => update.media_buy_id === mediaBuyId);
  expect(updates.map((update) => update.paused)).toEqual([true, false]);
  // Each carries the buy's revision for optimistic concurrency, and the create's account.
  expect(updates[0]).toMatchObject({ revision: 1, account: { account_id: 'acct_stand_in' } });
  expect(updates[1]).toMatchObject({ revision: 2 });
});

test('the validator refuses what the status does not allow, before it enters history or reaches the seller', async () => {
  const { handle, mediaBuyId, packageIds } = await liveBuy();
  expect(await refusal(change(handle, { kind: 'resume' }))).toMatch(/^INVALID_STATE: Only a paused media buy/);
  expect(await refusal(change(handle, { kind: 'budget', budgets: { pkg_nobody_has: 10 } }))).toBe(
    'INVALID_REQUEST: No package pkg_nobody_has in this media buy.',
  );
  expect(await refusal(change(handle, { kind: 'dates', startTime: 'soon' }))).toMatch(/^INVALID_REQUEST/);
  expect(await change(handle, { kind: 'budget', budgets: { [packageIds[0]!]: 1_500 } })).toMatchObject({
    sequence: 1,
    outcome: 'applied',
  });
  const state = await handle.query(mediaBuyStateQuery);
  expect(state.changes.map((entry) => entry.kind)).toEqual(['budget']);
  expect(state.packages[packageIds[0]!]!.budget).toBe(1_500);
  expect(stack.seller.updates().filter((update) => update.media_buy_id === mediaBuyId)).toHaveLength(1);
});

test('changes sent together run one at a time in the order accepted; an update ID answers once', async () => {
  const { handle, mediaBuyId, packageIds } = await liveBuy([1_000, 2_000]);
  // Each is accepted before the next is sent (the order of acceptance is the order of running).
  const accepted = [];
  for (const [request, updateId] of [
    [{ kind: 'pause' }, 'pause-1'],
    [{ kind: 'budget', budgets: { [packageIds[1]!]: 2_500 } }, 'budget-1'],
    // Valid against the status the queued pause will leave, not the status now.
    [{ kind: 'resume' }, 'resume-1'],
  ] as const) {
    accepted.push(
      await handle.startUpdate(changeMediaBuyUpdate, {
        args: [{ requestedBy: 'ops@buyer', ...request } as ChangeRequest],
        updateId,
        waitForStage: WorkflowUpdateStage.ACCEPTED,
      }),
    );
  }
  const answers = await Promise.all(accepted.map((update) => update.result()));
  expect(answers.map((answer) => [answer.sequence, answer.outcome])).toEqual([
    [1, 'applied'],
    [2, 'applied'],
    [3, 'applied'],
  ]);
  expect(await change(handle, { kind: 'pause' }, 'pause-1')).toMatchObject({ sequence: 1, outcome: 'applied' });
  const updates = stack.seller.updates().filter((update) => update.media_buy_id === mediaBuyId);
  expect(updates.map((update) => Object.keys(update).filter((key) => ['paused', 'packages'].includes(key)))).toEqual([
    ['paused'],
    ['packages'],
    ['paused'],
  ]);
});

describe('every change is verified by what the seller’s buy shows', () => {
  test('a pause the seller answers and does not make ends PAUSE_NOT_APPLIED; the buy stays as the seller has it', async () => {
    stack.seller.behaviour = { ignores: ['paused'], updateAnswer: 'affected-packages' };
    const { handle, mediaBuyId } = await liveBuy();
    const answer = await change(handle, { kind: 'pause' });
    expect(answer).toMatchObject({
      outcome: 'failed',
      status: 'pending_creatives',
      error: { code: 'PAUSE_NOT_APPLIED' },
    });
    expect(answer.error?.message).toContain('a read of the buy (get_media_buys) shows status: pending_creatives');
    const state = await handle.query(mediaBuyStateQuery);
    expect(state.status).toBe('pending_creatives');
    expect(state.changes[0]).toMatchObject({ outcome: 'failed', verifiedBy: 'read' });
    expect(stack.seller.updates().filter((update) => update.media_buy_id === mediaBuyId)).toHaveLength(1);
  });

  test('a packages change answered with package ids only: the view takes the budgets from the read after it', async () => {
    stack.seller.behaviour = { updateAnswer: 'affected-packages' };
    const { handle, packageIds } = await liveBuy([1_000, 2_000]);
    const [first, second] = packageIds as [string, string];
    // The seller lowers nothing it was not asked to; the second package keeps its budget.
    const answer = await change(handle, { kind: 'packages', packages: [{ package_id: first, budget: 1_234 }] });
    expect(answer).toMatchObject({ outcome: 'applied' });
    const state = await handle.query(mediaBuyStateQuery);
    expect(state.packages[first]).toMatchObject({ budget: 1_234, creativeIds: [] });
    expect(state.packages[second]).toMatchObject({ budget: 2_000 });
    expect(state.changes[0]).toMatchObject({ verifiedBy: 'read' });
  });

  test('a seller with no get_media_buys: an answer that describes the buy shows the change, a terse one leaves it sent', async () => {
    stack.seller.behaviour = { noReads: true };
    const described = await liveBuy();
    expect(await change(described.handle, { kind: 'pause' })).toMatchObject({ outcome: 'applied', status: 'paused' });
    expect((await described.handle.query(mediaBuyStateQuery)).changes[0]).toMatchObject({ verifiedBy: 'answer' });

    stack.seller.behaviour = { noReads: true, updateAnswer: 'affected-packages' };
    const terse = await liveBuy();
    const answer = await change(terse.handle, { kind: 'pause' });
    // Sent, not confirmed: the buy's status is not implied from the request.
    expect(answer).toMatchObject({ outcome: 'sent', status: 'pending_creatives' });
    const state = await terse.handle.query(mediaBuyStateQuery);
    expect(state.changes[0]).toMatchObject({ outcome: 'sent' });
    expect(state.changes[0]!.note).toContain('nothing shows the pause yet');
    // Nothing is queued behind a sent change: the next one runs.
    expect(await change(terse.handle, { kind: 'cancel' })).toMatchObject({ outcome: 'sent' });
  });

  test('a 3.0 seller’s coarse actions (update_budget, update_dates) let budget and dates changes through', async () => {
    stack.seller.behaviour = { actions: 'coarse-3.0' };
    const { handle, packageIds } = await liveBuy();
    const state = await handle.query(mediaBuyStateQuery);
    expect(state.availableActions).toEqual(expect.arrayContaining(['update_budget', 'update_dates']));
    expect(await change(handle, { kind: 'budget', budgets: { [packageIds[0]!]: 4_000 } })).toMatchObject({
      outcome: 'applied',
    });
    const endTime = new Date(Date.parse(state.endTime!) + 7 * DAY).toISOString();
    expect(await change(handle, { kind: 'dates', endTime })).toMatchObject({ outcome: 'applied' });
    expect((await handle.query(mediaBuyStateQuery)).endTime).toBe(endTime);
  });
});
