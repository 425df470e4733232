/**
 * Hardening of the gateway's HTTP surface (#12 item 5), as self-contained pieces:
 *
 * - `rejectMalformedPath`: a path whose percent-encoding does not decode (`/v1/operations/%ZZ`) answers 400 before
 *   the router tries to decode it (which throws and used to answer 500).
 * - `hostAllowList`: the `Host` header must name this gateway, so a browser page on another site that re-points its
 *   own DNS name at 127.0.0.1 (DNS rebinding) cannot reach the API.
 * - `securityHeaders`: nosniff, no framing, no referrer, a CSP that allows nothing (the API serves JSON only).
 * - `rateLimit`: a token bucket per principal (per client address before authentication), 429 with Retry-After.
 * - `safeJsonBody`: reads and parses JSON bodies itself: UTF-8 only (415 otherwise), gzip/deflate decoded with the
 *   size limit applied after decompression, garbage compression 400, nesting over a limit 400 found by a linear scan
 *   before any recursive code, numbers JSON cannot carry (1e309) 400.
 * - `configureServer` / `createHardenedServer`: timeouts for slow headers and bodies, idle keep-alive, a connection cap.
 *
 * Every refusal answers the gateway's error shape `{error: {code, message}}` itself, so no error handler can turn it
 * into a 500.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

function refuse(
  res: Response,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  res.status(status).set(headers).json({ error: { code, message } });
}

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

export function securityHeaders(options: { hsts?: boolean } = {}): RequestHandler {
  // Built once: every request sets the same headers (plain setHeader; none of them is Content-Type).
  const headers: [string, string][] = [
    ['X-Content-Type-Options', 'nosniff'],
    ['X-Frame-Options', 'DENY'],
    ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
    ['Referrer-Policy', 'no-referrer'],
    ['Cross-Origin-Opener-Policy', 'same-origin'],
    ['Cache-Control', 'no-store'],
    ...(options.hsts ? [['Strict-Transport-Security', 'max-age=31536000; includeSubDomains'] as [string, string]] : []),
  ];
  return (_req, res, next) => {
    for (const [name, value] of headers) res.setHeader(name, value);
    next();
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Rate limits

export interface RateLimitOptions {
  /** Requests a principal may make in a burst. */
  burst: number;
  /** Sustained requests per second. */
  perSecond: number;
  /** The bucket a request counts against; default: the principal (`tenant/id`), else the client address. */
  key?: (req: Request) => string;
  now?: () => number;
  /** Buckets kept at most; full (idle) buckets are dropped first. */
  maxBuckets?: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

export function rateLimit(options: RateLimitOptions): RequestHandler {
  const now = options.now ?? Date.now;
  const maxBuckets = options.maxBuckets ?? 10_000;
  const keyOf =
    options.key ??
    ((req: Request) => (req.principal ? `principal:${req.principal.tenant}/${req.principal.id}` : `address:${req.ip}`));
  const buckets = new Map<string, Bucket>();

  const refill = (bucket: Bucket, at: number): void => {
    bucket.tokens = Math.min(options.burst, bucket.tokens + ((at - bucket.at) / 1000) * options.perSecond);
    bucket.at = at;
  };

  return (req, res, next) => {
    const at = now();
    const key = keyOf(req);
    let bucket = buckets.get(key);
    if (!bucket) {
      if (buckets.size >= maxBuckets) {
        for (const [candidate, value] of buckets) {
          refill(value, at);
          if (value.tokens >= options.burst) buckets.delete(candidate);
        }
        // Still full: every bucket is in use; drop the oldest (a Map iterates in insertion order).
        if (buckets.size >= maxBuckets) buckets.delete(buckets.keys().next().value!);
      }
      bucket = { tokens: options.burst, at };
      buckets.set(key, bucket);
    } else {
      refill(bucket, at);
    }
    res.set('RateLimit-Policy', `${options.burst};w=${Math.ceil(options.burst / options.perSecond)}`);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      next();
      return;
    }
    const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / options.perSecond));
    refuse(
      res,
      429,
      'RATE_LIMITED',
      `Too many requests from ${req.principal ? `principal "${req.principal.id}"` : 'this address'}: at most ${options.perSecond}/s (bursts of ${options.burst}); retry in ${retryAfter} s.`,
      { 'Retry-After': String(retryAfter) },
    );
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// JSON bodies

export const DEFAULT_MAX_JSON_DEPTH = 64;

/**
 * Whether the JSON text nests objects and arrays deeper than `maxDepth`. One pass, no recursion, no allocation, so a
 * body nested 100,000 levels costs a scan, not a stack. Brackets inside strings do not count.
 */
