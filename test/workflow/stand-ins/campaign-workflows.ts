/**
 * The workflow bundle of the campaign and governance middle-layer tests: the real `adcpCampaign` and the real
 * governance code, with stand-ins registered under the children's type names (Temporal's pattern for testing a
 * workflow's wiring): `adcpDiscovery` and `adcpOperation` answer through an activity the test scripts, `adcpMediaBuy`
 * registers its buy with the test's ledger and runs until the test signals its end.
 */
import { condition, defineQuery, defineSignal, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { DiscoveryInput, DiscoveryState } from '../../../contract/discovery';
import type { OperationInput, OperationState } from '../../../contract/operation';
import type { MediaBuyInput, MediaBuyState } from '../../../contract/media-buy';
import type { GovernanceSettings, GovernanceState, GovernedTool } from '../../../contract/governance';
import {
  governSpend,
  newGovernanceState,
  registerGovernanceDecisions,
  reportPlanOutcome,
  type SpendVerdict,
} from '../../../workflows/governance/workflow';

export { adcpCampaign } from '../../../workflows/campaign/workflow';

export interface StandInActivities {
  standInDiscovery(input: DiscoveryInput): Promise<DiscoveryState>;
  standInOperation(input: OperationInput & { workflowId: string }): Promise<OperationState>;
  standInBuyStarted(input: { workflowId: string; buy: MediaBuyInput }): Promise<void>;
}

const { standInDiscovery, standInOperation, standInBuyStarted } = proxyActivities<StandInActivities>({
  startToCloseTimeout: '10s',
  retry: { maximumAttempts: 1 },
});

export const standInBuyEndedSignal = defineSignal<[MediaBuyState]>('standInBuyEnded');
export const standInGovernanceQuery = defineQuery<GovernanceState>('standInGovernance');

export async function adcpDiscovery(input: DiscoveryInput): Promise<DiscoveryState> {
  return await standInDiscovery(input);
}

export async function adcpOperation(input: OperationInput): Promise<OperationState> {
  return await standInOperation({ ...input, workflowId: workflowInfo().workflowId });
}

export async function adcpMediaBuy(input: MediaBuyInput): Promise<MediaBuyState> {
  let ended: MediaBuyState | undefined;
  setHandler(standInBuyEndedSignal, (state) => {
    ended = state;
  });
  await standInBuyStarted({ workflowId: workflowInfo().workflowId, buy: input });
  await condition(() => ended !== undefined);
  return ended!;
}

/** A governed spend as a media buy runs one: decisions registered, the check to its verdict, the outcome reported. */
export async function governedSpend(input: {
  settings: GovernanceSettings;
  ownerKey: string;
  tool: GovernedTool;
  payload: Record<string, unknown>;
  report?: boolean;
}): Promise<{ verdict: SpendVerdict; state: GovernanceState }> {
  const state = newGovernanceState(input.settings);
  registerGovernanceDecisions(state);
  setHandler(standInGovernanceQuery, () => state);
  const caller = { settings: input.settings, ownerKey: input.ownerKey, indexed: false };
  const verdict = await governSpend(caller, state, { action: 'create', tool: input.tool, payload: input.payload });
  if (input.report && verdict.ok)
    await reportPlanOutcome(caller, state, {
      action: 'create',
      outcome: 'completed',
      ...(verdict.checkId ? { checkId: verdict.checkId } : {}),
      ...(verdict.governanceContext ? { governanceContext: verdict.governanceContext } : {}),
      sellerResponse: { seller_reference: 'mb_1' },
    });
  return { verdict, state };
}
