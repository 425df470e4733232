/**
 * The campaign's rules, pure (no Temporal): what a selection must satisfy, how an allocation policy picks products,
 * the budget guard, which changes a campaign accepts in which phase, and the create_media_buy arguments of each
 * seller's buy. The workflow (workflow.ts) calls these from its validators and its loop; unit tests call them directly.
 */
import type { CatalogueEntry, RankedEntry } from '../../protocol/catalogue';
import {
  type AllocationPolicy,
  type BuyDelivery,
  type CampaignCreative,
  type CreativeLibraryRequest,
  type CampaignBuy,
  type CampaignChangeRequest,
  type CampaignInput,
  type CampaignPhase,
  type CampaignState,
  type SelectionLine,
  type SelectionRequest,
  cents,
} from '../../contract/campaign';

export type Verdict = { ok: true } | { ok: false; code: string; message: string };

const refuse = (code: string, message: string): Verdict => ({ ok: false, code, message });

export function sumBudgets(lines: { budget: number }[]): number {
  return cents(lines.reduce((sum, line) => sum + line.budget, 0));
}

type Guarded = Pick<CampaignBuy, 'committedBudget' | 'pendingBudget' | 'moveReserve'>;

/**
 * What the guard counts for one buy: its committed budget, or a raise in flight if higher, plus what a budget move
 * took elsewhere for it and has not yet given it.
 */
export function guardedBudget(buy: Guarded): number {
  return cents(Math.max(buy.committedBudget, buy.pendingBudget ?? 0) + (buy.moveReserve ?? 0));
}

export function guardedTotal(buys: Record<string, Guarded>): number {
  return cents(Object.values(buys).reduce((sum, buy) => sum + guardedBudget(buy), 0));
}

/** Products the selection may name: what discovery found, by seller and product id. */
export type IndexedProduct = Pick<CatalogueEntry, 'pricingOptions' | 'reportingFrequencies'> &
  Partial<Pick<CatalogueEntry, 'formats'>>;
export type ProductIndex = ReadonlyMap<string, IndexedProduct>;

export function productKey(sellerId: string, productId: string): string {
  return `${sellerId}\u0000${productId}`;
}

