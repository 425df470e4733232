/**
 * What an operation shows of itself, computed from its state: the search attributes operators filter on, the memo
 * reads answer from when no worker can, the human line in the Web UI, and the notification the buyer's systems get.
 * Pure: the workflow writes these (each search-attribute or memo upsert is a history event, so it writes only when a
 * fingerprint changed); tests read them without a server.
 */
import type { OperationState } from '../../contract/operation';
import type { BuyerNotification, NotificationEvent } from '../../contract/notification';

/** The largest result kept in the memo; a larger one is replaced by a note saying where to read it. */
export const MEMO_RESULT_LIMIT = 32 * 1024;

/** The values of the search attributes the workflow keeps current (AdcpStatus, AdcpTaskId, AdcpInputReason). */
export interface IndexedValues {
  status: string;
  taskId: string | null;
  inputReason: string | null;
}

export function indexedValues(state: OperationState): IndexedValues {
  return {
    status: state.status,
    taskId: state.taskId ?? null,
    inputReason: state.status === 'input-required' ? (state.inputRequest?.reason ?? 'UNSPECIFIED') : null,
  };
}

/** What the starter indexes (status pending, no task, no question): a fresh run's first upsert writes only a change. */
export const INDEXED_AT_START = JSON.stringify({ status: 'pending', taskId: null, inputReason: null });

/** Changes when anything a reader of the memo relies on changes: status, task, question, failure, outcome, resource. */
export function memoFingerprint(state: OperationState): string {
  return JSON.stringify([
    indexedValues(state),
    state.failure?.reason ?? null,
    state.outcome ?? null,
    state.resource ?? null,
    state.cancellation?.at ?? null,
  ]);
}

/** The state as the memo keeps it: a result too large for it is replaced by a note. */
export function memoState(state: OperationState): OperationState {
  const resultSize = state.result ? JSON.stringify(state.result).length : 0;
  if (resultSize <= MEMO_RESULT_LIMIT) return state;
  return {
    ...state,
    result: { note: `result of ${resultSize} bytes: read it from the running operation or its final result` },
  };
}

/** The workflow's current details: one line an operator reads in the Web UI. */
export function describeForHumans(state: OperationState): string {
  const parts = [`${state.task} at ${state.sellerId}: ${state.status}`];
  if (state.taskId) parts.push(`task ${state.taskId}`);
  if (state.resource?.mediaBuyId) parts.push(`media buy ${state.resource.mediaBuyId}`);
  if (state.callInFlight) parts.push(`call in flight (${state.callInFlight.step})`);
  if (state.progress?.percentage !== undefined) parts.push(`${state.progress.percentage}%`);
  if (state.progress?.currentStep) parts.push(state.progress.currentStep);
  if (state.inputRequest) parts.push(`waiting for input (${state.inputRequest.reason ?? 'no reason given'})`);
  if (state.message) parts.push(state.message);
  parts.push(`polls: ${state.pollCount}`);
  return parts.join(' · ');
}

/** The notification of `event` to the tenant's systems, as the adcpNotification child delivers it. */
export function buyerNotification(
  state: OperationState,
  event: NotificationEvent,
  idempotencyKey: string,
  tenant: string,
  occurredAt: string,
): BuyerNotification {
  return {
    idempotency_key: idempotencyKey,
    event,
    operation_id: state.operationId,
    tenant,
    task: state.task,
    agent_id: state.sellerId,
    status: state.status,
    occurred_at: occurredAt,
    ...(event === 'completed' && state.resource?.mediaBuyId
      ? { resource: { media_buy_id: state.resource.mediaBuyId } }
      : {}),
    ...(event === 'input_required' && state.inputRequest
      ? {
          input_request: {
            ...(state.inputRequest.reason !== undefined ? { reason: state.inputRequest.reason } : {}),
            ...(state.inputRequest.message !== undefined ? { message: state.inputRequest.message } : {}),
            round: state.inputRequest.round,
            deadline: state.inputRequest.deadline,
          },
        }
      : {}),
    ...(event === 'failed' || event === 'rejected' || event === 'timed_out'
      ? {
          failure: {
            ...(state.failure?.reason ? { reason: state.failure.reason } : {}),
            message: state.failure?.message ?? state.message ?? state.errors?.[0]?.message ?? state.status,
          },
        }
      : {}),
  };
}
