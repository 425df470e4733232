/**
 * Authenticates seller webhooks before anything reads them (CONVENTIONS: the API validates, authenticates and
 * forwards). One entry point, three schemes, chosen per seller by config/webhook-auth.ts:
 *   - rfc9421: AdCP 3.x webhook signing (adcp-protocol.md §11), verified by @adcp/sdk's verifier. This module
 *     supplies what the SDK leaves to the receiver: per-seller keys (inline or a cached `jwks_uri`),
 *     revocation, a bounded replay store, and a raw body that is never re-serialised.
 *   - hmac-sha256: the legacy rc.2 `X-ADCP-Signature` over `<ts>.<raw body>` (§3.5), with per-seller compat.
 *   - bearer: the legacy rc.2 `Authorization: Bearer` (§3.5); no body integrity.
 * Rejections carry a stable reason code (the conformance vectors' `webhook_signature_*` codes for RFC 9421)
 * for the response and metrics, and a `logDetail` that is for server logs only.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import {
  HttpsRevocationStore,
  RequestSignatureError,
  WebhookSignatureError,
  verifyWebhookSignature,
  type AdcpJsonWebKey,
  type JwksResolver,
  type ReplayInsertResult,
  type ReplayStore,
  type RevocationStore,
} from '@adcp/sdk/signing/server';
import {
  type WebhookAuthConfig,
  type WebhookAuthScheme,
  WebhookAuthConfigError,
  resolveWebhookCredentials,
} from '../config/webhook-auth';

/** The request as it reached the gateway. `url` is the full target URI the seller addressed (scheme, host, path, query). */
export interface WebhookRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** The body bytes exactly as received. */
  rawBody: Uint8Array;
}

/** RFC 9421 rejection codes, as the AdCP webhook-signing conformance vectors name them. */
export const RFC9421_REJECTION_REASONS = [
  'webhook_signature_header_malformed',
  'webhook_signature_params_incomplete',
  'webhook_signature_tag_invalid',
  'webhook_signature_alg_not_allowed',
  'webhook_signature_window_invalid',
  'webhook_signature_components_incomplete',
  'webhook_target_uri_malformed',
  'webhook_signature_key_unknown',
  'webhook_signature_key_purpose_invalid',
  'webhook_signature_key_revoked',
  'webhook_signature_revocation_stale',
  'webhook_signature_rate_abuse',
  'webhook_signature_invalid',
  'webhook_signature_digest_mismatch',
  'webhook_signature_replayed',
] as const;

export const HMAC_REJECTION_REASONS = [
  'hmac_signature_missing',
  'hmac_signature_malformed',
  'hmac_timestamp_invalid',
  'hmac_timestamp_out_of_window',
  'hmac_signature_invalid',
] as const;

export const BEARER_REJECTION_REASONS = ['bearer_token_missing', 'bearer_token_invalid'] as const;

/** Failures on our side or in the body's encoding, not the seller's credentials. */
export const OTHER_REJECTION_REASONS = [
  'body_not_utf8',
  'jwks_unavailable',
  'verifier_misconfigured',
  'verifier_error',
] as const;

export type WebhookRejectionReason =
  | (typeof RFC9421_REJECTION_REASONS)[number]
  | (typeof HMAC_REJECTION_REASONS)[number]
  | (typeof BEARER_REJECTION_REASONS)[number]
  | (typeof OTHER_REJECTION_REASONS)[number];

export interface WebhookVerified {
  ok: true;
  scheme: WebhookAuthScheme;
  /** The RFC 9421 `keyid` that signed the request. */
  keyId?: string;
}

export interface WebhookRejected {
  ok: false;
  scheme: WebhookAuthScheme;
  reason: WebhookRejectionReason;
  /**
   * 401 for anything the seller's credentials got wrong; 400 for a body that is not UTF-8; 503 when the seller's
   * JWKS cannot be fetched (a retry may succeed); 500 when our own config or code is at fault.
   */
  status: 400 | 401 | 500 | 503;
  /**
   * For RFC 9421 401s: `Signature error="<reason>"`. @adcp/sdk's webhook emitter reads it to stop retrying a
   * delivery that would fail identically (adcp#2423).
   */
  wwwAuthenticate?: string;
  /** What exactly failed, for server logs only: never send it to the caller. */
  logDetail: string;
}

