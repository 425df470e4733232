/**
 * The gateway with #12's protections in front: one call that wraps the app createGateway() built, so api/main.ts can
 * switch it on without api/app.ts knowing. Order matters and is fixed here:
 *
 *   security headers → Host allow-list → malformed paths → /codec (its own auth and CORS) →
 *   /v1: per-address rate limit → authentication + role + tenant → per-principal rate limit → strict JSON body →
 *   the gateway (/healthz and the webhook routes stay outside authentication: webhooks keep their own verification).
 */
import express, { type RequestHandler } from 'express';
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
}

export function createSecureGateway(options: SecureGatewayOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Behind a proxy the lead sets `trust proxy` so `req.ip` (the per-address limit) is the client's.
  app.set('trust proxy', options.gateway.get('trust proxy'));
  app.use(securityHeaders({ hsts: options.hsts ?? false }));
  if (options.allowedHosts) app.use(hostAllowList(options.allowedHosts));
  app.use(rejectMalformedPath());
  if (options.codecServer) app.use('/codec', options.codecServer);
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
  return app;
}
