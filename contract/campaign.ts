/**
 * The campaign workflow's public surface: one campaign = one workflow that runs a discovery, waits for a selection
 * (a person's Update, or an allocation policy) and an approval (an Update recording who approved), then starts one
 * `adcpMediaBuy` child per chosen seller and holds the whole campaign: pause, resume and cancel fan out to every buy,
 * and a budget guard keeps the sum of committed budgets within the campaign's. Imported by the workflow, the
 * campaigns API, the typed client and tests. Message names are stable.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { RankingPreferences } from '../protocol/catalogue';
import type { DiscoveryState } from './discovery';
import type { CampaignGovernance, GovernancePlanSync } from './governance';
import type { MediaBuyState } from './media-buy';

export const CAMPAIGN_WORKFLOW_TYPE = 'adcpCampaign';

export function campaignWorkflowId(campaignKey: string): string {
  return `adcp-campaign-${campaignKey}`;
}

export const CAMPAIGN_ID_PATTERN = /^adcp-campaign-[A-Za-z0-9_.:-]{1,200}$/;

/** The buy key of one seller's buy in a campaign: the same campaign and seller always name the same buy. */
export function campaignBuyKey(campaignKey: string, sellerId: string): string {
  return `${campaignKey}.${sellerId}`;
}

export type CampaignPhase =
  'discovering' | 'selecting' | 'awaiting_approval' | 'buying' | 'live' | 'paused' | 'canceled' | 'ended';

export interface Flight {
  startTime: string;
  endTime: string;
}

/** How the products are chosen without a person: the best-ranked product of each of the top sellers. */
export interface AllocationPolicy {
  kind: 'top_ranked';
  /** How many sellers get a buy (default: every seller that answered). */
  maxSellers?: number;
}

export interface CampaignInput {
  campaignKey: string;
  brief: string;
  totalBudget: number;
  currency?: string;
  flight: Flight;
  sellerIds: string[];
  skipped?: { sellerId: string; reason: string }[];
  timeBudgetMs: number;
  /** More get_products arguments (brand, account, filters, ...). */
  discoveryParams?: Record<string, unknown>;
  preferences?: RankingPreferences;
  /** Without a policy the campaign waits for a selection Update after discovery. */
  allocation?: AllocationPolicy;
  /**
   * How the campaign moves budget across its sellers once live (off unless set; see BudgetAllocationPolicy). Changeable
   * later with the `setBudgetAllocation` Update.
   */
  budgetAllocation?: BudgetAllocationPolicyInput;
  /** create_media_buy arguments every buy shares (brand, account, po_number, ...); packages and flight are the campaign's. */
  buyParams?: Record<string, unknown>;
  requestedBy: string;
  /**
   * The gateway's public base URL: each buy registers its reporting webhook at
   * <base>/webhooks/adcp-reporting/<buy workflow id>, at a frequency every product of the buy offers. Absent: pulls only.
   */
  reportingBaseUrl?: string;
  indexed?: boolean;
  /**
   * The tenant that owns the campaign (absent in single-tenant/dev mode): recorded in state, and carried by its
   * discovery and its buys (their AdcpTenant, their seller credentials). The campaign key is then already scoped by it.
   */
  tenant?: string;
  /** The authenticated principal that created it (`tenant/id`). */
  principal?: string;
  /** The campaign's creative library at creation (sync_creatives `creatives[]` entries; see validateCreatives). */
  creatives?: CampaignCreative[];
  /** How the campaign follows its buys (delivery, pacing, alerts). */
  monitoring?: MonitoringSettings;
  /** Continue as new past this many history events (default 2,000; tests set it low). */
  historyEventLimit?: number;
  /**
   * A governance agent: the plan is pushed with sync_plans at creation, and every buy is checked
   * (check_governance) before it spends and reported (report_plan_outcome) after. Absent: no governance calls.
   */
  governance?: CampaignGovernance;
  /** Set only by continue-as-new. */
  carried?: CampaignCarried;
}

