/**
 * The workflow bundle of the media-buy wiring tests: the real media-buy workflow, and in place of the operation
 * workflow it starts for each create, change and creative sync a stand-in that hands the operation to an activity
 * (the test's simulated seller answers it). The media buy's wiring is under test here, not the operation's.
 */
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { OperationInput, OperationState } from '../../contract/operation';

export { adcpMediaBuy } from '../../workflows/media-buy/workflow';

export interface StandInOperationActivities {
  standInOperation(input: OperationInput & { operationId: string }): Promise<OperationState>;
}

const { standInOperation } = proxyActivities<StandInOperationActivities>({
  startToCloseTimeout: '10s',
  retry: { maximumAttempts: 1 },
});

export async function adcpOperation(input: OperationInput): Promise<OperationState> {
  return standInOperation({ ...input, operationId: workflowInfo().workflowId });
}
