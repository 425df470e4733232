/**
 * The call in flight, as Temporal sees it: an operation's pending activities from `handle.describe()` (the same data
 * as the Web UI's "Pending Activities" tab), reduced to what an operator needs while a seller misbehaves: which call,
 * which attempt, why the last one failed, and when the next one runs.
 *
 * Retries of an activity write no history, so this is the only place where attempts between two status changes show.
 * For the polling activity each attempt is one poll of the seller, and a "failure" of type TaskUnchanged is the
 * seller answering "still the same"; `waitingOnSeller` says so, so a display does not call it an error.
 */
import type { WorkflowExecutionDescription } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';

/** As the client decodes it (numeric enum), or in its JSON form (the enum's name), e.g. from a recorded answer. */
type RawPendingActivity = Omit<temporal.api.workflow.v1.IPendingActivityInfo, 'state'> & {
  state?: temporal.api.workflow.v1.IPendingActivityInfo['state'] | string;
};
type RawTimestamp = { seconds?: unknown; nanos?: number | null } | null | undefined;

export type PendingActivityState =
  'scheduled' | 'started' | 'cancel_requested' | 'paused' | 'pause_requested' | 'unspecified';

/** PendingActivityState (temporal/api/enums/v1/workflow.proto). */
const STATES: Record<number, PendingActivityState> = {
  0: 'unspecified',
  1: 'scheduled',
  2: 'started',
  3: 'cancel_requested',
  4: 'paused',
  5: 'pause_requested',
};

/** The enum as a number (the client's decoded message) or its proto name (the message's JSON form). */
function stateOf(value: unknown): PendingActivityState {
  if (typeof value === 'number') return STATES[value] ?? 'unspecified';
  if (typeof value === 'string') {
    const name = value.replace(/^PENDING_ACTIVITY_STATE_/, '').toLowerCase();
    return (Object.values(STATES) as string[]).includes(name) ? (name as PendingActivityState) : 'unspecified';
  }
  return 'unspecified';
}

/** Failure types the activities throw to say "not yet", not "wrong" (activities/index.ts). */
const BENIGN_FAILURE_TYPES = new Set(['TaskUnchanged']);

export interface PendingActivityView {
  activityId: string;
  /** The activity's name: callSeller, readTask, waitForTask, ... */
  activityType: string;
  state: PendingActivityState;
  /** 1 for the first try; retries count up. */
  attempt: number;
  /** The retry policy's limit; undefined when unlimited. */
  maximumAttempts?: number;
  /** When the current attempt started (ISO 8601), if one is running. */
  lastStartedAt?: string;
  /** When the last attempt ended (ISO 8601). */
  lastAttemptCompletedAt?: string;
  /** When the next attempt is due (ISO 8601): Temporal's schedule when it gives one, else last end + retry interval. */
  nextAttemptAt?: string;
  /** The backoff before the next attempt, in milliseconds. */
  retryIntervalMs?: number;
  /** The last attempt's failure: what went wrong, and its type (e.g. SellerTransientError, TaskUnchanged). */
  lastFailure?: { message: string; type?: string; nonRetryable?: boolean };
  /** The last failure only says the seller's task has not moved yet (a poll), not that something broke. */
  waitingOnSeller: boolean;
  /** When the activity gives up for good (schedule-to-close), if it has such a deadline. */
  expiresAt?: string;
  lastHeartbeatAt?: string;
  paused: boolean;
}

/** Protobuf `int64` arrives as a Long, a number or a string, depending on the decoder. */
function toNumber(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'number') return value;
  if (typeof value === 'string') return Number(value);
  if (typeof value === 'bigint') return Number(value);
  if (typeof value === 'object' && typeof (value as { toNumber?: unknown }).toNumber === 'function') {
    return (value as { toNumber(): number }).toNumber();
  }
  // A Long that went through JSON (a recorded describe answer).
  if (
    typeof value === 'object' &&
    typeof (value as { low?: unknown }).low === 'number' &&
    typeof (value as { high?: unknown }).high === 'number'
  ) {
    const long = value as { low: number; high: number };
    return long.high * 2 ** 32 + (long.low >>> 0);
  }
  return undefined;
}

function toMs(value: RawTimestamp): number | undefined {
  if (!value) return undefined;
  const seconds = toNumber(value.seconds) ?? 0;
  const nanos = value.nanos ?? 0;
  const ms = seconds * 1000 + Math.floor(nanos / 1_000_000);
  return ms > 0 ? ms : undefined;
}

