/**
 * The campaigns API (mounted by the gateway). It validates and forwards; the campaign's workflow holds the state,
 * runs its discovery, waits for the selection and the approval, starts the buys and guards the budget.
 *
 *   POST /v1/campaigns                   {campaign_key, brief, total_budget, currency?, flight, agent_ids?, time_budget_seconds,
 *                                         discovery_params?, preferences?, allocation?, buy_params?, requested_by}
 *   GET  /v1/campaigns/:id               phase, discovery summary, selection, approval, buys (live status, creative sync and
 *                                         review, format coverage, delivery and pacing), budget, delivery, changes, alerts
 *   POST /v1/campaigns/:id/selection     {lines: [{agent_id, product_id, pricing_option_id?, budget}], proposals?: [{agent_id,
 *                                         proposal_id, budget}], selected_by, idempotency_key?}
 *   POST /v1/campaigns/:id/approval      {approved_by, note?, idempotency_key?}
 *   POST /v1/campaigns/:id/changes       {kind: pause|resume|cancel|budget, requested_by, reason?, agent_id?, budget?, idempotency_key?}
 *   POST /v1/campaigns/:id/budget-allocation  {policy: {mode?, min_share?, max_share?, agents?, min_move_amount?, ...},
 *                                         requested_by, reason?, idempotency_key?}: the allocation policy, validated, recorded
 *   POST /v1/campaigns/:id/budget-moves/decision  {plan, decision: approve|reject, decided_by, note?, idempotency_key?}
 *   GET  /v1/campaigns/:id/creatives     the creative library, and per seller: sync, review per creative, format coverage
 *   POST /v1/campaigns/:id/creatives     {creatives: [{creative_id, format_id: {agent_url, id}, ...}], mode?: add|replace,
 *                                         requested_by, idempotency_key?}: synced to every buy (and to buys made later)
 */
import express from 'express';
import type { z } from 'zod';
import { type CampaignClient, type CampaignView, CampaignRequestError } from '../client/campaign-client';
import type {
  BudgetAllocationPolicyInput,
  BuyDelivery,
  CampaignBuy,
  CampaignBuyProposal,
  CampaignCreative,
} from '../contract/campaign';
import { validateAllocationPolicy } from '../workflows/campaign/allocation';
import { callerOf } from './app';
import { budgetAllocationView, policyView } from './budget-allocation-view';
import {
  type budgetAllocationSchema,
  budgetAllocationChangeSchema,
  budgetMovesDecisionSchema,
  campaignApprovalSchema,
  campaignChangeSchema,
  campaignCreativesSchema,
  campaignSelectionSchema,
  createCampaignSchema,
  parseRequest,
  preferencesFrom,
} from './schemas';

const HOUR_MS = 3_600_000;

function policyFrom(body: z.infer<typeof budgetAllocationSchema>): BudgetAllocationPolicyInput {
  const hours = (value: number | undefined) => (value === undefined ? undefined : Math.round(value * HOUR_MS));
  const fields: BudgetAllocationPolicyInput = {
    mode: body.mode,
    approvalTimeoutMs: hours(body.approval_timeout_hours),
    minShare: body.min_share,
    maxShare: body.max_share,
    sellers: body.agents
      ? Object.fromEntries(
          Object.entries(body.agents).map(([id, bounds]) => [
            id,
            {
              ...(bounds.min_share !== undefined ? { minShare: bounds.min_share } : {}),
              ...(bounds.max_share !== undefined ? { maxShare: bounds.max_share } : {}),
            },
          ]),
        )
      : undefined,
    minMoveAmount: body.min_move_amount,
    minPeriodsBetweenMoves: body.min_periods_between_moves,
    freezeBeforeEndMs: hours(body.freeze_before_end_hours),
    signals: body.signals,
    underDeliveryThreshold: body.under_delivery_threshold,
    deliveringThreshold: body.delivering_threshold,
    underDeliveryGraceMs: hours(body.under_delivery_grace_hours),
    reportingPeriodMs: hours(body.reporting_period_hours),
  };
  return Object.fromEntries(
    Object.entries(fields).filter(([, value]) => value !== undefined),
  ) as BudgetAllocationPolicyInput;
}

/** A policy field as the wire names it: `sellers.s1.maxShare` is `agents.s1.max_share`, `freezeBeforeEndMs` hours. */
function wireField(field: string): string {
  const snake = (name: string) =>
    name.replace(/Ms\b/, 'Hours').replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
  const [head, ...rest] = field.split('.');
  if (head === 'sellers') return ['agents', ...rest.map((part, index) => (index === 0 ? part : snake(part)))].join('.');
  return [snake(head!), ...rest].join('.');
}