/** A sync_creatives `creatives[]` entry: creative_id and format_id are required, the rest goes to the seller as is. */
export type CampaignCreative = Record<string, unknown> & {
  creative_id: string;
  format_id: { id: string; agent_url?: string } & Record<string, unknown>;
};

export interface MonitoringSettings {
  /** The longest wait between two polls of the buys (default 1 h); right after a change the polls come sooner. */
  intervalMs?: number;
  /** Pacing below this (delivered spend / planned spend) is under-delivery (default 0.8). */
  underDeliveryThreshold?: number;
  /** No under-delivery alert before this long after a buy's start (default 24 h). */
  underDeliveryGraceMs?: number;
}

/** What a campaign carries into its next run (continue-as-new). */
export interface CampaignCarried {
  state: CampaignState;
  changeSequence: number;
  /** The catalogue's formats of the chosen products, by product key (the rest of the catalogue is not carried). */
  productFormats: [string, string[]][];
  /** The wait between two polls when the run ended: the next run goes on from it rather than from the first. */
  pollDelayMs?: number;
}

export interface SelectionLine {
  sellerId: string;
  productId: string;
  pricingOptionId?: string;
  budget: number;
  formatIds?: Record<string, unknown>[];
}

/**
 * Accept a seller's proposal (3.1 get_products `proposals[]`) instead of hand-picked products: the seller's buy is
 * create_media_buy with `proposal_id` and `total_budget` (= budget); a draft is finalized first (workflows/campaign/proposals.ts).
 */
export interface ProposalSelection {
  sellerId: string;
  proposalId: string;
  budget: number;
}

export interface SelectionRequest {
  /** Hand-picked products (may be empty when every seller is bought by proposal). */
  lines: SelectionLine[];
  /** Proposals accepted, at most one per seller and never for a seller that also has lines. */
  proposals?: ProposalSelection[];
  selectedBy: string;
}

/** A seller's buy by proposal: what was accepted, what was finalized and bought, and each requote on the way. */
export interface CampaignBuyProposal {
  /** The proposal the selection accepted. */
  proposalId: string;
  budget: number;
  /** Its status when accepted (draft, committed, or absent: ready to buy). */
  status?: string;
  /** The committed proposal bought (the accepted one, or what finalizing it produced). */
  boughtProposalId?: string;
  expiresAt?: string;
  /** Each finalize (get_products refine, action finalize) the campaign ran, oldest first. */
  finalized: { from: string; to?: string; operationId: string; at: string; error?: string }[];
  /** Each create_media_buy the seller refused with REQUOTE_REQUIRED (or an expired/unknown proposal). */
  requotes: { proposalId: string; code: string; message: string; buyWorkflowId: string; at: string }[];
  /** A requote the campaign could not resolve on its own: a person decides (a new selection is not possible once live). */
  needsPerson?: string;
}

export interface ApprovalRequest {
  approvedBy: string;
  note?: string;
}

export type CampaignChangeKind = 'pause' | 'resume' | 'cancel' | 'budget';

export interface CampaignChangeRequest {
  kind: CampaignChangeKind;
  requestedBy: string;
  reason?: string;
  /** budget: the seller whose buy gets the new budget, and that buy's new total. */
  sellerId?: string;
  budget?: number;
}

export type BuyOutcome = 'applied' | 'failed' | 'refused' | 'not_needed';

export interface CampaignChangeRecord {
  sequence: number;
  kind: CampaignChangeKind;
  requestedBy: string;
  reason?: string;
  sellerId?: string;
  budget?: number;
  requestedAt: string;
  outcome: 'queued' | 'running' | 'applied' | 'partial' | 'failed';
  /** What each buy answered. */
  buys: Record<string, { outcome: BuyOutcome; status?: string; error?: { code: string; message: string } }>;
  finishedAt?: string;
}

