/**
 * The gateway with #12's protections in front: one call that wraps the app createGateway() built, so api/main.ts can
 * switch it on without api/app.ts knowing. Order matters and is fixed here:
 *
 *   security headers (helmet) → Host allow-list → malformed paths → this listener's routes only (`serve`) →
 *   /codec (its own auth and CORS) →
 *   /v1: per-address rate limit → authentication → per-principal rate limit → role + tenant →
 *   the gateway (its one body parser; /healthz and the webhook routes stay outside authentication: webhooks keep
 *   their own verification) → the problem handler (503 for Temporal and anything unexpected, 4xx for the caller's
 *   faults, never a 500).
 *
 * The per-principal limit counts before the tenant lookup, so requests naming made-up IDs are limited like others.
 */
import express, { type RequestHandler } from 'express';
import { gatewayMetricsOf } from '../../observability/gateway-metrics';
import {
  type RateLimitOptions,
  addressKey,
  hostAllowList,
  rateLimit,
  rejectMalformedPath,
  securityHeaders,
} from '../hardening';
import { problemHandler, refuse } from '../problems';
import { type ResourceKind, type RoutePolicy, createAuthorization } from './access-control';
import type { AuthEvent, Authentication, TenantOf } from './middleware';

export interface SecureGatewayOptions {
  /** The app createGateway() returned. */
  gateway: express.Express;
  authentication: Authentication;
  tenantOf: Partial<Record<ResourceKind, TenantOf>>;
  /** Host header values served (see hostAllowList); undefined: no check (only for tests). */
  allowedHosts?: string[];
  /** createCodecServer(...), served at /codec. */
  codecServer?: express.Router;
  /** Per principal; default 20 requests/s, bursts of 60. */
  principalRateLimit?: Omit<RateLimitOptions, 'key'>;
  /** Per client address, before authentication; default 50 requests/s, bursts of 200. */
  addressRateLimit?: Omit<RateLimitOptions, 'key'>;
  /** Strict-Transport-Security, when the gateway is served over HTTPS. */
  hsts?: boolean;
  policy?: RoutePolicy[];
  onEvent?: (event: AuthEvent) => void;
  /**
   * Which routes this listener serves: "all" (default), "api" (/v1, /codec, /healthz) or "webhooks" (/webhooks/*,
   * /healthz). Anything else answers 404 there, so the webhook address exposed to sellers does not expose /v1.
   */
  serve?: 'all' | 'api' | 'webhooks';
}

/** Paths a listener of each kind serves (besides /healthz, which both serve). */
const WEBHOOK_PATH = /^\/webhooks(\/|$)/i;

function listenerFilter(serve: 'api' | 'webhooks'): RequestHandler {
  return (req, res, next) => {
    // Both listeners: health, and the JWKS that verifies our signed notifications.
    if (/^\/(healthz|\.well-known\/jwks\.json)\/?$/i.test(req.path)) return next();
    const webhook = WEBHOOK_PATH.test(req.path);
    if (webhook === (serve === 'webhooks')) return next();
    refuse(res, 404, 'NOT_FOUND', `No route ${req.method} ${req.path.slice(0, 200)} on this listener.`);
  };
}

export function createSecureGateway(options: SecureGatewayOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Behind a proxy the lead sets `trust proxy` so `req.ip` (the per-address limit) is the client's.
  app.set('trust proxy', options.gateway.get('trust proxy'));
  // Counted first, so the API error rate includes what the protections below refuse (401, 403, 421, 429, 413).
  const metrics = gatewayMetricsOf(options.gateway);
  if (metrics) app.use(metrics.middleware());
  app.use(securityHeaders({ hsts: options.hsts ?? false }));
  if (options.allowedHosts) app.use(hostAllowList(options.allowedHosts));
  app.use(rejectMalformedPath());
  const serve = options.serve ?? 'all';
  if (serve !== 'all') app.use(listenerFilter(serve));
  if (options.codecServer && serve !== 'webhooks') app.use('/codec', options.codecServer);
  const v1: RequestHandler[] = [
    rateLimit({ burst: 200, perSecond: 50, ...options.addressRateLimit, key: addressKey }),
    options.authentication.authenticate,
    rateLimit({ burst: 60, perSecond: 20, ...options.principalRateLimit }),
    createAuthorization({
      tenantOf: options.tenantOf,
      ...(options.policy ? { policy: options.policy } : {}),
      ...(options.onEvent ? { onEvent: options.onEvent } : {}),
    }),
  ];
  app.use('/v1', ...v1);
  app.use(options.gateway);
  app.use(problemHandler());
  return app;
}
