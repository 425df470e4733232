/**
 * The AdCP verifier checklist for webhooks (adcp-protocol.md §11; steps 1-13 and 9a, numbered as the conformance
 * vectors' `failed_step`), composed from @adcp/sdk's building blocks in the SDK verifier's order and with its error
 * codes, so rfc9421.ts maps outcomes exactly as before. What differs is only the work per webhook: the seller's key is
 * imported once (key-cache.ts), the signature headers are read without a general parser when they are in canonical
 * form (signature-headers.ts), the target URI's checks and replay scope are remembered for the next webhook to the
 * same URL, and the body is hashed as the bytes received rather than re-encoded from a decoded copy. The signature
 * base is the SDK's own (`buildSignatureBase`).
 *
 * Order matters: cheap checks on the headers (1-6a) come before the key is resolved (7); revocation (9), the per-key
 * cap (9a) and the replay pre-check come before the signature is checked (10), so a flood of bad or replayed
 * webhooks costs no Ed25519/ECDSA work; the nonce is committed (13) only after every other step passed, so a webhook
 * that fails never takes a place in the cache.
 */
import {
  ALLOWED_ALGS,
  CLOCK_SKEW_TOLERANCE_SECONDS,
  MAX_SIGNATURE_WINDOW_SECONDS,
  RequestSignatureError,
  WEBHOOK_MANDATORY_COMPONENTS,
  WEBHOOK_SIGNING_TAG,
  WebhookSignatureError,
  buildSignatureBase,
  canonicalTargetUri,
  getHeaderValue,
  verifySignature,
  type JwksResolver,
  type ParsedSignatureInput,
  type ReplayStore,
  type RevocationStore,
} from '@adcp/sdk/signing/server';
import type { VerificationKeyCache } from './key-cache';
import { contentDigestMatchesBody, readSignature, readSignatureInput } from './signature-headers';
import { StringMemo } from './string-memo';

export interface ChecklistRequest {
  method: string;
  /** The target URI as canonicalised by target-uri.ts. */
  targetUri: string;
  headers: Record<string, string | string[] | undefined>;
  /** The body bytes as received (already known to be UTF-8). */
  rawBody: Uint8Array;
}

export interface ChecklistOptions {
  jwks: JwksResolver;
  revocationStore: RevocationStore;
  replayStore: ReplayStore;
  keys: VerificationKeyCache;
  /** Unix seconds. */
  now: number;
}

const REQUIRED_PARAMS = ['created', 'expires', 'nonce', 'keyid', 'alg', 'tag'] as const;

function fail(code: ConstructorParameters<typeof WebhookSignatureError>[0], step: number, message: string): never {
  throw new WebhookSignatureError(code, step, message);
}

/** Steps 1-2: both headers present and parseable, every required parameter there. */
function parseHeaders(headers: ChecklistRequest['headers']): { input: ParsedSignatureInput; signature: Uint8Array } {
  const inputHeader = getHeaderValue(headers, 'Signature-Input');
  const signatureHeader = getHeaderValue(headers, 'Signature');
  if (!inputHeader || !signatureHeader) {
    fail('webhook_signature_header_malformed', 1, 'Signature and Signature-Input must both be sent.');
  }
  let input: ParsedSignatureInput;
  let signature: Uint8Array;
  try {
    input = readSignatureInput(inputHeader);
    signature = readSignature(signatureHeader, input.label).bytes;
  } catch (err) {
    fail('webhook_signature_header_malformed', 1, err instanceof Error ? err.message : String(err));
  }
  const absent = REQUIRED_PARAMS.filter((name) => input.params[name] === undefined);
  if (absent.length > 0) {
    fail('webhook_signature_params_incomplete', 2, `Signature-Input lacks ${absent.join(', ')}.`);
  }
  return { input, signature };
}

/** Step 5: every window fault (inverted, too long, from the future, expired) is one code; the message says which. */
function checkWindow(created: number, expires: number, now: number): void {
  if (expires <= created) fail('webhook_signature_window_invalid', 5, 'The signature expires before it was created.');
  if (expires - created > MAX_SIGNATURE_WINDOW_SECONDS) {
    fail(
      'webhook_signature_window_invalid',
      5,
      `The signature window is longer than ${MAX_SIGNATURE_WINDOW_SECONDS} s.`,
    );
  }
  if (now < created - CLOCK_SKEW_TOLERANCE_SECONDS) {
    fail(
      'webhook_signature_window_invalid',
      5,
      'The signature was created in the future (beyond the clock skew allowed).',
    );
  }
  if (now > expires + CLOCK_SKEW_TOLERANCE_SECONDS)
    fail('webhook_signature_window_invalid', 5, 'The signature has expired.');
}

/** Loopback hosts may use plain http (the storyboard runner's receivers), compared as the SDK verifier does. */
function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '::1' || hostname.startsWith('127.');
}

/** Step 6a: a target URI that can be signed (parseable, https or loopback, no userinfo or fragment). */
function checkTarget(targetUri: string): true {
  let url: URL;
  try {
    url = new URL(targetUri);
  } catch {
    fail('webhook_target_uri_malformed', 6, `@target-uri ${JSON.stringify(targetUri)} does not parse.`);
  }
  if (url.protocol !== 'https:' && !isLoopback(url.hostname.toLowerCase())) {
    fail('webhook_target_uri_malformed', 6, `@target-uri ${JSON.stringify(targetUri)} is not https.`);
  }
  if (url.username || url.password) fail('webhook_target_uri_malformed', 6, '@target-uri carries userinfo.');
  if (url.hash) fail('webhook_target_uri_malformed', 6, '@target-uri carries a fragment.');
  return true;
}

