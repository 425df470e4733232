/**
 * One catalogue from many sellers' `get_products` answers: each product normalised to the fields a buyer compares
 * (seller, product, pricing options, formats, delivery type, forecast), each seller's proposals kept as offered, and
 * each seller's `incomplete[]` kept. Ranking is a replaceable pure function (`Scorer`); the default is simple and
 * deterministic: the same catalogue always ranks the same way. Pure, so the discovery workflow imports it.
 */
import { asRecord } from './records';

export interface CataloguePricingOption {
  pricingOptionId?: string;
  pricingModel?: string;
  currency?: string;
  /** fixed_price, else the floor or guidance the seller gave (what the default scorer compares). */
  price?: number;
  fixed: boolean;
  minSpendPerPackage?: number;
}

export interface CatalogueEntry {
  sellerId: string;
  productId: string;
  name?: string;
  description?: string;
  deliveryType?: string;
  channels: string[];
  formats: string[];
  pricingOptions: CataloguePricingOption[];
  forecast?: Record<string, unknown>;
  briefRelevance?: string;
  reportingFrequencies: string[];
  /** The product as the seller sent it, for whatever the normalised view leaves out. */
  raw: Record<string, unknown>;
}

export interface CatalogueProposal {
  sellerId: string;
  proposalId: string;
  name?: string;
  /** 3.1 `proposal_status`: `draft` must be finalized before create_media_buy, `committed` is bought as is. */
  status?: string;
  allocations: Record<string, unknown>[];
  /** When the proposal lapses: for a committed one, the end of the seller's inventory hold. */
  expiresAt?: string;
  /** The seller's `total_budget_guidance` (min/recommended/max, currency). */
  budgetGuidance?: ProposalBudgetGuidance;
  /** The proposal this one was refined or finalized from. */
  parentProposalId?: string;
  raw: Record<string, unknown>;
}

export interface ProposalBudgetGuidance {
  min?: number;
  recommended?: number;
  max?: number;
  currency?: string;
}

export interface SellerIncomplete {
  sellerId: string;
  /** The seller's own `incomplete[]` entries, as sent. */
  entries: Record<string, unknown>[];
}

export interface Catalogue {
  entries: CatalogueEntry[];
  proposals: CatalogueProposal[];
  incomplete: SellerIncomplete[];
}

export interface RankedEntry extends CatalogueEntry {
  rank: number;
  score: number;
  reasons: string[];
}

/** What the buyer wants, for the scorer: delivery types in order of preference, channels, a CPM ceiling. */
export interface RankingPreferences {
  preferredDeliveryTypes?: string[];
  channels?: string[];
  maxCpm?: number;
}

/** A scorer: a pure function from an entry to a score (higher is better) and why. */
export type Scorer = (entry: CatalogueEntry, preferences: RankingPreferences) => { score: number; reasons: string[] };

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function pricingOptionOf(raw: unknown): CataloguePricingOption | undefined {
  const option = asRecord(raw);
  if (!option) return undefined;
  const guidance = asRecord(option.price_guidance);
  const fixed = num(option.fixed_price) ?? num(option.rate);
  const price = fixed ?? num(option.floor_price) ?? num(guidance?.floor) ?? num(guidance?.p50);
  const pricingOptionId = str(option.pricing_option_id);
  const pricingModel = str(option.pricing_model);
  const currency = str(option.currency);
  const minSpend = num(option.min_spend_per_package);
  return {
    ...(pricingOptionId ? { pricingOptionId } : {}),
    ...(pricingModel ? { pricingModel } : {}),
    ...(currency ? { currency } : {}),
    ...(price !== undefined ? { price } : {}),
    fixed: fixed !== undefined,
    ...(minSpend !== undefined ? { minSpendPerPackage: minSpend } : {}),
  };
}

function formatIdOf(raw: unknown): string | undefined {
  if (typeof raw === 'string') return raw;
  const format = asRecord(raw);
  return str(format?.id);
}