/** The policy the campaign would refuse is refused here, before any Temporal call, naming the wire field. */
function checkedPolicy(body: z.infer<typeof budgetAllocationSchema>, at: string): BudgetAllocationPolicyInput {
  const policy = policyFrom(body);
  const verdict = validateAllocationPolicy(policy);
  if (verdict.ok) return policy;
  const errors = verdict.errors.map((error) => `${at}.${wireField(error.field)} ${error.message}`);
  throw new CampaignRequestError(
    `${at}.${wireField(verdict.errors[0]!.field)}`,
    `The allocation policy is invalid: ${errors.join('; ')}.`,
  );
}

export function campaignView(view: CampaignView): Record<string, unknown> {
  const { state } = view;
  return {
    id: view.campaignId,
    running: view.running,
    campaign_key: state.campaignKey,
    // Whose campaign it is (#12): null for campaigns started without an authenticated caller.
    tenant: state.tenant ?? null,
    principal: state.principal ?? null,
    phase: state.phase,
    brief: state.brief,
    total_budget: state.totalBudget,
    currency: state.currency ?? null,
    committed_budget: state.committedBudget,
    flight: { start_time: state.flight.startTime, end_time: state.flight.endTime },
    discovery_id: state.discoveryId,
    discovery: state.discovery
      ? {
          status: state.discovery.status,
          partial: state.discovery.partial,
          products: state.discovery.products,
          sellers: Object.values(state.discovery.sellers).map((seller) => ({
            agent_id: seller.sellerId,
            status: seller.status,
            products: seller.productCount ?? null,
            error: seller.error ?? null,
          })),
          incomplete: state.discovery.incomplete.map((entry) => ({ agent_id: entry.sellerId, entries: entry.entries })),
        }
      : null,
    selection: state.selection
      ? {
          selected_by: state.selection.selectedBy,
          at: state.selection.at,
          by_policy: state.selection.byPolicy ?? false,
          lines: state.selection.lines.map((line) => ({
            agent_id: line.sellerId,
            product_id: line.productId,
            pricing_option_id: line.pricingOptionId ?? null,
            budget: line.budget,
          })),
          proposals: (state.selection.proposals ?? []).map((entry) => ({
            agent_id: entry.sellerId,
            proposal_id: entry.proposalId,
            budget: entry.budget,
          })),
        }
      : null,
    approval: state.approval
      ? { approved_by: state.approval.approvedBy, at: state.approval.at, note: state.approval.note ?? null }
      : null,
    buys: view.buys.map((buy) => ({
      agent_id: buy.sellerId,
      id: buy.workflowId,
      status: buy.status ?? null,
      media_buy_id: buy.mediaBuyId ?? null,
      committed_budget: buy.committedBudget,
      failure: buy.failure ?? null,
      governance: buy.governance ?? null,
      proposal: proposalView(state.buys[buy.sellerId]?.proposal),
      ...buyFollowView(state.buys[buy.sellerId]),
    })),
    library: state.library
      ? {
          version: state.library.version,
          creatives: state.library.creatives.map((creative) => ({
            creative_id: creative.creative_id,
            format_id: creative.format_id,
          })),
          updated_at: state.library.updatedAt,
          updated_by: state.library.updatedBy,
        }
      : null,
    delivery: state.delivery ? deliveryView(state.delivery) : null,
    monitoring: state.monitoring
      ? { looks: state.monitoring.polls, last_look_at: state.monitoring.lastPollAt ?? null }
      : null,
    run: state.run ?? 1,
    governance: state.governance
      ? {
          agent_id: state.governance.sellerId,
          plan_id: state.governance.planId,
          plan_status: state.governance.status,
          plan_version: state.governance.version ?? null,
          synced_at: state.governance.at,
          operation_id: state.governance.operationId,
          error: state.governance.error ?? null,
        }
      : null,
    changes: state.changes.map((change) => ({
      sequence: change.sequence,
      kind: change.kind,
      requested_by: change.requestedBy,
      agent_id: change.sellerId ?? null,
      budget: change.budget ?? null,
      outcome: change.outcome,
      buys: change.buys,
      requested_at: change.requestedAt,
      finished_at: change.finishedAt ?? null,
    })),
    budget_allocation: state.budgetAllocation ? budgetAllocationView(state.budgetAllocation) : null,
    alerts: state.alerts.map((entry) => ({
      at: entry.at,
      kind: entry.kind,
      agent_id: entry.sellerId,
      creative_id: entry.creativeId ?? null,
      note: entry.note,
      open: !entry.clearedAt,
      cleared_at: entry.clearedAt ?? null,
    })),
    started_at: state.startedAt,
    updated_at: state.updatedAt,
  };
}

