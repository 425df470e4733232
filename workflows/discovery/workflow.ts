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
import { type Catalogue, mergeCatalogues, normaliseProducts, rankCatalogue } from '../../protocol/catalogue';
import {
  OPERATION_WORKFLOW_TYPE,
  type OperationInput,
  type OperationState,
  operationStateFromFailure,
} from '../../contract/operation';
import {
  DEFAULT_DISCOVERY_GRACE_MS,
  type DiscoveryInput,
  type DiscoverySellerResult,
  type DiscoveryState,
  discoveryStateQuery,
} from '../../contract/discovery';

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function errorOf(failure: unknown): { code: string; message: string } {
  let cause: unknown = failure;
  while (cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) cause = cause.cause;
  if (cause instanceof ApplicationFailure) return { code: cause.type ?? 'FAILED', message: cause.message };
  return { code: 'FAILED', message: cause instanceof Error ? cause.message : String(cause) };
}

/** The get_products arguments: the caller's, then the brief and the time budget (seconds, rounded up). */
export function getProductsParams(input: DiscoveryInput): Record<string, unknown> {
  return {
    buying_mode: 'brief',
    ...input.params,
    brief: input.brief,
    time_budget: { interval: Math.max(1, Math.ceil(input.timeBudgetMs / 1000)), unit: 'seconds' },
  };
}

export async function adcpDiscovery(input: DiscoveryInput): Promise<DiscoveryState> {
  const startedAtMs = Date.now();
  const deadlineMs = startedAtMs + input.timeBudgetMs + (input.graceMs ?? DEFAULT_DISCOVERY_GRACE_MS);
  const state: DiscoveryState = {
    discoveryKey: input.discoveryKey,
    brief: input.brief,
    status: 'running',
    partial: false,
    startedAt: iso(startedAtMs),
    deadline: iso(deadlineMs),
    sellers: {},
    catalogue: [],
    proposals: [],
    incomplete: [],
    // Tenancy: only discoveries started with a tenant carry these fields.
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
    ...(input.principal !== undefined ? { principal: input.principal } : {}),
  };
  for (const skipped of input.skipped ?? []) {
    state.sellers[skipped.sellerId] = {
      sellerId: skipped.sellerId,
      status: 'skipped',
      error: { code: 'UNSUPPORTED_TASK', message: skipped.reason },
    };
  }
  setHandler(discoveryStateQuery, () => state);

  const parts = new Map<string, Catalogue>();
  const params = getProductsParams(input);
  let outstanding = input.sellerIds.length;

  function finish(sellerId: string, result: Omit<DiscoverySellerResult, 'sellerId' | 'operationId'>): void {
    const entry = state.sellers[sellerId];
    if (entry.status !== 'asking') return;
    Object.assign(entry, result, { durationMs: Date.now() - startedAtMs });
    outstanding -= 1;
    setCurrentDetails(
      `discovery ${input.discoveryKey}: ${input.sellerIds.length - outstanding}/${input.sellerIds.length} sellers done`,
    );
  }

  async function ask(sellerId: string): Promise<void> {
    const operationId = operationIdFor('get_products', `${input.discoveryKey}.${sellerId}`);
    state.sellers[sellerId] = { sellerId, status: 'asking', operationId };
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
      if (isCancellation(failure)) {
        finish(sellerId, {
          status: 'timed_out',
          error: { code: 'TIME_BUDGET_EXCEEDED', message: 'No answer within the time budget; the call was cancelled.' },
        });
        return;
      }
      const ended = operationStateFromFailure(failure);
      if (!ended) {
        finish(sellerId, { status: 'failed', error: errorOf(failure) });
        return;
      }
      operation = ended;
    }
    if (operation.status !== 'completed') {
      const error = operation.errors?.[0];
      const timedOut = operation.failure?.reason === 'timed_out';
      finish(sellerId, {
        status: timedOut ? 'timed_out' : 'failed',
        error: error
          ? { code: error.code, message: error.message }
          : {
              code: operation.failure?.reason ?? operation.status,
              message: operation.failure?.message ?? operation.message ?? `get_products ended ${operation.status}`,
            },
      });
      return;
    }
    const part = normaliseProducts(sellerId, operation.result);
    parts.set(sellerId, part);
    finish(sellerId, {
      status: 'answered',
      productCount: part.entries.length,
      proposalCount: part.proposals.length,
      ...(part.incomplete.length > 0 ? { incomplete: true } : {}),
    });
  }

  const scope = new CancellationScope();
  const asks = input.sellerIds.map((sellerId) => scope.run(() => ask(sellerId)).catch(() => undefined));
  await condition(() => outstanding === 0, Math.max(deadlineMs - Date.now(), 1));
  if (outstanding > 0) {
    scope.cancel();
    await Promise.all(asks);
  }

  // Sellers in the order they were asked, so the same answers always merge the same way.
  const merged = mergeCatalogues(input.sellerIds.map((sellerId) => parts.get(sellerId)).filter((part) => !!part));
  state.catalogue = rankCatalogue(merged.entries, {
    ...input.preferences,
    ...(input.preferences?.preferredDeliveryTypes === undefined && Array.isArray(input.params?.preferred_delivery_types)
      ? { preferredDeliveryTypes: input.params.preferred_delivery_types as string[] }
      : {}),
  });
  state.proposals = merged.proposals;
  state.incomplete = merged.incomplete;
  state.partial =
    merged.incomplete.length > 0 ||
    Object.values(state.sellers).some((seller) => seller.status === 'failed' || seller.status === 'timed_out');
  state.status = 'completed';
  state.finishedAt = iso(Date.now());
  setCurrentDetails(
    `discovery ${input.discoveryKey}: ${state.catalogue.length} products from ${parts.size}/${input.sellerIds.length} sellers${state.partial ? ' (partial)' : ''}`,
  );
  return state;
}
