/**
 * Seller keys are imported into KeyObjects once (api/webhook-verification/key-cache.ts), and a key rotated under the
 * same kid must never be checked against the old KeyObject: in the cache itself, and end to end through a seller's
 * `jwks_uri` that starts serving another key under the kid it always used. Target-URI derivations are remembered
 * (StringMemo) within a bound, and their failures are not.
 */
// @adcp/sdk/signing/server loads the ESM-only `jose` at require time (for code these tests never call).
jest.mock('jose', () => ({}));

import { sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RequestSignatureError, verifySignature, type AdcpJsonWebKey } from '@adcp/sdk/signing/server';
import { webhookAuthSchema } from '../../config/webhook-auth';
import { WebhookAuthenticator } from '../../api/webhook-verification';
import { VerificationKeyCache } from '../../api/webhook-verification/key-cache';
import { StringMemo } from '../../api/webhook-verification/string-memo';
import {
  asWebhookRequest,
  mintWebhookSigningKey,
  signWebhookRequest,
  type WebhookSigningKey,
} from '../fixtures/webhook-signing';

const DATA = Buffer.from('the signature base');

function signatureBy(key: WebhookSigningKey): Buffer {
  const { privateKey } = key.signerKey as unknown as { privateKey: Record<string, unknown> };
  return sign(null, DATA, { key: { ...privateKey, key_ops: undefined } as never, format: 'jwk' });
}

describe('VerificationKeyCache', () => {
  test('a JWK is imported once and the KeyObject verifies its signatures', () => {
    const key = mintWebhookSigningKey('kid-a');
    const cache = new VerificationKeyCache();
    const first = cache.publicKeyFor(key.publicJwk);
    expect(cache.publicKeyFor(key.publicJwk)).toBe(first);
    // An equal JWK in another object (a refetched JWKS) finds the same import.
    expect(cache.publicKeyFor({ ...key.publicJwk })).toBe(first);
    expect(cache.size).toBe(1);
    expect(verifySignature('ed25519', first, DATA, signatureBy(key))).toBe(true);
  });

  test('a key rotated under the same kid is imported afresh, in a new object or changed in place', () => {
    const before = mintWebhookSigningKey('kid-rotating');
    const after = mintWebhookSigningKey('kid-rotating');
    const cache = new VerificationKeyCache();
    const oldKey = cache.publicKeyFor(before.publicJwk);

    const newKey = cache.publicKeyFor(after.publicJwk);
    expect(newKey).not.toBe(oldKey);
    expect(verifySignature('ed25519', newKey, DATA, signatureBy(after))).toBe(true);
    expect(verifySignature('ed25519', newKey, DATA, signatureBy(before))).toBe(false);

    // The same JWK object given new key material (nobody should, but a stale KeyObject must not survive it).
    const mutable: AdcpJsonWebKey = { ...before.publicJwk };
    expect(cache.publicKeyFor(mutable)).toBe(oldKey);
    mutable.x = after.publicJwk.x;
    expect(verifySignature('ed25519', cache.publicKeyFor(mutable), DATA, signatureBy(after))).toBe(true);
  });

  test('the cache is bounded: the least recently used key goes first', () => {
    const keys = ['k1', 'k2', 'k3'].map((kid) => mintWebhookSigningKey(kid).publicJwk);
    const cache = new VerificationKeyCache({ maxEntries: 2 });
    const first = cache.publicKeyFor(keys[0]);
    cache.publicKeyFor(keys[1]);
    cache.publicKeyFor({ ...keys[0] }); // k1 used again: k2 is now the oldest
    cache.publicKeyFor(keys[2]);
    expect(cache.size).toBe(2);
    expect(cache.publicKeyFor({ ...keys[0] })).toBe(first);
    expect(cache.size).toBe(2);
    for (let i = 0; i < 50; i++) cache.publicKeyFor(mintWebhookSigningKey(`many-${i}`).publicJwk);
    expect(cache.size).toBe(2);
  });

  test('a JWK that does not import throws the SDK error and is not cached', () => {
    const cache = new VerificationKeyCache();
    const broken: AdcpJsonWebKey = { kid: 'broken', kty: 'OKP', crv: 'Ed25519', x: 'not-a-key' };
    expect(() => cache.publicKeyFor(broken)).toThrow(RequestSignatureError);
    expect(() => cache.publicKeyFor(broken)).toThrow(
      expect.objectContaining({ code: 'request_signature_key_unknown' }),
    );
    expect(cache.size).toBe(0);
  });
});

describe('StringMemo', () => {
  test('answers are remembered within the bound; throws are not', () => {
    const calls: string[] = [];
    const memo = new StringMemo((input: string) => {
      calls.push(input);
      if (input === 'bad') throw new Error('bad input');
      return { upper: input.toUpperCase() };
    }, 2);
    const first = memo.get('a');
    expect(memo.get('a')).toBe(first);
    expect(calls).toEqual(['a']);
    expect(() => memo.get('bad')).toThrow('bad input');
    expect(() => memo.get('bad')).toThrow('bad input');
    expect(calls).toEqual(['a', 'bad', 'bad']);
    memo.get('b');
    memo.get('c'); // the bound is 2: 'a' goes
    expect(memo.size).toBe(2);
    expect(memo.get('a')).toEqual(first);
    expect(memo.get('a')).not.toBe(first);
    expect(calls).toEqual(['a', 'bad', 'bad', 'b', 'c', 'a']);
  });
});

describe('a seller rotating its key under the same kid at its jwks_uri', () => {
  let server: Server;
  let published: AdcpJsonWebKey[] = [];
  let fetches = 0;

  beforeAll(async () => {
    server = createServer((_request, response) => {
      fetches++;
      response.setHeader('content-type', 'application/jwk-set+json');
      response.end(JSON.stringify({ keys: published }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test('webhooks signed with the new key verify after the refetch, the old key is refused', async () => {
    const url = 'https://buyer.example.com/webhooks/adcp/seller/adcp-create_media_buy-t:op-rotate';
    const body = { task_id: 'task_1', task_type: 'create_media_buy', status: 'working' };
    const config = webhookAuthSchema.parse({
      scheme: 'rfc9421',
      jwks_uri: `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`,
    });
    let now = 1_776_520_800;
    const authenticator = new WebhookAuthenticator({ now: () => now * 1000, jwksCacheTtlMs: 60_000 });
    const signedBy = (key: WebhookSigningKey, nonce: string) =>
      asWebhookRequest(signWebhookRequest({ url, body, key: key.signerKey, nowSeconds: now, nonce }));

    const before = mintWebhookSigningKey('seller-signing-key');
    const after = mintWebhookSigningKey('seller-signing-key');
    published = [before.publicJwk];
    await expect(authenticator.verify(signedBy(before, 'nonce-rotate-000001'), 'seller', config)).resolves.toEqual({
      ok: true,
      scheme: 'rfc9421',
      keyId: 'seller-signing-key',
    });

    published = [after.publicJwk];
    now += 120; // past the JWKS TTL: the next webhook refetches
    await expect(authenticator.verify(signedBy(after, 'nonce-rotate-000002'), 'seller', config)).resolves.toEqual({
      ok: true,
      scheme: 'rfc9421',
      keyId: 'seller-signing-key',
    });
    expect(fetches).toBe(2);
    await expect(
      authenticator.verify(signedBy(before, 'nonce-rotate-000003'), 'seller', config),
    ).resolves.toMatchObject({
      ok: false,
      reason: 'webhook_signature_invalid',
      status: 401,
    });
  });
});