export type WebhookVerification = WebhookVerified | WebhookRejected;

/** The legacy HMAC window (§3.5): reject when |now − timestamp| > 300 s. */
export const HMAC_TIMESTAMP_TOLERANCE_SECONDS = 300;

export type {
  ReplayStore as WebhookReplayStore,
  RevocationStore as WebhookRevocationStore,
} from '@adcp/sdk/signing/server';

// ─── @target-uri canonicalisation ─────────────────────────────────────────────────────────────────────────────

/** The URL cannot be a signed webhook target (no host, bare or zoned IPv6, not http(s), unparseable). */
export class TargetUriError extends Error {
  override readonly name = 'TargetUriError';
  readonly code = 'webhook_target_uri_malformed';
}

export interface CanonicalTarget {
  targetUri: string;
  authority: string;
}

const ABSOLUTE_URI = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)[^?#]*(\?[^#]*)?/s;

function uppercasePercentEncoding(input: string): string {
  return input.replace(/%([0-9a-fA-F]{2})/g, (_match, hex: string) => `%${hex.toUpperCase()}`);
}

/** RFC 3986 §6.2.2.2: percent-encoded unreserved characters (ALPHA, DIGIT, - . _ ~) are decoded. */
function decodeUnreservedPercentEncoding(input: string): string {
  return input.replace(/%([0-9a-fA-F]{2})/g, (match, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return /^[A-Za-z0-9\-._~]$/.test(char) ? char : match;
  });
}

/**
 * `@target-uri` and `@authority` per the AdCP RFC 9421 profile (target-uri-canonicalization.json): scheme and
 * host lower-cased, IDN hosts as A-labels, userinfo, default port and fragment dropped, dot segments removed
 * (consecutive slashes kept), path percent-encoding upper-cased with unreserved characters decoded, query kept
 * byte for byte (including a bare trailing `?`).
 */
export function canonicalizeTargetUri(rawUrl: string): CanonicalTarget {
  const match = ABSOLUTE_URI.exec(rawUrl);
  if (!match) throw new TargetUriError('Expected an absolute http(s) URI with an authority.');
  const [, scheme, authority, query] = match;
  if (!/^https?$/i.test(scheme)) throw new TargetUriError(`Expected an http or https URI, got scheme "${scheme}".`);
  // WHATWG URL parsing turns "\" into "/" for http(s); a signer that did not would disagree with us.
  if (rawUrl.includes('\\')) throw new TargetUriError('The URI contains a backslash.');
  const hostAndPort = authority.slice(authority.lastIndexOf('@') + 1);
  // `https:///p` parses as host "p" under WHATWG rules; RFC 3986 says the authority is empty.
  if (hostAndPort === '' || hostAndPort.startsWith(':')) throw new TargetUriError('The URI authority has no host.');
  let url: URL;
  try {
    // Rejects unbracketed IPv6, a missing "]", and RFC 6874 zone identifiers; converts IDN hosts to A-labels.
    url = new URL(rawUrl);
  } catch {
    throw new TargetUriError('The URI does not parse (check the host, IPv6 brackets and port).');
  }
  const path = uppercasePercentEncoding(decodeUnreservedPercentEncoding(url.pathname));
  return { targetUri: `${url.protocol}//${url.host}${path}${query ?? ''}`, authority: url.host };
}

// ─── Replay store ──────────────────────────────────────────────────────────────────────────────────────────────

export interface BoundedReplayStoreOptions {
  /** Nonces kept across all keys and endpoints; when full (after dropping expired ones) inserts fail closed. */
  maxEntries?: number;
  /** Nonces kept per (keyid, @target-uri): the per-key cap behind `webhook_signature_rate_abuse` (step 9a). */
  maxEntriesPerScope?: number;
}

interface ReplayEntry {
  expiresAt: number;
  scopeKey: string;
}

/**
 * The RFC 9421 nonce cache for one gateway process: TTL-based and bounded in total, unlike the SDK's
 * InMemoryReplayStore, which keeps a bucket per (keyid, target URI) forever; every operation has its own URL.
 * Implements the SDK's ReplayStore, so a store shared between gateway replicas (Redis, the SDK's
 * PostgresReplayStore) can replace it without other changes.
 */
export class BoundedReplayStore implements ReplayStore {
  private readonly entries = new Map<string, ReplayEntry>();
  private readonly perScope = new Map<string, number>();
  private readonly maxEntries: number;
  private readonly maxEntriesPerScope: number;

  constructor(options: BoundedReplayStoreOptions = {}) {
    this.maxEntries = options.maxEntries ?? 200_000;
    this.maxEntriesPerScope = options.maxEntriesPerScope ?? 10_000;
  }

  get size(): number {
    return this.entries.size;
  }

  async has(keyid: string, scope: string, nonce: string, now: number): Promise<boolean> {
    const entry = this.entries.get(entryKey(keyid, scope, nonce));
    return entry !== undefined && entry.expiresAt > now;
  }

  async isCapHit(keyid: string, scope: string, now: number): Promise<boolean> {
    this.sweep(now, false);
    return (this.perScope.get(scopeKey(keyid, scope)) ?? 0) >= this.maxEntriesPerScope;
  }

  async insert(
    keyid: string,
    scope: string,
    nonce: string,
    ttlSeconds: number,
    now: number,
  ): Promise<ReplayInsertResult> {
    this.sweep(now, false);
    const key = entryKey(keyid, scope, nonce);
    const existing = this.entries.get(key);
    if (existing && existing.expiresAt > now) return 'replayed';
    if (existing) this.remove(key, existing);
    const scoped = scopeKey(keyid, scope);
    if ((this.perScope.get(scoped) ?? 0) >= this.maxEntriesPerScope) return 'rate_abuse';
    if (this.entries.size >= this.maxEntries) {
      this.sweep(now, true);
      // Evicting a live nonce would reopen a replay window, so a full cache refuses instead.
      if (this.entries.size >= this.maxEntries) return 'rate_abuse';
    }
    this.entries.set(key, { expiresAt: now + ttlSeconds, scopeKey: scoped });
    this.perScope.set(scoped, (this.perScope.get(scoped) ?? 0) + 1);
    return 'ok';
  }

  /** Entries are in insertion order and TTLs are near-equal, so the cheap sweep stops at the first live entry. */
  private sweep(now: number, full: boolean): void {
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt <= now) this.remove(key, entry);
      else if (!full) break;
    }
  }

  private remove(key: string, entry: ReplayEntry): void {
    this.entries.delete(key);
    const remaining = (this.perScope.get(entry.scopeKey) ?? 1) - 1;
    if (remaining > 0) this.perScope.set(entry.scopeKey, remaining);
    else this.perScope.delete(entry.scopeKey);
  }
}

