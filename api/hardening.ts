/**
 * Hardening of the gateway's HTTP surface, as self-contained pieces:
 *
 * - `rejectMalformedPath`: a path whose percent-encoding does not decode (`/v1/operations/%ZZ`) answers 400 before
 *   the router tries to decode it.
 * - `hostAllowList`: the `Host` header must name this gateway, so a browser page on another site that re-points its
 *   own DNS name at 127.0.0.1 (DNS rebinding) cannot reach the API.
 * - `securityHeaders`: helmet, set for a JSON API: nosniff, no framing, no referrer, a CSP that allows nothing.
 * - `rateLimit`: express-rate-limit per principal (per client address before authentication), 429 with Retry-After.
 * - `configureServer` / `createHardenedServer`: timeouts for slow headers and bodies, idle keep-alive, a connection cap.
 *
 * Bodies are api/body.ts's; every refusal is a problem (api/problems.ts).
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Request, RequestHandler } from 'express';
import { ipKeyGenerator, rateLimit as expressRateLimit } from 'express-rate-limit';
import helmet from 'helmet';
import { refuse } from './problems';

// ---------------------------------------------------------------------------------------------------------------------
// Paths

export function rejectMalformedPath(): RequestHandler {
  return (req, res, next) => {
    try {
      decodeURIComponent(req.path);
    } catch {
      refuse(
        res,
        400,
        'MALFORMED_PATH',
        'The path has malformed percent-encoding ("%" must be followed by two hex digits of a UTF-8 sequence).',
      );
      return;
    }
    next();
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Host

/** Loopback names the gateway answers to by default (with any port). */
export const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '[::1]'];

const PORT_SUFFIX = /:\d+$/;

/**
 * 421 unless `Host` is one of `hosts`. An entry without a port matches any port (`gateway.example.com`); one with a
 * port matches only that (`gateway.example.com:8443`). Comparison ignores case.
 */
export function hostAllowList(hosts: string[]): RequestHandler {
  const exact = new Set<string>();
  const anyPort = new Set<string>();
  for (const host of hosts.map((entry) => entry.trim().toLowerCase()).filter(Boolean)) {
    if (/:\d+$/.test(host)) exact.add(host);
    else anyPort.add(host);
  }
  return (req, res, next) => {
    const host = (req.headers.host ?? '').trim().toLowerCase();
    if (host && (exact.has(host) || anyPort.has(host.replace(PORT_SUFFIX, '')))) return next();
    refuse(
      res,
      421,
      'HOST_NOT_ALLOWED',
      `This gateway does not answer for Host "${host.slice(0, 200)}". Use one of its configured names (ADCP_GATEWAY_ALLOWED_HOSTS).`,
    );
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Headers

/** helmet for an API that answers JSON only: nothing may be framed, embedded, scripted or sent a referrer. */
export function securityHeaders(options: { hsts?: boolean } = {}): RequestHandler {
  const headers = helmet({
    contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    crossOriginOpenerPolicy: { policy: 'same-origin' },
    strictTransportSecurity: options.hsts ? { maxAge: 31_536_000, includeSubDomains: true } : false,
  });
  return (req, res, next) => {
    // Answers about operations change with every call: no cache keeps them (routes that may be cached say so).
    res.setHeader('Cache-Control', 'no-store');
    headers(req, res, next);
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Rate limits

export interface RateLimitOptions {
  /** Requests a principal may make in a burst: the limit per window of `burst / perSecond` seconds. */
  burst: number;
  /** Sustained requests per second. */
  perSecond: number;
  /** The bucket a request counts against; default: the principal (`tenant/id`), else the client address. */
  key?: (req: Request) => string;
}

/** The per-address bucket of a request: its address (an IPv6 address by its /56). */
export function addressKey(req: Request): string {
  return `address:${ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown')}`;
}

export function rateLimit(options: RateLimitOptions): RequestHandler {
  const windowMs = Math.max(1, Math.ceil((options.burst / options.perSecond) * 1000));
  const keyOf =
    options.key ??
    ((req: Request) => (req.principal ? `principal:${req.principal.tenant}/${req.principal.id}` : addressKey(req)));
  return expressRateLimit({
    windowMs,
    limit: options.burst,
    standardHeaders: 'draft-6',
    legacyHeaders: false,
    keyGenerator: (req) => keyOf(req),
    // The address key goes through ipKeyGenerator (IPv6 /56); X-Forwarded-For is the proxy setting's to trust.
    validate: { xForwardedForHeader: false, keyGeneratorIpFallback: false },
    handler: (req, res) => {
      const reset = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const retryAfter = Math.max(1, Math.ceil(((reset?.getTime() ?? Date.now() + windowMs) - Date.now()) / 1000));
      refuse(
        res,
        429,
        'RATE_LIMITED',
        `Too many requests from ${req.principal ? `principal "${req.principal.id}"` : 'this address'}: at most ${options.burst} in ${windowMs / 1000} s (${options.perSecond}/s); retry in ${retryAfter} s.`,
        { headers: { 'Retry-After': String(retryAfter) } },
      );
    },
  });
}

// ---------------------------------------------------------------------------------------------------------------------
// Server limits

export interface ServerLimits {
  /** Time to receive the whole header block; default 10 s (slowloris). */
  headersTimeoutMs?: number;
  /** Time to receive the whole request, body included; default 30 s (slow bodies). */
  requestTimeoutMs?: number;
  /** Idle time of a kept-alive connection between requests; default 5 s. */
  keepAliveTimeoutMs?: number;
  /** Inactivity on a socket before it is destroyed; default 120 s (a reconcile may wait 60 s for its report). */
  socketTimeoutMs?: number;
  /** Open connections at most; more are refused by the kernel accept path (Node closes them); default 1024. */
  maxConnections?: number;
  /** Header lines per request at most; default 100. */
  maxHeadersCount?: number;
  /** Requests per kept-alive connection at most; default 1000. */
  maxRequestsPerSocket?: number;
}

const DEFAULT_LIMITS: Required<ServerLimits> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  socketTimeoutMs: 120_000,
  maxConnections: 1024,
  maxHeadersCount: 100,
  maxRequestsPerSocket: 1000,
};

/** Applies the limits to an existing server (e.g. the one `app.listen` returned). */
export function configureServer(server: http.Server, limits: ServerLimits = {}): http.Server {
  const value = { ...DEFAULT_LIMITS, ...limits };
  server.headersTimeout = value.headersTimeoutMs;
  server.requestTimeout = value.requestTimeoutMs;
  server.keepAliveTimeout = value.keepAliveTimeoutMs;
  server.maxHeadersCount = value.maxHeadersCount;
  server.maxRequestsPerSocket = value.maxRequestsPerSocket;
  server.maxConnections = value.maxConnections;
  server.setTimeout(value.socketTimeoutMs, (socket: Socket) => socket.destroy());
  return server;
}

/**
 * An http.Server for `app` with the limits applied. Prefer it to `app.listen`: Node checks the header and request
 * timeouts every `connectionsCheckingInterval`, which can only be set at creation (here a quarter of the header
 * timeout, at most 1 s, instead of Node's 30 s).
 */
export function createHardenedServer(app: http.RequestListener, limits: ServerLimits = {}): http.Server {
  const headersTimeoutMs = limits.headersTimeoutMs ?? DEFAULT_LIMITS.headersTimeoutMs;
  const server = http.createServer(
    { connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeoutMs / 4))) },
    app,
  );
  return configureServer(server, limits);
}