function toIso(value: RawTimestamp): string | undefined {
  const ms = toMs(value);
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

function failureOf(raw: RawPendingActivity['lastFailure']): PendingActivityView['lastFailure'] {
  if (!raw) return undefined;
  // An activity failure's own message is what the activity threw; a wrapped cause adds the transport's reason.
  const cause = raw.cause?.message && raw.cause.message !== raw.message ? `: ${raw.cause.message}` : '';
  const type =
    raw.applicationFailureInfo?.type ||
    (raw.timeoutFailureInfo ? 'Timeout' : raw.canceledFailureInfo ? 'Canceled' : undefined);
  return {
    message: `${raw.message || '(no message)'}${cause}`,
    ...(type ? { type } : {}),
    ...(raw.applicationFailureInfo?.nonRetryable ? { nonRetryable: true } : {}),
  };
}

/** The view of one raw pending activity. */
export function pendingActivityViewOf(raw: RawPendingActivity): PendingActivityView {
  const lastFailure = failureOf(raw.lastFailure);
  const retryIntervalMs = raw.currentRetryInterval ? toMs(raw.currentRetryInterval as RawTimestamp) : undefined;
  const completedMs = toMs(raw.lastAttemptCompleteTime);
  const scheduledNextMs = toMs(raw.nextAttemptScheduleTime);
  // Temporal fills nextAttemptScheduleTime only while the activity waits for its retry; derive it otherwise.
  const nextMs =
    scheduledNextMs ??
    (stateOf(raw.state) === 'scheduled' && completedMs !== undefined && retryIntervalMs !== undefined
      ? completedMs + retryIntervalMs
      : undefined);
  const maximumAttempts = raw.maximumAttempts ?? 0;
  return {
    activityId: raw.activityId ?? '',
    activityType: raw.activityType?.name ?? 'unknown',
    state: stateOf(raw.state),
    attempt: raw.attempt ?? 1,
    ...(maximumAttempts > 0 ? { maximumAttempts } : {}),
    ...(toIso(raw.lastStartedTime) ? { lastStartedAt: toIso(raw.lastStartedTime) } : {}),
    ...(completedMs !== undefined ? { lastAttemptCompletedAt: new Date(completedMs).toISOString() } : {}),
    ...(nextMs !== undefined ? { nextAttemptAt: new Date(nextMs).toISOString() } : {}),
    ...(retryIntervalMs !== undefined ? { retryIntervalMs } : {}),
    ...(lastFailure ? { lastFailure } : {}),
    waitingOnSeller: lastFailure?.type !== undefined && BENIGN_FAILURE_TYPES.has(lastFailure.type),
    ...(toIso(raw.expirationTime) ? { expiresAt: toIso(raw.expirationTime) } : {}),
    ...(toIso(raw.lastHeartbeatTime) ? { lastHeartbeatAt: toIso(raw.lastHeartbeatTime) } : {}),
    paused: raw.paused === true,
  };
}

/** Only the part of a describe() answer this module reads, so a recorded structure can be passed in tests. */
export type DescriptionWithPendingActivities =
  { raw: { pendingActivities?: RawPendingActivity[] | null } } | Pick<WorkflowExecutionDescription, 'raw'>;

/** The operation's calls in flight (usually one; none between calls), from `handle.describe()`. */
export function pendingActivityView(description: DescriptionWithPendingActivities): PendingActivityView[] {
  const pending = (description.raw as { pendingActivities?: RawPendingActivity[] | null }).pendingActivities ?? [];
  return pending.map(pendingActivityViewOf);
}

/** The same view in the HTTP API's naming (snake_case), for `pending_activities` in an operation's JSON. */
export function pendingActivityHttpView(view: PendingActivityView): Record<string, unknown> {
  return {
    activity_id: view.activityId,
    activity_type: view.activityType,
    state: view.state,
    attempt: view.attempt,
    maximum_attempts: view.maximumAttempts ?? null,
    last_started_at: view.lastStartedAt ?? null,
    last_attempt_completed_at: view.lastAttemptCompletedAt ?? null,
    next_attempt_at: view.nextAttemptAt ?? null,
    retry_interval_ms: view.retryIntervalMs ?? null,
    last_failure: view.lastFailure
      ? {
          message: view.lastFailure.message,
          type: view.lastFailure.type ?? null,
          ...(view.lastFailure.nonRetryable ? { non_retryable: true } : {}),
        }
      : null,
    waiting_on_seller: view.waitingOnSeller,
    expires_at: view.expiresAt ?? null,
    last_heartbeat_at: view.lastHeartbeatAt ?? null,
    paused: view.paused,
  };
}
