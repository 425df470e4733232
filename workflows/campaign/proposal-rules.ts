/**
 * The rules of accepting a seller's proposal in a campaign, pure (no Temporal): what a selection with `proposals[]`
 * must satisfy against the discovery's catalogue, the create_media_buy arguments of a buy by proposal, the
 * get_products refine call that finalizes a draft, and which seller answers mean "quote again". The workflow side
 * (campaign-proposals.ts) calls these; unit tests call them directly.
 *
 * AdCP 3.1: a `draft` proposal is finalized with get_products `buying_mode: "refine"` and a `scope: "proposal"`
 * entry with `action: "finalize"`, which answers a `committed` proposal (an inventory hold until `expires_at`);
 * a committed proposal is executed by create_media_buy with `proposal_id` and `total_budget`.
 */
import type { CatalogueProposal } from '../../protocol/catalogue';
import {
  type CampaignBuy,
  type CampaignBuyProposal,
  type CampaignInput,
  type CampaignPhase,
  type ProposalSelection,
  type SelectionRequest,
  cents,
} from '../../contract/campaign';
import type { MediaBuyState } from '../../contract/media-buy';
import { type ProductIndex, type Verdict, productKey, sumBudgets, validateSelection } from './rules';

const refuse = (code: string, message: string): Verdict => ({ ok: false, code, message });

/** At most this many proposals in one selection (one per seller). */
export const MAX_PROPOSALS_PER_SELECTION = 50;
/** How many times a buy by proposal is quoted again (finalized afresh and bought) before a person decides. */
export const MAX_REQUOTES = 1;

/** Seller answers to a create by proposal that a fresh finalize can fix: the terms changed, or the hold is gone. */
export const REQUOTE_CODES: readonly string[] = [
  'REQUOTE_REQUIRED',
  'PROPOSAL_EXPIRED',
  'PROPOSAL_NOT_FOUND',
  'PROPOSAL_NOT_COMMITTED',
];

/** Proposals the selection may name: what discovery offered, by seller and proposal id. */
export type ProposalIndex = ReadonlyMap<string, CatalogueProposal>;

export function indexProposals(proposals: CatalogueProposal[]): Map<string, CatalogueProposal> {
  return new Map(proposals.map((proposal) => [productKey(proposal.sellerId, proposal.proposalId), proposal]));
}

/** The proposals of a selection (none for a hand-picked one). */
export function proposalsOfSelection(request: Pick<SelectionRequest, 'proposals'> | undefined): ProposalSelection[] {
  return Array.isArray(request?.proposals) ? request.proposals : [];
}

/** What the selection commits: its lines plus its proposals' budgets. */
export function selectionTotal(request: SelectionRequest): number {
  return cents(sumBudgets(request.lines ?? []) + sumBudgets(proposalsOfSelection(request)));
}

/**
 * A selection with proposals: each names a proposal discovery found at that seller, not expired, one per seller and
 * no seller both by proposal and by products; lines (if any) are checked as a hand-picked selection; everything
 * together stays within the campaign's budget. Without proposals this is exactly `validateSelection`.
 */
