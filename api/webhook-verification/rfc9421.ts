/**
 * AdCP 3.x webhook signing (RFC 9421, adcp-protocol.md §11), verified by the SDK verifier's checklist composed from
 * @adcp/sdk's building blocks (rfc9421-checklist.ts). This module supplies what the SDK leaves to the receiver:
 * per-seller keys (inline, or a `jwks_uri` through the SDK's HttpsJwksResolver: cached, ETag and Cache-Control aware,
 * SSRF-safe), revocation, the replay store partitioned by seller, our own `@target-uri` canonicalisation, a raw body
 * that is never re-serialised, and each seller key imported once (key-cache.ts).
 */
import { isUtf8 } from 'node:buffer';
import {
  HttpsJwksResolver,
  HttpsRevocationStore,
  RequestSignatureError,
  WebhookSignatureError,
  type AdcpJsonWebKey,
  type JwksResolver,
  type ReplayStore,
  type RevocationStore,
} from '@adcp/sdk/signing/server';
import type { WebhookAuthConfig } from '../../config/webhook-auth';
import { VerificationKeyCache } from './key-cache';
import { partitionedBySeller } from './replay-store';
import { verifyWebhookChecklist } from './rfc9421-checklist';
import {
  type WebhookRejected,
  type WebhookRejectionReason,
  type WebhookRequest,
  type WebhookVerification,
  isRfc9421Reason,
  reject,
} from './result';
import { StringMemo } from './string-memo';
import { type CanonicalTarget, canonicalizeTargetUri } from './target-uri';

/** The seller's JWKS could not be fetched and no copy is cached. Retrying later may succeed. */
export class JwksUnavailableError extends Error {
  override readonly name = 'JwksUnavailableError';
}

export interface Rfc9421Options {
  replayStore: ReplayStore;
  /** Epoch milliseconds. */
  now: () => number;
  /** Upper bound on how long a fetched JWKS is used before it is refetched (the seller's Cache-Control may say less). */
  jwksCacheTtlMs: number;
  /** Minimum time between fetches of one `jwks_uri`, whatever triggers them (the AdCP floor is 30 s). */
  jwksRefreshCooldownMs: number;
  /** Let `jwks_uri` and `revocation_list_uri` resolve to private addresses (development only). */
  allowPrivateNetworkFetch: boolean;
}

function isLoopbackHttp(uri: string): boolean {
  const { protocol, hostname } = new URL(uri);
  return protocol === 'http:' && (hostname === 'localhost' || hostname === '[::1]' || /^127\./.test(hostname));
}

/**
 * Inline keys first, then the seller's `jwks_uri`. The SDK resolver keeps the last good keys when a refetch fails
 * and throws only when it has never fetched any: that is the 503 case (the seller retries later).
 */
class SellerJwks implements JwksResolver {
  constructor(
    private readonly inline: ReadonlyMap<string, AdcpJsonWebKey>,
    private readonly remote: { uri: string; resolver: JwksResolver } | undefined,
  ) {}

