/**
 * When to look at a waiting task again (adcp-protocol.md §1.6): quickly at first, because many tasks finish
 * within seconds, then at the reference cadence: about 5 s while `working` (for up to about 120 s), 60 s while
 * `submitted`, and about 2 minutes as a backup when the seller also sends webhooks.
 */
import type { OperationStatus } from './definitions';

export const QUICK_LOOKS_MS = [1_000, 2_000, 4_000, 8_000, 15_000, 30_000] as const;
export const WORKING_INTERVAL_MS = 5_000;
export const WORKING_WINDOW_MS = 120_000;
export const SUBMITTED_INTERVAL_MS = 60_000;
export const WEBHOOK_BACKUP_INTERVAL_MS = 120_000;

export interface CadenceInput {
  status: OperationStatus;
  /** Looks taken since the status last changed. */
  looksInStatus: number;
  /** How long the task has been `working` without a change of status. */
  workingForMs: number;
  webhookRegistered: boolean;
}

export interface CadenceDecision {
  delayMs: number;
  /**
   * Steady, slow polling: done by one activity whose retry policy repeats the look, so a day-long wait
   * costs a handful of history events instead of a dozen per poll.
   */
  steady: boolean;
}

export function nextLook(input: CadenceInput): CadenceDecision {
  const steadyInterval = input.webhookRegistered ? WEBHOOK_BACKUP_INTERVAL_MS : SUBMITTED_INTERVAL_MS;
  if (input.status === 'working' && input.workingForMs < WORKING_WINDOW_MS) {
    return { delayMs: Math.min(QUICK_LOOKS_MS[input.looksInStatus] ?? WORKING_INTERVAL_MS, WORKING_INTERVAL_MS), steady: false };
  }
  const quick = QUICK_LOOKS_MS[input.looksInStatus];
  if (quick !== undefined) return { delayMs: quick, steady: false };
  return { delayMs: steadyInterval, steady: true };
}
