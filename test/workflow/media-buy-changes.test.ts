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