export interface CampaignBuy {
  sellerId: string;
  buyKey: string;
  workflowId: string;
  lines: SelectionLine[];
  /** The budget in effect at the seller (what the guard counts). */
  committedBudget: number;
  /** A raise accepted and not yet applied: counted by the guard until it is applied or refused. */
  pendingBudget?: number;
  /**
   * Money a budget move took from another buy for this one (confirmed there), counted by the guard on top of this
   * buy's budget until the increase is applied here or the money returns to the pool.
   */
  moveReserve?: number;
  /**
   * A move's decrease here that no read confirmed: the guard keeps counting the budget as it was until a read of the
   * buy shows the lower budget (or shows the decrease did not happen).
   */
  unconfirmedDecrease?: { moveId: string; budget: number };
  /** The seller's `available_actions` as the buy last read them (what a budget move may ask of it). */
  availableActions?: string[];
  /** The buy's reporting frequency (what the allocation's reporting period follows). */
  reportingFrequency?: string;
  startedAt?: string;
  /** The buy's status when its workflow ended (rejected, canceled, completed, create_failed ...). */
  finalStatus?: string;
  finalMessage?: string;
  /** Set when this seller is bought by proposal (workflows/campaign/proposals.ts). */
  proposal?: CampaignBuyProposal;
  /** What the campaign last read from the buy's workflow (absent before the first poll). */
  status?: string;
  mediaBuyId?: string;
  /** The flight the seller confirmed (pacing uses it; the campaign's flight otherwise). */
  startTime?: string;
  endTime?: string;
  /** The library version last synced to this buy, and how that sync went. */
  creativeSync?: {
    version: number;
    outcome: 'applied' | 'failed' | 'refused';
    at: string;
    attempts?: number;
    error?: string;
  };
  /** Per creative of the library: what the seller said (sync_creatives action, review status, errors). */
  creatives?: Record<string, { status?: string; action?: string; error?: string }>;
  /** The formats the buy's products require, those the library covers, those missing (format ids). */
  coverage?: { required: string[]; covered: string[]; missing: string[] };
  /** Delivery as the buy's workflow totals it (reports and pulls), and pacing against a linear plan. */
  delivery?: BuyDelivery;
}

export interface BuyDelivery {
  impressions: number;
  spend: number;
  clicks?: number;
  /** Spend planned by now: the budget times the share of the flight elapsed. */
  plannedSpend: number;
  /** spend / plannedSpend (null before the flight starts). */
  pacing: number | null;
  at: string;
}

export type CampaignAlertKind =
  | 'buy_rejected'
  | 'buy_failed'
  | 'seller_unavailable'
  | 'creative_rejected'
  | 'under_delivery'
  | 'proposal_requote'
  /** A plan of budget moves waits for a person's decision (budget allocation in propose mode). */
  | 'allocation_proposal'
  /** A budget move did not arrive: its decrease was refused or unconfirmed, or its increase failed (money to the pool). */
  | 'allocation_move_failed';

export interface CampaignAlert {
  /** When it was raised. */
  at: string;
  kind: CampaignAlertKind;
  sellerId: string;
  note: string;
  /** kind:sellerId[:creativeId]: one open alert per key. */
  key?: string;
  creativeId?: string;
  clearedAt?: string;
}

export interface CampaignState {
  campaignKey: string;
  brief: string;
  totalBudget: number;
  currency?: string;
  flight: Flight;
  phase: CampaignPhase;
  requestedBy: string;
  discoveryId: string;
  discovery?: Pick<DiscoveryState, 'status' | 'partial' | 'sellers' | 'incomplete'> & { products: number };
  selection?: SelectionRequest & { at: string; byPolicy?: boolean };
  approval?: ApprovalRequest & { at: string };
  buys: Record<string, CampaignBuy>;
  /** Sum of the buys' committed budgets plus raises in flight: never above totalBudget. */
  committedBudget: number;
  changes: CampaignChangeRecord[];
  changeCount: number;
  alerts: CampaignAlert[];
  startedAt: string;
  updatedAt: string;
  /** The tenant that owns the campaign (absent in single-tenant/dev mode). */
  tenant?: string;
  /** The principal that created it (`tenant/id`). */
  principal?: string;
  /** The creative library every buy gets (absent until one is set). */
  library?: CreativeLibrary;
  /** Delivery summed across the buys and pacing against the plan (absent before the first poll of the buys). */
  delivery?: CampaignDelivery;
  /** How often the campaign has polled its buys, and when last. */
  monitoring?: { polls: number; lastPollAt?: string };
  /** Which run of the workflow this is (continue-as-new increments it). */
  run?: number;
  /** The plan at the governance agent (sync_plans), for campaigns that name one. */
  governance?: GovernancePlanSync;
  /** The budget allocation policy and every move it proposed or made (absent before a campaign starts holding it). */
  budgetAllocation?: BudgetAllocationState;
}