function deliveryView(delivery: BuyDelivery) {
  return {
    impressions: delivery.impressions,
    spend: delivery.spend,
    clicks: delivery.clicks ?? null,
    planned_spend: delivery.plannedSpend,
    pacing: delivery.pacing,
    at: delivery.at,
  };
}

/** What the campaign follows of one buy: its library sync, each creative's review, format coverage, delivery. */
function buyFollowView(buy: CampaignBuy | undefined) {
  return {
    creative_sync: buy?.creativeSync
      ? {
          version: buy.creativeSync.version,
          outcome: buy.creativeSync.outcome,
          at: buy.creativeSync.at,
          error: buy.creativeSync.error ?? null,
        }
      : null,
    creatives: Object.entries(buy?.creatives ?? {}).map(([creativeId, review]) => ({
      creative_id: creativeId,
      status: review.status ?? null,
      action: review.action ?? null,
      error: review.error ?? null,
    })),
    coverage: buy?.coverage ?? null,
    delivery: buy?.delivery ? deliveryView(buy.delivery) : null,
  };
}

/** A buy by proposal as the campaign view shows it: what was accepted, finalized, bought, and each requote. */
function proposalView(proposal: CampaignBuyProposal | undefined) {
  if (!proposal) return null;
  return {
    proposal_id: proposal.proposalId,
    status: proposal.status ?? null,
    budget: proposal.budget,
    bought_proposal_id: proposal.boughtProposalId ?? null,
    expires_at: proposal.expiresAt ?? null,
    finalized: proposal.finalized.map((entry) => ({
      from: entry.from,
      to: entry.to ?? null,
      operation_id: entry.operationId,
      at: entry.at,
      error: entry.error ?? null,
    })),
    requotes: proposal.requotes.map((entry) => ({
      proposal_id: entry.proposalId,
      code: entry.code,
      message: entry.message,
      buy_id: entry.buyWorkflowId,
      at: entry.at,
    })),
    needs_person: proposal.needsPerson ?? null,
  };
}

export interface CampaignRouterOptions {
  campaigns: CampaignClient;
}

