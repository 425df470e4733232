/**
 * The discoveries API (mounted by the gateway): one brief to many sellers within a time budget, answered as one
 * ranked catalogue with each seller's outcome (answered, failed, timed_out, skipped) and the sellers' incomplete[].
 *
 *   POST /v1/discoveries      {discovery_key, brief, agent_ids?, time_budget_seconds, params?, preferences?, requested_by?}
 *   GET  /v1/discoveries/:id  status, partial, sellers, catalogue (ranked), proposals, incomplete
 */
import express from 'express';
import type { CampaignClient } from '../client/campaign-client';
import type { DiscoveryState } from '../contract/discovery';
import { callerOf } from './app';
import { createDiscoverySchema, parseRequest, preferencesFrom } from './schemas';

export function discoveryView(id: string, running: boolean, state: DiscoveryState): Record<string, unknown> {
  return {
    id,
    running,
    status: state.status,
    partial: state.partial,
    brief: state.brief,
    // Whose discovery it is (#12): null for discoveries started without an authenticated caller.
    tenant: state.tenant ?? null,
    principal: state.principal ?? null,
    started_at: state.startedAt,
    deadline: state.deadline,
    finished_at: state.finishedAt ?? null,
    sellers: Object.values(state.sellers).map((seller) => ({
      agent_id: seller.sellerId,
      status: seller.status,
      operation_id: seller.operationId ?? null,
      products: seller.productCount ?? null,
      proposals: seller.proposalCount ?? null,
      incomplete: seller.incomplete ?? false,
      error: seller.error ?? null,
      duration_ms: seller.durationMs ?? null,
    })),
    catalogue: state.catalogue.map((entry) => ({
      rank: entry.rank,
      score: entry.score,
      reasons: entry.reasons,
      agent_id: entry.sellerId,
      product_id: entry.productId,
      name: entry.name ?? null,
      delivery_type: entry.deliveryType ?? null,
      channels: entry.channels,
      formats: entry.formats,
      pricing_options: entry.pricingOptions.map((option) => ({
        pricing_option_id: option.pricingOptionId ?? null,
        pricing_model: option.pricingModel ?? null,
        currency: option.currency ?? null,
        price: option.price ?? null,
        fixed: option.fixed,
      })),
      forecast: entry.forecast ?? null,
      brief_relevance: entry.briefRelevance ?? null,
    })),
    proposals: state.proposals.map((proposal) => ({
      agent_id: proposal.sellerId,
      proposal_id: proposal.proposalId,
      name: proposal.name ?? null,
      status: proposal.status ?? null,
      allocations: proposal.allocations,
    })),
    incomplete: state.incomplete.map((entry) => ({ agent_id: entry.sellerId, entries: entry.entries })),
  };
}

export function createDiscoveryRouter(options: { campaigns: CampaignClient }): express.Router {
  const { campaigns } = options;
  const router = express.Router();

  router.post('/v1/discoveries', async (req, res) => {
    const body = parseRequest(createDiscoverySchema, req.body);
    const preferences = preferencesFrom(body.preferences);
    const started = await campaigns.discover(
      {
        discoveryKey: body.discovery_key,
        brief: body.brief,
        ...(body.agent_ids ? { sellerIds: body.agent_ids } : {}),
        timeBudgetMs: body.time_budget_seconds * 1000,
        ...(body.params ? { params: body.params } : {}),
        ...(preferences ? { preferences } : {}),
        ...(body.requested_by ? { requestedBy: body.requested_by } : {}),
      },
      callerOf(req),
    );
    res
      .status(started.created ? 202 : 200)
      .location(`/v1/discoveries/${started.discoveryId}`)
      .json({ id: started.discoveryId, created: started.created });
  });

  router.get('/v1/discoveries/:id', async (req, res) => {
    const id = String(req.params.id);
    const view = await campaigns.discovery(id, callerOf(req));
    res.json(discoveryView(id, view.running, view.state));
  });

  return router;
}
