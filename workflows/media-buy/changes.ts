/**
 * Which changes a media buy accepts in which status, and what a change sends: pure rules the machine applies when a
 * change arrives (the update's validator), again when it runs, and when it builds the update_media_buy arguments.
 */
import {
  type ChangeRequest,
  type ChangeVerdict,
  type MediaBuyLifecycle,
  type MediaBuyState,
  checkChangeShape,
} from '../../contract/media-buy';
import { isTerminal } from './lifecycle';

/** The update_media_buy actions a change maps to (the normative action table in update_media_buy.mdx). */
const CHANGE_ACTIONS: Readonly<Record<ChangeRequest['kind'], readonly string[]>> = {
  pause: ['pause'],
  resume: ['resume'],
  cancel: ['cancel'],
  budget: ['increase_budget', 'decrease_budget', 'reallocate_budget'],
  dates: ['extend_flight', 'shorten_flight', 'update_flight_dates'],
  packages: [],
};

/** The status a change leads to when the seller applies it. */
export function statusAfterChange(kind: ChangeRequest['kind'], current: MediaBuyLifecycle): MediaBuyLifecycle {
  if (kind === 'pause') return 'paused';
  if (kind === 'cancel') return 'canceled';
  if (kind === 'resume') return 'active';
  return current;
}

/**
 * Whether a buy in `status` accepts the change, following the lifecycle and the storyboard's terminal enforcement:
 * nothing changes a completed, rejected or canceled buy (a second cancel is NOT_CANCELLABLE, anything else
 * INVALID_STATE); resume only a paused buy, pause only a buy that is not paused; the seller's available_actions,
 * when it sends them, have the last word.
 */
export function validateChange(
  state: Pick<MediaBuyState, 'status' | 'mediaBuyId' | 'availableActions' | 'packages' | 'endTime'>,
  request: ChangeRequest,
): ChangeVerdict {
  const shape = checkChangeShape(request);
  if (!shape.ok) return shape;
  const { status } = state;
  if (isTerminal(status)) {
    if (request.kind === 'cancel')
      return {
        ok: false,
        code: 'NOT_CANCELLABLE',
        message: `The media buy is ${status}; a ${status} buy cannot be canceled.`,
      };
    return {
      ok: false,
      code: 'INVALID_STATE',
      message: `The media buy is ${status}; a ${status} buy accepts no changes.`,
    };
  }
  if (status === 'creating' || !state.mediaBuyId) {
    return {
      ok: false,
      code: 'INVALID_STATE',
      message: 'The media buy is still being created; change it once the seller has answered with its media_buy_id.',
    };
  }
  if (request.kind === 'resume' && status !== 'paused') {
    return {
      ok: false,
      code: 'INVALID_STATE',
      message: `Only a paused media buy can be resumed; this one is ${status}.`,
    };
  }
  if (request.kind === 'pause' && status === 'paused') {
    return { ok: false, code: 'INVALID_STATE', message: 'The media buy is already paused.' };
  }
  if (request.kind === 'budget' || request.kind === 'packages') {
    const named =
      request.kind === 'budget'
        ? Object.keys(request.budgets ?? {})
        : (request.packages ?? [])
            .map((entry) => entry.package_id)
            .filter((id): id is string => typeof id === 'string');
    const unknown = named.filter((id) => Object.keys(state.packages).length > 0 && !state.packages[id]);
    if (unknown.length > 0)
      return { ok: false, code: 'INVALID_REQUEST', message: `No package ${unknown.join(', ')} in this media buy.` };
  }
  const actions = CHANGE_ACTIONS[request.kind];
  if (
    state.availableActions &&
    actions.length > 0 &&
    !actions.some((action) => state.availableActions!.includes(action))
  ) {
    return {
      ok: false,
      code: 'ACTION_NOT_ALLOWED',
      message: `The seller does not offer ${actions.join(' / ')} on this buy now (available: ${state.availableActions.join(', ') || 'none'}).`,
    };
  }
  return { ok: true };
}

/** The update_media_buy arguments of a change (idempotency_key and push config are the operation's). */
export function updateParamsFor(
  mediaBuyId: string,
  request: ChangeRequest,
  base: { account?: unknown; revision?: number },
): Record<string, unknown> {
  const params: Record<string, unknown> = { media_buy_id: mediaBuyId };
  if (base.account !== undefined) params.account = base.account;
  if (base.revision !== undefined) params.revision = base.revision;
  switch (request.kind) {
    case 'pause':
      params.paused = true;
      break;
    case 'resume':
      params.paused = false;
      break;
    case 'cancel':
      params.canceled = true;
      if (request.reason) params.cancellation_reason = request.reason;
      break;
    case 'budget':
      params.packages = Object.entries(request.budgets ?? {}).map(([package_id, budget]) => ({ package_id, budget }));
      break;
    case 'dates':
      if (request.startTime) params.start_time = request.startTime;
      if (request.endTime) params.end_time = request.endTime;
      break;
    case 'packages':
      params.packages = request.packages;
      break;
  }
  return params;
}
