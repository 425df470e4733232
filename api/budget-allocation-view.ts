/**
 * A campaign's budget allocation as the API and the CLI show it (snake_case): the policy, the pool, the plan waiting
 * for a decision, and each move. Pure, so the CLI (and the client package) render it without the HTTP routes.
 */
import type { AllocationEndpoint, BudgetAllocationPolicy, BudgetAllocationState } from '../contract/campaign';

const HOUR_MS = 3_600_000;

export function policyView(policy: BudgetAllocationPolicy) {
  return {
    mode: policy.mode,
    approval_timeout_hours: policy.approvalTimeoutMs / HOUR_MS,
    min_share: policy.minShare,
    max_share: policy.maxShare,
    agents: Object.fromEntries(
      Object.entries(policy.sellers).map(([id, bounds]) => [
        id,
        { min_share: bounds.minShare ?? null, max_share: bounds.maxShare ?? null },
      ]),
    ),
    min_move_amount: policy.minMoveAmount,
    min_periods_between_moves: policy.minPeriodsBetweenMoves,
    freeze_before_end_hours: policy.freezeBeforeEndMs / HOUR_MS,
    signals: policy.signals,
    under_delivery_threshold: policy.underDeliveryThreshold,
    delivering_threshold: policy.deliveringThreshold,
    under_delivery_grace_hours: policy.underDeliveryGraceMs / HOUR_MS,
    reporting_period_hours: policy.reportingPeriodMs === undefined ? null : policy.reportingPeriodMs / HOUR_MS,
  };
}

const endpointView = (endpoint: AllocationEndpoint) => (endpoint.kind === 'pool' ? 'pool' : endpoint.sellerId);

/** The policy, the pool, the plan waiting for a decision, and each move: from, to, amount, why, status. */
export function budgetAllocationView(book: BudgetAllocationState) {
  return {
    policy: policyView(book.policy),
    policy_changes: book.policyChanges.map((change) => ({
      at: change.at,
      by: change.by,
      mode: change.mode,
      reason: change.reason ?? null,
    })),
    pool: book.pool,
    proposal: book.proposal
      ? {
          plan: book.proposal.plan,
          moves: book.proposal.moves,
          since: book.proposal.since,
          deadline: book.proposal.deadline,
        }
      : null,
    last_decision: book.lastDecision
      ? { at: book.lastDecision.at, outcome: book.lastDecision.outcome, message: book.lastDecision.message }
      : null,
    totals: book.totals,
    moves: book.moves.map((move) => ({
      id: move.id,
      plan: move.plan,
      from: endpointView(move.from),
      to: endpointView(move.to),
      amount: move.amount,
      moved: move.moved ?? null,
      why: move.why,
      status: move.status,
      mode: move.mode,
      decided_by: move.decidedBy ?? null,
      created_at: move.createdAt,
      finished_at: move.finishedAt ?? null,
      error: move.error ?? null,
      steps: move.steps.map((step) => ({
        step: step.step,
        agent_id: step.sellerId ?? null,
        budget_before: step.budgetBefore ?? null,
        budget_after: step.budgetAfter ?? null,
        outcome: step.outcome,
        at: step.at,
        error: step.error ?? null,
      })),
    })),
  };
}
