/**
 * How the operation workflow calls its activities: one proxy group per kind of call, each with its timeouts, retry
 * policy, heartbeat and the errors no retry can fix; and how an activity's failure reads back in the one error model.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  type RetryPolicy,
  TimeoutFailure,
  proxyActivities,
  proxyLocalActivities,
} from '@temporalio/workflow';
import type { OperationActivities } from '../../activities';
import type { TaskListingActivities } from '../../activities/task-listing';
import { type CallTimeouts, POLL_BUDGET_SPENT } from '../../contract/activities';
import type { OperationInput } from '../../contract/operation';
import { type AdcpError, taskSpec } from '../../protocol';

/** Start-to-close is the hard call timeout plus room to report the failure. */
const ACTIVITY_MARGIN_MS = 10_000;
/** A killed worker's call is retried within about this long (heartbeats every few seconds). */
const HEARTBEAT_TIMEOUT = '5s';
/** A poll lost with its worker is made again this long after its heartbeat timed out. */
const LOST_POLL_RETRY = '1s';

/** Errors a retry cannot fix: bad configuration, answers that break the protocol, calls the seller refused. */
const NON_RETRYABLE = ['ConfigError', 'ProtocolViolation', 'IdempotencyKeyRefused', 'AnswerTooLarge'];

/** Planning a mutation's call (a local activity: the plan is recorded in history, every retry sends its bytes). */
export const planning = proxyLocalActivities<OperationActivities>({
  startToCloseTimeout: '10s',
  retry: {
    initialInterval: '1s',
    backoffCoefficient: 2,
    maximumInterval: '5s',
    maximumAttempts: 5,
    nonRetryableErrorTypes: NON_RETRYABLE,
  },
});

/**
 * Joining and leaving the seller's task watcher: local activities (markers in the operation's history, no activity
 * tasks). Each waits only for the one signal that carries its registration: the worker gathers the registrations of
 * many operations into one signalWithStart per watcher (activities/signal-batcher.ts), so a watcher that thousands
 * join at once takes a few signals a second, and no registration queues behind the others' signals.
 * Registration never throws (a refusal is an answer); a failed one leaves the operation polling on its own.
 */
export const watcherActivities = proxyLocalActivities<TaskListingActivities>({
  startToCloseTimeout: '60s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '5s', maximumAttempts: 2 },
});

function callRetry(input: OperationInput): RetryPolicy {
  const defaults = taskSpec(input.task).retry;
  return {
    initialInterval: `${input.retry?.initialIntervalMs ?? defaults.initialIntervalMs}ms`,
    backoffCoefficient: 2,
    maximumInterval: `${input.retry?.maximumIntervalMs ?? defaults.maximumIntervalMs}ms`,
    maximumAttempts: input.retry?.maximumAttempts ?? defaults.maximumAttempts,
    nonRetryableErrorTypes: NON_RETRYABLE,
  };
}

/**
 * The call to the seller, retried by the task's policy (the caller's own values win). Reads (non-mutating tasks) are
 * local activities: a synchronous answer then costs one marker in the workflow task that asked, not a
 * scheduled/started/completed trio and a second workflow task. Mutations stay ordinary activities (heartbeats,
 * cancellation reach).
 */
export function callActivities(input: OperationInput, timeouts: CallTimeouts, local: boolean) {
  const startToCloseTimeout = timeouts.callMs + ACTIVITY_MARGIN_MS;
  if (local) return proxyLocalActivities<OperationActivities>({ startToCloseTimeout, retry: callRetry(input) });
  return proxyActivities<OperationActivities>({
    startToCloseTimeout,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: callRetry(input),
  });
}

/** Reads, reconciliation and the cancel at the seller. */
export function readActivities(timeouts: CallTimeouts) {
  return proxyActivities<OperationActivities>({
    // A read tries the seller's read methods in turn: room for a few of them.
    startToCloseTimeout: `${timeouts.readMs * 2 + ACTIVITY_MARGIN_MS}ms`,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: {
      initialInterval: '1s',
      backoffCoefficient: 2,
      maximumInterval: '10s',
      maximumAttempts: 3,
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
}

/**
 * The polls of one wait as one activity that keeps the cadence itself (`nextRetryDelay` on each attempt,
 * contract/activities.ts AwaitTaskMoveOnCadenceInput), within the wait's budget. The retry policy only applies to
 * attempts that were lost.
 */
export function cadencedPollingActivities(budgetMs: number, timeouts: CallTimeouts) {
  return proxyActivities<OperationActivities>({
    startToCloseTimeout: `${timeouts.readMs * 2 + ACTIVITY_MARGIN_MS}ms`,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    scheduleToCloseTimeout: `${Math.max(budgetMs, 1_000)}ms`,
    retry: {
      initialInterval: LOST_POLL_RETRY,
      backoffCoefficient: 1,
      maximumInterval: LOST_POLL_RETRY,
      nonRetryableErrorTypes: NON_RETRYABLE,
    },
  });
}

/** The polling activity stopped because its time budget (deadline or working window) ended, not because it failed. */
export function budgetRanOut(failure: unknown): boolean {
  if (!(failure instanceof ActivityFailure)) return false;
  if (failure.cause instanceof ApplicationFailure && failure.cause.type === POLL_BUDGET_SPENT) return true;
  return failure.cause instanceof TimeoutFailure || failure.retryState === 'TIMEOUT';
}

/** How many polls the polling activity made before its budget ran out (its last attempt's details say). */
export function pollsBeforeBudgetRanOut(failure: unknown): number {
  const cause = failure instanceof ActivityFailure ? failure.cause : undefined;
  const detail =
    cause instanceof ApplicationFailure ? (cause.details?.[0] as { polls?: unknown } | undefined) : undefined;
  return typeof detail?.polls === 'number' ? detail.polls : 0;
}

/** The error an activity failure carries, in our one error model (activities attach it as details[0]). */
export function errorFromFailure(failure: unknown): AdcpError {
  let cause: unknown = failure;
  if (cause instanceof ActivityFailure) cause = cause.cause;
  if (cause instanceof TimeoutFailure)
    return { code: 'TIMEOUT', message: `the activity timed out (${cause.timeoutType})`, recovery: 'transient' };
  if (cause instanceof ApplicationFailure) {
    const detail = cause.details?.[0] as AdcpError | undefined;
    if (detail && typeof detail.code === 'string') return detail;
    return {
      code: cause.type ?? 'ACTIVITY_FAILED',
      message: cause.message,
      recovery: cause.nonRetryable ? 'terminal' : 'transient',
    };
  }
  return {
    code: 'ACTIVITY_FAILED',
    message: cause instanceof Error ? cause.message : String(cause),
    recovery: 'terminal',
  };
}
