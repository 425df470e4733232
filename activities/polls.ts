/**
 * Reading a seller's task: `readTask` reads it once, `awaitTaskMoveOnCadence` polls it until it moves, each retry one
 * poll, keeping the poll cadence itself through `nextRetryDelay` (no timer, no worker slot held between polls).
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import {
  type AwaitTaskMoveOnCadenceInput,
  type AwaitTaskMoveOutcome,
  nextPollDelayMs,
  POLL_BUDGET_SPENT,
  type ReadTaskInput,
  type ReadTaskOutcome,
} from '../contract/activities';
import type { TaskReadDependencies } from './task-reader';

export type PollActivityDependencies = TaskReadDependencies;

export function createPollActivities(deps: PollActivityDependencies) {
  const { guarded, readWithRetryAfter, ensureStorable } = deps;

  /**
   * A final result read from an AdCP task read (or the buy a resource read shows) checked against the schemas of the
   * version the seller declares. A seller's own task record is not an AdCP surface: its response_data is not checked.
   */
  async function schemaWarningsOf(input: ReadTaskInput, outcome: ReadTaskOutcome): Promise<string[]> {
    const check = deps.checkAnswer;
    if (!check) return [];
    if (outcome.resource) return check(input.sellerId, 'get_media_buys', { media_buys: [outcome.resource.row] });
    const snapshot = outcome.snapshot;
    if (snapshot?.status !== 'completed' || !snapshot.result || outcome.taskRecordAdapter === 'seller-records')
      return [];
    return check(input.sellerId, input.task, snapshot.result, 'result');
  }

  async function read(input: ReadTaskInput): Promise<ReadTaskOutcome> {
    return guarded(
      input.sellerId,
      (input.timeouts ?? deps.timeouts).readMs,
      async (context) => {
        let outcome = await readWithRetryAfter(context, input);
        const warnings = await schemaWarningsOf(input, outcome);
        if (warnings.length > 0) outcome = { ...outcome, schemaWarnings: warnings };
        return ensureStorable(outcome, `The read of ${input.task} task ${input.taskId} at ${input.sellerId}`);
      },
      input.tenant,
    );
  }

  return {
    /** One read of the task, by the method that works for this seller (activities/read-strategy.ts). */
    async readTask(input: ReadTaskInput): Promise<ReadTaskOutcome> {
      return read(input);
    },

    /**
     * The polling twin of readTask: fails benignly while the task has not moved (or cannot be seen). Each retry is a
     * poll, and each attempt names the delay of the next one itself (the cadence of AwaitTaskMoveOnCadenceInput).
     */
    async awaitTaskMoveOnCadence(input: AwaitTaskMoveOnCadenceInput): Promise<AwaitTaskMoveOutcome> {
      const info = Context.current().info;
      const attempt = info.attempt;
      const cadence = input.cadence;
      const waitsFirst = cadence.firstPollAfterMs > 0;
      // The budget (the deadline, the working or quick window) is the activity's schedule-to-close timeout, which the
      // server enforces across retries. Where it did not (a server before temporalio/temporal#6545; once, it seems,
      // the time-skipping test server), an attempt comes after the budget's end: it ends the activity itself, from
      // the server's own timestamps, so a window still ends.
      const budgetEndMs =
        info.scheduleToCloseTimeoutMs > 0 ? info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs : undefined;
      if (attempt > 1 && budgetEndMs !== undefined && info.currentAttemptScheduledTimestampMs > budgetEndMs) {
        throw ApplicationFailure.create({
          type: POLL_BUDGET_SPENT,
          message: `attempt ${attempt} came ${info.currentAttemptScheduledTimestampMs - budgetEndMs} ms after the polling budget ended`,
          nonRetryable: true,
          details: [{ polls: Math.max(waitsFirst ? attempt - 2 : attempt - 1, 0) }],
        });
      }
      if (waitsFirst && attempt === 1) {
        // The wait before the first poll, kept by the server as a retry delay: no timer, no worker slot held.
        throw ApplicationFailure.create({
          type: 'TaskPollDue',
          message: `first poll in ${cadence.firstPollAfterMs} ms`,
          category: 'BENIGN',
          details: [{ polls: 0 }],
          nextRetryDelay: cadence.firstPollAfterMs,
        });
      }
      const polls = waitsFirst ? attempt - 1 : attempt;
      const nextPollInMs = nextPollDelayMs(cadence, polls);
      let outcome: ReadTaskOutcome;
      try {
        outcome = await read(input);
      } catch (error) {
        if (error instanceof ApplicationFailure && error.nonRetryable) throw error;
        // A seller's "not before" (retry_after, an open circuit) is honoured when it is later than the next poll.
        const askedDelay =
          error instanceof ApplicationFailure && typeof error.nextRetryDelay === 'number' ? error.nextRetryDelay : 0;
        // A failed poll is one more reason to poll again at the same cadence.
        throw ApplicationFailure.create({
          type: 'TaskPollFailed',
          message: (error as Error).message,
          category: 'BENIGN',
          details: [{ polls }],
          nextRetryDelay: Math.max(nextPollInMs, askedDelay),
        });
      }
      const snapshot = outcome.snapshot;
      // A read that cannot see the task is no news: keep polling (webhooks, the deadline and reconciliation decide).
      // The seller's own word counts as a move where the workflow says which it saw (pending -> requires_approval
      // are both submitted); a buy the resource read shows is news for a create that has not settled.
      const sellerWordMoved =
        input.since.sellerStatus !== undefined && (snapshot?.rawStatus ?? null) !== input.since.sellerStatus;
      const unchanged =
        !outcome.resource &&
        (!snapshot ||
          (snapshot.status === input.since.status &&
            !sellerWordMoved &&
            JSON.stringify(snapshot.progress ?? null) === JSON.stringify(input.since.progress ?? null)));
      if (unchanged) {
        // The attempt count rides along: when the budget ends, this failure is what the workflow sees.
        const why = snapshot
          ? `still ${snapshot.status}`
          : `cannot read the task now (${outcome.unreadable?.code ?? 'unreadable'})`;
        throw ApplicationFailure.create({
          type: 'TaskUnchanged',
          message: why,
          category: 'BENIGN',
          details: [{ polls, readMethod: outcome.readMethod }],
          nextRetryDelay: nextPollInMs,
        });
      }
      return { ...outcome, polls };
    },
  };
}

export type PollActivities = ReturnType<typeof createPollActivities>;
