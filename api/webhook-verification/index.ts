/**
 * Authenticates seller webhooks before anything reads them (CONVENTIONS: the API validates, authenticates and
 * forwards). One entry point, three schemes, chosen per seller by config/webhook-auth.ts:
 *   - rfc9421 (rfc9421.ts): AdCP 3.x webhook signing, with the target URI (target-uri.ts) and the replay store
 *     (replay-store.ts) it needs;
 *   - hmac-sha256 (hmac.ts): the legacy rc.2 `X-ADCP-Signature`, with per-seller compat;
 *   - bearer (bearer.ts): the legacy rc.2 `Authorization: Bearer`; no body integrity.
 * Rejections carry a stable reason code (the conformance vectors' `webhook_signature_*` codes for RFC 9421)
 * for the response and metrics, and a `logDetail` that is for server logs only.
 */
import type { ReplayStore } from '@adcp/sdk/signing/server';
import { type WebhookAuthConfig, WebhookAuthConfigError } from '../../config/webhook-auth';
import { verifyBearer } from './bearer';
import { verifyHmac } from './hmac';
import { BoundedReplayStore } from './replay-store';
import { type WebhookRequest, type WebhookVerification, reject } from './result';
import { Rfc9421Verifier } from './rfc9421';

export * from './result';
export { HMAC_TIMESTAMP_TOLERANCE_SECONDS } from './hmac';
export { BoundedReplayStore, type BoundedReplayStoreOptions } from './replay-store';
export { JwksUnavailableError } from './rfc9421';
export { type CanonicalTarget, TargetUriError, canonicalizeTargetUri } from './target-uri';
export type {
  ReplayStore as WebhookReplayStore,
  RevocationStore as WebhookRevocationStore,
} from '@adcp/sdk/signing/server';

export interface WebhookAuthenticatorOptions {
  /** RFC 9421 nonce cache. Defaults to a BoundedReplayStore; gateway replicas must share one store. */
  replayStore?: ReplayStore;
  /** Epoch milliseconds. */
  now?: () => number;
  /** Longest a fetched JWKS is used before a refetch (a shorter Cache-Control max-age wins). Default 10 minutes. */
  jwksCacheTtlMs?: number;
  /** Minimum time between fetches of one `jwks_uri`, whatever triggers them. Default 30 s (the AdCP floor). */
  jwksRefreshCooldownMs?: number;
  /** Let `jwks_uri` and `revocation_list_uri` reach private addresses (development only). Default false. */
  allowPrivateNetworkFetch?: boolean;
}

export class WebhookAuthenticator {
  private readonly now: () => number;
  private readonly rfc9421: Rfc9421Verifier;

  constructor(options: WebhookAuthenticatorOptions = {}) {
    this.now = options.now ?? Date.now;
    this.rfc9421 = new Rfc9421Verifier({
      replayStore: options.replayStore ?? new BoundedReplayStore(),
      now: this.now,
      jwksCacheTtlMs: options.jwksCacheTtlMs ?? 10 * 60_000,
      jwksRefreshCooldownMs: options.jwksRefreshCooldownMs ?? 30_000,
      allowPrivateNetworkFetch: options.allowPrivateNetworkFetch ?? false,
    });
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
          return await this.rfc9421.verify(request, sellerId, config);
        case 'hmac-sha256':
          return verifyHmac(request, sellerId, config, env, this.now());
        case 'bearer':
          return verifyBearer(request, sellerId, config, env);
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
}

export function createWebhookAuthenticator(options: WebhookAuthenticatorOptions = {}): WebhookAuthenticator {
  return new WebhookAuthenticator(options);
}
