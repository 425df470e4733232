/**
 * The sellers API (mounted by the gateway): each configured seller with what its capabilities workflow keeps —
 * AdCP versions, tasks and read methods, reporting, idempotency replay window, account model — and whether the last
 * refresh reached it, with the circuit state the refreshing worker saw.
 *
 *   GET  /v1/sellers                          every configured seller
 *   GET  /v1/sellers/:id                      one seller
 *   POST /v1/sellers/:id/capabilities-changed {requested_by, reason?}: refresh now
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import {
  type SellerCapabilitiesClient,
  SellerUnknownError,
  type SellerView,
} from '../client/seller-capabilities-client';
import { isTemporalUnavailable } from '../client/temporal-errors';
import { formatZodIssues } from '../config/zod-format';
import { actorSchema } from '../protocol/requests';

export interface SellerRouterOptions {
  sellers: SellerCapabilitiesClient;
}

const changedSchema = z.object({ requested_by: actorSchema, reason: z.string().min(1).max(2000).optional() }).strict();

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
  const json = express.json({ limit: '64kb' });

  router.get('/v1/sellers', async (_req, res) => {
    const views = await sellers.list();
    res.json({ sellers: views.map(sellerView) });
  });

  router.get('/v1/sellers/:id', async (req, res) => {
    res.json(sellerView(await sellers.view(String(req.params.id))));
  });

  router.post('/v1/sellers/:id/capabilities-changed', json, async (req, res) => {
    const parsed = changedSchema.safeParse(req.body);
    if (!parsed.success) {
      res.status(400).json({
        error: {
          code: 'INVALID_REQUEST',
          message: formatZodIssues(parsed.error.issues),
          field: parsed.error.issues[0]?.path.join('.') || undefined,
        },
      });
      return;
    }
    await sellers.capabilitiesChanged(String(req.params.id), parsed.data.requested_by, parsed.data.reason);
    res.status(202).json({ status: 'accepted' });
  });

  router.use('/v1/sellers', (error: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (error instanceof SellerUnknownError) {
      res.status(404).json({ error: { code: 'SELLER_NOT_FOUND', message: error.message } });
      return;
    }
    if (isTemporalUnavailable(error)) {
      res.setHeader('Retry-After', '5');
      res.status(503).json({
        error: { code: 'TEMPORAL_UNAVAILABLE', message: 'Temporal is not reachable right now; retry in 5 s.' },
      });
      return;
    }
    if ((error as { type?: string })?.type === 'entity.parse.failed') {
      res.status(400).json({ error: { code: 'MALFORMED_JSON', message: 'The body is not valid JSON.' } });
      return;
    }
    next(error);
  });
  return router;
}
