/**
 * The gateway with #12's protections in front: one call that wraps the app createGateway() built, so api/main.ts can
 * switch it on without api/app.ts knowing. Order matters and is fixed here:
 *
 *   security headers → Host allow-list → malformed paths → this listener's routes only (`serve`) →
 *   /codec (its own auth and CORS) →
 *   /v1: per-address rate limit → authentication + role + tenant → per-principal rate limit → strict JSON body →
 *   the gateway (/healthz and the webhook routes stay outside authentication: webhooks keep their own verification) →
 *   an error handler that answers in the gateway's error shape (503 for Temporal, 4xx for bodies, never HTML).
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { isTemporalUnavailable } from '../../client/temporal-errors';
import { gatewayMetricsOf } from '../../observability/gateway-metrics';
import { errorFields } from '../../observability/logger';
import { requestLoggerOf } from '../../observability/request-logging';
import {
  type RateLimitOptions,
  hostAllowList,
  rateLimit,
  rejectMalformedPath,
  safeJsonBody,
  securityHeaders,
} from '../hardening';
import { type ResourceKind, type RoutePolicy, createAccessControl } from './access-control';
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
  /** Largest JSON body after decompression; default 1 MiB. */
  jsonLimitBytes?: number;
  maxJsonDepth?: number;
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

function notFound(res: Response, req: Request): void {
  res.status(404).json({
    error: { code: 'NOT_FOUND', message: `No route ${req.method} ${req.path.slice(0, 200)} on this listener.` },
  });
}

function listenerFilter(serve: 'api' | 'webhooks'): RequestHandler {
  return (req, res, next) => {
    // Both listeners: health, and the JWKS that verifies our signed notifications.
    if (/^\/(healthz|\.well-known\/jwks\.json)\/?$/i.test(req.path)) return next();
    const webhook = WEBHOOK_PATH.test(req.path);
    if (webhook === (serve === 'webhooks')) return next();
    notFound(res, req);
  };
}

/**
 * Errors that reach the wrapper (a tenant lookup that failed, a body the parser refused) answer in the gateway's
 * error shape: 503 when Temporal did not answer, the parser's own 4xx, and 500 only for what is really a bug.
 */
function errorAnswer(error: unknown, req: Request, res: Response, _next: NextFunction): void {
  if (isTemporalUnavailable(error)) {
    res
      .status(503)
      .set('Retry-After', '5')
      .json({ error: { code: 'TEMPORAL_UNAVAILABLE', message: 'Temporal did not answer in time; retry in 5 s.' } });
    return;
  }
  const status = (error as { status?: unknown }).status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    res.status(status).json({ error: { code: 'INVALID_REQUEST', message: (error as Error).message } });
    return;
  }
  requestLoggerOf(res).error({ ...errorFields(error), status: 500, path: req.path.slice(0, 200) }, 'unexpected error');
  res.status(500).json({ error: { code: 'INTERNAL', message: 'Unexpected error; see the gateway log.' } });
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
    rateLimit({ burst: 200, perSecond: 50, ...options.addressRateLimit, key: (req) => `address:${req.ip}` }),
    createAccessControl({
      authentication: options.authentication,
      tenantOf: options.tenantOf,
      ...(options.policy ? { policy: options.policy } : {}),
      ...(options.onEvent ? { onEvent: options.onEvent } : {}),
    }),
    rateLimit({ burst: 60, perSecond: 20, ...options.principalRateLimit }),
    safeJsonBody({
      ...(options.jsonLimitBytes ? { limitBytes: options.jsonLimitBytes } : {}),
      ...(options.maxJsonDepth ? { maxDepth: options.maxJsonDepth } : {}),
    }),
  ];
  app.use('/v1', ...v1);
  app.use(options.gateway);
  app.use(errorAnswer);
  return app;
}
