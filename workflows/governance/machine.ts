/**
 * Campaign governance's rules, pure (no Temporal, no I/O): what each call to the governance agent carries, what its
 * answer means, and every status a governed spend goes through. The workflow side (workflow.ts) runs the calls as
 * child operations and waits where this says; unit tests drive it directly with made-up answers.
 *
 * One governed spend (`GovernanceCheck`): an intent check_governance before the spend; approved → send it with the
 * signed governance_context; denied → nothing is sent; conditions with a `required_value` → applied and checked
 * again; other conditions → a person decides (approve, maybe with values, or decline) within the decision timeout,
 * and the adjusted payload is checked again; at most MAX_GOVERNANCE_ROUNDS checks, then it counts as denied. No
 * verdict (the agent unreachable, an answer without one) halts the spend.
 */
import { operationIdFor } from '../../protocol/ids';
import {
  type GovernanceCheckAnswer,
  applyConditions,
  conditionsMachineApplicable,
  parseGovernanceCheck,
} from '../../protocol/governance';
import type { OperationState } from '../../contract/operation';
import type { CampaignInput } from '../../contract/campaign';
import {
  type CampaignGovernance,
  DEFAULT_DECISION_TIMEOUT_MS,
  DEFAULT_GOVERNANCE_CALLER,
  MAX_GOVERNANCE_ROUNDS,
  type GovernanceCheckRecord,
  type GovernanceDecisionAnswer,
  type GovernanceDecisionRequest,
  type GovernancePlanSync,
  type GovernanceSettings,
  type GovernanceState,
  type GovernedTool,
} from '../../contract/governance';

const MAX_CHECKS_KEPT = 30;
const MAX_OUTCOMES_KEPT = 30;

export type Verdict = { ok: true } | { ok: false; code: string; message: string };

export type SpendVerdict =
  | { ok: true; payload: Record<string, unknown>; governanceContext?: string; checkId?: string }
  | { ok: false; code: string; message: string };

export type GovernanceLog = (level: 'info' | 'warn', message: string, fields: Record<string, unknown>) => void;

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

