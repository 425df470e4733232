/**
 * The media buy's lifecycle: the moves media-buy_media-buys_lifecycle.mdx documents ("Transitions"), plus the
 * orchestrator's own create states. Pure; the machine, the change rules and tests read it.
 */
import { type MediaBuyStatus, TERMINAL_MEDIA_BUY_STATUSES } from '../../protocol/media-buy';
import type { MediaBuyLifecycle } from '../../contract/media-buy';

export const LIFECYCLE_EDGES: Readonly<Record<MediaBuyLifecycle, readonly MediaBuyLifecycle[]>> = {
  creating: ['pending_creatives', 'pending_start', 'active', 'paused', 'rejected', 'create_failed'],
  pending_creatives: ['pending_start', 'paused', 'rejected', 'canceled'],
  pending_start: ['active', 'paused', 'rejected', 'canceled'],
  active: ['paused', 'completed', 'canceled'],
  paused: ['active', 'completed', 'canceled'],
  completed: [],
  rejected: [],
  canceled: [],
  create_failed: [],
};

export function isTerminal(status: MediaBuyLifecycle): boolean {
  return status === 'create_failed' || TERMINAL_MEDIA_BUY_STATUSES.has(status as MediaBuyStatus);
}

/** Whether `to` can follow `from` through zero or more lifecycle moves (a read may miss the states in between). */
export function reachable(from: MediaBuyLifecycle, to: MediaBuyLifecycle): boolean {
  if (from === to) return true;
  const seen = new Set<MediaBuyLifecycle>([from]);
  const queue: MediaBuyLifecycle[] = [from];
  while (queue.length > 0) {
    for (const next of LIFECYCLE_EDGES[queue.shift()!]) {
      if (next === to) return true;
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return false;
}
