/**
 * The sellers API (mounted by the gateway): each configured seller with what its capabilities workflow keeps —
 * AdCP versions, tasks and read methods, reporting, idempotency replay window, account model — and whether the last
 * refresh reached it, with the circuit state the refreshing worker saw.
 *
 *   GET  /v1/sellers                          every configured seller
 *   GET  /v1/sellers/:id                      one seller
 *   POST /v1/sellers/:id/capabilities-changed {requested_by, reason?}: refresh now
 */
import express from 'express';
import type { SellerCapabilitiesClient, SellerView } from '../client/seller-capabilities-client';
import { capabilitiesChangedSchema, parseRequest } from './schemas';

export interface SellerRouterOptions {
  sellers: SellerCapabilitiesClient;
}

/** snake_case view of one seller; no token values, only whether a token is configured. */
export function sellerView(view: SellerView): Record<string, unknown> {
  const { agent, state } = view;
  const capabilities = state?.capabilities;
  return {
    id: agent.id,
    name: agent.name ?? null,
    url: agent.url,
    protocol: agent.protocol,
    configured_adcp_version: agent.adcp_version ?? '3',
    reachable: state?.reachable ?? null,
    last_checked_at: state?.lastCheckedAt ?? null,
    last_error: state?.lastError ?? null,
    consecutive_failures: state?.consecutiveFailures ?? 0,
    latency_ms: state?.latencyMs ?? null,
    circuit: state?.circuit
      ? {
          state: state.circuit.state,
          consecutive_failures: state.circuit.consecutiveFailures ?? null,
          retry_at: state.circuit.retryAt ?? null,
          observed_at: state.circuit.observedAt,
        }
      : null,
    capabilities: capabilities
      ? {
          adcp_versions: capabilities.adcpVersions,
          wire_version: capabilities.wireVersion,
          supported_protocols: capabilities.supportedProtocols,
          specialisms: capabilities.specialisms,
          tasks: capabilities.tasks,
          tasks_source: capabilities.tasksSource,
          read_methods: capabilities.readMethods,
          reporting: {
            webhooks: capabilities.reporting.webhooks,
            delivery_methods: capabilities.reporting.deliveryMethods,
            frequencies: capabilities.reporting.frequencies,
            metrics: capabilities.reporting.metrics,
          },
          idempotency: {
            supported: capabilities.idempotency.supported,
            replay_ttl_seconds: capabilities.idempotency.replayTtlSeconds ?? null,
          },
          account: {
            require_operator_auth: capabilities.account.requireOperatorAuth ?? null,
            supported_billing: capabilities.account.supportedBilling,
            required_for_products: capabilities.account.requiredForProducts ?? null,
            sandbox: capabilities.account.sandbox ?? null,
          },
          supports_proposals: capabilities.supportsProposals ?? null,
          supported_pricing_models: capabilities.supportedPricingModels,
        }
      : null,
    capabilities_at: state?.capabilitiesAt ?? null,
    refreshes: state?.refreshes ?? 0,
    next_refresh_at: state?.nextRefreshAt ?? null,
    live: view.live,
  };
}

export function createSellerRouter(options: SellerRouterOptions): express.Router {
  const { sellers } = options;
  const router = express.Router();
  router.get('/v1/sellers', async (_req, res) => {
    const views = await sellers.list();
    res.json({ sellers: views.map(sellerView) });
  });

  router.get('/v1/sellers/:id', async (req, res) => {
    res.json(sellerView(await sellers.view(String(req.params.id))));
  });

  router.post('/v1/sellers/:id/capabilities-changed', async (req, res) => {
    const body = parseRequest(capabilitiesChangedSchema, req.body);
    await sellers.capabilitiesChanged(String(req.params.id), body.requested_by, body.reason);
    res.status(202).json({ status: 'accepted' });
  });

  return router;
}