/** Why an operation at the governance agent ended without the answer it was for. */
export function operationError(operation: OperationState): { code: string; message: string } {
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

/** The caller key of a plan's sync: one sync per owner, so a retried or continued owner finds the same operation. */
export function planSyncKey(ownerKey: string): string {
  return `${ownerKey}.governance.plan`;
}

/**
 * What came of a sync_plans: synced (with the agent's version), or failed with why. A failure is recorded, never
 * thrown: the checks before each spend decide.
 */
export function planSyncOutcome(
  base: Pick<GovernancePlanSync, 'sellerId' | 'planId' | 'operationId'>,
  answer: { operation: OperationState } | { alreadySynced: true } | { error: string },
  nowMs: number,
): GovernancePlanSync {
  const at = iso(nowMs);
  if ('alreadySynced' in answer) return { ...base, status: 'synced', at }; // synced by an earlier run of this owner
  if ('error' in answer) return { ...base, status: 'failed', at, error: { code: 'FAILED', message: answer.error } };
  const { operation } = answer;
  if (operation.status !== 'completed') return { ...base, status: 'failed', at, error: operationError(operation) };
  const plans = Array.isArray(operation.result?.plans) ? (operation.result.plans as Record<string, unknown>[]) : [];
  const mine = plans.find((entry) => entry?.plan_id === base.planId);
  if (mine?.status === 'error')
    return {
      ...base,
      status: 'failed',
      at,
      error: { code: 'PLAN_SYNC_ERROR', message: `The governance agent refused plan ${base.planId}.` },
    };
  return { ...base, status: 'synced', at, ...(typeof mine?.version === 'number' ? { version: mine.version } : {}) };
}

/** The governance settings each buy of a governed campaign carries (the campaign's plan, its agent). */
export function buyGovernanceOf(campaignKey: string, governance: CampaignGovernance): GovernanceSettings {
  return {
    sellerId: governance.sellerId,
    planId: governance.planId ?? campaignKey,
    ...(governance.caller ? { caller: governance.caller } : {}),
    ...(governance.decisionTimeoutMs !== undefined ? { decisionTimeoutMs: governance.decisionTimeoutMs } : {}),
  };
}

/** The plan a campaign syncs while planning: its budget, flight, brief and sellers, and the buyer's extra fields. */
export function campaignPlanOf(
  input: Pick<
    CampaignInput,
    'campaignKey' | 'brief' | 'totalBudget' | 'currency' | 'flight' | 'sellerIds' | 'buyParams' | 'discoveryParams'
  > & { governance: CampaignGovernance },
): { settings: GovernanceSettings; plan: CampaignPlan } {
  const settings = buyGovernanceOf(input.campaignKey, input.governance);
  const { brand: planBrand, ...extra } = input.governance.plan ?? {};
  const brand = planBrand ?? input.buyParams?.brand ?? input.discoveryParams?.brand;
  return {
    settings,
    plan: {
      planId: settings.planId,
      objectives: input.brief,
      totalBudget: input.totalBudget,
      ...(input.currency ? { currency: input.currency } : {}),
      flight: input.flight,
      sellerIds: input.sellerIds,
      ...(brand !== undefined ? { brand } : {}),
      extra,
    },
  };
}

// ---- check_governance ----------------------------------------------------------------------------------------------

/** What the workflow does next for a governed spend. */
export type GovernanceStep =
  | { kind: 'check'; round: number; callerKey: string; operationId: string; params: Record<string, unknown> }
  | { kind: 'await_decision'; timeoutMs: number }
  | { kind: 'verdict'; verdict: SpendVerdict };

export interface GovernedSpend {
  action: string;
  tool: GovernedTool;
  payload: Record<string, unknown>;
}

/**
 * One governed spend from its first check to its verdict, over the owner's GovernanceState (which it updates in
 * place: status, checks, the pending decision). The workflow asks `begin()`, runs what each step says and hands the
 * result back; the steps only ever go forward, round by round.
 */
export class GovernanceCheck {
  private round = 0;
  private payload: Record<string, unknown>;
  private governanceContext?: string;
  private lastAnswer?: { answer: GovernanceCheckAnswer; record: GovernanceCheckRecord };

  constructor(
    private readonly state: GovernanceState,
    private readonly settings: GovernanceSettings,
    private readonly ownerKey: string,
    private readonly spend: GovernedSpend,
    private readonly now: () => number,
    private readonly log: GovernanceLog = () => undefined,
  ) {
    this.payload = spend.payload;
    this.governanceContext = state.governanceContext;
  }

  get decisionTimeoutMs(): number {
    return this.settings.decisionTimeoutMs ?? DEFAULT_DECISION_TIMEOUT_MS;
  }

  begin(): GovernanceStep {
    return this.nextCheck();
  }

  private nextCheck(): GovernanceStep {
    this.round += 1;
    this.state.status = 'checking';
    const callerKey = `${this.ownerKey}.governance.${this.spend.action}.r${this.round}`;
    return {
      kind: 'check',
      round: this.round,
      callerKey,
      operationId: operationIdFor('check_governance', callerKey),
      params: {
        plan_id: this.settings.planId,
        caller: this.settings.caller ?? DEFAULT_GOVERNANCE_CALLER,
        tool: this.spend.tool,
        payload: this.payload,
        ...(this.governanceContext ? { governance_context: this.governanceContext } : {}),
      },
    };
  }

  private operationId(): string {
    return operationIdFor('check_governance', `${this.ownerKey}.governance.${this.spend.action}.r${this.round}`);
  }

  /** The check operation could not be run, or ended without a verdict: the gate stays closed. */
  unreachable(message: string): GovernanceStep {
    this.recordCheck({
      action: this.spend.action,
      tool: this.spend.tool,
      round: this.round,
      operationId: this.operationId(),
      at: iso(this.now()),
      verdict: 'error',
      explanation: message,
    });
    this.state.status = 'unavailable';
    // "When the gate is unreachable, the default is halt."
    return this.verdict({
      ok: false,
      code: 'GOVERNANCE_UNAVAILABLE',
      message: `No governance verdict for ${this.spend.tool} (${message}); nothing was sent to the seller.`,
    });
  }

  /** The check operation ended: its verdict decides the next step. */
  answered(operation: OperationState): GovernanceStep {
    if (operation.status !== 'completed') {
      const error = operationError(operation);
      return this.unreachable(`${error.code}: ${error.message}`);
    }
    const parsed = parseGovernanceCheck(operation.result);
    if (!parsed.ok) return this.unreachable(parsed.message);
    const { answer } = parsed;
    if (answer.governanceContext) this.governanceContext = answer.governanceContext;
    const record: GovernanceCheckRecord = {
      action: this.spend.action,
      tool: this.spend.tool,
      round: this.round,
      operationId: this.operationId(),
      at: iso(this.now()),
      verdict: answer.verdict,
      explanation: answer.explanation,
      ...(answer.checkId ? { checkId: answer.checkId } : {}),
      ...(answer.expiresAt ? { expiresAt: answer.expiresAt } : {}),
      ...(answer.conditions.length > 0 ? { conditions: answer.conditions } : {}),
      ...(answer.findings.length > 0 ? { findings: answer.findings } : {}),
      hasGovernanceContext: answer.governanceContext !== undefined,
    };
    this.recordCheck(record);
    this.log('info', 'Governance check', {
      owner: this.ownerKey,
      action: this.spend.action,
      round: this.round,
      verdict: answer.verdict,
    });
    if (answer.verdict === 'approved') {
      this.state.status = 'approved';
      // The create's context is carried on the later checks of the buy's lifecycle.
      if (this.spend.tool === 'create_media_buy' && this.governanceContext)
        this.state.governanceContext = this.governanceContext;
      return this.verdict({
        ok: true,
        payload: this.payload,
        ...(this.governanceContext ? { governanceContext: this.governanceContext } : {}),
        ...(answer.checkId ? { checkId: answer.checkId } : {}),
      });
    }
    if (answer.verdict === 'denied') {
      this.state.status = 'denied';
      return this.verdict({
        ok: false,
        code: 'GOVERNANCE_DENIED',
        message: answer.explanation || 'The governance agent denied it.',
      });
    }
    // Conditions.
    if (this.round >= MAX_GOVERNANCE_ROUNDS) return this.exhausted();
    if (conditionsMachineApplicable(answer.conditions)) {
      try {
        this.payload = applyConditions(this.payload, answer.conditions);
        record.applied = 'machine';
        return this.nextCheck();
      } catch (error) {
        this.log('warn', 'Governance conditions not applicable by the orchestrator', {
          note: (error as Error).message,
        });
      }
    }
    // A person decides: approve (maybe with values for the conditions) or decline.
    const nowMs = this.now();
    this.state.pending = {
      action: this.spend.action,
      tool: this.spend.tool,
      ...(answer.checkId ? { checkId: answer.checkId } : {}),
      explanation: answer.explanation,
      conditions: answer.conditions,
      since: iso(nowMs),
      deadline: iso(nowMs + this.decisionTimeoutMs),
    };
    this.state.status = 'awaiting_decision';
    this.lastAnswer = { answer, record };
    return { kind: 'await_decision', timeoutMs: this.decisionTimeoutMs };
  }

  /** Whether the pending conditions have a decision (the wake rule of the wait). */
  decisionArrived(): boolean {
    return this.state.pending?.decision !== undefined;
  }

  /** After the wait: the person's decision (or none before the deadline) decides. */
  decided(): GovernanceStep {
    const decision = this.state.pending?.decision;
    const { answer, record } = this.lastAnswer!;
    delete this.state.pending;
    this.lastAnswer = undefined;
    if (!decision) {
      this.state.status = 'declined';
      return this.verdict({
        ok: false,
        code: 'GOVERNANCE_DECISION_TIMED_OUT',
        message: `Nobody decided on the governance conditions within ${Math.round(this.decisionTimeoutMs / 60_000)} minutes: ${answer.explanation}`,
      });
    }
    if (decision.decision === 'decline') {
      this.state.status = 'declined';
      return this.verdict({
        ok: false,
        code: 'GOVERNANCE_DECLINED',
        message: `${decision.decidedBy} declined the governance conditions${decision.note ? ` (${decision.note})` : ''}: ${answer.explanation}`,
      });
    }
    try {
      this.payload = applyConditions(
        this.payload,
        answer.conditions.filter((entry) => decision.values && entry.field in decision.values),
        decision.values ?? {},
      );
    } catch (error) {
      this.log('warn', 'A decided value could not be applied', { note: (error as Error).message });
    }
    record.applied = 'person';
    return this.nextCheck();
  }

  private exhausted(): GovernanceStep {
    this.state.status = 'denied';
    return this.verdict({
      ok: false,
      code: 'GOVERNANCE_DENIED',
      message: `The governance conditions were not resolved in ${MAX_GOVERNANCE_ROUNDS} checks.`,
    });
  }

  private verdict(verdict: SpendVerdict): GovernanceStep {
    return { kind: 'verdict', verdict };
  }

  private recordCheck(record: GovernanceCheckRecord): void {
    this.state.checks.push(record);
    this.state.checkCount += 1;
    if (this.state.checks.length > MAX_CHECKS_KEPT)
      this.state.checks.splice(0, this.state.checks.length - MAX_CHECKS_KEPT);
  }
}

// ---- a person's decision ---------------------------------------------------------------------------------------------

/** The decideGovernance Update's checks, before it enters history. */
export function validateDecision(state: GovernanceState, request: GovernanceDecisionRequest | undefined): Verdict {
  const refuse = (code: string, message: string): Verdict => ({ ok: false, code, message });
  if (!request || (request.decision !== 'approve' && request.decision !== 'decline'))
    return refuse('INVALID_REQUEST', 'decision must be "approve" or "decline".');
  if (typeof request.decidedBy !== 'string' || request.decidedBy.trim() === '' || request.decidedBy.length > 200)
    return refuse('INVALID_REQUEST', 'decidedBy must say who decides (1-200 characters).');
  if (request.values !== undefined && (typeof request.values !== 'object' || Array.isArray(request.values)))
    return refuse('INVALID_REQUEST', 'values must map condition fields to values.');
  if (!state.pending || state.pending.decision)
    return refuse('INVALID_STATE', 'No governance conditions are waiting for a decision.');
  const fields = new Set(state.pending.conditions.map((entry) => entry.field));
  const unknown = Object.keys(request.values ?? {}).filter((field) => !fields.has(field));
  if (unknown.length > 0)
    return refuse('INVALID_REQUEST', `values name ${unknown.join(', ')}, which no pending condition names.`);
  return { ok: true };
}

/** Records a validated decision on the pending conditions (who decided is kept); the waiting check acts on it. */
export function recordDecision(
  state: GovernanceState,
  request: GovernanceDecisionRequest,
  nowMs: number,
): GovernanceDecisionAnswer {
  const pending = state.pending!;
  const at = iso(nowMs);
  pending.decision = { ...request, at };
  state.decisions.push({ ...request, at, action: pending.action });
  return { accepted: true as const, action: pending.action, decision: request.decision };
}

// ---- report_plan_outcome -------------------------------------------------------------------------------------------

export interface OutcomeReport {
  action: string;
  outcome: 'completed' | 'failed';
  checkId?: string;
  governanceContext?: string;
  sellerResponse?: Record<string, unknown>;
  error?: { code: string; message: string };
  /** Extension fields of the report (`ext`), e.g. what an allocation move moved. */
  ext?: Record<string, unknown>;
}

/**
 * The report_plan_outcome call for an outcome, or undefined when there is nothing to correlate it with: the schema
 * requires governance_context, and an agent that issued none cannot match the outcome to a check.
 */
export function outcomeCall(
  settings: GovernanceSettings,
  ownerKey: string,
  report: OutcomeReport,
  fallbackContext: string | undefined,
): { callerKey: string; operationId: string; params: Record<string, unknown> } | undefined {
  const governanceContext = report.governanceContext ?? fallbackContext;
  if (!governanceContext) return undefined;
  const callerKey = `${ownerKey}.governance.${report.action}.outcome`;
  return {
    callerKey,
    operationId: operationIdFor('report_plan_outcome', callerKey),
    params: {
      plan_id: settings.planId,
      outcome: report.outcome,
      governance_context: governanceContext,
      ...(report.checkId ? { check_id: report.checkId } : {}),
      ...(report.outcome === 'completed' && report.sellerResponse ? { seller_response: report.sellerResponse } : {}),
      ...(report.outcome === 'failed' && report.error ? { error: report.error } : {}),
      ...(report.ext ? { ext: report.ext } : {}),
    },
  };
}

export function recordOutcome(
  state: GovernanceState,
  report: Pick<OutcomeReport, 'action' | 'outcome' | 'checkId'>,
  operationId: string,
  nowMs: number,
): void {
  state.outcomes.push({
    action: report.action,
    outcome: report.outcome,
    operationId,
    at: iso(nowMs),
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