// NUL never occurs in a JWK kid, a URL or an sf-string nonce, so joining with it is unambiguous.
function scopeKey(keyid: string, scope: string): string {
  return `${keyid}\u0000${scope}`;
}

function entryKey(keyid: string, scope: string, nonce: string): string {
  return `${keyid}\u0000${scope}\u0000${nonce}`;
}

/** Two sellers may publish the same kid; their nonces must not collide in a shared store. */
function partitionedBySeller(store: ReplayStore, sellerId: string): ReplayStore {
  const keyFor = (keyid: string) => `${sellerId}\u0000${keyid}`;
  return {
    has: (keyid, scope, nonce, now) => store.has(keyFor(keyid), scope, nonce, now),
    isCapHit: (keyid, scope, now) => store.isCapHit(keyFor(keyid), scope, now),
    insert: (keyid, scope, nonce, ttl, now) => store.insert(keyFor(keyid), scope, nonce, ttl, now),
  };
}

// ─── Seller keys ───────────────────────────────────────────────────────────────────────────────────────────────

/** The seller's JWKS could not be fetched and no usable copy is cached. Retrying later may succeed. */
export class JwksUnavailableError extends Error {
  override readonly name = 'JwksUnavailableError';
}

/** Fetches a JWKS document and returns the parsed JSON; the result is validated before use. */
export type FetchJwks = (uri: string) => Promise<unknown>;

const MAX_JWKS_BYTES = 256 * 1024;

async function fetchJwksOverHttp(uri: string): Promise<unknown> {
  const response = await fetch(uri, {
    headers: { accept: 'application/jwk-set+json, application/json' },
    redirect: 'error',
    signal: AbortSignal.timeout(5_000),
  });
  if (!response.ok) throw new Error(`GET ${uri} answered HTTP ${response.status}.`);
  const text = await response.text();
  if (text.length > MAX_JWKS_BYTES) throw new Error(`GET ${uri} returned more than ${MAX_JWKS_BYTES} bytes.`);
  return JSON.parse(text);
}

