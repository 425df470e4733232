// @adcp/sdk/signing/server loads the ESM-only `jose` at require time (for code these tests never call), and Jest
// on Node 20 cannot require ESM. Remove once jest.config.js transforms jose (see the webhook work's report).
jest.mock('jose', () => ({}));

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolveWebhookCredentials, webhookAuthSchema, type WebhookAuthConfig } from '../../config/webhook-auth';
import { BoundedReplayStore, WebhookAuthenticator, type WebhookRequest } from '../../api/webhook-verification';
import {
  asWebhookRequest,
  mintWebhookSigningKey,
  signLegacyHmacWebhook,
  signWebhookRequest,
  type WebhookSigningKey,
} from '../fixtures/webhook-signing';

const NOW_SECONDS = 1_776_520_800;
const URL_FOR_OP = 'https://buyer.example.com/webhooks/adcp/adcp-create_media_buy-po-4711';
const BODY = {
  idempotency_key: 'evt_4c7e1a2b3d4e5f60718293a4',
  task_id: 'task_1',
  task_type: 'create_media_buy',
  status: 'completed',
  timestamp: '2026-04-18T14:00:00.000Z',
  protocol: 'media-buy',
  result: { media_buy_id: 'mb_1', status: 'pending_creatives' },
};

const HMAC_SECRET = 'an-hmac-secret-of-at-least-thirty-two-characters';
const BEARER_TOKEN = 'a-bearer-token-of-at-least-thirty-two-characters';
const ENV = { SELLER_WEBHOOK_SECRET: HMAC_SECRET, SELLER_WEBHOOK_TOKEN: BEARER_TOKEN };

function authenticatorAt(seconds: number, options: ConstructorParameters<typeof WebhookAuthenticator>[0] = {}) {
  return new WebhookAuthenticator({ now: () => seconds * 1000, ...options });
}

function hmacConfig(compat?: WebhookAuthConfig['compat']): WebhookAuthConfig {
  return webhookAuthSchema.parse({
    scheme: 'hmac-sha256',
    secret_env: 'SELLER_WEBHOOK_SECRET',
    ...(compat && { compat }),
  });
}

