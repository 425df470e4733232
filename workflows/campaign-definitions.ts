/**
 * The campaign workflow's public surface: one campaign = one workflow that runs a discovery, waits for a selection
 * (a person's Update, or an allocation policy) and an approval (an Update recording who approved), then starts one
 * `adcpMediaBuy` child per chosen seller and holds the whole campaign: pause, resume and cancel fan out to every buy,
 * and a budget guard keeps the sum of committed budgets within the campaign's. Imported by the workflow, the
 * campaigns API, the typed client and tests. Message names are stable.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { RankingPreferences } from '../protocol/catalogue';
import type { DiscoveryState } from './discovery-definitions';

export const CAMPAIGN_WORKFLOW_TYPE = 'adcpCampaign';

export function campaignWorkflowId(campaignKey: string): string {
  return `adcp-campaign-${campaignKey}`;
}

export const CAMPAIGN_ID_PATTERN = /^adcp-campaign-[A-Za-z0-9_.:-]{1,200}$/;

/** The buy key of one seller's buy in a campaign: the same campaign and seller always name the same buy. */
export function campaignBuyKey(campaignKey: string, agentId: string): string {
  return `${campaignKey}.${agentId}`;
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
  agentIds: string[];
  skipped?: { agentId: string; reason: string }[];
  timeBudgetMs: number;
  /** More get_products arguments (brand, account, filters, ...). */
  discoveryParams?: Record<string, unknown>;
  preferences?: RankingPreferences;
  /** Without a policy the campaign waits for a selection Update after discovery. */
  allocation?: AllocationPolicy;
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
   * The tenant that owns the campaign (#12; absent in single-tenant/dev mode): recorded in state, and carried by its
   * discovery and its buys (their AdcpTenant, their seller credentials). The campaign key is then already scoped by it.
   */
  tenant?: string;
  /** The authenticated principal that created it (`tenant/id`). */
  principal?: string;
}

export interface SelectionLine {
  agentId: string;
  productId: string;
  pricingOptionId?: string;
  budget: number;
  formatIds?: Record<string, unknown>[];
}

export interface SelectionRequest {
  lines: SelectionLine[];
  selectedBy: string;
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
  agentId?: string;
  budget?: number;
}

export type BuyOutcome = 'applied' | 'failed' | 'refused' | 'not_needed';

export interface CampaignChangeRecord {
  sequence: number;
  kind: CampaignChangeKind;
  requestedBy: string;
  reason?: string;
  agentId?: string;
  budget?: number;
  requestedAt: string;
  outcome: 'queued' | 'running' | 'applied' | 'partial' | 'failed';
  /** What each buy answered. */
  buys: Record<string, { outcome: BuyOutcome; status?: string; error?: { code: string; message: string } }>;
  finishedAt?: string;
}

export interface CampaignBuy {
  agentId: string;
  buyKey: string;
  workflowId: string;
  lines: SelectionLine[];
  /** The budget in effect at the seller (what the guard counts). */
  committedBudget: number;
  /** A raise accepted and not yet applied: counted by the guard until it is applied or refused. */
  pendingBudget?: number;
  startedAt?: string;
  /** The buy's status when its workflow ended (rejected, canceled, completed, create_failed ...). */
  finalStatus?: string;
  finalMessage?: string;
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
  alerts: { at: string; kind: 'buy_rejected' | 'buy_failed' | 'seller_unavailable'; agentId: string; note: string }[];
  startedAt: string;
  updatedAt: string;
  /** The tenant that owns the campaign (absent in single-tenant/dev mode). */
  tenant?: string;
  /** The principal that created it (`tenant/id`). */
  principal?: string;
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
/** Pause, resume, cancel (every buy) or one buy's budget (guarded). */
export const changeCampaignUpdate = defineUpdate<CampaignChangeAnswer, [CampaignChangeRequest]>('changeCampaign');
