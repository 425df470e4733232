/** Human-readable rendering for the CLI: short labelled lines, times in UTC, nothing the JSON output lacks. */
import type { OperationView } from '../client/orchestrator-client';
import type { OperationListRow } from '../client/operation-list';
import { failureOf } from '../api/operation-view';
import type { PendingActivityView } from '../client/pending-activity';
import type { OperationState } from '../contract/operation';

/** `2026-11-30 09:41:12Z`: one width, sortable, no locale surprises. */
export function time(iso: string | undefined | null): string {
  if (!iso) return '-';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : `${date.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/** "in 4 s", "3 min ago". */
export function relative(iso: string | undefined, now = Date.now()): string {
  if (!iso) return '';
  const delta = Math.round((Date.parse(iso) - now) / 1000);
  const size = Math.abs(delta);
  const text = size < 120 ? `${size} s` : size < 7200 ? `${Math.round(size / 60)} min` : `${Math.round(size / 3600)} h`;
  return delta >= 0 ? `in ${text}` : `${text} ago`;
}

const ENDED_BADLY = new Set(['failed', 'rejected', 'canceled']);

/** Whether the view shows an operation that ended without success: failed, rejected, canceled, or killed. */
export function endedBadly(view: OperationView): boolean {
  if (view.state && ENDED_BADLY.has(view.state.status)) return true;
  return !view.running && view.execution !== 'COMPLETED';
}

/** One line for the call in flight: "callSeller attempt 3/5 · last error: ... · next retry 09:41:12Z (in 4 s)". */
export function activityLine(activity: PendingActivityView, now = Date.now()): string {
  const parts = [
    `${activity.activityType} attempt ${activity.attempt}${activity.maximumAttempts ? `/${activity.maximumAttempts}` : ''} (${activity.state})`,
  ];
  if (activity.lastFailure) {
    const label = activity.waitingOnSeller ? 'last poll' : 'last error';
    parts.push(
      `${label}: ${activity.lastFailure.message}${activity.lastFailure.type ? ` [${activity.lastFailure.type}]` : ''}`,
    );
  }
  if (activity.nextAttemptAt)
    parts.push(
      `next ${activity.waitingOnSeller ? 'poll' : 'retry'} ${time(activity.nextAttemptAt)} (${relative(activity.nextAttemptAt, now)})`,
    );
  else if (activity.lastStartedAt && activity.state === 'started')
    parts.push(`running since ${time(activity.lastStartedAt)}`);
  if (activity.paused) parts.push('paused');
  return parts.join(' · ');
}

function progressText(state: OperationState): string | undefined {
  const progress = state.progress;
  if (!progress) return undefined;
  const parts: string[] = [];
  if (progress.percentage !== undefined) parts.push(`${progress.percentage}%`);
  if (progress.stepNumber !== undefined && progress.totalSteps !== undefined)
    parts.push(`step ${progress.stepNumber}/${progress.totalSteps}`);
  if (progress.currentStep) parts.push(progress.currentStep);
  return parts.length > 0 ? parts.join(' · ') : undefined;
}

/** The labelled lines of `status` (and the header of `watch`). */
export function operationLines(view: OperationView, activities: PendingActivityView[], now = Date.now()): string[] {
  const state = view.state;
  const lines: [string, string][] = [['Operation', view.operationId]];
  if (state) {
    lines.push(['Seller', state.sellerId]);
    lines.push(['Task', `${state.task}${state.taskId ? ` (seller task ${state.taskId})` : ''}`]);
    const execution = view.running ? 'running' : `ended, workflow ${view.execution}`;
    lines.push(['Status', `${state.status}  (${execution}; last change ${time(state.updatedAt)})`]);
  } else {
    lines.push(['Status', `unknown (${view.running ? 'running' : `workflow ${view.execution}`})`]);
  }
  if (!view.live && view.staleReason) lines.push(['Note', view.staleReason]);
  if (view.executionError) lines.push(['Execution', view.executionError]);
  if (state?.message) lines.push(['Message', state.message]);
  const progress = state ? progressText(state) : undefined;
  if (progress) lines.push(['Progress', progress]);
  if (state?.status === 'input-required' && state.inputRequest) {
    const question = state.inputRequest;
    lines.push([
      'Question',
      `${question.reason ?? 'input requested'}${question.message ? `: ${question.message}` : ''} (round ${question.round}; answer by ${time(question.deadline)} with \`adcp-orchestrator answer ${view.operationId} --input '{...}'\`)`,
    ]);
  }
  if (state?.status === 'auth-required' && state.authRequired) {
    lines.push([
      'Auth',
      `the seller needs fresh credentials (since ${time(state.authRequired.since)}, deadline ${time(state.authRequired.deadline)})`,
    ]);
  }
  for (const activity of activities) lines.push(['Call', activityLine(activity, now)]);
  if (activities.length === 0 && state?.callInFlight)
    lines.push(['Call', `${state.callInFlight.step} since ${time(state.callInFlight.since)}`]);
  if (state?.resource)
    lines.push([
      'Media buy',
      `${state.resource.mediaBuyId}${state.resource.state ? ` (${state.resource.state})` : ''}`,
    ]);
  if (state?.outcome && !view.running)
    lines.push([
      'Outcome',
      `${state.outcome}${state.outcomeNotes?.length ? `: ${state.outcomeNotes.join('; ')}` : ''}`,
    ]);
  const failure = state ? failureOf(state) : undefined;
  if (failure) lines.push(['Failure', `${failure.reason}: ${failure.message}`]);
  if (state?.cancellation) {
    const cancel = state.cancellation;
    lines.push(['Canceled', `by ${cancel.requestedBy} at ${time(cancel.at)}: ${cancel.reason} (${cancel.sellerNote})`]);
  }
  for (const error of state?.errors ?? [])
    lines.push(['Error', `${error.code}: ${error.message}${error.recovery ? ` (${error.recovery})` : ''}`]);
  if (state)
    lines.push([
      'Started',
      `${time(state.startedAt)} · deadline ${time(state.deadline)} · ${state.pollCount} poll(s), ${state.webhooksApplied} webhook(s)`,
    ]);
  const width = Math.max(...lines.map(([label]) => label.length));
  return lines.map(([label, value]) => `${label.padEnd(width)}  ${value}`);
}

/** The `list` table. */
export function listLines(rows: OperationListRow[]): string[] {
  if (rows.length === 0) return ['No operations match.'];
  const header = ['OPERATION', 'TASK', 'SELLER', 'STATUS', 'WAITING', 'STARTED', 'UPDATED', 'WORKFLOW'];
  const table = rows.map((row) => [
    row.operation_id,
    row.task ?? '-',
    row.agent_id ?? '-',
    row.status ?? '-',
    row.input_reason ?? (row.waiting ? 'yes' : ''),
    time(row.started_at),
    time(row.updated_at),
    row.execution_status,
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...table.map((cells) => cells[column].length)));
  const render = (cells: string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column]))
      .join('  ')
      .trimEnd();
  return [render(header), ...table.map(render)];
}
