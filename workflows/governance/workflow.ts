/**
 * Campaign governance inside the workflows (governance/campaign in AdCP 3.1, experimental):
 *
 * - `syncGovernancePlan`: sync_plans pushes the buyer's plan to the governance agent while planning;
 * - `governSpend`: an intent check_governance before every spend (create_media_buy, an update that raises budget).
 *   approved → the caller sends the call with the signed `governance_context`; denied → no call; conditions with a
 *   `required_value` → applied and re-checked; other conditions → a person decides (`decideGovernance` Update, who is
 *   recorded) and the adjusted payload is re-checked; at most MAX_GOVERNANCE_ROUNDS checks per action;
 * - `reportPlanOutcome`: report_plan_outcome once the seller answered, without holding the buy back.
 *
 * Every call to the governance agent is an orchestrator operation (a child `adcpOperation`): a check that goes to
 * human review (submitted/working) is waited for like any operation, with polling, retries and a deadline. Only
 * owners whose input names a governance agent call any of this, so workflows without one replay unchanged.
 */
import { ParentClosePolicy, condition, log, setHandler, startChild } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { SA_SELLER, SA_STATUS, SA_TASK, SA_TENANT } from '../../config/search-attributes';
import { operationIdFor } from '../../protocol';
import {
  type GovernanceCheckAnswer,
  applyConditions,
  conditionsMachineApplicable,
  parseGovernanceCheck,
} from '../../protocol/governance';
import {
  OPERATION_WORKFLOW_TYPE,
  type OperationInput,
  type OperationState,
  operationStateFromFailure,
} from '../../contract/operation';
import type { CampaignInput } from '../../contract/campaign';
import {
  type CampaignGovernance,
  DEFAULT_DECISION_TIMEOUT_MS,
  DEFAULT_GOVERNANCE_CALLER,
  MAX_GOVERNANCE_ROUNDS,
  type GovernanceCheckRecord,
  type GovernancePlanSync,
  type GovernanceSettings,
  type GovernanceState,
  type GovernedTool,
  decideGovernanceUpdate,
} from '../../contract/governance';

const MAX_CHECKS_KEPT = 30;
const MAX_OUTCOMES_KEPT = 30;