export interface CreativeLibrary {
  /** Increments on every change; a buy is synced up to a version. */
  version: number;
  creatives: CampaignCreative[];
  updatedAt: string;
  updatedBy: string;
}

export interface CampaignDelivery {
  impressions: number;
  spend: number;
  clicks?: number;
  plannedSpend: number;
  pacing: number | null;
  at: string;
}

/** Add creatives to the library (same creative_id replaces) or replace the whole library. */
export interface CreativeLibraryRequest {
  creatives: CampaignCreative[];
  mode?: 'add' | 'replace';
  requestedBy: string;
}

export interface CampaignChangeAnswer {
  sequence: number;
  outcome: CampaignChangeRecord['outcome'];
  committedBudget: number;
  buys: CampaignChangeRecord['buys'];
}

export const campaignStateQuery = defineQuery<CampaignState>('campaignState');
/** Choose the products (and each line's budget) after discovery: recorded with who selected. */
export const selectProductsUpdate = defineUpdate<{ accepted: true; committedBudget: number }, [SelectionRequest]>(
  'selectProducts',
);
/** The approval gate: nothing is spent before it, and it records who approved. */
export const approveCampaignUpdate = defineUpdate<{ accepted: true; buys: string[] }, [ApprovalRequest]>(
  'approveCampaign',
);
/** Add to or replace the creative library: synced to every buy, including buys created later. */
export const setCampaignCreativesUpdate = defineUpdate<
  { version: number; creatives: number },
  [CreativeLibraryRequest]
>('setCampaignCreatives');
/** Pause, resume, cancel (every buy) or one buy's budget (guarded). */
export const changeCampaignUpdate = defineUpdate<CampaignChangeAnswer, [CampaignChangeRequest]>('changeCampaign');
/** Set or change the budget allocation policy (validated; recorded with who changed it). */
export const setBudgetAllocationUpdate = defineUpdate<BudgetAllocationAnswer, [BudgetAllocationRequest]>(
  'setBudgetAllocation',
);
/** Approve or reject the plan of budget moves that waits for a person (propose mode). */
export const decideBudgetMovesUpdate = defineUpdate<BudgetMovesDecisionAnswer, [BudgetMovesDecision]>(
  'decideBudgetMoves',
);

/** Money in the campaign's currency, rounded to cents so sums compare exactly. */
export function cents(amount: number): number {
  return Math.round(amount * 100) / 100;
}

export interface BuyDigest {
  sellerId: string;
  workflowId: string;
  found: boolean;
  status?: string;
  mediaBuyId?: string;
  done?: boolean;
  startTime?: string;
  endTime?: string;
  packages: { packageId: string; productId?: string; budget?: number }[];
  totals?: { impressions?: number; spend?: number; clicks?: number };
  creatives: Record<string, { status?: string; action?: string; error?: string }>;
  failure?: string;
  /** The seller's capabilities workflow: reachable on its last refresh, and its circuit. */
  seller?: { reachable?: boolean; circuit?: string; error?: string };
  availableActions?: string[];
  reportingFrequency?: string;
}

/**
 * The small part of a buy's state the campaign needs: status, flight, packages, delivery totals, creative review.
 * Read by query, so the buy's history is untouched and the campaign's history gets one small activity result.
 */