export function indexCatalogue(entries: CatalogueEntry[]): Map<string, IndexedProduct> {
  return new Map(
    entries.map((entry) => [
      productKey(entry.sellerId, entry.productId),
      {
        pricingOptions: entry.pricingOptions,
        reportingFrequencies: entry.reportingFrequencies,
        formats: entry.formats,
      },
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
    if (!line || typeof line.sellerId !== 'string' || typeof line.productId !== 'string')
      return refuse('INVALID_REQUEST', `lines[${index}] needs sellerId and productId.`);
    if (typeof line.budget !== 'number' || !Number.isFinite(line.budget) || line.budget <= 0)
      return refuse('INVALID_REQUEST', `lines[${index}].budget must be a positive number.`);
    const key = productKey(line.sellerId, line.productId);
    if (seen.has(key))
      return refuse('INVALID_REQUEST', `lines[${index}] repeats ${line.productId} at ${line.sellerId}.`);
    seen.add(key);
    const product = products.get(key);
    if (!product)
      return refuse(
        'PRODUCT_NOT_FOUND',
        `lines[${index}]: discovery found no product ${line.productId} at seller ${line.sellerId}.`,
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
    if (!best.has(entry.sellerId)) best.set(entry.sellerId, entry);
  }
  const chosen = [...best.values()].slice(0, policy.maxSellers ?? best.size);
  if (chosen.length === 0) return [];
  const share = Math.floor((totalBudget * 100) / chosen.length) / 100;
  const remainder = cents(totalBudget - share * chosen.length);
  return chosen.map((entry, index) => {
    const pricing = entry.pricingOptions[0]?.pricingOptionId;
    return {
      sellerId: entry.sellerId,
      productId: entry.productId,
      ...(pricing ? { pricingOptionId: pricing } : {}),
      budget: cents(share + (index === 0 ? remainder : 0)),
    };
  });
}

export function linesBySeller(lines: SelectionLine[]): Map<string, SelectionLine[]> {
  const grouped = new Map<string, SelectionLine[]>();
  for (const line of lines) grouped.set(line.sellerId, [...(grouped.get(line.sellerId) ?? []), line]);
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
    if (typeof request.sellerId !== 'string' || request.sellerId === '')
      return refuse('INVALID_REQUEST', 'sellerId must name the seller whose buy gets the new budget.');
    // A well-formed request the campaign cannot apply now: a conflict (409), as the media-buy routes answer.
    if (!state.buys[request.sellerId])
      return refuse(
        'INVALID_STATE',
        `The campaign has no buy at ${request.sellerId} (buys: ${Object.keys(state.buys).join(', ') || 'none yet'}).`,
      );
    if (typeof request.budget !== 'number' || !Number.isFinite(request.budget) || request.budget <= 0)
      return refuse('INVALID_REQUEST', 'budget must be a positive number.');
    const buy = state.buys[request.sellerId];
    if (buy.finalStatus)
      return refuse('INVALID_STATE', `The buy at ${request.sellerId} has ended (${buy.finalStatus}).`);
    const others = guardedTotal(
      Object.fromEntries(Object.entries(state.buys).filter(([sellerId]) => sellerId !== request.sellerId)),
    );
    // The new total replaces the buy's budget (or a raise in flight); money a move reserved for it comes on top.
    const projected = cents(
      others + Math.max(buy.committedBudget, buy.pendingBudget ?? 0, request.budget) + (buy.moveReserve ?? 0),
    );
    if (projected > state.totalBudget)
      return refuse(
        'BUDGET_EXCEEDED',
        `With ${request.budget} at ${request.sellerId} the campaign would commit ${projected}, over its budget of ${state.totalBudget}.`,
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

// ---- creative library, coverage, delivery and pacing -----------------------------------------------------------

export const MAX_LIBRARY_CREATIVES = 100;

/** The checks of a creative library request, without zod (workflow code): the API's schema says the same. */
export function validateCreatives(request: CreativeLibraryRequest | undefined): Verdict {
  if (!request || typeof request !== 'object') return refuse('INVALID_REQUEST', 'A library change has creatives.');
  if (typeof request.requestedBy !== 'string' || request.requestedBy.trim() === '' || request.requestedBy.length > 200)
    return refuse('INVALID_REQUEST', 'requestedBy must say who changes the library (1-200 characters).');
  if (request.mode !== undefined && request.mode !== 'add' && request.mode !== 'replace')
    return refuse('INVALID_REQUEST', `mode must be add or replace; got "${String(request.mode)}".`);
  return validateCreativeList(request.creatives, request.mode === 'replace' ? 0 : 1);
}

export function validateCreativeList(creatives: unknown, min = 1): Verdict {
  if (!Array.isArray(creatives) || creatives.length < min || creatives.length > MAX_LIBRARY_CREATIVES)
    return refuse('INVALID_REQUEST', `creatives must list ${min} to ${MAX_LIBRARY_CREATIVES} creatives.`);
  const seen = new Set<string>();
  for (const [index, creative] of (creatives as unknown[]).entries()) {
    const entry = creative as Partial<CampaignCreative> | null;
    if (!entry || typeof entry !== 'object' || Array.isArray(entry))
      return refuse('INVALID_REQUEST', `creatives[${index}] must be an object.`);
    if (typeof entry.creative_id !== 'string' || !/^[A-Za-z0-9_.:-]{1,200}$/.test(entry.creative_id))
      return refuse('INVALID_REQUEST', `creatives[${index}].creative_id must be 1-200 letters, digits, "_.:-".`);
    if (seen.has(entry.creative_id))
      return refuse('INVALID_REQUEST', `creatives[${index}] repeats creative_id ${entry.creative_id}.`);
    seen.add(entry.creative_id);
    const format = entry.format_id as { id?: unknown } | undefined;
    if (!format || typeof format !== 'object' || typeof format.id !== 'string' || format.id === '')
      return refuse('INVALID_REQUEST', `creatives[${index}].format_id needs an id (and the creative agent_url).`);
  }
  return { ok: true };
}

/** The library after a change: `add` replaces creatives with the same creative_id and appends the others. */
export function mergeLibrary(current: CampaignCreative[], request: CreativeLibraryRequest): CampaignCreative[] {
  if (request.mode === 'replace') return [...request.creatives];
  const incoming = new Map(request.creatives.map((creative) => [creative.creative_id, creative]));
  const merged = current.map((creative) => incoming.get(creative.creative_id) ?? creative);
  for (const creative of request.creatives)
    if (!current.some((existing) => existing.creative_id === creative.creative_id)) merged.push(creative);
  return merged;
}

function formatIdsOf(raw: Record<string, unknown>[] | undefined): string[] {
  return (raw ?? []).map((format) => format.id).filter((id): id is string => typeof id === 'string');
}

/** The format ids one line's product requires: the line's own format_ids, else the product's from discovery. */
export function lineFormats(line: SelectionLine, formatsOf: (key: string) => string[] | undefined): string[] {
  if (line.formatIds && line.formatIds.length > 0) return formatIdsOf(line.formatIds);
  return formatsOf(productKey(line.sellerId, line.productId)) ?? [];
}

/** Required formats of a buy (union over its lines), the ones the library covers, the missing ones. */
export function coverageFor(
  lines: SelectionLine[],
  formatsOf: (key: string) => string[] | undefined,
  library: CampaignCreative[],
): { required: string[]; covered: string[]; missing: string[] } {
  const required = [...new Set(lines.flatMap((line) => lineFormats(line, formatsOf)))].sort();
  const available = new Set(library.map((creative) => creative.format_id.id));
  return {
    required,
    covered: required.filter((format) => available.has(format)),
    missing: required.filter((format) => !available.has(format)),
  };
}

/**
 * Which of the buy's packages each creative goes to: the packages whose product takes the creative's format (a
 * product with no known formats takes every creative). Packages are matched to lines by product_id.
 */
export function assignmentsFor(
  packages: { packageId: string; productId?: string }[],
  lines: SelectionLine[],
  formatsOf: (key: string) => string[] | undefined,
  library: CampaignCreative[],
): Record<string, string[]> {
  const assignments: Record<string, string[]> = {};
  for (const creative of library) {
    const packageIds = packages
      .filter((pkg) => {
        const line = lines.find((candidate) => candidate.productId === pkg.productId) ?? lines[0];
        const formats = line ? lineFormats(line, formatsOf) : [];
        return formats.length === 0 || formats.includes(creative.format_id.id);
      })
      .map((pkg) => pkg.packageId);
    if (packageIds.length > 0) assignments[creative.creative_id] = packageIds;
  }
  return assignments;
}

/** Spend planned by `nowMs` under a linear plan over the flight: the budget times the share elapsed. */
export function plannedSpend(budget: number, startMs: number, endMs: number, nowMs: number): number {
  if (!(endMs > startMs)) return nowMs >= endMs ? budget : 0;
  const share = Math.min(1, Math.max(0, (nowMs - startMs) / (endMs - startMs)));
  return cents(budget * share);
}

export function pacingOf(spend: number, planned: number): number | null {
  return planned > 0 ? Math.round((spend / planned) * 1000) / 1000 : null;
}

/** The campaign's delivery: the buys' numbers summed, pacing over the sum of their plans. */
export function sumDelivery(deliveries: BuyDelivery[], at: string): BuyDelivery {
  const impressions = deliveries.reduce((sum, entry) => sum + entry.impressions, 0);
  const spend = cents(deliveries.reduce((sum, entry) => sum + entry.spend, 0));
  const withClicks = deliveries.filter((entry) => entry.clicks !== undefined);
  const planned = cents(deliveries.reduce((sum, entry) => sum + entry.plannedSpend, 0));
  return {
    impressions,
    spend,
    ...(withClicks.length > 0 ? { clicks: withClicks.reduce((sum, entry) => sum + entry.clicks!, 0) } : {}),
    plannedSpend: planned,
    pacing: pacingOf(spend, planned),
    at,
  };
}
