/**
 * Discovery across sellers: one brief as `get_products` to every chosen seller in parallel, each its own
 * `adcpOperation` child (so each call has every guarantee of an operation: idempotent key, retries, reads,
 * webhooks). The whole run has a time budget: the buyer's `time_budget` is sent to the sellers and is each
 * operation's budget, and the workflow's own deadline is that budget plus a short grace. At the deadline the children
 * still running are cancelled (not awaited): their sellers are reported `timed_out` and the catalogue is what came
 * back in time. A slow, failing or unreachable seller never fails the discovery; a partial answer is a result.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowCancellationType,
  ChildWorkflowFailure,
  ParentClosePolicy,
  condition,
  isCancellation,
  setCurrentDetails,
  setHandler,
  startChild,
} from '@temporalio/workflow';
import { SA_SELLER, SA_STATUS, SA_TASK, SA_TENANT } from '../../config/search-attributes';
import { operationIdFor } from '../../protocol/ids';
import {
  OPERATION_WORKFLOW_TYPE,
  type OperationInput,
  type OperationState,
  operationStateFromFailure,
} from '../../contract/operation';
import { type DiscoveryInput, type DiscoveryState, discoveryStateQuery } from '../../contract/discovery';
import { DiscoveryMachine, getProductsParams } from './machine';

function errorOf(failure: unknown): { code: string; message: string } {
  let cause: unknown = failure;
  while (cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) cause = cause.cause;
  if (cause instanceof ApplicationFailure) return { code: cause.type ?? 'FAILED', message: cause.message };
  return { code: 'FAILED', message: cause instanceof Error ? cause.message : String(cause) };
}

export async function adcpDiscovery(input: DiscoveryInput): Promise<DiscoveryState> {
  const machine = new DiscoveryMachine(input, Date.now);
  setHandler(discoveryStateQuery, () => machine.state);
  const params = getProductsParams(input);

  async function ask(sellerId: string): Promise<void> {
    await follow(sellerId);
    setCurrentDetails(machine.details());
  }

  async function follow(sellerId: string): Promise<void> {
    const operationId = operationIdFor('get_products', `${input.discoveryKey}.${sellerId}`);
    machine.asking(sellerId, operationId);
    const operationInput: OperationInput = {
      sellerId,
      task: 'get_products',
      params,
      budgetMs: input.timeBudgetMs,
      // The discovery's calls act for its tenant: its seller credentials, its AdcpTenant.
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
    };
    let operation: OperationState;
    try {
      const child = await startChild(OPERATION_WORKFLOW_TYPE, {
        workflowId: operationId,
        args: [operationInput],
        // At the deadline the discovery asks the operation to stop and does not wait for it to finish stopping;
        // a discovery that ends for any other reason takes its calls with it.
        cancellationType: ChildWorkflowCancellationType.TRY_CANCEL,
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        staticSummary: `get_products for discovery ${input.discoveryKey}`,
        ...(input.indexed !== false
          ? {
              typedSearchAttributes: [
                { key: SA_TASK, value: 'get_products' },
                { key: SA_SELLER, value: sellerId },
                { key: SA_STATUS, value: 'pending' },
                ...(input.tenant !== undefined ? [{ key: SA_TENANT, value: input.tenant }] : []),
              ],
            }
          : {}),
      });
      operation = (await child.result()) as OperationState;
    } catch (failure) {
      if (isCancellation(failure)) return machine.timedOut(sellerId);
      const ended = operationStateFromFailure(failure);
      if (!ended) return machine.failed(sellerId, errorOf(failure));
      operation = ended;
    }
    machine.operationEnded(sellerId, operation);
  }

  const scope = new CancellationScope();
  const asks = input.sellerIds.map((sellerId) => scope.run(() => ask(sellerId)).catch(() => undefined));
  await condition(() => machine.done(), Math.max(machine.deadlineMs - Date.now(), 1));
  if (!machine.done()) {
    // At the deadline the calls still running are cancelled (not awaited): their sellers are reported timed out.
    scope.cancel();
    await Promise.all(asks);
  }
  const state = machine.finish();
  setCurrentDetails(machine.details());
  return state;
}
