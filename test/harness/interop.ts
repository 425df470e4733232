/**
 * What the interop suites (test/integration/interop-*.test.ts) share: running one AdCP task as an orchestrator
 * operation to its end, and the part of its state a failed expectation should show.
 */
import { randomUUID } from 'node:crypto';
import type { OrchestratorClient } from '../../client/orchestrator-client';
import type { OperationState } from '../../contract/operation';

/** Runs one AdCP task as an orchestrator operation (a fresh idempotency key) and waits for its end. */
export async function runOperation(
  orchestrator: OrchestratorClient,
  sellerId: string,
  task: string,
  params: Record<string, unknown>,
): Promise<OperationState> {
  const started = await orchestrator.start({ sellerId, task, params, idempotencyKey: randomUUID() });
  return orchestrator.result(started.operationId);
}

/** The operation's status with the seller's raw errors: what a failed expectation should show. */
export function operationSummary(state: OperationState) {
  return {
    status: state.status,
    outcome: state.outcome,
    outcomeNotes: state.outcomeNotes,
    errors: state.errors,
    failure: state.failure,
    message: state.message,
  };
}