/** Keys with a kid and kty; anything else in a fetched document (other key types, junk) is ignored, not fatal. */
function keysOf(document: unknown, uri: string): Map<string, AdcpJsonWebKey> {
  const keys = document && typeof document === 'object' ? (document as { keys?: unknown }).keys : undefined;
  if (!Array.isArray(keys)) throw new Error(`${uri} is not a JWKS: expected an object with a "keys" array.`);
  const byKid = new Map<string, AdcpJsonWebKey>();
  for (const key of keys) {
    if (key && typeof key === 'object' && typeof key.kid === 'string' && typeof key.kty === 'string') {
      byKid.set(key.kid, key as AdcpJsonWebKey);
    }
  }
  return byKid;
}

interface RemoteJwksTiming {
  now: () => number;
  ttlMs: number;
  refreshCooldownMs: number;
  maxStaleMs: number;
}

/**
 * One seller's `jwks_uri`, cached. An unknown kid triggers a refetch (key rotation), at most once per cooldown
 * so a stream of made-up kids cannot turn the gateway against the seller. A failed fetch keeps serving the last
 * good keys for `maxStaleMs` past their TTL.
 */
class RemoteJwks implements JwksResolver {
  private keys: Map<string, AdcpJsonWebKey> | undefined;
  private fetchedAt = Number.NEGATIVE_INFINITY;
  private lastAttempt = Number.NEGATIVE_INFINITY;
  private lastError = 'never fetched';
  private inFlight: Promise<void> | undefined;

  constructor(
    private readonly uri: string,
    private readonly fetchJwks: FetchJwks,
    private readonly timing: RemoteJwksTiming,
  ) {}

  async resolve(keyid: string): Promise<AdcpJsonWebKey | null> {
    const { now, ttlMs, refreshCooldownMs, maxStaleMs } = this.timing;
    const fresh = this.keys !== undefined && now() - this.fetchedAt < ttlMs;
    if (fresh && this.keys!.has(keyid)) return this.keys!.get(keyid)!;
    if (this.inFlight) await this.inFlight;
    else if (now() - this.lastAttempt >= refreshCooldownMs) await this.refresh();
    if (!this.keys || now() - this.fetchedAt >= ttlMs + maxStaleMs) {
      throw new JwksUnavailableError(`No usable JWKS from ${this.uri}: ${this.lastError}`);
    }
    return this.keys.get(keyid) ?? null;
  }

  private refresh(): Promise<void> {
    this.inFlight ??= this.load().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async load(): Promise<void> {
    this.lastAttempt = this.timing.now();
    try {
      this.keys = keysOf(await this.fetchJwks(this.uri), this.uri);
      this.fetchedAt = this.timing.now();
    } catch (err) {
      this.lastError = err instanceof Error ? err.message : String(err);
    }
  }
}

class SellerJwks implements JwksResolver {
  constructor(
    private readonly inline: ReadonlyMap<string, AdcpJsonWebKey>,
    private readonly remote: JwksResolver | undefined,
  ) {}

  async resolve(keyid: string): Promise<AdcpJsonWebKey | null> {
    return this.inline.get(keyid) ?? (this.remote ? this.remote.resolve(keyid) : null);
  }
}

/** Config revocations first (they hold even when the list is stale), then the seller's revocation list. */
class SellerRevocations implements RevocationStore {
  constructor(
    private readonly revokedKeyIds: ReadonlySet<string>,
    private readonly list: RevocationStore | undefined,
  ) {}