export function validateSelectionWithProposals(
  phase: CampaignPhase,
  totalBudget: number,
  products: ProductIndex,
  proposals: ProposalIndex,
  request: SelectionRequest | undefined,
  nowMs: number,
): Verdict {
  const accepted = proposalsOfSelection(request);
  if (!request || request.proposals === undefined) return validateSelection(phase, totalBudget, products, request);
  if (!Array.isArray(request.proposals))
    return refuse('INVALID_REQUEST', 'proposals must be a list of {sellerId, proposalId, budget}.');
  if (accepted.length === 0 && (!Array.isArray(request.lines) || request.lines.length === 0))
    return refuse('INVALID_REQUEST', 'A selection names at least one product line or one proposal.');
  if (Array.isArray(request.lines) && request.lines.length > 0) {
    const lines = validateSelection(phase, totalBudget, products, request);
    if (!lines.ok) return lines;
  } else {
    if (phase !== 'selecting' && phase !== 'awaiting_approval')
      return refuse(
        'INVALID_STATE',
        `The campaign is ${phase}; proposals are accepted after discovery and before approval.`,
      );
    if (typeof request.selectedBy !== 'string' || request.selectedBy.trim() === '')
      return refuse('INVALID_REQUEST', 'selectedBy must say who accepts the proposals.');
  }
  if (accepted.length > MAX_PROPOSALS_PER_SELECTION)
    return refuse('INVALID_REQUEST', `proposals lists at most ${MAX_PROPOSALS_PER_SELECTION} proposals.`);
  const lineSellers = new Set((request.lines ?? []).map((line) => line?.sellerId));
  const sellers = new Set<string>();
  for (const [index, entry] of accepted.entries()) {
    if (!entry || typeof entry.sellerId !== 'string' || typeof entry.proposalId !== 'string')
      return refuse('INVALID_REQUEST', `proposals[${index}] needs sellerId and proposalId.`);
    if (typeof entry.budget !== 'number' || !Number.isFinite(entry.budget) || entry.budget <= 0)
      return refuse('INVALID_REQUEST', `proposals[${index}].budget must be a positive number.`);
    if (sellers.has(entry.sellerId))
      return refuse(
        'INVALID_REQUEST',
        `proposals[${index}]: seller ${entry.sellerId} already has a proposal accepted.`,
      );
    sellers.add(entry.sellerId);
    if (lineSellers.has(entry.sellerId))
      return refuse(
        'INVALID_REQUEST',
        `proposals[${index}]: seller ${entry.sellerId} also has product lines; a seller is bought either by proposal or by products.`,
      );
    const proposal = proposals.get(productKey(entry.sellerId, entry.proposalId));
    if (!proposal) {
      const elsewhere = [...proposals.values()].find((offered) => offered.proposalId === entry.proposalId);
      return refuse(
        'PROPOSAL_NOT_FOUND',
        elsewhere
          ? `proposals[${index}]: proposal ${entry.proposalId} was offered by seller ${elsewhere.sellerId}, not ${entry.sellerId}.`
          : `proposals[${index}]: discovery found no proposal ${entry.proposalId} at seller ${entry.sellerId}.`,
      );
    }
    if (proposal.expiresAt !== undefined && Date.parse(proposal.expiresAt) <= nowMs)
      return refuse(
        'PROPOSAL_EXPIRED',
        `proposals[${index}]: proposal ${entry.proposalId} at ${entry.sellerId} expired at ${proposal.expiresAt}; run a new discovery.`,
      );
    if (proposal.status !== undefined && proposal.status !== 'draft' && proposal.status !== 'committed')
      return refuse(
        'INVALID_REQUEST',
        `proposals[${index}]: proposal ${entry.proposalId} is ${proposal.status}; only draft or committed proposals are bought.`,
      );
  }
  const total = selectionTotal(request);
  if (total > totalBudget)
    return refuse(
      'BUDGET_EXCEEDED',
      `The lines and proposals add up to ${total}, over the campaign budget of ${totalBudget}.`,
    );
  return { ok: true };
}

/** The buy record of an accepted proposal (before any finalize). */
export function buyProposalOf(entry: ProposalSelection, offered: CatalogueProposal | undefined): CampaignBuyProposal {
  return {
    proposalId: entry.proposalId,
    budget: cents(entry.budget),
    ...(offered?.status !== undefined ? { status: offered.status } : {}),
    ...(offered?.expiresAt !== undefined ? { expiresAt: offered.expiresAt } : {}),
    finalized: [],
    requotes: [],
  };
}

/** create_media_buy arguments of a buy by proposal: the shared arguments, the flight, `proposal_id`, `total_budget`. */
export function proposalBuyParams(
  input: Pick<CampaignInput, 'buyParams' | 'flight' | 'currency'>,
  proposalId: string,
  budget: number,
  currency: string | undefined,
): Record<string, unknown> {
  const { packages: _packages, ...shared } = input.buyParams ?? {};
  return {
    ...shared,
    start_time: input.flight.startTime,
    end_time: input.flight.endTime,
    proposal_id: proposalId,
    total_budget: { amount: cents(budget), currency: input.currency ?? currency ?? 'USD' },
  };
}

/** get_products arguments that finalize one proposal (refine mode: no brief; brand and account as in discovery). */
export function finalizeParams(
  discoveryParams: Record<string, unknown> | undefined,
  proposalId: string,
): Record<string, unknown> {
  return {
    ...(discoveryParams?.brand !== undefined ? { brand: discoveryParams.brand } : {}),
    ...(discoveryParams?.account !== undefined ? { account: discoveryParams.account } : {}),
    buying_mode: 'refine',
    refine: [{ scope: 'proposal', proposal_id: proposalId, action: 'finalize' }],
  };
}

/** The seller's code when a buy by proposal ended because the proposal must be quoted again; undefined otherwise. */
export function requoteCodeOf(ended: Pick<MediaBuyState, 'status' | 'failure'>): string | undefined {
  if (ended.status === 'rejected') return undefined;
  const code = ended.failure?.error?.code;
  if (code !== undefined) return REQUOTE_CODES.includes(code) ? code : undefined;
  const message = ended.failure?.message ?? '';
  return REQUOTE_CODES.find((candidate) => message.includes(candidate));
}

/** Statuses of a buy whose create has not settled (or failed and may be quoted again). */
const UNSETTLED: readonly (string | undefined)[] = [undefined, 'creating', 'create_failed'];

/**
 * Whether a followed buy by proposal may still be refused and quoted again: its current attempt has no status yet,
 * is creating, or failed (the follower is deciding). The campaign does not continue as new meanwhile.
 */
export function proposalCreatesSettling(
  buys: Record<string, Pick<CampaignBuy, 'status' | 'finalStatus'>>,
  followed: ReadonlySet<string>,
): boolean {
  return [...followed].some((sellerId) => {
    const buy = buys[sellerId];
    return buy !== undefined && buy.finalStatus === undefined && UNSETTLED.includes(buy.status);
  });
}
