/**
 * Governance's public surface in the workflows: the settings a campaign or a standalone media buy
 * carries when it names a governance agent, the record of each check, sync and outcome report kept in the owner's
 * state, and the Update by which a person decides on conditions the orchestrator cannot apply itself. Imported by the
 * workflows, the API, the typed clients and tests. Message names are stable.
 */
import { defineUpdate } from '@temporalio/workflow';
import type { GovernanceCondition, GovernanceFinding, GovernanceVerdict } from '../protocol/governance';

/** A governance agent for a plan: an agent of agents.json that answers sync_plans, check_governance, report_plan_outcome. */
export interface GovernanceSettings {
  /** The governance agent's id in agents.json. */
  sellerId: string;
  /** The plan the checks are against (a campaign's: its key, unless given). */
  planId: string;
  /** Our agent URL as `caller` on check_governance (default: urn:adcp-orchestrator). */
  caller?: string;
  /** How long a person may take to decide on conditions (default 72 h); then the spend is refused. */
  decisionTimeoutMs?: number;
}

/** A campaign's governance agent: its plan is synced at creation, and every buy of the campaign is governed by it. */
export interface CampaignGovernance {
  sellerId: string;
  /** Default: the campaign's key. */
  planId?: string;
  caller?: string;
  decisionTimeoutMs?: number;
  /**
   * More of the buyer's plan for sync_plans (brand, countries, channels, policy_ids, budget.reallocation_threshold,
   * approved_sellers, ...), passed as given; budget total, flight, objectives (the brief) and plan_id are the campaign's.
   */
  plan?: Record<string, unknown>;
}

export const DEFAULT_GOVERNANCE_CALLER = 'urn:adcp-orchestrator';
export const DEFAULT_DECISION_TIMEOUT_MS = 72 * 3_600_000;
/** Conditions → adjust → re-check, at most this many checks per governed action; then it counts as denied. */
export const MAX_GOVERNANCE_ROUNDS = 3;

export type GovernedTool = 'create_media_buy' | 'update_media_buy';

/** One check_governance (intent) and what came of it. */
export interface GovernanceCheckRecord {
  /** What the check governs: `create`, or `change-<sequence>`. */
  action: string;
  tool: GovernedTool;
  round: number;
  operationId: string;
  at: string;
  /** The agent's verdict; `error` when no verdict could be had (the gate stays closed). */
  verdict: GovernanceVerdict | 'error';
  explanation: string;
  checkId?: string;
  expiresAt?: string;
  conditions?: GovernanceCondition[];
  findings?: GovernanceFinding[];
  /** Conditions the orchestrator applied to the payload before re-checking. */
  applied?: 'machine' | 'person';
  /** The signed token, whose presence the view shows (the token itself goes to the seller, not to HTTP readers). */
  hasGovernanceContext?: boolean;
}

/** A person's answer to conditions the orchestrator could not apply itself. */
export interface GovernanceDecisionRequest {
  decision: 'approve' | 'decline';
  decidedBy: string;
  /** The authenticated principal (`tenant/id`), set by the client from the credentials. */
  principal?: string;
  note?: string;
  /** Values for the conditions' fields (field → value), applied to the payload before the re-check. */
  values?: Record<string, unknown>;
}

/** Conditions waiting for a person (visible over HTTP), and the decision once made. */
export interface PendingGovernanceDecision {
  action: string;
  tool: GovernedTool;
  checkId?: string;
  explanation: string;
  conditions: GovernanceCondition[];
  since: string;
  deadline: string;
  decision?: GovernanceDecisionRequest & { at: string };
}

export interface GovernanceOutcomeRecord {
  action: string;
  outcome: 'completed' | 'failed';
  operationId: string;
  at: string;
  checkId?: string;
}

/** The governance part of a media buy's state (present only when the buy names a governance agent). */
export interface GovernanceState {
  sellerId: string;
  planId: string;
  /** The last verdict that let a spend through or stopped it. */
  status: 'checking' | 'awaiting_decision' | 'approved' | 'denied' | 'declined' | 'unavailable';
  checks: GovernanceCheckRecord[];
  checkCount: number;
  pending?: PendingGovernanceDecision;
  /** Decisions made by people, oldest first. */
  decisions: (GovernanceDecisionRequest & { at: string; action: string })[];
  outcomes: GovernanceOutcomeRecord[];
  /** The governance_context of the approved create: carried on later checks of the buy's lifecycle. */
  governanceContext?: string;
}

/** The campaign's plan at the governance agent (sync_plans). */
export interface GovernancePlanSync {
  sellerId: string;
  planId: string;
  operationId: string;
  status: 'synced' | 'failed';
  at: string;
  version?: number;
  error?: { code: string; message: string };
}

export interface GovernanceDecisionAnswer {
  accepted: true;
  action: string;
  decision: GovernanceDecisionRequest['decision'];
}

/** Approve (with the conditions, or values for them) or decline conditions a check set: records who decided. */
export const decideGovernanceUpdate = defineUpdate<GovernanceDecisionAnswer, [GovernanceDecisionRequest]>(
  'decideGovernance',
);
