/**
 * Campaign governance inside the workflows (governance/campaign in AdCP 3.1, experimental): the calls to the
 * governance agent, each an orchestrator operation (a child `adcpOperation`), so a check that goes to human review
 * (submitted/working) is waited for like any operation, with polling, retries and a deadline. What the calls carry
 * and what their answers mean is machine.ts; this file starts the operations, waits where the machine says, and
 * registers the `decideGovernance` Update. Only owners whose input names a governance agent call any of this.
 *
 * - `syncGovernancePlan` / `syncCampaignPlan`: sync_plans pushes the buyer's plan while planning;
 * - `governSpend`: the intent check before every spend (create_media_buy, an update that raises budget);
 * - `reportPlanOutcome` / `reportOutcome`: report_plan_outcome once the seller answered, not waited for.
 */
import { ParentClosePolicy, condition, log, setHandler, startChild } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { SA_SELLER, SA_STATUS, SA_TASK, SA_TENANT } from '../../config/search-attributes';
import { operationIdFor } from '../../protocol';
import {
  OPERATION_WORKFLOW_TYPE,
  type OperationInput,
  type OperationState,
  operationStateFromFailure,
} from '../../contract/operation';
import type { CampaignInput } from '../../contract/campaign';
import {
  type CampaignGovernance,
  type GovernancePlanSync,
  type GovernanceSettings,
  type GovernanceState,
  type GovernedTool,
  decideGovernanceUpdate,
} from '../../contract/governance';
import {
  type CampaignPlan,
  GovernanceCheck,
  type GovernanceLog,
  type OutcomeReport,
  type SpendVerdict,
  campaignPlanOf,
  outcomeCall,
  planSyncKey,
  planSyncOutcome,
  recordDecision,
  recordOutcome,
  syncPlansParams,
  validateDecision,
} from './machine';

export type { CampaignPlan, SpendVerdict } from './machine';
export { buyGovernanceOf, newGovernanceState, raisesBudget, syncPlansParams } from './machine';

/** Who calls the governance agent and for what: the owner's key names the operations, its tenant acts. */
export interface GovernanceCaller {
  settings: GovernanceSettings;
  /** The owner's business key (buy key, campaign key): operation IDs derive from it. */
  ownerKey: string;
  tenant?: string;
  principal?: string;
  indexed: boolean;
}

const logTo: GovernanceLog = (level, message, fields) => log[level](message, fields);

async function startGovernanceOperation(
  caller: GovernanceCaller,
  task: string,
  callerKey: string,
  params: Record<string, unknown>,
) {
  const operationInput: OperationInput = {
    sellerId: caller.settings.sellerId,
    task,
    params,
    ...(caller.tenant !== undefined ? { tenant: caller.tenant } : {}),
    ...(caller.principal !== undefined ? { principal: caller.principal } : {}),
  };
  return startChild(OPERATION_WORKFLOW_TYPE, {
    workflowId: operationIdFor(task, callerKey),
    args: [operationInput],
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

function messageOf(failure: unknown): string {
  return failure instanceof Error ? failure.message : String(failure);
}

// ---- sync_plans ----------------------------------------------------------------------------------------------------

/** sync_plans at the governance agent, waited for; a failure is recorded, never thrown (checks then decide). */
export async function syncGovernancePlan(caller: GovernanceCaller, plan: CampaignPlan): Promise<GovernancePlanSync> {
  const callerKey = planSyncKey(caller.ownerKey);
  const base = {
    sellerId: caller.settings.sellerId,
    planId: plan.planId,
    operationId: operationIdFor('sync_plans', callerKey),
  };
  try {
    const operation = await runGovernanceOperation(caller, 'sync_plans', callerKey, syncPlansParams(plan));
    return planSyncOutcome(base, { operation }, Date.now());
  } catch (failure) {
    if (failure instanceof WorkflowExecutionAlreadyStartedError)
      return planSyncOutcome(base, { alreadySynced: true }, Date.now());
    return planSyncOutcome(base, { error: messageOf(failure) }, Date.now());
  }
}

/** sync_plans for a campaign while planning (before discovery, so before any selection or approval). */
export async function syncCampaignPlan(
  input: Pick<
    CampaignInput,
    'campaignKey' | 'brief' | 'totalBudget' | 'currency' | 'flight' | 'sellerIds' | 'buyParams' | 'discoveryParams'
  > & { governance?: CampaignGovernance; tenant?: string; principal?: string },
  indexed: boolean,
): Promise<GovernancePlanSync> {
  const { settings, plan } = campaignPlanOf({ ...input, governance: input.governance! });
  return syncGovernancePlan(
    {
      settings,
      ownerKey: input.campaignKey,
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
      indexed,
    },
    plan,
  );
}

// ---- check_governance ----------------------------------------------------------------------------------------------

/**
 * Registers the `decideGovernance` Update on the owner's workflow: it records a person's decision on the pending
 * conditions (validated before it enters history) and the check waiting in `governSpend` acts on it.
 */
export function registerGovernanceDecisions(state: GovernanceState): void {
  setHandler(decideGovernanceUpdate, (request) => recordDecision(state, request, Date.now()), {
    validator: (request) => {
      const verdict = validateDecision(state, request);
      if (!verdict.ok) throw new Error(`${verdict.code}: ${verdict.message}`);
    },
  });
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
  const check = new GovernanceCheck(state, caller.settings, caller.ownerKey, spend, Date.now, logTo);
  let step = check.begin();
  for (;;) {
    changed();
    if (step.kind === 'verdict') return step.verdict;
    if (step.kind === 'await_decision') {
      await condition(() => check.decisionArrived(), step.timeoutMs);
      step = check.decided();
      continue;
    }
    let operation: OperationState;
    try {
      operation = await runGovernanceOperation(caller, 'check_governance', step.callerKey, step.params);
    } catch (failure) {
      step = check.unreachable(messageOf(failure));
      continue;
    }
    step = check.answered(operation);
  }
}

// ---- report_plan_outcome -------------------------------------------------------------------------------------------

/**
 * report_plan_outcome after the seller answered: started as an abandoned child operation (its own retries and
 * deadline) and not waited for, so the owner is never held back by it. Returns the operation's ID, or undefined when
 * nothing was reported (no governance_context to report against, or the start failed).
 */
export async function reportOutcome(
  caller: GovernanceCaller,
  report: OutcomeReport,
  fallbackContext?: string,
): Promise<string | undefined> {
  const call = outcomeCall(caller.settings, caller.ownerKey, report, fallbackContext);
  if (!call) return undefined;
  try {
    await startGovernanceOperation(caller, 'report_plan_outcome', call.callerKey, call.params);
  } catch (failure) {
    // Started by an earlier attempt: it is reported already.
    if (!(failure instanceof WorkflowExecutionAlreadyStartedError)) {
      log.warn('report_plan_outcome could not be started', { operationId: call.operationId, error: String(failure) });
      return undefined;
    }
  }
  return call.operationId;
}

/** reportOutcome for an owner that keeps a GovernanceState (a media buy): the outcome is recorded there. */
export async function reportPlanOutcome(
  caller: GovernanceCaller,
  state: GovernanceState,
  report: OutcomeReport,
): Promise<void> {
  const operationId = await reportOutcome(caller, report, state.governanceContext);
  if (operationId) recordOutcome(state, report, operationId, Date.now());
}
