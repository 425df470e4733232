/**
 * Legacy rc.2 HMAC-SHA256 (adcp-protocol.md §3.5): `X-ADCP-Signature: sha256=<hex>` over `<X-ADCP-Timestamp>.<raw
 * body>`, a ±300 s window and a constant-time compare, with per-seller `compat` switches for known deviations.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { type WebhookAuthConfig, resolveWebhookCredentials } from '../../config/webhook-auth';
import { type WebhookRequest, type WebhookVerification, reject, singleHeader } from './result';

/** The legacy HMAC window (§3.5): reject when |now − timestamp| > 300 s. */
export const HMAC_TIMESTAMP_TOLERANCE_SECONDS = 300;

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})$/;

/** The HMAC over `<X-ADCP-Timestamp as sent>.<raw body>` (§3.5). */
function hmacSha256(secret: string, timestamp: string, rawBody: Uint8Array): Buffer {
  return createHmac('sha256', secret).update(`${timestamp}.`, 'utf8').update(rawBody).digest();
}

export function verifyHmac(
  request: WebhookRequest,
  sellerId: string,
  config: WebhookAuthConfig,
  env: Readonly<Record<string, string | undefined>> | undefined,
  nowMs: number,
): WebhookVerification {
  const { hmacSecret } = resolveWebhookCredentials(config, env, sellerId);
  if (!hmacSecret)
    return reject('hmac-sha256', 'verifier_misconfigured', `Seller ${sellerId} has no HMAC secret configured.`);
  const signature = singleHeader(request.headers, 'x-adcp-signature');
  const timestamp = singleHeader(request.headers, 'x-adcp-timestamp');
  if (signature === undefined || timestamp === undefined) {
    return reject('hmac-sha256', 'hmac_signature_missing', 'X-ADCP-Signature and X-ADCP-Timestamp are both required.');
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
  const skew = Math.floor(nowMs / 1000) - signedAtSeconds;
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