/** Who calls the governance agent and for what: the owner's key names the operations, its tenant acts. */
export interface GovernanceCaller {
  settings: GovernanceSettings;
  /** The owner's business key (buy key, campaign key): operation IDs derive from it. */
  ownerKey: string;
  tenant?: string;
  principal?: string;
  indexed: boolean;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export function newGovernanceState(settings: GovernanceSettings): GovernanceState {
  return {
    sellerId: settings.sellerId,
    planId: settings.planId,
    status: 'checking',
    checks: [],
    checkCount: 0,
    decisions: [],
    outcomes: [],
  };
}

function operationInput(caller: GovernanceCaller, task: string, params: Record<string, unknown>): OperationInput {
  return {
    sellerId: caller.settings.sellerId,
    task,
    params,
    ...(caller.tenant !== undefined ? { tenant: caller.tenant } : {}),
    ...(caller.principal !== undefined ? { principal: caller.principal } : {}),
  };
}

async function startGovernanceOperation(
  caller: GovernanceCaller,
  task: string,
  callerKey: string,
  params: Record<string, unknown>,
) {
  return startChild(OPERATION_WORKFLOW_TYPE, {
    workflowId: operationIdFor(task, callerKey),
    args: [operationInput(caller, task, params)],
    // The operation finishes what it started even if its owner goes away.
    parentClosePolicy: ParentClosePolicy.ABANDON,
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    staticSummary: `${task} for ${caller.ownerKey} (plan ${caller.settings.planId})`,
    ...(caller.indexed
      ? {
          typedSearchAttributes: [
            { key: SA_TASK, value: task },
            { key: SA_SELLER, value: caller.settings.sellerId },
            { key: SA_STATUS, value: 'pending' },
            ...(caller.tenant !== undefined ? [{ key: SA_TENANT, value: caller.tenant }] : []),
          ],
        }
      : {}),
  });
}

/** Runs one operation at the governance agent and waits for its end (failed/rejected ones included). */
async function runGovernanceOperation(
  caller: GovernanceCaller,
  task: string,
  callerKey: string,
  params: Record<string, unknown>,
): Promise<OperationState> {
  const child = await startGovernanceOperation(caller, task, callerKey, params);
  try {
    return (await child.result()) as OperationState;
  } catch (failure) {
    const state = operationStateFromFailure(failure);
    if (state) return state;
    throw failure;
  }
}

function operationError(operation: OperationState): { code: string; message: string } {
  const error = operation.errors?.[0];
  if (error) return { code: error.code, message: error.message };
  return {
    code: operation.failure?.reason ?? operation.status,
    message: operation.failure?.message ?? operation.message ?? `the operation ended ${operation.status}`,
  };
}

// ---- sync_plans ----------------------------------------------------------------------------------------------------

/** The plan a campaign pushes (sync_plans `plans[0]`): budget, flight, objectives, and the sellers it may buy from. */
export interface CampaignPlan {
  planId: string;
  objectives: string;
  totalBudget: number;
  currency?: string;
  flight: { startTime: string; endTime: string };
  sellerIds: string[];
  brand?: unknown;
  /** Anything more the buyer's plan says (countries, channels, policy_ids, ...), passed as given. */
  extra?: Record<string, unknown>;
}

export function syncPlansParams(plan: CampaignPlan): Record<string, unknown> {
  return {
    plans: [
      {
        ...plan.extra,
        plan_id: plan.planId,
        ...(plan.brand !== undefined ? { brand: plan.brand } : {}),
        objectives: plan.objectives,
        budget: {
          // Without the buyer's threshold, the agent may not reallocate on its own: every change is its decision.
          reallocation_threshold: 0,
          ...((plan.extra?.budget as Record<string, unknown> | undefined) ?? {}),
          // The total and its currency are the campaign's, whatever the extra plan fields say.
          total: plan.totalBudget,
          currency: plan.currency ?? 'USD',
        },
        flight: { start: plan.flight.startTime, end: plan.flight.endTime },
        // The sellers are agents.json ids, not the URLs approved_sellers wants: they travel as an extension.
        ext: {
          ...(plan.extra?.ext as Record<string, unknown> | undefined),
          adcp_orchestrator: { sellers: plan.sellerIds },
        },
      },
    ],
  };
}

/** sync_plans at the governance agent, waited for; a failure is recorded, never thrown (checks then decide). */
export async function syncGovernancePlan(caller: GovernanceCaller, plan: CampaignPlan): Promise<GovernancePlanSync> {
  const operationId = operationIdFor('sync_plans', `${caller.ownerKey}.governance.plan`);
  const base = { sellerId: caller.settings.sellerId, planId: plan.planId, operationId };
  let operation: OperationState;
  try {
    operation = await runGovernanceOperation(
      caller,
      'sync_plans',
      `${caller.ownerKey}.governance.plan`,
      syncPlansParams(plan),
    );
  } catch (failure) {
    if (failure instanceof WorkflowExecutionAlreadyStartedError) {
      return { ...base, status: 'synced', at: iso(Date.now()) }; // synced by an earlier run of this owner
    }
    const message = failure instanceof Error ? failure.message : String(failure);
    return { ...base, status: 'failed', at: iso(Date.now()), error: { code: 'FAILED', message } };
  }
  if (operation.status !== 'completed')
    return { ...base, status: 'failed', at: iso(Date.now()), error: operationError(operation) };
  const plans = Array.isArray(operation.result?.plans) ? (operation.result.plans as Record<string, unknown>[]) : [];
  const mine = plans.find((entry) => entry?.plan_id === plan.planId);
  if (mine?.status === 'error')
    return {
      ...base,
      status: 'failed',
      at: iso(Date.now()),
      error: { code: 'PLAN_SYNC_ERROR', message: `The governance agent refused plan ${plan.planId}.` },
    };
  return {
    ...base,
    status: 'synced',
    at: iso(Date.now()),
    ...(typeof mine?.version === 'number' ? { version: mine.version } : {}),
  };
}

// ---- check_governance ----------------------------------------------------------------------------------------------

export type SpendVerdict =
  | { ok: true; payload: Record<string, unknown>; governanceContext?: string; checkId?: string }
  | { ok: false; code: string; message: string };

/**
 * Registers the `decideGovernance` Update on the owner's workflow: it records a person's decision on the pending
 * conditions (validated before it enters history) and the loop in `governSpend` acts on it.
 */
export function registerGovernanceDecisions(state: GovernanceState): void {
  setHandler(
    decideGovernanceUpdate,
    (request) => {
      const pending = state.pending!;
      const at = iso(Date.now());
      pending.decision = { ...request, at };
      state.decisions.push({ ...request, at, action: pending.action });
      return { accepted: true as const, action: pending.action, decision: request.decision };
    },
    {
      validator: (request) => {
        if (!request || (request.decision !== 'approve' && request.decision !== 'decline'))
          throw new Error('INVALID_REQUEST: decision must be "approve" or "decline".');
        if (typeof request.decidedBy !== 'string' || request.decidedBy.trim() === '' || request.decidedBy.length > 200)
          throw new Error('INVALID_REQUEST: decidedBy must say who decides (1-200 characters).');
        if (request.values !== undefined && (typeof request.values !== 'object' || Array.isArray(request.values)))
          throw new Error('INVALID_REQUEST: values must map condition fields to values.');
        if (!state.pending || state.pending.decision)
          throw new Error('INVALID_STATE: No governance conditions are waiting for a decision.');
        const fields = new Set(state.pending.conditions.map((entry) => entry.field));
        const unknown = Object.keys(request.values ?? {}).filter((field) => !fields.has(field));
        if (unknown.length > 0)
          throw new Error(`INVALID_REQUEST: values name ${unknown.join(', ')}, which no pending condition names.`);
      },
    },
  );
}

function recordCheck(state: GovernanceState, record: GovernanceCheckRecord): void {
  state.checks.push(record);
  state.checkCount += 1;
  if (state.checks.length > MAX_CHECKS_KEPT) state.checks.splice(0, state.checks.length - MAX_CHECKS_KEPT);
}

/**
 * The intent check before a spend, to its end: approved (with the payload to send, maybe adjusted), or refused with
 * the agent's explanation (denied, declined by a person, conditions unresolved, the agent unreachable).
 */
export async function governSpend(
  caller: GovernanceCaller,
  state: GovernanceState,
  spend: { action: string; tool: GovernedTool; payload: Record<string, unknown>; onChange?: () => void },
): Promise<SpendVerdict> {
  const changed = spend.onChange ?? (() => undefined);
  let payload = spend.payload;
  let governanceContext = state.governanceContext;
  for (let round = 1; round <= MAX_GOVERNANCE_ROUNDS; round += 1) {
    state.status = 'checking';
    changed();
    const callerKey = `${caller.ownerKey}.governance.${spend.action}.r${round}`;
    const operationId = operationIdFor('check_governance', callerKey);
    const params: Record<string, unknown> = {
      plan_id: caller.settings.planId,
      caller: caller.settings.caller ?? DEFAULT_GOVERNANCE_CALLER,
      tool: spend.tool,
      payload,
      ...(governanceContext ? { governance_context: governanceContext } : {}),
    };
    let operation: OperationState;
    try {
      operation = await runGovernanceOperation(caller, 'check_governance', callerKey, params);
    } catch (failure) {
      const message = failure instanceof Error ? failure.message : String(failure);
      return unavailable(state, spend, round, operationId, message, changed);
    }
    if (operation.status !== 'completed') {
      const error = operationError(operation);
      return unavailable(state, spend, round, operationId, `${error.code}: ${error.message}`, changed);
    }
    const parsed = parseGovernanceCheck(operation.result);
    if (!parsed.ok) return unavailable(state, spend, round, operationId, parsed.message, changed);
    const answer: GovernanceCheckAnswer = parsed.answer;
    if (answer.governanceContext) governanceContext = answer.governanceContext;
    const record: GovernanceCheckRecord = {
      action: spend.action,
      tool: spend.tool,
      round,
      operationId,
      at: iso(Date.now()),
      verdict: answer.verdict,
      explanation: answer.explanation,
      ...(answer.checkId ? { checkId: answer.checkId } : {}),
      ...(answer.expiresAt ? { expiresAt: answer.expiresAt } : {}),
      ...(answer.conditions.length > 0 ? { conditions: answer.conditions } : {}),
      ...(answer.findings.length > 0 ? { findings: answer.findings } : {}),
      hasGovernanceContext: answer.governanceContext !== undefined,
    };
    recordCheck(state, record);
    log.info('Governance check', { owner: caller.ownerKey, action: spend.action, round, verdict: answer.verdict });

    if (answer.verdict === 'approved') {
      state.status = 'approved';
      if (spend.tool === 'create_media_buy' && governanceContext) state.governanceContext = governanceContext;
      changed();
      return {
        ok: true,
        payload,
        ...(governanceContext ? { governanceContext } : {}),
        ...(answer.checkId ? { checkId: answer.checkId } : {}),
      };
    }
    if (answer.verdict === 'denied') {
      state.status = 'denied';
      changed();
      return { ok: false, code: 'GOVERNANCE_DENIED', message: answer.explanation || 'The governance agent denied it.' };
    }
    // conditions
    if (round === MAX_GOVERNANCE_ROUNDS) break;
    if (conditionsMachineApplicable(answer.conditions)) {
      try {
        payload = applyConditions(payload, answer.conditions);
        record.applied = 'machine';
        continue;
      } catch (error) {
        log.warn('Governance conditions not applicable by the orchestrator', { note: (error as Error).message });
      }
    }
    // A person decides: approve (maybe with values for the conditions) or decline.
    const now = Date.now();
    const timeoutMs = caller.settings.decisionTimeoutMs ?? DEFAULT_DECISION_TIMEOUT_MS;
    state.pending = {
      action: spend.action,
      tool: spend.tool,
      ...(answer.checkId ? { checkId: answer.checkId } : {}),
      explanation: answer.explanation,
      conditions: answer.conditions,
      since: iso(now),
      deadline: iso(now + timeoutMs),
    };
    state.status = 'awaiting_decision';
    changed();
    const decided = await condition(() => state.pending?.decision !== undefined, timeoutMs);
    const decision = state.pending.decision;
    delete state.pending;
    if (!decided || !decision) {
      state.status = 'declined';
      changed();
      return {
        ok: false,
        code: 'GOVERNANCE_DECISION_TIMED_OUT',
        message: `Nobody decided on the governance conditions within ${Math.round(timeoutMs / 60_000)} minutes: ${answer.explanation}`,
      };
    }
    if (decision.decision === 'decline') {
      state.status = 'declined';
      changed();
      return {
        ok: false,
        code: 'GOVERNANCE_DECLINED',
        message: `${decision.decidedBy} declined the governance conditions${decision.note ? ` (${decision.note})` : ''}: ${answer.explanation}`,
      };
    }
    try {
      payload = applyConditions(
        payload,
        answer.conditions.filter((entry) => decision.values && entry.field in decision.values),
        decision.values ?? {},
      );
    } catch (error) {
      log.warn('A decided value could not be applied', { note: (error as Error).message });
    }
    record.applied = 'person';
  }
  state.status = 'denied';
  changed();
  return {
    ok: false,
    code: 'GOVERNANCE_DENIED',
    message: `The governance conditions were not resolved in ${MAX_GOVERNANCE_ROUNDS} checks.`,
  };
}

function unavailable(
  state: GovernanceState,
  spend: { action: string; tool: GovernedTool },
  round: number,
  operationId: string,
  message: string,
  changed: () => void,
): SpendVerdict {
  recordCheck(state, {
    action: spend.action,
    tool: spend.tool,
    round,
    operationId,
    at: iso(Date.now()),
    verdict: 'error',
    explanation: message,
  });
  state.status = 'unavailable';
  changed();
  // "When the gate is unreachable, the default is halt."
  return {
    ok: false,
    code: 'GOVERNANCE_UNAVAILABLE',
    message: `No governance verdict for ${spend.tool} (${message}); nothing was sent to the seller.`,
  };
}

// ---- report_plan_outcome -------------------------------------------------------------------------------------------

/**
 * report_plan_outcome after the seller answered: started as an abandoned child operation (its own retries and
 * deadline) and not waited for, so the buy is never held back by it.
 */
export async function reportPlanOutcome(
  caller: GovernanceCaller,
  state: GovernanceState,
  report: {
    action: string;
    outcome: 'completed' | 'failed';
    checkId?: string;
    governanceContext?: string;
    sellerResponse?: Record<string, unknown>;
    error?: { code: string; message: string };
  },
): Promise<void> {
  const governanceContext = report.governanceContext ?? state.governanceContext;
  // The schema requires governance_context; an agent that issued none has nothing to correlate the outcome with.
  if (!governanceContext) return;
  const callerKey = `${caller.ownerKey}.governance.${report.action}.outcome`;
  const params: Record<string, unknown> = {
    plan_id: caller.settings.planId,
    outcome: report.outcome,
    governance_context: governanceContext,
    ...(report.checkId ? { check_id: report.checkId } : {}),
    ...(report.outcome === 'completed' && report.sellerResponse ? { seller_response: report.sellerResponse } : {}),
    ...(report.outcome === 'failed' && report.error ? { error: report.error } : {}),
  };
  const operationId = operationIdFor('report_plan_outcome', callerKey);
  try {
    await startGovernanceOperation(caller, 'report_plan_outcome', callerKey, params);
  } catch (failure) {
    if (!(failure instanceof WorkflowExecutionAlreadyStartedError)) {
      log.warn('report_plan_outcome could not be started', { operationId, error: String(failure) });
      return;
    }
  }
  state.outcomes.push({
    action: report.action,
    outcome: report.outcome,
    operationId,
    at: iso(Date.now()),
    ...(report.checkId ? { checkId: report.checkId } : {}),
  });
  if (state.outcomes.length > MAX_OUTCOMES_KEPT) state.outcomes.shift();
}

// ---- which changes spend -------------------------------------------------------------------------------------------

/**
 * Whether a media-buy change raises spend (and so needs a check first): a package budget above what the buy has
 * now, or above nothing known. Lowering a budget, pausing, resuming, cancelling or moving dates spends nothing new.
 */
export function raisesBudget(
  packages: Record<string, { budget?: number }>,
  request: { kind: string; budgets?: Record<string, number>; packages?: Record<string, unknown>[] },
): boolean {
  const above = (packageId: unknown, budget: unknown) => {
    if (typeof budget !== 'number') return false;
    const current = typeof packageId === 'string' ? packages[packageId]?.budget : undefined;
    return current === undefined || budget > current;
  };
  if (request.kind === 'budget')
    return Object.entries(request.budgets ?? {}).some(([packageId, budget]) => above(packageId, budget));
  if (request.kind === 'packages')
    return (request.packages ?? []).some((entry) => above(entry.package_id, entry.budget));
  return false;
}

// ---- campaigns -----------------------------------------------------------------------------------------------------

/** The governance settings each buy of a governed campaign carries (the campaign's plan, its agent). */
export function buyGovernanceOf(campaignKey: string, governance: CampaignGovernance): GovernanceSettings {
  return {
    sellerId: governance.sellerId,
    planId: governance.planId ?? campaignKey,
    ...(governance.caller ? { caller: governance.caller } : {}),
    ...(governance.decisionTimeoutMs !== undefined ? { decisionTimeoutMs: governance.decisionTimeoutMs } : {}),
  };
}

/** sync_plans for a campaign while planning (before discovery, so before any selection or approval). */
export async function syncCampaignPlan(
  input: Pick<
    CampaignInput,
    'campaignKey' | 'brief' | 'totalBudget' | 'currency' | 'flight' | 'sellerIds' | 'buyParams' | 'discoveryParams'
  > & { governance?: CampaignGovernance; tenant?: string; principal?: string },
  indexed: boolean,
): Promise<GovernancePlanSync> {
  const governance = input.governance!;
  const settings = buyGovernanceOf(input.campaignKey, governance);
  const { brand: planBrand, ...extra } = governance.plan ?? {};
  const brand = planBrand ?? input.buyParams?.brand ?? input.discoveryParams?.brand;
  return syncGovernancePlan(
    {
      settings,
      ownerKey: input.campaignKey,
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
      indexed,
    },
    {
      planId: settings.planId,
      objectives: input.brief,
      totalBudget: input.totalBudget,
      ...(input.currency ? { currency: input.currency } : {}),
      flight: input.flight,
      sellerIds: input.sellerIds,
      ...(brand !== undefined ? { brand } : {}),
      extra,
    },
  );
}