describe('legacy HMAC-SHA256', () => {
  const signed = (timestampSeconds = NOW_SECONDS, extra: Partial<Parameters<typeof signLegacyHmacWebhook>[0]> = {}) =>
    asWebhookRequest(
      signLegacyHmacWebhook({ url: URL_FOR_OP, secret: HMAC_SECRET, body: BODY, timestampSeconds, ...extra }),
    );

  test('a correctly signed webhook verifies', async () => {
    await expect(authenticatorAt(NOW_SECONDS).verify(signed(), 'seller', hmacConfig(), ENV)).resolves.toEqual({
      ok: true,
      scheme: 'hmac-sha256',
    });
  });

  test.each([
    ['300 s old', -300, true],
    ['300 s ahead', 300, true],
    ['301 s old', -301, false],
    ['301 s ahead', 301, false],
  ])('timestamp %s', async (_label, offset, accepted) => {
    const verification = await authenticatorAt(NOW_SECONDS).verify(
      signed(NOW_SECONDS + offset),
      'seller',
      hmacConfig(),
      ENV,
    );
    if (accepted) expect(verification.ok).toBe(true);
    else expect(verification).toMatchObject({ ok: false, reason: 'hmac_timestamp_out_of_window', status: 401 });
  });

  test('a signature without the sha256= prefix is malformed unless the seller has the compat switch', async () => {
    const bare = signed(NOW_SECONDS, { omitPrefix: true });
    await expect(authenticatorAt(NOW_SECONDS).verify(bare, 'seller', hmacConfig(), ENV)).resolves.toMatchObject({
      ok: false,
      reason: 'hmac_signature_malformed',
    });
    await expect(
      authenticatorAt(NOW_SECONDS).verify(bare, 'seller', hmacConfig({ missing_sha256_prefix: true }), ENV),
    ).resolves.toEqual({
      ok: true,
      scheme: 'hmac-sha256',
    });
  });

  test('a different algorithm prefix is malformed', async () => {
    const request = signed();
    request.headers['x-adcp-signature'] = String(request.headers['x-adcp-signature']).replace('sha256=', 'sha1=');
    await expect(
      authenticatorAt(NOW_SECONDS).verify(request, 'seller', hmacConfig({ missing_sha256_prefix: true }), ENV),
    ).resolves.toMatchObject({
      ok: false,
      reason: 'hmac_signature_malformed',
    });
  });

  test('an ISO-8601 timestamp (signed as sent) is accepted only with the compat switch, and still windowed', async () => {
    const iso = (seconds: number) => signed(NOW_SECONDS, { timestampHeader: new Date(seconds * 1000).toISOString() });
    await expect(
      authenticatorAt(NOW_SECONDS).verify(iso(NOW_SECONDS), 'seller', hmacConfig(), ENV),
    ).resolves.toMatchObject({
      ok: false,
      reason: 'hmac_timestamp_invalid',
    });
    const compat = hmacConfig({ iso_timestamp: true });
    await expect(authenticatorAt(NOW_SECONDS).verify(iso(NOW_SECONDS), 'seller', compat, ENV)).resolves.toEqual({
      ok: true,
      scheme: 'hmac-sha256',
    });
    await expect(
      authenticatorAt(NOW_SECONDS).verify(iso(NOW_SECONDS - 301), 'seller', compat, ENV),
    ).resolves.toMatchObject({
      ok: false,
      reason: 'hmac_timestamp_out_of_window',
    });
  });

  test('a non-numeric timestamp is invalid', async () => {
    const request = signed(NOW_SECONDS, { timestampHeader: 'yesterday' });
    await expect(authenticatorAt(NOW_SECONDS).verify(request, 'seller', hmacConfig(), ENV)).resolves.toMatchObject({
      reason: 'hmac_timestamp_invalid',
    });
  });

  test('a tampered body, a replaced timestamp or another secret fail as signature_invalid', async () => {
    const authenticator = authenticatorAt(NOW_SECONDS);
    const tampered = signed();
    tampered.rawBody = Buffer.from(JSON.stringify({ ...BODY, status: 'failed' }));
    await expect(authenticator.verify(tampered, 'seller', hmacConfig(), ENV)).resolves.toMatchObject({
      reason: 'hmac_signature_invalid',
      status: 401,
    });

    const retimed = signed();
    retimed.headers['x-adcp-timestamp'] = String(NOW_SECONDS - 1);
    await expect(authenticator.verify(retimed, 'seller', hmacConfig(), ENV)).resolves.toMatchObject({
      reason: 'hmac_signature_invalid',
    });

    const otherSecret = asWebhookRequest(
      signLegacyHmacWebhook({ url: URL_FOR_OP, secret: 'x'.repeat(40), body: BODY, timestampSeconds: NOW_SECONDS }),
    );
    await expect(authenticator.verify(otherSecret, 'seller', hmacConfig(), ENV)).resolves.toMatchObject({
      reason: 'hmac_signature_invalid',
    });
  });

  test('the body bytes are verified as received, not re-serialised', async () => {
    const spaced = '{"task_id": "task_1", "status": "completed"}';
    const request = asWebhookRequest(
      signLegacyHmacWebhook({ url: URL_FOR_OP, secret: HMAC_SECRET, body: spaced, timestampSeconds: NOW_SECONDS }),
    );
    await expect(authenticatorAt(NOW_SECONDS).verify(request, 'seller', hmacConfig(), ENV)).resolves.toMatchObject({
      ok: true,
    });
  });

  test('missing and repeated headers', async () => {
    const authenticator = authenticatorAt(NOW_SECONDS);
    const missing = signed();
    delete missing.headers['x-adcp-signature'];
    await expect(authenticator.verify(missing, 'seller', hmacConfig(), ENV)).resolves.toMatchObject({
      reason: 'hmac_signature_missing',
    });
    const repeated = signed();
    repeated.headers['x-adcp-signature'] = [String(repeated.headers['x-adcp-signature']), 'sha256=' + '0'.repeat(64)];
    await expect(authenticator.verify(repeated, 'seller', hmacConfig(), ENV)).resolves.toMatchObject({
      reason: 'hmac_signature_malformed',
    });
  });

  test('a missing or short secret is our misconfiguration, answered 401 as a bad signature is (never 500)', async () => {
    const authenticator = authenticatorAt(NOW_SECONDS);
    await expect(authenticator.verify(signed(), 'seller', hmacConfig(), {})).resolves.toMatchObject({
      ok: false,
      reason: 'verifier_misconfigured',
      status: 401,
    });
    await expect(
      authenticator.verify(signed(), 'seller', hmacConfig(), { SELLER_WEBHOOK_SECRET: 'short' }),
    ).resolves.toMatchObject({
      reason: 'verifier_misconfigured',
      status: 401,
    });
  });
});

