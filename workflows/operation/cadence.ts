/**
 * How often to poll a waiting task (adcp-protocol.md §1.6): about every 5 s while `working` (for up to about
 * 120 s), every 60 s while `submitted`, about every 2 minutes as a backup when the seller also sends webhooks.
 * Many tasks finish within seconds, so each wait starts with quick polls that double up to that interval.
 *
 * The whole sequence runs inside one activity whose retry policy repeats the poll (initial interval, coefficient 2,
 * capped at the status interval): retries write no history, so a day of polling costs a handful of events.
 */
import type { OperationStatus } from '../../contract/operation';
import { nextPollDelayMs } from '../../contract/activities';

export const FIRST_POLL_WORKING_MS = 1_000;
export const FIRST_POLL_MS = 2_000;
export const WORKING_INTERVAL_MS = 5_000;
export const WORKING_WINDOW_MS = 120_000;
export const SUBMITTED_INTERVAL_MS = 60_000;
export const WEBHOOK_BACKUP_INTERVAL_MS = 120_000;

export interface CadenceInput {
  status: OperationStatus;
  /** How long the task has been `working` without a change of status (0 otherwise). */
  workingForMs: number;
  webhookRegistered: boolean;
}

export interface WaitPlan {
  /** Delay before the first poll of this wait. */
  firstPollAfterMs: number;
  /** Delay before the second poll; each later delay doubles, up to `maxIntervalMs`. */
  initialIntervalMs: number;
  maxIntervalMs: number;
  /** While `working`: how much longer the working cadence applies before falling back to the submitted one. */
  windowMs?: number;
  /**
   * After `afterPolls` polls, the next is `intervalMs` later and each later gap doubles up to `maxIntervalMs` (absent:
   * every gap `intervalMs`): a wait the seller's task watcher covers.
   */
  settle?: { afterPolls: number; intervalMs: number; maxIntervalMs?: number };
}

export function planWait(input: CadenceInput): WaitPlan {
  if (input.status === 'working' && input.workingForMs < WORKING_WINDOW_MS) {
    return {
      firstPollAfterMs: FIRST_POLL_WORKING_MS,
      initialIntervalMs: FIRST_POLL_WORKING_MS * 2,
      maxIntervalMs: WORKING_INTERVAL_MS,
      windowMs: WORKING_WINDOW_MS - input.workingForMs,
    };
  }
  return {
    firstPollAfterMs: FIRST_POLL_MS,
    initialIntervalMs: FIRST_POLL_MS * 2,
    maxIntervalMs: input.webhookRegistered ? WEBHOOK_BACKUP_INTERVAL_MS : SUBMITTED_INTERVAL_MS,
  };
}

/** The polls of a plan in order: when each falls (from the start of the wait) and the gap to the one after it. */
export function* pollSchedule(plan: WaitPlan): Generator<{ atMs: number; nextGapMs: number }, never> {
  let atMs = plan.firstPollAfterMs;
  for (let polls = 1; ; polls += 1) {
    const nextGapMs = nextPollDelayMs(plan, polls);
    yield { atMs, nextGapMs };
    atMs += nextGapMs;
  }
}

/** The polls a plan makes in its first `horizonMs` (for docs and tests): offsets from the start of the wait. */
export function pollOffsets(plan: WaitPlan, horizonMs: number): number[] {
  const offsets: number[] = [];
  const end = Math.min(horizonMs, plan.windowMs ?? Infinity);
  for (const { atMs } of pollSchedule(plan)) {
    if (atMs > end) break;
    offsets.push(atMs);
  }
  return offsets;
}