  async isRevoked(keyid: string): Promise<boolean> {
    if (this.revokedKeyIds.has(keyid)) return true;
    if (!this.list) return false;
    try {
      return await this.list.isRevoked(keyid);
    } catch (err) {
      if (err instanceof RequestSignatureError) throw err;
      // No list at all is as bad as a stale one: fail closed with the spec's code.
      throw new RequestSignatureError(
        'request_signature_revocation_stale',
        9,
        `Revocation list unavailable: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }
}

// ─── The authenticator ─────────────────────────────────────────────────────────────────────────────────────────

export interface WebhookAuthenticatorOptions {
  /** RFC 9421 nonce cache. Defaults to a BoundedReplayStore; gateway replicas must share one store. */
  replayStore?: ReplayStore;
  /** Epoch milliseconds. */
  now?: () => number;
  /** Fetches a seller's `jwks_uri`. Defaults to a plain HTTPS GET (5 s timeout, no redirects, 256 KiB cap). */
  fetchJwks?: FetchJwks;
  /** How long a fetched JWKS is trusted before it is refetched. Default 10 minutes. */
  jwksCacheTtlMs?: number;
  /** Minimum time between fetches of one `jwks_uri`, whatever triggers them. Default 30 s (the AdCP floor). */
  jwksRefreshCooldownMs?: number;
  /** How long past its TTL a JWKS is still used while refetches fail. Default 1 hour. */
  jwksMaxStaleMs?: number;
  /** Let `revocation_list_uri` use plain http and private addresses (development only). Default false. */
  allowPrivateNetworkFetch?: boolean;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const RFC9421_REASONS: ReadonlySet<string> = new Set(RFC9421_REJECTION_REASONS);

export class WebhookAuthenticator {
  private readonly replayStore: ReplayStore;
  private readonly now: () => number;
  private readonly fetchJwks: FetchJwks;
  private readonly jwksTiming: RemoteJwksTiming;
  private readonly allowPrivateNetworkFetch: boolean;
  private readonly remoteJwks = new Map<string, RemoteJwks>();
  private readonly revocationLists = new Map<string, HttpsRevocationStore>();
  private readonly inlineKeys = new WeakMap<WebhookAuthConfig, ReadonlyMap<string, AdcpJsonWebKey>>();

  constructor(options: WebhookAuthenticatorOptions = {}) {
    this.replayStore = options.replayStore ?? new BoundedReplayStore();
    this.now = options.now ?? Date.now;
    this.fetchJwks = options.fetchJwks ?? fetchJwksOverHttp;
    this.jwksTiming = {
      now: this.now,
      ttlMs: options.jwksCacheTtlMs ?? 10 * 60_000,
      refreshCooldownMs: options.jwksRefreshCooldownMs ?? 30_000,
      maxStaleMs: options.jwksMaxStaleMs ?? 60 * 60_000,
    };
    this.allowPrivateNetworkFetch = options.allowPrivateNetworkFetch ?? false;
  }

  /** Never throws: every outcome, including our own faults, is a WebhookVerification. */
  async verify(
    request: WebhookRequest,
    sellerId: string,
    config: WebhookAuthConfig,
    env?: Readonly<Record<string, string | undefined>>,
  ): Promise<WebhookVerification> {
    try {
      switch (config.scheme) {
        case 'rfc9421':
          return await this.verifyRfc9421(request, sellerId, config);
        case 'hmac-sha256':
          return this.verifyHmac(request, sellerId, config, env);
        case 'bearer':
          return this.verifyBearer(request, sellerId, config, env);
        default:
          return reject(
            config.scheme,
            'verifier_misconfigured',
            `Unknown webhook scheme ${JSON.stringify(config.scheme)} for seller ${sellerId}.`,
          );
      }
    } catch (err) {
      const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      if (err instanceof WebhookAuthConfigError) return reject(config.scheme, 'verifier_misconfigured', detail);
      return reject(config.scheme, 'verifier_error', detail);
    }
  }

  private async verifyRfc9421(
    request: WebhookRequest,
    sellerId: string,
    config: WebhookAuthConfig,
  ): Promise<WebhookVerification> {
    let target: CanonicalTarget;
    try {
      target = canonicalizeTargetUri(request.url);
    } catch (err) {
      return reject('rfc9421', 'webhook_target_uri_malformed', err instanceof Error ? err.message : String(err));
    }
    let body: string;
    try {
      // The SDK hashes the body as UTF-8 text; strict decoding guarantees those are exactly the received bytes.
      body = STRICT_UTF8.decode(request.rawBody);
    } catch {
      return reject('rfc9421', 'body_not_utf8', 'The webhook body is not valid UTF-8, so it cannot be JSON.');
    }
    try {
      const verified = await verifyWebhookSignature(
        { method: request.method, url: target.targetUri, headers: request.headers, body },
        {
          jwks: this.jwksFor(sellerId, config),
          replayStore: partitionedBySeller(this.replayStore, sellerId),
          revocationStore: this.revocationsFor(sellerId, config),
          now: () => Math.floor(this.now() / 1000),
        },
      );
      return { ok: true, scheme: 'rfc9421', keyId: verified.keyid };
    } catch (err) {
      return rfc9421Rejection(err);
    }
  }

  private jwksFor(sellerId: string, config: WebhookAuthConfig): JwksResolver {
    let inline = this.inlineKeys.get(config);
    if (!inline) {
      inline = new Map((config.jwks?.keys ?? []).map((key) => [key.kid, key as AdcpJsonWebKey]));
      this.inlineKeys.set(config, inline);
    }
    let remote: RemoteJwks | undefined;
    if (config.jwks_uri) {
      const cacheKey = `${sellerId}\u0000${config.jwks_uri}`;
      remote = this.remoteJwks.get(cacheKey);
      if (!remote) {
        remote = new RemoteJwks(config.jwks_uri, this.fetchJwks, this.jwksTiming);
        this.remoteJwks.set(cacheKey, remote);
      }
    }
    return new SellerJwks(inline, remote);
  }

  private revocationsFor(sellerId: string, config: WebhookAuthConfig): RevocationStore {
    let list: HttpsRevocationStore | undefined;
    if (config.revocation_list_uri) {
      const cacheKey = `${sellerId}\u0000${config.revocation_list_uri}`;
      list = this.revocationLists.get(cacheKey);
      if (!list) {
        list = new HttpsRevocationStore(config.revocation_list_uri, {
          allowPrivateIp: this.allowPrivateNetworkFetch,
          now: () => Math.floor(this.now() / 1000),
        });
        this.revocationLists.set(cacheKey, list);
      }
    }
    return new SellerRevocations(new Set(config.revoked_key_ids ?? []), list);
  }

  private verifyHmac(
    request: WebhookRequest,
    sellerId: string,
    config: WebhookAuthConfig,
    env: Readonly<Record<string, string | undefined>> | undefined,
  ): WebhookVerification {
    const { hmacSecret } = resolveWebhookCredentials(config, env, sellerId);
    if (!hmacSecret)
      return reject('hmac-sha256', 'verifier_misconfigured', `Seller ${sellerId} has no HMAC secret configured.`);
    const signature = singleHeader(request.headers, 'x-adcp-signature');
    const timestamp = singleHeader(request.headers, 'x-adcp-timestamp');
    if (signature === undefined || timestamp === undefined) {
      return reject(
        'hmac-sha256',
        'hmac_signature_missing',
        'X-ADCP-Signature and X-ADCP-Timestamp are both required.',
      );
    }
    if (signature === null || timestamp === null) {
      return reject(
        'hmac-sha256',
        'hmac_signature_malformed',
        'X-ADCP-Signature or X-ADCP-Timestamp was sent more than once.',
      );
    }
    const compat = config.compat ?? {};
    let signedAtSeconds: number;
    if (/^\d{1,15}$/.test(timestamp)) signedAtSeconds = Number(timestamp);
    else if (compat.iso_timestamp && ISO_8601.test(timestamp) && Number.isFinite(Date.parse(timestamp))) {
      signedAtSeconds = Date.parse(timestamp) / 1000;
    } else {
      return reject(
        'hmac-sha256',
        'hmac_timestamp_invalid',
        `X-ADCP-Timestamp must be Unix seconds${compat.iso_timestamp ? ' or ISO 8601' : ''}; got ${JSON.stringify(timestamp.slice(0, 40))}.`,
      );
    }
    const skew = Math.floor(this.now() / 1000) - signedAtSeconds;
    if (Math.abs(skew) > HMAC_TIMESTAMP_TOLERANCE_SECONDS) {
      return reject(
        'hmac-sha256',
        'hmac_timestamp_out_of_window',
        `X-ADCP-Timestamp is ${skew} s from now; the window is ±${HMAC_TIMESTAMP_TOLERANCE_SECONDS} s.`,
      );
    }
    let hex: string;
    if (signature.startsWith('sha256=')) hex = signature.slice('sha256='.length);
    else if (compat.missing_sha256_prefix) hex = signature;
    else return reject('hmac-sha256', 'hmac_signature_malformed', 'X-ADCP-Signature must start with "sha256=".');
    if (!/^[0-9a-fA-F]{64}$/.test(hex)) {
      return reject('hmac-sha256', 'hmac_signature_malformed', 'X-ADCP-Signature must carry 64 hex digits.');
    }
    const provided = Buffer.from(hex, 'hex');
    const expected = hmacSha256(hmacSecret, timestamp, request.rawBody);
    if (provided.length !== expected.length || !timingSafeEqual(provided, expected)) {
      return reject('hmac-sha256', 'hmac_signature_invalid', 'X-ADCP-Signature does not match the body and timestamp.');
    }
    return { ok: true, scheme: 'hmac-sha256' };
  }

  private verifyBearer(
    request: WebhookRequest,
    sellerId: string,
    config: WebhookAuthConfig,
    env: Readonly<Record<string, string | undefined>> | undefined,
  ): WebhookVerification {
    const { bearerToken } = resolveWebhookCredentials(config, env, sellerId);
    if (!bearerToken)
      return reject('bearer', 'verifier_misconfigured', `Seller ${sellerId} has no bearer token configured.`);
    const authorization = singleHeader(request.headers, 'authorization');
    const token = typeof authorization === 'string' ? /^Bearer +(\S+) *$/i.exec(authorization)?.[1] : undefined;
    if (token === undefined)
      return reject('bearer', 'bearer_token_missing', 'Expected one "Authorization: Bearer <token>" header.');
    // Comparing digests keeps the comparison constant-time without leaking the expected token's length.
    if (!timingSafeEqual(sha256(token), sha256(bearerToken))) {
      return reject(
        'bearer',
        'bearer_token_invalid',
        'The bearer token does not match the one configured for this seller.',
      );
    }
    return { ok: true, scheme: 'bearer' };
  }
}

export function createWebhookAuthenticator(options: WebhookAuthenticatorOptions = {}): WebhookAuthenticator {
  return new WebhookAuthenticator(options);
}

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})$/;

/** The HMAC over `<X-ADCP-Timestamp as sent>.<raw body>` (§3.5). */
function hmacSha256(secret: string, timestamp: string, rawBody: Uint8Array): Buffer {
  return createHmac('sha256', secret).update(`${timestamp}.`, 'utf8').update(rawBody).digest();
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** A header's value; undefined when absent, null when sent more than once. */
function singleHeader(headers: WebhookRequest['headers'], name: string): string | undefined | null {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue;
    if (value === undefined) return undefined;
    if (Array.isArray(value)) return value.length === 1 ? value[0].trim() : value.length === 0 ? undefined : null;
    return value.trim();
  }
  return undefined;
}

function reject(scheme: WebhookAuthScheme, reason: WebhookRejectionReason, logDetail: string): WebhookRejected {
  const status =
    reason === 'body_not_utf8' ? 400 : reason === 'jwks_unavailable' ? 503 : reason.startsWith('verifier_') ? 500 : 401;
  const rejection: WebhookRejected = { ok: false, scheme, reason, status, logDetail };
  if (status === 401 && RFC9421_REASONS.has(reason)) rejection.wwwAuthenticate = `Signature error="${reason}"`;
  return rejection;
}

/** Maps what the SDK verifier throws onto the conformance vectors' codes. */
function rfc9421Rejection(err: unknown): WebhookRejected {
  if (err instanceof JwksUnavailableError) return reject('rfc9421', 'jwks_unavailable', err.message);
  if (err instanceof WebhookSignatureError) {
    // The SDK splits "wrong adcp_use" into webhook_mode_mismatch; the spec and vector 008 call it key_purpose_invalid.
    const code = err.code === 'webhook_mode_mismatch' ? 'webhook_signature_key_purpose_invalid' : err.code;
    const reason = RFC9421_REASONS.has(code) ? (code as WebhookRejectionReason) : 'webhook_signature_invalid';
    return reject('rfc9421', reason, `step ${err.failedStep} ${err.code}: ${err.message}`);
  }
  if (err instanceof RequestSignatureError) {
    // Thrown by shared SDK code (canonicalisation, a covered header that is absent): same step, request-signing name.
    const code = err.code.replace(/^request_signature_/, 'webhook_signature_');
    const reason = RFC9421_REASONS.has(code) ? (code as WebhookRejectionReason) : 'webhook_signature_header_malformed';
    return reject('rfc9421', reason, `step ${err.failedStep} ${err.code}: ${err.message}`);
  }
  return reject('rfc9421', 'verifier_error', err instanceof Error ? `${err.name}: ${err.message}` : String(err));
}