export function digestOf(sellerId: string, workflowId: string, state: MediaBuyState): BuyDigest {
  return {
    sellerId,
    workflowId,
    found: true,
    status: state.status,
    ...(state.mediaBuyId ? { mediaBuyId: state.mediaBuyId } : {}),
    done: state.done,
    ...(state.startTime ? { startTime: state.startTime } : {}),
    ...(state.endTime ? { endTime: state.endTime } : {}),
    packages: Object.values(state.packages).map((pkg) => ({
      packageId: pkg.packageId,
      ...(pkg.productId ? { productId: pkg.productId } : {}),
      ...(pkg.budget !== undefined ? { budget: pkg.budget } : {}),
    })),
    totals: {
      ...(state.reporting.totals.impressions !== undefined ? { impressions: state.reporting.totals.impressions } : {}),
      ...(state.reporting.totals.spend !== undefined ? { spend: state.reporting.totals.spend } : {}),
      ...(state.reporting.totals.clicks !== undefined ? { clicks: state.reporting.totals.clicks } : {}),
    },
    creatives: Object.fromEntries(
      Object.values(state.creatives).map((creative) => [
        creative.creativeId,
        {
          ...(creative.status ? { status: creative.status } : {}),
          ...(creative.action ? { action: creative.action } : {}),
          ...(creative.errors?.[0] ? { error: `${creative.errors[0].code}: ${creative.errors[0].message}` } : {}),
        },
      ]),
    ),
    ...(state.failure ? { failure: state.failure.message } : {}),
    ...(state.availableActions ? { availableActions: state.availableActions } : {}),
    ...(reportingFrequencyOf(state) ? { reportingFrequency: reportingFrequencyOf(state) } : {}),
  };
}

function reportingFrequencyOf(state: MediaBuyState): string | undefined {
  return state.reporting.registered?.frequency ?? state.reporting.frequency;
}

// ---- budget allocation: the policy, the moves ------------------------------------------------------------------------

/** off: the campaign never moves money; propose: it plans and waits for a person; auto: it applies its plans. */
export const ALLOCATION_MODES = ['off', 'propose', 'auto'] as const;
export type AllocationMode = (typeof ALLOCATION_MODES)[number];

/** What may make the campaign move money: spend against plan, units against plan, a seller down, a buy rejected. */
export const ALLOCATION_SIGNALS = ['pacing', 'delivery_vs_plan', 'seller_down', 'buy_rejected'] as const;
export type AllocationSignal = (typeof ALLOCATION_SIGNALS)[number];

/** The budget allocation policy as the campaign holds it (every default filled in; workflows/campaign/allocation.ts). */
export interface BudgetAllocationPolicy {
  mode: AllocationMode;
  /** propose: how long a plan waits for approval before it lapses (the state it was computed from ages). */
  approvalTimeoutMs: number;
  /** Every seller's share of the campaign budget stays within [minShare, maxShare] unless `sellers` says otherwise. */
  minShare: number;
  maxShare: number;
  /** Per-seller bounds, by seller id (the campaign's agent_id). */
  sellers: Record<string, { minShare?: number; maxShare?: number }>;
  /** The smallest budget change worth a call to a seller (campaign currency, whole cents). */
  minMoveAmount: number;
  /** A seller's budget moves at most once per this many reporting periods (at least one). */
  minPeriodsBetweenMoves: number;
  /** Nothing moves this long before the flight ends. */
  freezeBeforeEndMs: number;
  signals: AllocationSignal[];
  /** A buy whose pacing (or delivery against plan) is below this under-delivers. */
  underDeliveryThreshold: number;
  /** A buy at or above this (on every signal that counts) delivers and may take more money. */
  deliveringThreshold: number;
  /** No delivery judgement before a buy has run this long (the minimum observation window). */
  underDeliveryGraceMs: number;
  /**
   * The reporting period the allocation counts in (moves per seller, the spend floor's margin, a seller down too
   * long). Absent: the coarsest reporting_frequency of the open buys, daily when none says.
   */
  reportingPeriodMs?: number;
}

/** The policy as a buyer writes it: every field optional (the defaults are allocation.ts's DEFAULT_ALLOCATION_POLICY). */
export type BudgetAllocationPolicyInput = Partial<BudgetAllocationPolicy>;

export type AllocationEndpoint = { kind: 'pool' } | { kind: 'seller'; sellerId: string };

export type AllocationReasonCode =
  AllocationSignal | 'above_max_share' | 'below_min_share' | 'delivering' | 'pool' | 'no_taker';