/** One seller's answer (the get_products result object) as catalogue entries, proposals and incomplete parts. */
export function normaliseProducts(sellerId: string, result: unknown): Catalogue {
  const answer = asRecord(result) ?? {};
  const entries: CatalogueEntry[] = [];
  for (const item of Array.isArray(answer.products) ? answer.products : []) {
    const product = asRecord(item);
    const productId = str(product?.product_id);
    if (!product || !productId) continue;
    const reporting = asRecord(product.reporting_capabilities);
    const name = str(product.name);
    const description = str(product.description);
    const deliveryType = str(product.delivery_type);
    const forecast = asRecord(product.forecast);
    const briefRelevance = str(product.brief_relevance);
    entries.push({
      sellerId,
      productId,
      ...(name ? { name } : {}),
      ...(description ? { description } : {}),
      ...(deliveryType ? { deliveryType } : {}),
      channels: strings(product.channels),
      formats: (Array.isArray(product.format_ids) ? product.format_ids : [])
        .map(formatIdOf)
        .filter((id): id is string => id !== undefined),
      pricingOptions: (Array.isArray(product.pricing_options) ? product.pricing_options : [])
        .map(pricingOptionOf)
        .filter((option): option is CataloguePricingOption => option !== undefined),
      ...(forecast ? { forecast } : {}),
      ...(briefRelevance ? { briefRelevance } : {}),
      reportingFrequencies: strings(reporting?.available_reporting_frequencies),
      raw: product,
    });
  }
  const proposals = proposalsOf(sellerId, answer);
  const incompleteEntries = (Array.isArray(answer.incomplete) ? answer.incomplete : [])
    .map((entry) => asRecord(entry))
    .filter((entry): entry is Record<string, unknown> => entry !== undefined);
  return {
    entries,
    proposals,
    incomplete: incompleteEntries.length > 0 ? [{ sellerId, entries: incompleteEntries }] : [],
  };
}

/** One proposal as the catalogue keeps it (undefined without a `proposal_id`). */
export function proposalOf(sellerId: string, raw: unknown): CatalogueProposal | undefined {
  const proposal = asRecord(raw);
  const proposalId = str(proposal?.proposal_id);
  if (!proposal || !proposalId) return undefined;
  const name = str(proposal.name);
  const status = str(proposal.proposal_status);
  const expiresAt = str(proposal.expires_at);
  const parentProposalId = str(proposal.parent_proposal_id);
  const guidance = asRecord(proposal.total_budget_guidance);
  const budgetGuidance: ProposalBudgetGuidance | undefined = guidance
    ? {
        ...(num(guidance.min) !== undefined ? { min: num(guidance.min) } : {}),
        ...(num(guidance.recommended) !== undefined ? { recommended: num(guidance.recommended) } : {}),
        ...(num(guidance.max) !== undefined ? { max: num(guidance.max) } : {}),
        ...(str(guidance.currency) ? { currency: str(guidance.currency) } : {}),
      }
    : undefined;
  return {
    sellerId,
    proposalId,
    ...(name ? { name } : {}),
    ...(status ? { status } : {}),
    allocations: (Array.isArray(proposal.allocations) ? proposal.allocations : [])
      .map((allocation) => asRecord(allocation))
      .filter((allocation): allocation is Record<string, unknown> => allocation !== undefined),
    ...(expiresAt ? { expiresAt } : {}),
    ...(budgetGuidance ? { budgetGuidance } : {}),
    ...(parentProposalId ? { parentProposalId } : {}),
    raw: proposal,
  };
}

/** The proposals of one get_products answer (brief or refine mode), as offered. */
export function proposalsOf(sellerId: string, result: unknown): CatalogueProposal[] {
  const answer = asRecord(result) ?? {};
  return (Array.isArray(answer.proposals) ? answer.proposals : [])
    .map((item) => proposalOf(sellerId, item))
    .filter((proposal): proposal is CatalogueProposal => proposal !== undefined);
}

/**
 * The committed proposal a `get_products` refine answer with `action: "finalize"` produced for `sourceProposalId`:
 * the committed proposal whose parent is the source, else the committed proposal with the source's own id (sellers
 * that keep the id), else the only committed one. Undefined when the seller finalized nothing.
 */