// Both are pure functions of the target URI, which every webhook of an operation repeats.
const checkedTargets = new StringMemo(checkTarget);
const replayScopes = new StringMemo(canonicalTargetUri);

/** Runs the checklist; answers the verified keyid or throws the SDK's WebhookSignatureError/RequestSignatureError. */
export async function verifyWebhookChecklist(request: ChecklistRequest, options: ChecklistOptions): Promise<string> {
  const { now } = options;
  const { input, signature } = parseHeaders(request.headers);
  const { params } = input;
  if (params.tag !== WEBHOOK_SIGNING_TAG) {
    fail('webhook_signature_tag_invalid', 3, `Expected tag "${WEBHOOK_SIGNING_TAG}", got "${params.tag}".`);
  }
  if (!ALLOWED_ALGS.has(params.alg))
    fail('webhook_signature_alg_not_allowed', 4, `alg "${params.alg}" is not allowed.`);
  checkWindow(params.created, params.expires, now);
  for (const component of WEBHOOK_MANDATORY_COMPONENTS) {
    if (!input.components.includes(component)) {
      fail('webhook_signature_components_incomplete', 6, `"${component}" must be a covered component.`);
    }
  }
  checkedTargets.get(request.targetUri);

  // Step 7: the key, under exactly the keyid asked for.
  const jwk = await options.jwks.resolve(params.keyid);
  if (!jwk) fail('webhook_signature_key_unknown', 7, `No key "${params.keyid}" among the seller's keys.`);
  if (jwk.kid !== params.keyid) {
    fail('webhook_signature_key_unknown', 7, `Asked for key "${params.keyid}", the key set answered "${jwk.kid}".`);
  }
  // Step 8: a key for verifying webhook signatures. An unscoped key and one scoped for another purpose are told apart
  // (rfc9421.ts maps the second, webhook_mode_mismatch, back onto the spec's key_purpose_invalid).
  if (jwk.adcp_use === undefined || !jwk.key_ops?.includes('verify')) {
    fail('webhook_signature_key_purpose_invalid', 8, `Key "${jwk.kid}" is not scoped to verify webhook signatures.`);
  }
  if (jwk.adcp_use !== 'webhook-signing') {
    fail('webhook_mode_mismatch', 8, `Key "${jwk.kid}" is for adcp_use "${jwk.adcp_use}", not "webhook-signing".`);
  }
  // Step 9: revocation; a stale list surfaces under the webhook code.
  try {
    if (await options.revocationStore.isRevoked(jwk.kid)) {
      fail('webhook_signature_key_revoked', 9, `Key "${jwk.kid}" has been revoked.`);
    }
  } catch (err) {
    if (err instanceof RequestSignatureError && err.code === 'request_signature_revocation_stale') {
      fail('webhook_signature_revocation_stale', 9, err.message);
    }
    throw err;
  }
  // Nonces are scoped by (keyid, @target-uri): a webhook captured for one URL does not use up another's budget.
  const scope = replayScopes.get(request.targetUri);
  // Step 9a, then the replay pre-check (step 12 ahead of time), both before any signature work.
  if (await options.replayStore.isCapHit(jwk.kid, scope, now)) {
    fail('webhook_signature_rate_abuse', 9, `Key "${jwk.kid}" has used up its nonce cache for this URL.`);
  }
  if (await options.replayStore.has(jwk.kid, scope, params.nonce, now)) {
    fail('webhook_signature_replayed', 12, `Nonce "${params.nonce}" of key "${jwk.kid}" was already seen.`);
  }
  // Step 10: the signature.
  const base = buildSignatureBase(
    input.components,
    { method: request.method, url: request.targetUri, headers: request.headers },
    params,
    input.signatureParamsValue,
  );
  const publicKey = options.keys.publicKeyFor(jwk);
  if (!verifySignature(params.alg, publicKey, Buffer.from(base, 'utf8'), signature)) {
    fail('webhook_signature_invalid', 10, 'The signature does not verify over the signature base.');
  }
  // Step 11: the body is the one signed.
  const digest = getHeaderValue(request.headers, 'Content-Digest');
  if (!digest || !contentDigestMatchesBody(digest, request.rawBody)) {
    fail('webhook_signature_digest_mismatch', 11, 'Content-Digest does not match the body.');
  }
  // Step 13: commit the nonce for as long as the signature could still be accepted.
  const ttl = Math.max(
    params.expires - now + CLOCK_SKEW_TOLERANCE_SECONDS,
    MAX_SIGNATURE_WINDOW_SECONDS + CLOCK_SKEW_TOLERANCE_SECONDS,
  );
  const committed = await options.replayStore.insert(jwk.kid, scope, params.nonce, ttl, now);
  if (committed === 'replayed') {
    fail('webhook_signature_replayed', 13, `Nonce "${params.nonce}" of key "${jwk.kid}" was already seen.`);
  }
  if (committed === 'rate_abuse') {
    fail('webhook_signature_rate_abuse', 13, `Key "${jwk.kid}" used up its nonce cache for this URL on commit.`);
  }
  return jwk.kid;
}
