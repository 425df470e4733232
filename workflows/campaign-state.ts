/**
 * The campaign's rules, pure (no Temporal): what a selection must satisfy, how an allocation policy picks products,
 * the budget guard, which changes a campaign accepts in which phase, and the create_media_buy arguments of each
 * seller's buy. The workflow (campaign.ts) calls these from its validators and its loop; unit tests call them directly.
 */
import type { CatalogueEntry, RankedEntry } from '../protocol/catalogue';
import type {
  AllocationPolicy,
  CampaignBuy,
  CampaignChangeRequest,
  CampaignInput,
  CampaignPhase,
  CampaignState,
  SelectionLine,
  SelectionRequest,
} from './campaign-definitions';

export type Verdict = { ok: true } | { ok: false; code: string; message: string };

const refuse = (code: string, message: string): Verdict => ({ ok: false, code, message });

/** Money in the campaign's currency, rounded to cents so sums compare exactly. */
export function cents(amount: number): number {
  return Math.round(amount * 100) / 100;
}

export function sumBudgets(lines: { budget: number }[]): number {
  return cents(lines.reduce((sum, line) => sum + line.budget, 0));
}

/** What the guard counts for one buy: its committed budget, or a raise in flight if higher. */
export function guardedBudget(buy: Pick<CampaignBuy, 'committedBudget' | 'pendingBudget'>): number {
  return Math.max(buy.committedBudget, buy.pendingBudget ?? 0);
}

export function guardedTotal(buys: Record<string, Pick<CampaignBuy, 'committedBudget' | 'pendingBudget'>>): number {
  return cents(Object.values(buys).reduce((sum, buy) => sum + guardedBudget(buy), 0));
}

/** Products the selection may name: what discovery found, by seller and product id. */
export type IndexedProduct = Pick<CatalogueEntry, 'pricingOptions' | 'reportingFrequencies'>;
export type ProductIndex = ReadonlyMap<string, IndexedProduct>;

export function productKey(agentId: string, productId: string): string {
  return `${agentId}\u0000${productId}`;
}

export function indexCatalogue(entries: CatalogueEntry[]): Map<string, IndexedProduct> {
  return new Map(
    entries.map((entry) => [
      productKey(entry.agentId, entry.productId),
      { pricingOptions: entry.pricingOptions, reportingFrequencies: entry.reportingFrequencies },
    ]),
  );
}

export function validateSelection(
  phase: CampaignPhase,
  totalBudget: number,
  products: ProductIndex,
  request: SelectionRequest | undefined,
): Verdict {
  if (phase !== 'selecting' && phase !== 'awaiting_approval')
    return refuse(
      'INVALID_STATE',
      `The campaign is ${phase}; products are selected after discovery and before approval.`,
    );
  if (!request || typeof request.selectedBy !== 'string' || request.selectedBy.trim() === '')
    return refuse('INVALID_REQUEST', 'selectedBy must say who selects the products.');
  if (!Array.isArray(request.lines) || request.lines.length === 0)
    return refuse('INVALID_REQUEST', 'lines must list at least one product.');
  const seen = new Set<string>();
  for (const [index, line] of request.lines.entries()) {
    if (!line || typeof line.agentId !== 'string' || typeof line.productId !== 'string')
      return refuse('INVALID_REQUEST', `lines[${index}] needs agentId and productId.`);
    if (typeof line.budget !== 'number' || !Number.isFinite(line.budget) || line.budget <= 0)
      return refuse('INVALID_REQUEST', `lines[${index}].budget must be a positive number.`);
    const key = productKey(line.agentId, line.productId);
    if (seen.has(key))
      return refuse('INVALID_REQUEST', `lines[${index}] repeats ${line.productId} at ${line.agentId}.`);
    seen.add(key);
    const product = products.get(key);
    if (!product)
      return refuse(
        'PRODUCT_NOT_FOUND',
        `lines[${index}]: discovery found no product ${line.productId} at seller ${line.agentId}.`,
      );
    if (
      line.pricingOptionId !== undefined &&
      product.pricingOptions.length > 0 &&
      !product.pricingOptions.some((option) => option.pricingOptionId === line.pricingOptionId)
    )
      return refuse(
        'INVALID_REQUEST',
        `lines[${index}]: product ${line.productId} has no pricing option ${line.pricingOptionId}.`,
      );
  }
  const total = sumBudgets(request.lines);
  if (total > totalBudget)
    return refuse('BUDGET_EXCEEDED', `The lines add up to ${total}, over the campaign budget of ${totalBudget}.`);
  return { ok: true };
}

/**
 * top_ranked: the best-ranked product of each seller, sellers in the order of their best product's rank, at most
 * `maxSellers`; the budget split evenly (cents; the remainder to the first line).
 */