export function finalizedProposalOf(
  sellerId: string,
  result: unknown,
  sourceProposalId: string,
): CatalogueProposal | undefined {
  const committed = proposalsOf(sellerId, result).filter((proposal) => proposal.status === 'committed');
  return (
    committed.find((proposal) => proposal.parentProposalId === sourceProposalId) ??
    committed.find((proposal) => proposal.proposalId === sourceProposalId) ??
    (committed.length === 1 ? committed[0] : undefined)
  );
}

export function mergeCatalogues(parts: Catalogue[]): Catalogue {
  return {
    entries: parts.flatMap((part) => part.entries),
    proposals: parts.flatMap((part) => part.proposals),
    incomplete: parts.flatMap((part) => part.incomplete),
  };
}

/** The CPM of an entry's cheapest CPM pricing option, if it has one. */
export function lowestCpm(entry: CatalogueEntry): number | undefined {
  const cpms = entry.pricingOptions
    .filter((option) => option.pricingModel === 'cpm' && option.price !== undefined)
    .map((option) => option.price!);
  return cpms.length > 0 ? Math.min(...cpms) : undefined;
}

/**
 * The default scorer. Points: +30/+20/+10 for the buyer's 1st/2nd/3rd preferred delivery type, +10 per wanted
 * channel, +5 for a forecast, +5 for a brief relevance note, up to +20 for a low CPM (20 at 0, 0 at or above 50 or
 * the buyer's ceiling), -100 above the ceiling. Ties are broken by seller then product id in `rank`.
 */
export const defaultScorer: Scorer = (entry, preferences) => {
  let score = 0;
  const reasons: string[] = [];
  const preferred = preferences.preferredDeliveryTypes ?? [];
  const position = entry.deliveryType ? preferred.indexOf(entry.deliveryType) : -1;
  if (position >= 0 && position < 3) {
    const points = 30 - 10 * position;
    score += points;
    reasons.push(`delivery type ${entry.deliveryType} is preference ${position + 1} (+${points})`);
  }
  const wanted = (preferences.channels ?? []).filter((channel) => entry.channels.includes(channel));
  if (wanted.length > 0) {
    score += 10 * wanted.length;
    reasons.push(`channels ${wanted.join(', ')} (+${10 * wanted.length})`);
  }
  if (entry.forecast) {
    score += 5;
    reasons.push('has a forecast (+5)');
  }
  if (entry.briefRelevance) {
    score += 5;
    reasons.push('seller explained its brief relevance (+5)');
  }
  const cpm = lowestCpm(entry);
  if (cpm !== undefined) {
    const ceiling = preferences.maxCpm ?? 50;
    if (preferences.maxCpm !== undefined && cpm > preferences.maxCpm) {
      score -= 100;
      reasons.push(`CPM ${cpm} above the ceiling ${preferences.maxCpm} (-100)`);
    } else {
      const points = Math.round(Math.max(0, 20 * (1 - cpm / ceiling)) * 100) / 100;
      score += points;
      reasons.push(`CPM ${cpm} (+${points})`);
    }
  }
  return { score, reasons };
};

/** Ranks the entries: score descending, then seller id, then product id (so equal scores rank the same every time). */
export function rankCatalogue(
  entries: CatalogueEntry[],
  preferences: RankingPreferences = {},
  scorer: Scorer = defaultScorer,
): RankedEntry[] {
  return entries
    .map((entry) => ({ entry, ...scorer(entry, preferences) }))
    .sort(
      (a, b) =>
        b.score - a.score ||
        (a.entry.sellerId < b.entry.sellerId ? -1 : a.entry.sellerId > b.entry.sellerId ? 1 : 0) ||
        (a.entry.productId < b.entry.productId ? -1 : a.entry.productId > b.entry.productId ? 1 : 0),
    )
    .map((scored, index) => ({ ...scored.entry, rank: index + 1, score: scored.score, reasons: scored.reasons }));
}