describe('legacy Bearer', () => {
  const config = webhookAuthSchema.parse({ scheme: 'bearer', token_env: 'SELLER_WEBHOOK_TOKEN' });
  const withAuthorization = (authorization?: string): WebhookRequest => ({
    method: 'POST',
    url: URL_FOR_OP,
    headers: { 'content-type': 'application/json', ...(authorization !== undefined && { authorization }) },
    rawBody: Buffer.from(JSON.stringify(BODY)),
  });

  test.each([
    ['the configured token', `Bearer ${BEARER_TOKEN}`, { ok: true, scheme: 'bearer' }],
    ['a lower-case scheme name', `bearer ${BEARER_TOKEN}`, { ok: true, scheme: 'bearer' }],
    ['another token', `Bearer ${BEARER_TOKEN}x`, { ok: false, reason: 'bearer_token_invalid', status: 401 }],
    ['a prefix of the token', `Bearer ${BEARER_TOKEN.slice(0, 20)}`, { ok: false, reason: 'bearer_token_invalid' }],
    [
      'Basic credentials',
      `Basic ${Buffer.from('a:b').toString('base64')}`,
      { ok: false, reason: 'bearer_token_missing' },
    ],
    ['no Authorization header', undefined, { ok: false, reason: 'bearer_token_missing' }],
  ])('%s', async (_label, authorization, expected) => {
    await expect(
      authenticatorAt(NOW_SECONDS).verify(withAuthorization(authorization), 'seller', config, ENV),
    ).resolves.toMatchObject(expected);
  });
});