export function policySelection(
  catalogue: RankedEntry[],
  totalBudget: number,
  policy: AllocationPolicy,
): SelectionLine[] {
  const best = new Map<string, RankedEntry>();
  for (const entry of [...catalogue].sort((a, b) => a.rank - b.rank)) {
    if (!best.has(entry.agentId)) best.set(entry.agentId, entry);
  }
  const chosen = [...best.values()].slice(0, policy.maxSellers ?? best.size);
  if (chosen.length === 0) return [];
  const share = Math.floor((totalBudget * 100) / chosen.length) / 100;
  const remainder = cents(totalBudget - share * chosen.length);
  return chosen.map((entry, index) => {
    const pricing = entry.pricingOptions[0]?.pricingOptionId;
    return {
      agentId: entry.agentId,
      productId: entry.productId,
      ...(pricing ? { pricingOptionId: pricing } : {}),
      budget: cents(share + (index === 0 ? remainder : 0)),
    };
  });
}

export function linesBySeller(lines: SelectionLine[]): Map<string, SelectionLine[]> {
  const grouped = new Map<string, SelectionLine[]>();
  for (const line of lines) grouped.set(line.agentId, [...(grouped.get(line.agentId) ?? []), line]);
  return grouped;
}

/** create_media_buy arguments for one seller's buy: the shared arguments, the flight, one package per line. */
export function buyParamsFor(
  input: Pick<CampaignInput, 'buyParams' | 'flight' | 'campaignKey'>,
  lines: SelectionLine[],
): Record<string, unknown> {
  return {
    ...input.buyParams,
    start_time: input.flight.startTime,
    end_time: input.flight.endTime,
    packages: lines.map((line) => ({
      product_id: line.productId,
      ...(line.pricingOptionId ? { pricing_option_id: line.pricingOptionId } : {}),
      budget: line.budget,
      ...(line.formatIds ? { format_ids: line.formatIds } : {}),
    })),
  };
}

const LIVE_PHASES: readonly CampaignPhase[] = ['buying', 'live', 'paused'];

/** Whether the campaign accepts a change now, and for a budget change whether the guard allows it. */
export function validateCampaignChange(
  state: Pick<CampaignState, 'phase' | 'buys' | 'totalBudget'>,
  request: CampaignChangeRequest | undefined,
): Verdict {
  if (!request || typeof request !== 'object') return refuse('INVALID_REQUEST', 'A change has kind and requestedBy.');
  if (!['pause', 'resume', 'cancel', 'budget'].includes(request.kind))
    return refuse('INVALID_REQUEST', `kind must be pause, resume, cancel or budget; got "${String(request.kind)}".`);
  if (typeof request.requestedBy !== 'string' || request.requestedBy.trim() === '' || request.requestedBy.length > 200)
    return refuse('INVALID_REQUEST', 'requestedBy must say who asks for the change (1-200 characters).');
  const { phase } = state;
  if (phase === 'canceled' || phase === 'ended')
    return refuse('INVALID_STATE', `The campaign is ${phase}; it takes no more changes.`);
  if (request.kind === 'cancel') return { ok: true };
  if (request.kind === 'budget') {
    if (typeof request.agentId !== 'string' || !state.buys[request.agentId])
      return refuse(
        'INVALID_REQUEST',
        `agentId must name a seller with a buy in this campaign (${Object.keys(state.buys).join(', ') || 'none yet'}).`,
      );
    if (typeof request.budget !== 'number' || !Number.isFinite(request.budget) || request.budget <= 0)
      return refuse('INVALID_REQUEST', 'budget must be a positive number.');
    const buy = state.buys[request.agentId];
    if (buy.finalStatus)
      return refuse('INVALID_STATE', `The buy at ${request.agentId} has ended (${buy.finalStatus}).`);
    const others = guardedTotal(
      Object.fromEntries(Object.entries(state.buys).filter(([agentId]) => agentId !== request.agentId)),
    );
    const projected = cents(others + Math.max(guardedBudget(buy), request.budget));
    if (projected > state.totalBudget)
      return refuse(
        'BUDGET_EXCEEDED',
        `With ${request.budget} at ${request.agentId} the campaign would commit ${projected}, over its budget of ${state.totalBudget}.`,
      );
    return { ok: true };
  }
  if (!LIVE_PHASES.includes(phase))
    return refuse('INVALID_STATE', `The campaign is ${phase}; ${request.kind} applies once its buys exist.`);
  if (request.kind === 'pause' && phase === 'paused') return refuse('INVALID_STATE', 'The campaign is already paused.');
  if (request.kind === 'resume' && phase !== 'paused')
    return refuse('INVALID_STATE', 'Only a paused campaign resumes.');
  return { ok: true };
}
