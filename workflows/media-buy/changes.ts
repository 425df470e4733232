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
import { type MediaBuySnapshot, actionsPermit } from '../../protocol/media-buy';
import { isTerminal } from './lifecycle';

/** The status a change leads to when the seller applies it (nothing leads out of a terminal status). */
export function statusAfterChange(kind: ChangeRequest['kind'], current: MediaBuyLifecycle): MediaBuyLifecycle {
  if (isTerminal(current)) return current;
  if (kind === 'pause') return 'paused';
  if (kind === 'cancel') return 'canceled';
  if (kind === 'resume') return 'active';
  return current;
}

/**
 * Whether a buy in `status` accepts the change, following the lifecycle and the storyboard's terminal enforcement:
 * nothing changes a completed, rejected or canceled buy (a second cancel is NOT_CANCELLABLE, anything else
 * INVALID_STATE); resume only a paused buy, pause only a buy that is not paused; the seller's available_actions (or
 * 3.0 valid_actions), when it sends them, have the last word, read in AdCP's action vocabulary (protocol/media-buy.ts
 * actionsPermit: a coarse 3.0 name covers what it rolls up to, reallocate_budget keeps the total).
 */
export function validateChange(
  state: Pick<MediaBuyState, 'status' | 'mediaBuyId' | 'availableActions' | 'packages' | 'startTime' | 'endTime'>,
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
  if (state.availableActions) {
    const verdict = actionsPermit(state.availableActions, updateParamsFor(state.mediaBuyId, request, {}), {
      budgets: Object.fromEntries(Object.values(state.packages).map((pkg) => [pkg.packageId, pkg.budget])),
      ...(state.startTime ? { startTime: state.startTime } : {}),
      ...(state.endTime ? { endTime: state.endTime } : {}),
    });
    if (!verdict.permitted) {
      const { need } = verdict;
      const offered = need.anyOf.join(' / ') + (need.allOf ? ` (or ${need.allOf.join(' and ')})` : '');
      return {
        ok: false,
        code: 'ACTION_NOT_ALLOWED',
        message: `The seller does not offer ${offered} for this change's ${need.part} on this buy now (available: ${state.availableActions.join(', ') || 'none'}).`,
      };
    }
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

// ---- did the seller make the change? ---------------------------------------------------------------------------

/** What one description of the buy (an update answer, a get_media_buys read) says about a change. */
export type ChangeEvidence =
  { evidence: 'shown' } | { evidence: 'contradicted'; differences: string[] } | { evidence: 'unknown' };

/** The code a change the seller answered and did not make ends with (as a cancel's CANCEL_NOT_APPLIED). */
export function notAppliedCode(kind: ChangeRequest['kind']): string {
  return `${kind.toUpperCase()}_NOT_APPLIED`;
}

const LIVE: ReadonlySet<string> = new Set(['pending_creatives', 'pending_start', 'active']);

function sameTime(a: string, b: string): boolean {
  return Date.parse(a) === Date.parse(b);
}

function sameIds(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((id) => b.includes(id));
}

/** The creative ids a `packages[].creative_assignments` (or `creatives`) entry assigns. */
function assignedIds(value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value
    .map((entry) =>
      typeof entry === 'string'
        ? entry
        : entry && typeof entry === 'object'
          ? (entry as { creative_id?: unknown }).creative_id
          : undefined,
    )
    .filter((id): id is string => typeof id === 'string');
}

/**
 * Compares the buy as a seller describes it with what the change asked for: `shown` when every field the description
 * carries matches, `contradicted` (with what differs) when one does not, `unknown` when it carries none of them.
 */
export function changeEvidence(request: ChangeRequest, buy: MediaBuySnapshot): ChangeEvidence {
  const differences: string[] = [];
  let checked = 0;
  const compare = (what: string, shown: boolean, seen: string) => {
    checked += 1;
    if (!shown) differences.push(`${what}: ${seen}`);
  };
  const status = buy.status;
  switch (request.kind) {
    case 'pause':
      if (status) compare('status', status === 'paused', status);
      break;
    case 'resume':
      if (status) compare('status', LIVE.has(status), status);
      break;
    case 'cancel':
      // A buy that ended otherwise (completed, rejected) neither shows nor denies the cancel.
      if (status === 'canceled' || (status && LIVE.has(status)) || status === 'paused')
        compare('status', status === 'canceled', status);
      break;
    case 'budget':
      for (const [packageId, budget] of Object.entries(request.budgets ?? {})) {
        const seen = buy.packages?.find((pkg) => pkg.packageId === packageId)?.budget;
        if (seen !== undefined) compare(`${packageId} budget`, seen === budget, String(seen));
      }
      break;
    case 'dates':
      if (request.startTime && buy.startTime)
        compare('start_time', sameTime(request.startTime, buy.startTime), buy.startTime);
      if (request.endTime && buy.endTime) compare('end_time', sameTime(request.endTime, buy.endTime), buy.endTime);
      break;
    case 'packages':
      for (const entry of request.packages ?? []) {
        const pkg = buy.packages?.find((candidate) => candidate.packageId === entry.package_id);
        if (!pkg) continue;
        const id = String(entry.package_id);
        if (typeof entry.budget === 'number' && pkg.budget !== undefined)
          compare(`${id} budget`, pkg.budget === entry.budget, String(pkg.budget));
        if (typeof entry.paused === 'boolean' && pkg.paused !== undefined)
          compare(`${id} paused`, pkg.paused === entry.paused, String(pkg.paused));
        const assigned = assignedIds(entry.creative_assignments) ?? assignedIds(entry.creatives);
        if (assigned && pkg.creativeIds)
          compare(`${id} creatives`, sameIds(assigned, pkg.creativeIds), `[${pkg.creativeIds.join(', ')}]`);
      }
      break;
  }
  if (differences.length > 0) return { evidence: 'contradicted', differences };
  return checked > 0 ? { evidence: 'shown' } : { evidence: 'unknown' };
}
