/**
 * What keeps one attempt of a seller call visible and bounded: a heartbeat every 2 s, so that a worker that died is
 * noticed within the heartbeat timeout and a cancellation reaches the attempt, and a hard deadline on the attempt's
 * own signal.
 */
import { Context } from '@temporalio/activity';
import { deadlineSignal } from './linked-signal';

export const HEARTBEAT_EVERY_MS = 2_000;

/**
 * Heartbeats every HEARTBEAT_EVERY_MS until the returned function runs. A local activity cannot heartbeat (the core
 * refuses it: "Activity heartbeat failed ... UnknownActivity"); its workflow task is kept alive by the core instead.
 */
export function heartbeatUntilDone(context: Context): () => void {
  if (context.info.isLocal) return () => undefined;
  const ticker = setInterval(() => context.heartbeat(), HEARTBEAT_EVERY_MS);
  return () => clearInterval(ticker);
}

export interface AttemptBounds {
  /** Aborts when the activity is cancelled, or with a TimeoutError at the deadline. */
  signal: AbortSignal;
  /** Stops the heartbeats and clears the deadline: run it when the attempt ends. */
  end(): void;
}

/** The attempt's signal (the activity's cancellation and a hard deadline), with heartbeats until it ends. */
export function boundAttempt(timeoutMs: number, context: Context = Context.current()): AttemptBounds {
  const deadline = deadlineSignal(context.cancellationSignal, timeoutMs);
  const stopHeartbeats = heartbeatUntilDone(context);
  return {
    signal: deadline.signal,
    end() {
      stopHeartbeats();
      deadline.dispose();
    },
  };
}
