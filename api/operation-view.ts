/**
 * How an operation and a reconciliation report look over HTTP (snake_case, the seller's payload passed through): the
 * gateway's answers and the CLI's `--json` output. No express here, so the CLI (and the packed client) can use it
 * without loading the gateway.
 */
import type { OperationView } from '../client/orchestrator-client';
import { pendingActivityHttpView } from '../client/pending-activity';
import type { OperationResource, OperationState } from '../contract/operation';
import type { ReconciliationReport } from '../contract/reconciliation';

function resourceView(resource: OperationResource | undefined): Record<string, unknown> | null {
  if (!resource) return null;
  return {
    media_buy_id: resource.mediaBuyId ?? null,
    ...(resource.state ? { state: resource.state } : {}),
    ...(resource.status ? { status: resource.status } : {}),
    ...(resource.matchedBy ? { matched_by: resource.matchedBy } : {}),
    ...(resource.confirmedBy ? { confirmed_by: resource.confirmedBy, confirmed_at: resource.confirmedAt } : {}),
    ...(resource.candidates?.length ? { candidates: resource.candidates } : {}),
  };
}

const SETTLED: ReadonlySet<string> = new Set(['completed', 'failed', 'canceled', 'rejected']);

/** The reconciliation report in the API's naming (snake_case). */
export function reconciliationReportView(report: ReconciliationReport): Record<string, unknown> {
  return {
    agent_id: report.sellerId,
    requested_by: report.requestedBy,
    at: report.at,
    open_operations: report.openOperations,
    seller_lists_tasks: report.sellerListsTasks,
    ...(report.sellerError !== undefined ? { seller_error: report.sellerError } : {}),
    seller_open_tasks: report.sellerOpenTasks,
    seller_list_truncated: report.sellerListTruncated,
    adopted: report.adopted.map((entry) => ({ operation_id: entry.operationId, task_id: entry.taskId })),
    unattributed: report.unattributed.map((entry) => ({
      task_id: entry.taskId,
      ...(entry.taskType !== undefined ? { task_type: entry.taskType } : {}),
      status: entry.status,
    })),
    missing_from_seller: report.missingFromSeller,
    poll_requested: report.pollRequested,
    ...(report.openMediaBuys !== undefined ? { open_media_buys: report.openMediaBuys } : {}),
    ...(report.mediaBuyRefreshRequested !== undefined
      ? { media_buy_refresh_requested: report.mediaBuyRefreshRequested }
      : {}),
    ...(report.buys ? { seller_buys: sellerBuysView(report.buys) } : {}),
  };
}

/** The orphan pass of a reconciliation report, snake_case. */
function sellerBuysView(buys: NonNullable<ReconciliationReport['buys']>): Record<string, unknown> {
  return {
    listed: buys.listed,
    ...(buys.note !== undefined ? { note: buys.note } : {}),
    count: buys.count,
    truncated: buys.truncated,
    ...(buys.chunks !== undefined ? { chunks: buys.chunks } : {}),
    known: buys.known,
    adopted: buys.adopted.map((entry) => ({
      operation_id: entry.operationId,
      media_buy_id: entry.mediaBuyId,
      ...(entry.matchedBy ? { matched_by: entry.matchedBy } : {}),
    })),
    orphan_count: buys.orphanCount,
    orphans: buys.orphans.map((orphan) => ({
      media_buy_id: orphan.mediaBuyId,
      ...(orphan.status !== undefined ? { status: orphan.status } : {}),
      ...(orphan.createdAt !== undefined ? { created_at: orphan.createdAt } : {}),
      ...(orphan.operationId !== undefined ? { named_operation_id: orphan.operationId } : {}),
      ...(orphan.operationStatus !== undefined ? { named_operation_status: orphan.operationStatus } : {}),
    })),
    claimed_twice: buys.claimedTwice.map((claim) => ({ media_buy_id: claim.mediaBuyId, workflow_ids: claim.owners })),
    claimed_twice_count: buys.claimedTwiceCount ?? buys.claimedTwice.length,
    ...(buys.unanswered ? { unanswered: buys.unanswered } : {}),
    ...(buys.resumed ? { resumed: true } : {}),
  };
}

function errorView(error: NonNullable<OperationState['errors']>[number]): Record<string, unknown> {
  return {
    code: error.code,
    message: error.message,
    recovery: error.recovery,
    ...(error.field ? { field: error.field } : {}),
    ...(error.suggestion ? { suggestion: error.suggestion } : {}),
    ...(error.retryAfterSeconds !== undefined ? { retry_after: error.retryAfterSeconds } : {}),
    ...(error.details ? { details: error.details } : {}),
  };
}

/**
 * Why an operation failed: the orchestrator's own reason when it ended it (timed out, call failed, ...), else, for an
 * operation the seller ended failed or rejected (a validation error, a policy refusal), the seller's first error.
 */
export function failureOf(
  state: OperationState,
): { reason: string; message: string; error?: NonNullable<OperationState['errors']>[number] } | undefined {
  if (state.failure) return state.failure;
  if (state.status !== 'failed' && state.status !== 'rejected') return undefined;
  const error = state.errors?.[0];
  return {
    reason: state.status === 'rejected' ? 'seller_rejected' : 'seller_failed',
    message: state.message ?? error?.message ?? `The seller ended the task ${state.status}.`,
    ...(error ? { error } : {}),
  };
}

