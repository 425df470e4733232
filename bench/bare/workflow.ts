/**
 * The floor of this design, for benchmark 3 (B1): a bare Temporal workflow with one ordinary activity making the same
 * @adcp/sdk call an orchestrator operation makes. No state machine, no plan, no search attributes, no memo.
 * Bundled on its own for the bench's bare worker (bench/worker.ts); nothing in the product imports it.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { BareActivities } from './activities';

const { callSeller } = proxyActivities<BareActivities>({
  startToCloseTimeout: '70s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 3 },
});

export async function bareCall(input: { tool: string; params: Record<string, unknown> }): Promise<number> {
  return callSeller(input.tool, input.params);
}