describe('RFC 9421 round trip with the SDK signer', () => {
  let key: WebhookSigningKey;
  let config: WebhookAuthConfig;

  beforeAll(() => {
    key = mintWebhookSigningKey('seller-webhook-2026');
    config = webhookAuthSchema.parse({ scheme: 'rfc9421', jwks: { keys: [key.publicJwk] } });
  });

  const sign = (overrides: Partial<Parameters<typeof signWebhookRequest>[0]> = {}) =>
    asWebhookRequest(
      signWebhookRequest({ url: URL_FOR_OP, body: BODY, key: key.signerKey, nowSeconds: NOW_SECONDS, ...overrides }),
    );

  test('a webhook signed by the SDK verifies and names its key', async () => {
    await expect(authenticatorAt(NOW_SECONDS + 5).verify(sign(), 'seller', config)).resolves.toEqual({
      ok: true,
      scheme: 'rfc9421',
      keyId: 'seller-webhook-2026',
    });
  });

  test('the same delivery twice is a replayed nonce; a re-signed retry of the same event is not', async () => {
    const authenticator = authenticatorAt(NOW_SECONDS);
    const first = sign({ nonce: 'nonce-0000000000000001' });
    await expect(authenticator.verify(first, 'seller', config)).resolves.toMatchObject({ ok: true });
    await expect(authenticator.verify({ ...first }, 'seller', config)).resolves.toMatchObject({
      ok: false,
      reason: 'webhook_signature_replayed',
      status: 401,
      wwwAuthenticate: 'Signature error="webhook_signature_replayed"',
    });
    await expect(
      authenticator.verify(sign({ nonce: 'nonce-0000000000000002' }), 'seller', config),
    ).resolves.toMatchObject({ ok: true });
  });

  test('a key revoked in config is refused', async () => {
    const revoked = webhookAuthSchema.parse({ ...config, revoked_key_ids: ['seller-webhook-2026'] });
    await expect(authenticatorAt(NOW_SECONDS).verify(sign(), 'seller', revoked)).resolves.toMatchObject({
      ok: false,
      reason: 'webhook_signature_key_revoked',
    });
  });

  test('another seller’s keys do not verify this seller’s webhooks', async () => {
    const other = mintWebhookSigningKey('other-seller-key');
    const request = asWebhookRequest(
      signWebhookRequest({ url: URL_FOR_OP, body: BODY, key: other.signerKey, nowSeconds: NOW_SECONDS }),
    );
    await expect(authenticatorAt(NOW_SECONDS).verify(request, 'seller', config)).resolves.toMatchObject({
      reason: 'webhook_signature_key_unknown',
    });
  });

  test('a tampered body fails the digest; a tampered body with a recomputed digest fails the signature', async () => {
    const authenticator = authenticatorAt(NOW_SECONDS);
    const tampered = sign();
    tampered.rawBody = Buffer.from(JSON.stringify({ ...BODY, status: 'failed' }));
    await expect(authenticator.verify(tampered, 'seller', config)).resolves.toMatchObject({
      reason: 'webhook_signature_digest_mismatch',
    });

    const forged = sign();
    const forgedBody = JSON.stringify({ ...BODY, status: 'failed' });
    forged.rawBody = Buffer.from(forgedBody);
    forged.headers['content-digest'] = signWebhookRequest({
      url: URL_FOR_OP,
      body: forgedBody,
      key: key.signerKey,
    }).headers['content-digest'];
    await expect(authenticator.verify(forged, 'seller', config)).resolves.toMatchObject({
      reason: 'webhook_signature_invalid',
    });
  });

  test('a webhook signed for one operation does not verify at another operation’s URL', async () => {
    const request = { ...sign(), url: `${URL_FOR_OP}-other` };
    await expect(authenticatorAt(NOW_SECONDS).verify(request, 'seller', config)).resolves.toMatchObject({
      reason: 'webhook_signature_invalid',
    });
  });

  test('an expired signature is outside the window', async () => {
    await expect(authenticatorAt(NOW_SECONDS + 300 + 61).verify(sign(), 'seller', config)).resolves.toMatchObject({
      reason: 'webhook_signature_window_invalid',
    });
  });

  test('a request-signing tag is refused on the webhook route', async () => {
    await expect(
      authenticatorAt(NOW_SECONDS).verify(sign({ tag: 'adcp/request-signing/v1' }), 'seller', config),
    ).resolves.toMatchObject({
      reason: 'webhook_signature_tag_invalid',
    });
  });

  test('an unsigned request is refused', async () => {
    const request: WebhookRequest = {
      method: 'POST',
      url: URL_FOR_OP,
      headers: { 'content-type': 'application/json' },
      rawBody: Buffer.from('{}'),
    };
    await expect(authenticatorAt(NOW_SECONDS).verify(request, 'seller', config)).resolves.toMatchObject({
      ok: false,
      reason: 'webhook_signature_header_malformed',
      status: 401,
    });
  });

  test('a body that is not UTF-8 is a bad request, not a signature question', async () => {
    const request = { ...sign(), rawBody: Buffer.from([0x7b, 0xff, 0x7d]) };
    await expect(authenticatorAt(NOW_SECONDS).verify(request, 'seller', config)).resolves.toMatchObject({
      reason: 'body_not_utf8',
      status: 400,
    });
  });
});