export function createCampaignRouter(options: CampaignRouterOptions): express.Router {
  const { campaigns } = options;
  const router = express.Router();

  router.post('/v1/campaigns', async (req, res) => {
    const body = parseRequest(createCampaignSchema, req.body);
    const preferences = preferencesFrom(body.preferences);
    const created = await campaigns.create(
      {
        campaignKey: body.campaign_key,
        brief: body.brief,
        totalBudget: body.total_budget,
        ...(body.currency ? { currency: body.currency } : {}),
        flight: { startTime: body.flight.start_time, endTime: body.flight.end_time },
        ...(body.agent_ids ? { sellerIds: body.agent_ids } : {}),
        timeBudgetMs: body.time_budget_seconds * 1000,
        ...(body.discovery_params ? { discoveryParams: body.discovery_params } : {}),
        ...(preferences ? { preferences } : {}),
        ...(body.allocation
          ? {
              allocation: {
                kind: body.allocation.kind,
                ...(body.allocation.max_sellers ? { maxSellers: body.allocation.max_sellers } : {}),
              },
            }
          : {}),
        ...(body.buy_params ? { buyParams: body.buy_params } : {}),
        requestedBy: body.requested_by,
        ...(body.creatives ? { creatives: body.creatives as CampaignCreative[] } : {}),
        ...(body.budget_allocation
          ? { budgetAllocation: checkedPolicy(body.budget_allocation, 'budget_allocation') }
          : {}),
        ...(body.monitoring
          ? {
              monitoring: {
                ...(body.monitoring.interval_seconds !== undefined
                  ? { intervalMs: body.monitoring.interval_seconds * 1000 }
                  : {}),
                ...(body.monitoring.under_delivery_threshold !== undefined
                  ? { underDeliveryThreshold: body.monitoring.under_delivery_threshold }
                  : {}),
                ...(body.monitoring.under_delivery_grace_hours !== undefined
                  ? { underDeliveryGraceMs: body.monitoring.under_delivery_grace_hours * 3_600_000 }
                  : {}),
              },
            }
          : {}),
        ...(body.governance
          ? {
              governance: {
                sellerId: body.governance.agent_id,
                ...(body.governance.plan_id ? { planId: body.governance.plan_id } : {}),
                ...(body.governance.caller ? { caller: body.governance.caller } : {}),
                ...(body.governance.decision_timeout_hours !== undefined
                  ? { decisionTimeoutMs: body.governance.decision_timeout_hours * 3_600_000 }
                  : {}),
                ...(body.governance.plan ? { plan: body.governance.plan } : {}),
              },
            }
          : {}),
      },
      callerOf(req),
    );
    res
      .status(created.created ? 202 : 200)
      .location(`/v1/campaigns/${created.campaignId}`)
      .json({ id: created.campaignId, created: created.created });
  });

  router.get('/v1/campaigns/:id', async (req, res) => {
    res.json(campaignView(await campaigns.view(String(req.params.id), callerOf(req))));
  });

  router.post('/v1/campaigns/:id/selection', async (req, res) => {
    const body = parseRequest(campaignSelectionSchema, req.body);
    const answer = await campaigns.select(
      String(req.params.id),
      {
        selectedBy: body.selected_by,
        lines: body.lines.map((line) => ({
          sellerId: line.agent_id,
          productId: line.product_id,
          ...(line.pricing_option_id ? { pricingOptionId: line.pricing_option_id } : {}),
          budget: line.budget,
          ...(line.format_ids ? { formatIds: line.format_ids } : {}),
        })),
        ...(body.proposals
          ? {
              proposals: body.proposals.map((entry) => ({
                sellerId: entry.agent_id,
                proposalId: entry.proposal_id,
                budget: entry.budget,
              })),
            }
          : {}),
      },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.json({ accepted: answer.accepted, committed_budget: answer.committedBudget });
  });

  router.post('/v1/campaigns/:id/approval', async (req, res) => {
    const body = parseRequest(campaignApprovalSchema, req.body);
    const answer = await campaigns.approve(
      String(req.params.id),
      { approvedBy: body.approved_by, ...(body.note ? { note: body.note } : {}) },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.json({ accepted: answer.accepted, buys: answer.buys });
  });

  router.post('/v1/campaigns/:id/budget-allocation', async (req, res) => {
    const body = parseRequest(budgetAllocationChangeSchema, req.body);
    const answer = await campaigns.setBudgetAllocation(
      String(req.params.id),
      {
        policy: checkedPolicy(body.policy, 'policy'),
        requestedBy: body.requested_by,
        ...(body.reason ? { reason: body.reason } : {}),
      },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.json({ policy: policyView(answer.policy), withdrawn_plan: answer.withdrawn ?? null });
  });

  router.post('/v1/campaigns/:id/budget-moves/decision', async (req, res) => {
    const body = parseRequest(budgetMovesDecisionSchema, req.body);
    const answer = await campaigns.decideBudgetMoves(
      String(req.params.id),
      {
        plan: body.plan,
        decision: body.decision,
        decidedBy: body.decided_by,
        ...(body.note ? { note: body.note } : {}),
      },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.json({ plan: answer.plan, decision: answer.decision, moves: answer.moves });
  });

  router.post('/v1/campaigns/:id/changes', async (req, res) => {
    const body = parseRequest(campaignChangeSchema, req.body);
    const answer = await campaigns.change(
      String(req.params.id),
      {
        kind: body.kind,
        requestedBy: body.requested_by,
        ...(body.reason ? { reason: body.reason } : {}),
        ...(body.agent_id ? { sellerId: body.agent_id } : {}),
        ...(body.budget !== undefined ? { budget: body.budget } : {}),
      },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.status(answer.outcome === 'failed' ? 409 : 200).json({
      sequence: answer.sequence,
      outcome: answer.outcome,
      committed_budget: answer.committedBudget,
      buys: answer.buys,
    });
  });

  router.get('/v1/campaigns/:id/creatives', async (req, res) => {
    const view = campaignView(await campaigns.view(String(req.params.id), callerOf(req)));
    res.json({
      id: view.id,
      library: view.library,
      sellers: (view.buys as Record<string, unknown>[]).map((buy) => ({
        agent_id: buy.agent_id,
        media_buy_id: buy.media_buy_id,
        creative_sync: buy.creative_sync,
        creatives: buy.creatives,
        coverage: buy.coverage,
      })),
    });
  });

  router.post('/v1/campaigns/:id/creatives', async (req, res) => {
    const body = parseRequest(campaignCreativesSchema, req.body);
    const answer = await campaigns.setCreatives(
      String(req.params.id),
      { creatives: body.creatives as CampaignCreative[], mode: body.mode, requestedBy: body.requested_by },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.json({ version: answer.version, creatives: answer.creatives });
  });

  return router;
}
