/**
 * The discovery's rules, pure (no Temporal, no I/O): its deadline (the time budget plus a grace), what each seller's
 * get_products operation means for that seller (answered, failed, timed out), when the discovery is done, and the
 * catalogue it reports: the answers merged in the order the sellers were asked, ranked, partial when a seller did not
 * answer in time, failed, or said its answer is incomplete. A slow, failing or unreachable seller never fails the
 * discovery. The workflow starts the operations and hands their ends here.
 */
import { type Catalogue, mergeCatalogues, normaliseProducts, rankCatalogue } from '../../protocol/catalogue';
import type { OperationState } from '../../contract/operation';
import {
  DEFAULT_DISCOVERY_GRACE_MS,
  type DiscoveryInput,
  type DiscoverySellerResult,
  type DiscoveryState,
} from '../../contract/discovery';

type SellerEnd = Omit<DiscoverySellerResult, 'sellerId' | 'operationId'>;

function iso(ms: number): string {
  return new Date(ms).toISOString();
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

export class DiscoveryMachine {
  readonly state: DiscoveryState;
  readonly deadlineMs: number;
  private readonly parts = new Map<string, Catalogue>();
  private outstanding: number;

  constructor(
    private readonly input: DiscoveryInput,
    private readonly now: () => number,
  ) {
    const startedAtMs = now();
    this.deadlineMs = startedAtMs + input.timeBudgetMs + (input.graceMs ?? DEFAULT_DISCOVERY_GRACE_MS);
    this.outstanding = input.sellerIds.length;
    this.state = {
      discoveryKey: input.discoveryKey,
      brief: input.brief,
      status: 'running',
      partial: false,
      startedAt: iso(startedAtMs),
      deadline: iso(this.deadlineMs),
      sellers: {},
      catalogue: [],
      proposals: [],
      incomplete: [],
      // Tenancy: only discoveries started with a tenant carry these fields.
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
    };
    for (const skipped of input.skipped ?? []) {
      this.state.sellers[skipped.sellerId] = {
        sellerId: skipped.sellerId,
        status: 'skipped',
        error: { code: 'UNSUPPORTED_TASK', message: skipped.reason },
      };
    }
  }

  /** The wake rule of the wait: every seller has answered (or failed). */
  done(): boolean {
    return this.outstanding === 0;
  }

  asking(sellerId: string, operationId: string): void {
    this.state.sellers[sellerId] = { sellerId, status: 'asking', operationId };
  }

  /** The seller's operation ended: its answer joins the catalogue, anything else is why the seller has none. */
  operationEnded(sellerId: string, operation: OperationState): void {
    if (operation.status !== 'completed') {
      const error = operation.errors?.[0];
      this.end(sellerId, {
        status: operation.failure?.reason === 'timed_out' ? 'timed_out' : 'failed',
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
    this.parts.set(sellerId, part);
    this.end(sellerId, {
      status: 'answered',
      productCount: part.entries.length,
      proposalCount: part.proposals.length,
      ...(part.incomplete.length > 0 ? { incomplete: true } : {}),
    });
  }

  /** The deadline canceled the seller's call before it answered. */
  timedOut(sellerId: string): void {
    this.end(sellerId, {
      status: 'timed_out',
      error: { code: 'TIME_BUDGET_EXCEEDED', message: 'No answer within the time budget; the call was cancelled.' },
    });
  }

  /** The seller's operation could not be run or followed at all. */
  failed(sellerId: string, error: { code: string; message: string }): void {
    this.end(sellerId, { status: 'failed', error });
  }

  /** Each seller ends once: whatever comes after its first end (a late cancellation) is ignored. */
  private end(sellerId: string, result: SellerEnd): void {
    const entry = this.state.sellers[sellerId];
    if (entry.status !== 'asking') return;
    Object.assign(entry, result, { durationMs: this.now() - Date.parse(this.state.startedAt) });
    this.outstanding -= 1;
  }

  /** The catalogue from what came back in time: sellers in the order they were asked, so the same answers merge the same way. */
  finish(): DiscoveryState {
    const { input, state } = this;
    const merged = mergeCatalogues(
      input.sellerIds.map((sellerId) => this.parts.get(sellerId)).filter((part) => part !== undefined),
    );
    state.catalogue = rankCatalogue(merged.entries, {
      ...input.preferences,
      ...(input.preferences?.preferredDeliveryTypes === undefined &&
      Array.isArray(input.params?.preferred_delivery_types)
        ? { preferredDeliveryTypes: input.params.preferred_delivery_types as string[] }
        : {}),
    });
    state.proposals = merged.proposals;
    state.incomplete = merged.incomplete;
    state.partial =
      merged.incomplete.length > 0 ||
      Object.values(state.sellers).some((seller) => seller.status === 'failed' || seller.status === 'timed_out');
    state.status = 'completed';
    state.finishedAt = iso(this.now());
    return state;
  }

  details(): string {
    const { input, state } = this;
    if (state.status === 'completed')
      return `discovery ${input.discoveryKey}: ${state.catalogue.length} products from ${this.parts.size}/${input.sellerIds.length} sellers${state.partial ? ' (partial)' : ''}`;
    return `discovery ${input.discoveryKey}: ${input.sellerIds.length - this.outstanding}/${input.sellerIds.length} sellers done`;
  }
}
