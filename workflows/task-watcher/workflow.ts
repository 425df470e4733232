/**
 * The task watcher of one seller and shard: holds the operations parked there, lists their tasks in a few calls per
 * round and tells only the operations whose task moved. Thin: the handlers hand registrations to the machine
 * (./machine.ts), the loop runs the listing and delivery activities it asks for, waits until it wants to act again,
 * and continues as new (carrying every watched operation) when Temporal suggests it. It ends after a while with
 * nothing to watch; the next registration (signalWithStart) starts it again.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  TimeoutFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { TaskListingActivities } from '../../activities/task-listing';
import {
  type ListingFailure,
  type TaskWatcherInput,
  type TaskWatcherView,
  WATCH_INTERVAL_MS,
  taskWatcherQuery,
  unwatchTaskSignal,
  watchTaskSignal,
} from '../../contract/task-watcher';
import { TaskWatcherMachine } from './machine';

// A listing is a few bounded calls (one per 100 rows or ids, each bounded by the read timeout, heartbeating
// between them); its retries are few and short: the machine backs off between listings itself.
const listing = proxyActivities<TaskListingActivities>({
  startToCloseTimeout: '10m',
  heartbeatTimeout: '2m',
  retry: {
    initialInterval: '2s',
    backoffCoefficient: 2,
    maximumInterval: '20s',
    maximumAttempts: 2,
    nonRetryableErrorTypes: ['ConfigError'],
  },
});

// Delivery signals each operation whose task moved; a failed delivery is retried by the machine.
const delivery = proxyActivities<TaskListingActivities>({
  startToCloseTimeout: '10m',
  heartbeatTimeout: '2m',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '20s', maximumAttempts: 2 },
});

function failureOf(failure: unknown): ListingFailure {
  let cause: unknown = failure;
  if (cause instanceof ActivityFailure) cause = cause.cause;
  if (cause instanceof ApplicationFailure) {
    return {
      error: { code: cause.type ?? 'LISTING_FAILED', message: cause.message, recovery: 'transient' },
      permanent: cause.nonRetryable || cause.type === 'ConfigError',
    };
  }
  if (cause instanceof TimeoutFailure)
    return {
      error: { code: 'TIMEOUT', message: `the listing timed out (${cause.timeoutType})`, recovery: 'transient' },
      permanent: false,
    };
  return {
    error: {
      code: 'LISTING_FAILED',
      message: cause instanceof Error ? cause.message : String(cause),
      recovery: 'transient',
    },
    permanent: false,
  };
}

export async function adcpTaskWatcher(input: TaskWatcherInput): Promise<TaskWatcherView> {
  const watcherId = workflowInfo().workflowId;
  const machine = new TaskWatcherMachine(
    {
      sellerId: input.sellerId,
      shard: input.shard,
      shards: input.shards,
      intervalMs: input.intervalMs ?? WATCH_INTERVAL_MS,
    },
    watcherId,
    input.carried,
  );
  setHandler(watchTaskSignal, (registrations) => {
    // A registration names the round of the worker that sent it, and the watcher lists at the latest one. Behind a
    // patch because a watcher run from before ignored the field and its history replays that. Removal condition: no
    // task watcher run started before this build is still open (a watcher continues as new every few thousand
    // events and ends when idle, so that is days after the build became current).
    const takesRound = patched('task-watcher-round-from-registration');
    for (const registration of [registrations].flat()) {
      if (!takesRound && registration && typeof registration === 'object') {
        const { intervalMs: _ignored, ...asBefore } = registration;
        machine.register(asBefore, Date.now());
      } else machine.register(registration, Date.now());
    }
  });
  setHandler(unwatchTaskSignal, (requests) => {
    for (const request of [requests].flat()) machine.unregister(request?.operationId);
  });
  setHandler(taskWatcherQuery, () => machine.view(Date.now()));

  for (;;) {
    const info = workflowInfo();
    if (
      info.continueAsNewSuggested ||
      (input.continueAsNewAfterEvents !== undefined && info.historyLength >= input.continueAsNewAfterEvents)
    ) {
      await condition(allHandlersFinished);
      // The next run lists at the round this one ended with (a registration may have changed it).
      const round =
        machine.intervalMs === (input.intervalMs ?? WATCH_INTERVAL_MS) ? {} : { intervalMs: machine.intervalMs };
      return await continueAsNew<typeof adcpTaskWatcher>({ ...input, ...round, carried: machine.carry() });
    }
    const step = machine.next(Date.now());
    if (step.kind === 'end') {
      if (!allHandlersFinished()) await condition(allHandlersFinished);
      // A registration that arrived meanwhile keeps the watcher going.
      if (machine.size > 0 || machine.pendingNotices.length > 0) continue;
      return machine.view(Date.now());
    }
    if (step.kind === 'wait') {
      const until = step.untilMs;
      setCurrentDetails(`watching ${machine.size} operation(s) at ${input.sellerId}`);
      // Woken early only when something is due sooner (a first registration, a notice): not by every registration.
      await condition(() => machine.wakeAtMs(Date.now()) < until, Math.max(until - Date.now(), 1));
      continue;
    }
    if (step.kind === 'deliver') {
      try {
        const outcome = await delivery.deliverTaskNotices({
          sellerId: input.sellerId,
          ...(step.tenant !== undefined ? { tenant: step.tenant } : {}),
          ...(step.account !== undefined ? { account: step.account } : {}),
          watcherId,
          notices: step.notices,
        });
        machine.delivered(step.notices, outcome, Date.now());
      } catch {
        machine.deliveryFailed(step.notices, Date.now());
      }
      continue;
    }
    try {
      const outcome = await listing.listWatchedTasks({
        ...step.input,
        sellerId: input.sellerId,
        shard: input.shard,
        shards: input.shards,
      });
      machine.listed(step.group, step.input, outcome, Date.now());
    } catch (failure) {
      machine.listingFailed(step.group, failureOf(failure), Date.now());
    }
  }
}