describe('RFC 9421 keys from jwks_uri (through @adcp/sdk HttpsJwksResolver)', () => {
  let original: WebhookSigningKey;
  let rotated: WebhookSigningKey;
  let server: Server;
  let jwksUri: string;
  let config: WebhookAuthConfig;
  // What the seller's JWKS endpoint serves; each test sets it.
  let published: unknown[] = [];
  let failWith: number | undefined;
  let fetches = 0;
  let notModified = 0;
  let version = 1;

  beforeAll(async () => {
    original = mintWebhookSigningKey('seller-key-1');
    rotated = mintWebhookSigningKey('seller-key-2');
    server = createServer((request, response) => {
      fetches++;
      if (failWith !== undefined) {
        response.statusCode = failWith;
        response.end();
        return;
      }
      const etag = `"v${version}"`;
      if (request.headers['if-none-match'] === etag) {
        notModified++;
        response.statusCode = 304;
        response.end();
        return;
      }
      response.setHeader('content-type', 'application/jwk-set+json');
      response.setHeader('etag', etag);
      response.end(JSON.stringify({ keys: published }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    jwksUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
    config = webhookAuthSchema.parse({ scheme: 'rfc9421', jwks_uri: jwksUri });
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => {
    published = [original.publicJwk];
    failWith = undefined;
    fetches = 0;
    notModified = 0;
    version++;
  });

  const signedBy = (key: WebhookSigningKey, nonce: string, nowSeconds: number) =>
    asWebhookRequest(signWebhookRequest({ url: URL_FOR_OP, body: BODY, key: key.signerKey, nowSeconds, nonce }));

  test('an unknown kid refetches the JWKS (key rotation), at most once per cooldown', async () => {
    let now = NOW_SECONDS;
    const authenticator = new WebhookAuthenticator({ now: () => now * 1000, jwksRefreshCooldownMs: 30_000 });

    await expect(
      authenticator.verify(signedBy(original, 'nonce-rotation-000001', now), 'seller', config),
    ).resolves.toMatchObject({ ok: true, keyId: 'seller-key-1' });
    expect(fetches).toBe(1);

    // The seller rotates. Within the cooldown the new kid is unknown and nothing is fetched.
    published = [original.publicJwk, rotated.publicJwk];
    version++;
    now += 10;
    await expect(
      authenticator.verify(signedBy(rotated, 'nonce-rotation-000002', now), 'seller', config),
    ).resolves.toMatchObject({ reason: 'webhook_signature_key_unknown' });
    expect(fetches).toBe(1);

    // After the cooldown the unknown kid triggers one refetch and verifies.
    now += 21;
    await expect(
      authenticator.verify(signedBy(rotated, 'nonce-rotation-000003', now), 'seller', config),
    ).resolves.toMatchObject({ ok: true, keyId: 'seller-key-2' });
    expect(fetches).toBe(2);

    // A stream of made-up kids cannot make the gateway hammer the seller.
    const stranger = mintWebhookSigningKey('made-up-kid');
    for (let i = 0; i < 5; i++) {
      await expect(
        authenticator.verify(signedBy(stranger, `nonce-stranger-00000${i}`, now), 'seller', config),
      ).resolves.toMatchObject({ reason: 'webhook_signature_key_unknown' });
    }
    expect(fetches).toBe(2);
  });

  test('known keys are served from cache until the TTL, then revalidated with the ETag', async () => {
    let now = NOW_SECONDS;
    const authenticator = new WebhookAuthenticator({ now: () => now * 1000, jwksCacheTtlMs: 600_000 });
    for (let i = 0; i < 3; i++) {
      await expect(
        authenticator.verify(signedBy(original, `nonce-cache-00000000${i}`, now), 'seller', config),
      ).resolves.toMatchObject({ ok: true });
    }
    expect(fetches).toBe(1);
    now += 601;
    await expect(
      authenticator.verify(signedBy(original, 'nonce-cache-000000009', now), 'seller', config),
    ).resolves.toMatchObject({ ok: true });
    expect(fetches).toBe(2);
    expect(notModified).toBe(1);
  });

  test('an unreachable JWKS with nothing cached is a 503, so the seller retries', async () => {
    failWith = 502;
    await expect(
      authenticatorAt(NOW_SECONDS).verify(signedBy(original, 'nonce-unreachable-0001', NOW_SECONDS), 'seller', config),
    ).resolves.toMatchObject({ ok: false, reason: 'jwks_unavailable', status: 503 });
  });

  test('a failed refresh keeps using the last good keys', async () => {
    let now = NOW_SECONDS;
    const authenticator = new WebhookAuthenticator({ now: () => now * 1000, jwksCacheTtlMs: 60_000 });
    await expect(
      authenticator.verify(signedBy(original, 'nonce-stale-0000000001', now), 'seller', config),
    ).resolves.toMatchObject({ ok: true });
    failWith = 502;
    now += 120;
    await expect(
      authenticator.verify(signedBy(original, 'nonce-stale-0000000002', now), 'seller', config),
    ).resolves.toMatchObject({ ok: true });
    expect(fetches).toBe(2);
  });

  test('a jwks_uri on a private address is refused unless development fetches are allowed', async () => {
    const privateConfig = webhookAuthSchema.parse({ scheme: 'rfc9421', jwks_uri: 'https://10.0.0.1/jwks.json' });
    await expect(
      authenticatorAt(NOW_SECONDS).verify(
        signedBy(original, 'nonce-private-00000001', NOW_SECONDS),
        'seller',
        privateConfig,
      ),
    ).resolves.toMatchObject({ ok: false, reason: 'jwks_unavailable' });
  });
});

describe('BoundedReplayStore', () => {
  test('a nonce is a replay until its TTL passes', async () => {
    const store = new BoundedReplayStore();
    expect(await store.insert('kid', 'https://a/1', 'n1', 360, 1000)).toBe('ok');
    expect(await store.has('kid', 'https://a/1', 'n1', 1359)).toBe(true);
    expect(await store.insert('kid', 'https://a/1', 'n1', 360, 1359)).toBe('replayed');
    expect(await store.has('kid', 'https://a/2', 'n1', 1359)).toBe(false);
    expect(await store.has('kid', 'https://a/1', 'n1', 1360)).toBe(false);
    expect(await store.insert('kid', 'https://a/1', 'n1', 360, 1360)).toBe('ok');
  });

  test('the per-(key, endpoint) cap reports rate abuse', async () => {
    const store = new BoundedReplayStore({ maxEntriesPerScope: 2 });
    expect(await store.insert('kid', 'https://a/1', 'n1', 360, 0)).toBe('ok');
    expect(await store.isCapHit('kid', 'https://a/1', 0)).toBe(false);
    expect(await store.insert('kid', 'https://a/1', 'n2', 360, 0)).toBe('ok');
    expect(await store.isCapHit('kid', 'https://a/1', 0)).toBe(true);
    expect(await store.insert('kid', 'https://a/1', 'n3', 360, 0)).toBe('rate_abuse');
    expect(await store.insert('kid', 'https://a/2', 'n3', 360, 0)).toBe('ok');
    expect(await store.isCapHit('kid', 'https://a/1', 360)).toBe(false);
  });

  test('the total is bounded: full of live nonces it refuses, expired ones make room', async () => {
    const store = new BoundedReplayStore({ maxEntries: 3 });
    for (const [i, ttl] of [
      [1, 100],
      [2, 400],
      [3, 200],
    ] as const)
      expect(await store.insert('kid', `https://a/${i}`, 'n', ttl, 0)).toBe('ok');
    expect(await store.insert('kid', 'https://a/4', 'n', 360, 50)).toBe('rate_abuse');
    expect(await store.insert('kid', 'https://a/4', 'n', 360, 150)).toBe('ok');
    expect(store.size).toBe(3);
    // Full again at 250: the third entry has expired behind a live one, and a full sweep finds it.
    expect(await store.insert('kid', 'https://a/5', 'n', 360, 250)).toBe('ok');
    expect(store.size).toBe(3);
    expect(await store.has('kid', 'https://a/2', 'n', 250)).toBe(true);
    expect(await store.has('kid', 'https://a/3', 'n', 250)).toBe(false);
  });
});

describe('webhookAuthSchema', () => {
  const fail = (input: unknown) => {
    const result = webhookAuthSchema.safeParse(input);
    expect(result.success).toBe(false);
    return result.error!.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('\n');
  };

  test.each([
    [
      'rfc9421 with inline keys',
      { scheme: 'rfc9421', jwks: { keys: [{ kid: 'k', kty: 'OKP', crv: 'Ed25519', x: 'abc' }] } },
    ],
    [
      'rfc9421 with jwks_uri and revocations',
      { scheme: 'rfc9421', jwks_uri: 'https://seller.example/jwks.json', revoked_key_ids: ['old'] },
    ],
    ['hmac with compat', { scheme: 'hmac-sha256', secret_env: 'SELLER_SECRET', compat: { iso_timestamp: true } }],
    ['bearer', { scheme: 'bearer', token_env: 'SELLER_TOKEN' }],
  ])('accepts %s', (_label, input) => {
    expect(webhookAuthSchema.safeParse(input).success).toBe(true);
  });

  test.each([
    ['no scheme (bearer is never a default)', { token_env: 'SELLER_TOKEN' }, /^scheme: Expected scheme/],
    ['rfc9421 without keys', { scheme: 'rfc9421' }, /set "jwks".*or "jwks_uri"/],
    ['hmac without secret_env', { scheme: 'hmac-sha256' }, /needs "secret_env"/],
    ['bearer without token_env', { scheme: 'bearer' }, /needs "token_env"/],
    ['an inline secret', { scheme: 'hmac-sha256', secret_env: 'SELLER_SECRET', secret: 'x'.repeat(40) }, /secret/],
    [
      'a secret value in secret_env',
      { scheme: 'hmac-sha256', secret_env: 'this is my secret value!!' },
      /name of an environment variable/,
    ],
    [
      'a private key in jwks',
      { scheme: 'rfc9421', jwks: { keys: [{ kid: 'k', kty: 'OKP', x: 'a', d: 'b' }] } },
      /private key material/,
    ],
    ['an RSA key', { scheme: 'rfc9421', jwks: { keys: [{ kid: 'k', kty: 'RSA' }] } }, /kty/],
    ['plain http jwks_uri off loopback', { scheme: 'rfc9421', jwks_uri: 'http://seller.example/jwks.json' }, /https/],
    [
      'hmac fields under rfc9421',
      { scheme: 'rfc9421', jwks_uri: 'https://s.example/j', secret_env: 'S' },
      /"secret_env" is only used with scheme "hmac-sha256"/,
    ],
    [
      'compat under bearer',
      { scheme: 'bearer', token_env: 'T', compat: { iso_timestamp: true } },
      /"compat" is only used/,
    ],
  ])('rejects %s', (_label, input, message) => {
    expect(fail(input)).toMatch(message);
  });

  test('credentials are read from the environment and checked for length', () => {
    const config = webhookAuthSchema.parse({ scheme: 'hmac-sha256', secret_env: 'SELLER_SECRET' });
    expect(resolveWebhookCredentials(config, { SELLER_SECRET: HMAC_SECRET })).toEqual({ hmacSecret: HMAC_SECRET });
    expect(() => resolveWebhookCredentials(config, {}, 'acme')).toThrow(
      'Seller acme: environment variable SELLER_SECRET (the HMAC-SHA256 webhook secret) is not set',
    );
    expect(() => resolveWebhookCredentials(config, { SELLER_SECRET: 'short' }, 'acme')).toThrow(
      /is 5 characters; at least 32 are required/,
    );
  });
});
