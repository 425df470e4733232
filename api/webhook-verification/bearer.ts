/** Legacy rc.2 `Authorization: Bearer` (adcp-protocol.md §3.5), only when a seller's config chooses it: no body integrity. */
import { createHash, timingSafeEqual } from 'node:crypto';
import { type WebhookAuthConfig, resolveWebhookCredentials } from '../../config/webhook-auth';
import { type WebhookRequest, type WebhookVerification, reject, singleHeader } from './result';

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

export function verifyBearer(
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
