/**
 * `watch`: follows one operation until it ends. It polls the status (query, else the published state) and the
 * workflow's pending activities, and prints what changed since the last poll: status transitions with their source,
 * the seller's message and progress, the question of an input-required pause, and the call in flight with its
 * attempt, last error and next retry. With --json each change is one JSON object per line (NDJSON).
 */
import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { operationView } from '../../api/operation-view';
import type { OperationView, OrchestratorClient } from '../../client/orchestrator-client';
import { type PendingActivityView, pendingActivityHttpView } from '../../client/pending-activity';
import type { Transition } from '../../contract/operation';
import {
  EXIT,
  type GlobalOptions,
  pendingActivities,
  positiveInteger,
  print,
  printJson,
  withSession,
} from '../context';
import { activityLine, endedBadly, operationLines, time } from '../format';

export interface WatchOptions {
  intervalMs: number;
  json: boolean;
  /** Print the full status first (false after `start`, which printed the id already). */
  header?: boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function transitionLine(transition: Transition): string {
  return `${time(transition.at)}  ${transition.from} → ${transition.to} (${transition.source})${transition.note ? `  ${transition.note}` : ''}`;
}

/** What identifies "the same call in the same attempt with the same error": a change prints a line. */
function activityKey(activity: PendingActivityView): string {
  return JSON.stringify([
    activity.activityId,
    activity.attempt,
    activity.state,
    activity.lastFailure?.message,
    activity.nextAttemptAt,
  ]);
}

/** Follows the operation to its end; resolves with the exit code (1 when it ended failed, rejected or canceled). */
export async function watchOperation(
  session: { orchestrator: OrchestratorClient; client: Client },
  operationId: string,
  options: WatchOptions,
): Promise<number> {
  let first = true;
  let seenTransitions = 0;
  let lastMessage: string | undefined;
  let lastProgress: string | undefined;
  let lastQuestion: string | undefined;
  let lastStale: boolean | undefined;
  const shownActivities = new Map<string, string>();
  for (;;) {
    const view: OperationView = await session.orchestrator.status(operationId);
    const activities = view.running ? await pendingActivities(session.client, operationId) : [];
    const state = view.state;
    if (first) {
      first = false;
      seenTransitions = state?.transitionCount ?? 0;
      if (options.json)
        printJson({
          event: 'snapshot',
          operation: operationView(view, {}),
          pending_activities: activities.map(pendingActivityHttpView),
        });
      else if (options.header !== false) for (const line of operationLines(view, activities)) print(line);
      for (const activity of activities) shownActivities.set(activity.activityId, activityKey(activity));
      lastMessage = state?.message;
      lastProgress = JSON.stringify(state?.progress ?? null);
      lastQuestion = JSON.stringify(state?.inputRequest ?? null);
      lastStale = !view.live;
      if (!options.json && view.running)
        print(
          `Watching ${operationId} (every ${options.intervalMs / 1000} s; Ctrl-C stops watching, not the operation)...`,
        );
    } else if (state) {
      // The state keeps its latest transitions (bounded); transitionCount counts them all.
      const fresh = Math.min(state.transitionCount - seenTransitions, state.transitions.length);
      for (const transition of fresh > 0 ? state.transitions.slice(-fresh) : []) {
        if (options.json) printJson({ event: 'status', operation_id: operationId, ...transition });
        else print(transitionLine(transition));
      }
      seenTransitions = state.transitionCount;
      if (state.message !== lastMessage && state.message) {
        if (options.json) printJson({ event: 'message', operation_id: operationId, message: state.message });
        else print(`  message: ${state.message}`);
      }
      lastMessage = state.message;
      const progress = JSON.stringify(state.progress ?? null);
      if (progress !== lastProgress && state.progress) {
        if (options.json) printJson({ event: 'progress', operation_id: operationId, progress: state.progress });
        else
          print(
            `  progress: ${[state.progress.percentage !== undefined ? `${state.progress.percentage}%` : '', state.progress.currentStep ?? ''].filter(Boolean).join(' · ')}`,
          );
      }
      lastProgress = progress;
      const question = JSON.stringify(state.inputRequest ?? null);
      if (question !== lastQuestion && state.status === 'input-required' && state.inputRequest) {
        const ask = state.inputRequest;
        if (options.json) printJson({ event: 'input_required', operation_id: operationId, input_request: ask });
        else
          print(
            `  waiting on you: ${ask.reason ?? 'input requested'}${ask.message ? `: ${ask.message}` : ''} (round ${ask.round}, answer by ${time(ask.deadline)}): adcp-orchestrator answer ${operationId} --input '{...}'`,
          );
      }
      lastQuestion = question;
    }
    if (!view.live !== lastStale) {
      lastStale = !view.live;
      if (!view.live && view.staleReason) {
        if (options.json) printJson({ event: 'stale', operation_id: operationId, message: view.staleReason });
        else print(`  note: ${view.staleReason}`);
      }
    }
    for (const activity of activities) {
      const key = activityKey(activity);
      if (shownActivities.get(activity.activityId) === key) continue;
      shownActivities.set(activity.activityId, key);
      // A first attempt that has not failed yet is the normal case; print calls once they have something to say.
      if (activity.attempt <= 1 && !activity.lastFailure) continue;
      if (options.json) printJson({ event: 'call', operation_id: operationId, ...pendingActivityHttpView(activity) });
      else print(`  call: ${activityLine(activity)}`);
    }
    if (!view.running) {
      const code = endedBadly(view) ? EXIT.FAILED : EXIT.OK;
      if (options.json) printJson({ event: 'end', operation: operationView(view, {}), exit_code: code });
      else {
        print('');
        for (const line of operationLines(view, [])) print(line);
      }
      return code;
    }
    await sleep(options.intervalMs);
  }
}

export function registerWatchCommand(program: Command): void {
  program
    .command('watch')
    .description(
      'Follow an operation live until it ends: status changes as they happen, the call in flight with its attempt, last error and next retry.',
    )
    .argument('<operation-id>', 'the operation to follow')
    .option('--interval <seconds>', 'seconds between polls', positiveInteger, 2)
    .addHelpText(
      'after',
      '\nWith --json, one JSON object per line: snapshot, status, message, progress, input_required, call, stale, end.\nExits when the operation ends: 0 completed, 1 failed, rejected or canceled.',
    )
    .action(async (operationId: string, options: { interval: number }, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      await withSession(globals, async (session) => {
        process.exitCode = await watchOperation(session, operationId, {
          intervalMs: options.interval * 1000,
          json: globals.json === true,
        });
      });
    });
}