export interface AllocationReason {
  code: AllocationReasonCode;
  sellerId?: string;
  note: string;
}

/**
 * Where a move is. proposed → approved (a person, or auto) → decreasing (the source's update) → confirming (a read
 * of the source) → increasing (the target's update, governed) → applied; or it ends failed (nothing moved),
 * returned (taken from the source, not given: the money is in the pool), rejected or expired (a proposal nobody
 * took), skipped (it no longer held when its turn came), canceled (the campaign was canceled first).
 */
export type BudgetMoveStatus =
  | 'proposed'
  | 'approved'
  | 'decreasing'
  | 'confirming'
  | 'increasing'
  | 'applied'
  | 'returned'
  | 'failed'
  | 'rejected'
  | 'expired'
  | 'skipped'
  | 'canceled';

export interface BudgetMoveStep {
  step: 'decrease' | 'confirm' | 'increase' | 'report';
  sellerId?: string;
  budgetBefore?: number;
  budgetAfter?: number;
  outcome: 'applied' | 'failed' | 'refused' | 'confirmed' | 'unconfirmed' | 'reported';
  at: string;
  error?: { code: string; message: string };
  /** The update ID the buy's change had (the same ID on every retry: a move never changes a buy twice). */
  updateId?: string;
  /** The report_plan_outcome operation. */
  operationId?: string;
}

export interface BudgetMoveRecord {
  /** `<plan>.<n>`: the plan's sequence and the move's place in it. */
  id: string;
  plan: number;
  from: AllocationEndpoint;
  to: AllocationEndpoint;
  /** What the plan moves (campaign currency). */
  amount: number;
  /** What arrived (or left the source, for a move to the pool); set when the move ends. */
  moved?: number;
  /** The reasons in one line (the CLI's "why"). */
  why: string;
  reasons: AllocationReason[];
  status: BudgetMoveStatus;
  mode: 'auto' | 'propose';
  /** Who approved or rejected it (propose mode). */
  decidedBy?: string;
  createdAt: string;
  updatedAt: string;
  finishedAt?: string;
  steps: BudgetMoveStep[];
  error?: { code: string; message: string };
}

export interface BudgetAllocationState {
  policy: BudgetAllocationPolicy;
  /** Every change of the policy, oldest first (bounded): who, when, the mode it set. */
  policyChanges: { at: string; by: string; mode: AllocationMode; reason?: string }[];
  /** The campaign budget on no buy (returned by moves, freed by rejected buys, never allocated). */
  pool: number;
  /** Plans made so far (each move's id starts with its plan's number). */
  plans: number;
  /** The last decision: moves, or why none. */
  lastDecision?: {
    at: string;
    plan?: number;
    outcome: 'moves' | 'none';
    why?: string;
    message: string;
    notes: string[];
  };
  /** A plan waiting for a person (propose mode), and its deadline. */
  proposal?: { plan: number; moves: string[]; since: string; deadline: string };
  /** The most recent moves, oldest first (bounded; `totals` counts them all). */
  moves: BudgetMoveRecord[];
  totals: { moves: number; applied: number; returned: number; failed: number; moved: number };
  /** When a move last changed each seller's budget (the once-per-period rule). */
  lastMoveAt: Record<string, string>;
  /** After a proposal was rejected or lapsed: no new proposal before this (one reporting period). */
  quietUntil?: string;
}

export interface BudgetAllocationRequest {
  policy: BudgetAllocationPolicyInput;
  requestedBy: string;
  reason?: string;
}

export interface BudgetAllocationAnswer {
  policy: BudgetAllocationPolicy;
  /** A proposal that waited under the previous policy and was withdrawn by this change. */
  withdrawn?: number;
}

export interface BudgetMovesDecision {
  /** The plan number the proposal shows (a decision for an older plan is refused). */
  plan: number;
  decision: 'approve' | 'reject';
  decidedBy: string;
  note?: string;
}

export interface BudgetMovesDecisionAnswer {
  plan: number;
  decision: 'approve' | 'reject';
  moves: string[];
}