export function jsonNestingExceeds(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

export class JsonBodyError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Parses JSON text under the gateway's rules: nesting at most `maxDepth`, every number finite. Usable on its own
 * (e.g. by the webhook receiver on the verified raw body before any recursive code).
 */
export function parseJsonStrict(text: string, maxDepth = DEFAULT_MAX_JSON_DEPTH): unknown {
  if (jsonNestingExceeds(text, maxDepth))
    throw new JsonBodyError(
      400,
      'NESTING_TOO_DEEP',
      `The JSON nests objects and arrays deeper than ${maxDepth} levels.`,
    );
  let badNumber: string | undefined;
  let value: unknown;
  try {
    value = JSON.parse(text, function (key, item: unknown) {
      if (typeof item === 'number' && !Number.isFinite(item)) badNumber ??= key;
      return item;
    });
  } catch (error) {
    throw new JsonBodyError(400, 'MALFORMED_JSON', `The body is not valid JSON: ${(error as Error).message}.`);
  }
  if (badNumber !== undefined)
    throw new JsonBodyError(
      400,
      'NUMBER_OUT_OF_RANGE',
      `The number at "${badNumber}" is outside what JSON numbers can carry (a double); send a smaller number, or a string.`,
    );
  return value;
}

export interface SafeJsonBodyOptions {
  /** Largest body in bytes, after decompression; default 1 MiB (the gateway's limit). */
  limitBytes?: number;
  maxDepth?: number;
}

function isJson(req: Request): boolean {
  return Boolean(req.is(['application/json', 'application/*+json']));
}

function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Reads `stream` up to `limitBytes`. Over the limit it stops keeping bytes but lets the request drain, so the answer
 * can still be written on the socket; a decompressor is destroyed so a zip bomb stops inflating. */
function readLimited(stream: Readable, limitBytes: number, req: Request): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    stream.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limitBytes) {
        over = true;
        chunks.length = 0;
        if (stream !== req) {
          req.unpipe();
          stream.destroy();
        }
        req.resume();
        reject(new JsonBodyError(413, 'PAYLOAD_TOO_LARGE', `The body is larger than ${limitBytes} bytes.`));
        return;
      }
      chunks.push(chunk);
    });
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('error', reject);
    // A client that goes away mid-body (or is cut off by the request timeout) ends the read too.
    req.once('close', () => {
      if (!req.complete) reject(new Error('the request was aborted'));
    });
  });
}

/**
 * Parses JSON request bodies (leaves other types alone, so the app's own 400/415 for them still apply). Mount before
 * the app's `express.json()`, which then sees the body already read and skips.
 */
export function safeJsonBody(options: SafeJsonBodyOptions = {}): RequestHandler {
  const limitBytes = options.limitBytes ?? 1024 * 1024;
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_JSON_DEPTH;
  const utf8 = new TextDecoder('utf-8', { fatal: true });

  return async (req: Request, res: Response, next: NextFunction) => {
    if (!hasBody(req) || !isJson(req)) return next();
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limitBytes) {
      refuse(res, 413, 'PAYLOAD_TOO_LARGE', `The body is larger than ${limitBytes} bytes.`);
      req.resume();
      return;
    }
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(req.headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (charset && charset !== 'utf-8' && charset !== 'utf8') {
      refuse(
        res,
        415,
        'UNSUPPORTED_CHARSET',
        `The body's charset "${charset.slice(0, 40)}" is not supported; send UTF-8.`,
      );
      req.resume();
      return;
    }
    const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
    let stream: Readable = req;
    if (encoding === 'gzip' || encoding === 'x-gzip') stream = req.pipe(createGunzip());
    else if (encoding === 'deflate') stream = req.pipe(createInflate());
    else if (encoding !== 'identity') {
      refuse(
        res,
        415,
        'UNSUPPORTED_CONTENT_ENCODING',
        `The body's Content-Encoding "${encoding.slice(0, 40)}" is not supported; send identity, gzip or deflate.`,
      );
      req.resume();
      return;
    }
    let body: Buffer;
    try {
      body = await readLimited(stream, limitBytes, req);
    } catch (error) {
      req.resume();
      if (error instanceof JsonBodyError) refuse(res, error.status, error.code, error.message);
      else if (stream !== req)
        refuse(res, 400, 'MALFORMED_BODY', `The body is not valid ${encoding} data: ${(error as Error).message}.`);
      else refuse(res, 400, 'MALFORMED_BODY', `The body could not be read: ${(error as Error).message}.`);
      return;
    }
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      refuse(res, 400, 'MALFORMED_BODY', 'The body is not valid UTF-8.');
      return;
    }
    try {
      req.body = parseJsonStrict(text, maxDepth);
    } catch (error) {
      if (error instanceof JsonBodyError) {
        refuse(res, error.status, error.code, error.message);
        return;
      }
      throw error;
    }
    // body-parser (express.json) skips a request already read; older parsers look at this flag.
    (req as Request & { _body?: boolean })._body = true;
    next();
  };
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