  async resolve(keyid: string): Promise<AdcpJsonWebKey | null> {
    const key = this.inline.get(keyid);
    if (key) return key;
    if (!this.remote) return null;
    try {
      return await this.remote.resolver.resolve(keyid);
    } catch (err) {
      throw new JwksUnavailableError(
        `No usable JWKS from ${this.remote.uri}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
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

/** One cached fetcher per (seller, URL): two sellers may publish at one URL but must not share state. */
function perSeller<T>(cache: Map<string, T>, sellerId: string, uri: string, create: () => T): T {
  const key = `${sellerId}\u0000${uri}`;
  let value = cache.get(key);
  if (value === undefined) {
    value = create();
    cache.set(key, value);
  }
  return value;
}

interface SellerOptions {
  jwks: JwksResolver;
  replayStore: ReplayStore;
  revocationStore: RevocationStore;
}

export class Rfc9421Verifier {
  private readonly remoteJwks = new Map<string, { uri: string; resolver: JwksResolver }>();
  private readonly revocationLists = new Map<string, HttpsRevocationStore>();
  private readonly inlineKeys = new WeakMap<WebhookAuthConfig, ReadonlyMap<string, AdcpJsonWebKey>>();
  private readonly sellerOptionsCache = new WeakMap<WebhookAuthConfig, Map<string, SellerOptions>>();
  private readonly keys = new VerificationKeyCache();
  /** Every webhook of an operation is posted to its one URL: canonicalised once. */
  private readonly targets = new StringMemo(canonicalizeTargetUri);

  constructor(private readonly options: Rfc9421Options) {}

  async verify(request: WebhookRequest, sellerId: string, config: WebhookAuthConfig): Promise<WebhookVerification> {
    let target: CanonicalTarget;
    try {
      target = this.targets.get(request.url);
    } catch (err) {
      return reject('rfc9421', 'webhook_target_uri_malformed', err instanceof Error ? err.message : String(err));
    }
    // Checked without decoding: the digest is computed over the received bytes, and JSON needs UTF-8 anyway.
    if (!isUtf8(request.rawBody)) {
      return reject('rfc9421', 'body_not_utf8', 'The webhook body is not valid UTF-8, so it cannot be JSON.');
    }
    try {
      const keyId = await verifyWebhookChecklist(
        { method: request.method, targetUri: target.targetUri, headers: request.headers, rawBody: request.rawBody },
        { ...this.sellerOptions(sellerId, config), keys: this.keys, now: this.nowSeconds() },
      );
      return { ok: true, scheme: 'rfc9421', keyId };
    } catch (err) {
      return rfc9421Rejection(err);
    }
  }

  private readonly nowSeconds = (): number => Math.floor(this.options.now() / 1000);

  /**
   * The verifier's per-seller stores, made once per (seller config, seller) rather than per webhook. They hold no
   * state of their own: the fetched JWKS and revocation lists live in the cached SDK fetchers, nonces in the store.
   */
  private sellerOptions(sellerId: string, config: WebhookAuthConfig): SellerOptions {
    let bySeller = this.sellerOptionsCache.get(config);
    if (!bySeller) {
      bySeller = new Map();
      this.sellerOptionsCache.set(config, bySeller);
    }
    let options = bySeller.get(sellerId);
    if (!options) {
      options = {
        jwks: this.jwksFor(sellerId, config),
        replayStore: partitionedBySeller(this.options.replayStore, sellerId),
        revocationStore: this.revocationsFor(sellerId, config),
      };
      bySeller.set(sellerId, options);
    }
    return options;
  }

  private jwksFor(sellerId: string, config: WebhookAuthConfig): JwksResolver {
    let inline = this.inlineKeys.get(config);
    if (!inline) {
      inline = new Map((config.jwks?.keys ?? []).map((key) => [key.kid, key as AdcpJsonWebKey]));
      this.inlineKeys.set(config, inline);
    }
    const uri = config.jwks_uri;
    const remote = uri
      ? perSeller(this.remoteJwks, sellerId, uri, () => ({
          uri,
          resolver: new HttpsJwksResolver(uri, {
            minCooldownSeconds: Math.ceil(this.options.jwksRefreshCooldownMs / 1000),
            maxAgeSeconds: Math.ceil(this.options.jwksCacheTtlMs / 1000),
            // config/webhook-auth.ts admits plain http only on loopback (development); the SDK must be told the same.
            allowPrivateIp: this.options.allowPrivateNetworkFetch || isLoopbackHttp(uri),
            now: () => this.nowSeconds(),
          }),
        }))
      : undefined;
    return new SellerJwks(inline, remote);
  }

  private revocationsFor(sellerId: string, config: WebhookAuthConfig): RevocationStore {
    const uri = config.revocation_list_uri;
    const list = uri
      ? perSeller(
          this.revocationLists,
          sellerId,
          uri,
          () =>
            new HttpsRevocationStore(uri, {
              allowPrivateIp: this.options.allowPrivateNetworkFetch,
              now: () => this.nowSeconds(),
            }),
        )
      : undefined;
    return new SellerRevocations(new Set(config.revoked_key_ids ?? []), list);
  }
}

/** Maps what the checklist (the SDK's error classes) throws onto the conformance vectors' codes. */
function rfc9421Rejection(err: unknown): WebhookRejected {
  if (err instanceof JwksUnavailableError) return reject('rfc9421', 'jwks_unavailable', err.message);
  if (err instanceof WebhookSignatureError) {
    // The SDK splits "wrong adcp_use" into webhook_mode_mismatch; the spec and vector 008 call it key_purpose_invalid.
    const code = err.code === 'webhook_mode_mismatch' ? 'webhook_signature_key_purpose_invalid' : err.code;
    const reason: WebhookRejectionReason = isRfc9421Reason(code) ? code : 'webhook_signature_invalid';
    return reject('rfc9421', reason, `step ${err.failedStep} ${err.code}: ${err.message}`);
  }
  if (err instanceof RequestSignatureError) {
    // Thrown by shared SDK code (canonicalisation, a covered header that is absent): same step, request-signing name.
    const code = err.code.replace(/^request_signature_/, 'webhook_signature_');
    const reason: WebhookRejectionReason = isRfc9421Reason(code) ? code : 'webhook_signature_header_malformed';
    return reject('rfc9421', reason, `step ${err.failedStep} ${err.code}: ${err.message}`);
  }
  return reject('rfc9421', 'verifier_error', err instanceof Error ? `${err.name}: ${err.message}` : String(err));
}