/** The operation as HTTP callers see it: snake_case, with the seller's payload passed through untouched. */
export function operationView(view: OperationView, links: { webUi?: string }): Record<string, unknown> {
  const state: OperationState | undefined = view.state;
  const body: Record<string, unknown> = {
    operation_id: view.operationId,
    execution: view.execution,
    running: view.running,
    live: view.live,
    state_source: view.stateSource,
  };
  if (view.staleReason) body.state_message = view.staleReason;
  if (links.webUi) body.web_ui = links.webUi;
  if (view.executionError) body.execution_error = view.executionError;
  if (view.pendingActivities && view.pendingActivities.length > 0) {
    body.pending_activities = view.pendingActivities.map(pendingActivityHttpView);
  }
  if (!state) return body;
  const failure = failureOf(state);
  Object.assign(body, {
    agent_id: state.sellerId,
    task: state.task,
    status: state.status,
    task_id: state.taskId ?? null,
    context_id: state.contextId ?? null,
    message: state.message ?? null,
    progress: state.progress
      ? {
          percentage: state.progress.percentage,
          current_step: state.progress.currentStep,
          total_steps: state.progress.totalSteps,
          step_number: state.progress.stepNumber,
        }
      : null,
    poll_count: state.pollCount,
    webhooks_applied: state.webhooksApplied,
    webhook_registered: state.webhookRegistered,
    input_request: state.inputRequest ?? null,
    input_rounds: state.inputRounds,
    auth_required: state.authRequired ?? null,
    errors: (state.errors ?? []).map(errorView),
    failure: failure
      ? {
          reason: failure.reason,
          message: failure.message,
          ...(failure.error ? { error: errorView(failure.error) } : {}),
        }
      : null,
    // How the seller's tasks are read (learned per seller): kept so an operator can see why polls look as they do.
    read_method: state.readMethod ?? null,
    cancellation: state.cancellation
      ? {
          requested_by: state.cancellation.requestedBy,
          reason: state.cancellation.reason,
          at: state.cancellation.at,
          seller_notified: state.cancellation.sellerNotified,
          seller_note: state.cancellation.sellerNote,
          ...(state.cancellation.resource ? { resource: resourceView(state.cancellation.resource) } : {}),
        }
      : null,
    reconciliation: (state.reconciliation ?? []).map((entry) => ({
      at: entry.at,
      trigger: entry.trigger,
      outcome: entry.outcome,
      ...(entry.taskId ? { task_id: entry.taskId } : {}),
      note: entry.note,
    })),
    transitions: state.transitions,
    anomalies: state.anomalies,
    started_at: state.startedAt,
    updated_at: state.updatedAt,
    deadline: state.deadline,
  });
  // Fields the workflow adds as it learns them (older running operations do not carry them).
  if ('replayed' in state && state.replayed !== undefined) body.replayed = state.replayed;
  if (state.resource) body.resource = resourceView(state.resource);
  // Tenancy (#12): whose operation it is, and who did what to it as authenticated (the audit trail).
  if (state.tenant !== undefined) body.tenant = state.tenant;
  if (state.principal !== undefined) body.principal = state.principal;
  if (state.audit) body.audit = state.audit;
  if (state.cancellation?.principal !== undefined && body.cancellation)
    (body.cancellation as Record<string, unknown>).principal = state.cancellation.principal;
  if (state.callInFlight) body.call_in_flight = state.callInFlight;
  if (state.heldWebhooks !== undefined) body.held_webhooks = state.heldWebhooks;
  if (state.sellerStatus !== undefined) body.seller_status = state.sellerStatus;
  if (state.schemaWarnings?.length) body.schema_warnings = state.schemaWarnings;
  if (state.requestShaping && Object.keys(state.requestShaping).length > 0) body.request_shaping = state.requestShaping;
  if (state.provisional) {
    const { taskId, ...rest } = state.provisional;
    body.provisional = { ...rest, ...(taskId ? { task_id: taskId } : {}) };
  }
  if (state.conflicts) {
    body.conflicts = state.conflicts.map(({ taskId, ...rest }) => ({
      ...rest,
      ...(taskId ? { task_id: taskId } : {}),
    }));
  }
  if (state.webhooksRefused !== undefined) body.webhooks_refused = state.webhooksRefused;
  if (state.refusedWebhooks) {
    body.refused_webhooks = state.refusedWebhooks.map(({ taskId, operationId, sellerId, ...rest }) => ({
      ...rest,
      ...(taskId ? { task_id: taskId } : {}),
      ...(operationId ? { operation_id: operationId } : {}),
      // The seller whose signature verified a webhook refused as another seller's (the wire's agent_id).
      ...(sellerId ? { agent_id: sellerId } : {}),
    }));
  }
  // A settled status stands for its result and outcome, also while the workflow is still closing (`finishing`).
  const settled = !view.running || SETTLED.has(state.status);
  if (settled && view.running) body.finishing = true;
  if (settled) {
    body.result = state.result ?? null;
    body.outcome = state.outcome ?? null;
    body.outcome_notes = state.outcomeNotes ?? [];
  }
  return body;
}
