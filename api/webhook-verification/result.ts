/**
 * What every scheme's verifier answers: the request as received, the stable rejection reasons, and the
 * verified / rejected result with its HTTP status.
 */
import type { WebhookAuthScheme } from '../../config/webhook-auth';

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
   * 401 for anything the seller's credentials got wrong, and for a seller whose credential is not configured here
   * (answered as a bad signature; the gateway reports the misconfiguration in its log and /healthz); 400 for a body
   * that is not UTF-8; 503 when the seller's JWKS cannot be fetched or our verifier failed (a retry may succeed).
   */
  status: 400 | 401 | 503;
  /**
   * For RFC 9421 401s: `Signature error="<reason>"`. @adcp/sdk's webhook emitter reads it to stop retrying a
   * delivery that would fail identically (adcp#2423).
   */
  wwwAuthenticate?: string;
  /** What exactly failed, for server logs only: never send it to the caller. */
  logDetail: string;
}

export type WebhookVerification = WebhookVerified | WebhookRejected;

const RFC9421_REASONS: ReadonlySet<string> = new Set(RFC9421_REJECTION_REASONS);

export function isRfc9421Reason(code: string): code is (typeof RFC9421_REJECTION_REASONS)[number] {
  return RFC9421_REASONS.has(code);
}

export function reject(scheme: WebhookAuthScheme, reason: WebhookRejectionReason, logDetail: string): WebhookRejected {
  const status =
    reason === 'body_not_utf8' ? 400 : reason === 'jwks_unavailable' || reason === 'verifier_error' ? 503 : 401;
  const rejection: WebhookRejected = { ok: false, scheme, reason, status, logDetail };
  if (status === 401 && isRfc9421Reason(reason)) rejection.wwwAuthenticate = `Signature error="${reason}"`;
  return rejection;
}

/** A header's value; undefined when absent, null when sent more than once. */
export function singleHeader(headers: WebhookRequest['headers'], name: string): string | undefined | null {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue;
    if (value === undefined) return undefined;
    if (Array.isArray(value)) return value.length === 1 ? value[0].trim() : value.length === 0 ? undefined : null;
    return value.trim();
  }
  return undefined;
}
