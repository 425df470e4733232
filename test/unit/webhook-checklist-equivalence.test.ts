/**
 * Our RFC 9421 checklist (api/webhook-verification/rfc9421-checklist.ts) against @adcp/sdk's verifyWebhookSignature,
 * which the gateway used before: for a valid webhook and for one broken at each step, both must answer the same
 * (the keyid, or the same error class, code and failed step), with the same stores in the same state. The official
 * vectors (webhook-conformance.test.ts) cover the spec's codes; this covers the order and the paths they do not.
 */
// @adcp/sdk/signing/server loads the ESM-only `jose` at require time (for code these tests never call).
jest.mock('jose', () => ({}));

import { isUtf8 } from 'node:buffer';
import {
  InMemoryReplayStore,
  RequestSignatureError,
  WebhookSignatureError,
  verifyWebhookSignature,
  type AdcpJsonWebKey,
  type JwksResolver,
  type RevocationStore,
} from '@adcp/sdk/signing/server';
import { canonicalizeTargetUri } from '../../api/webhook-verification';
import { VerificationKeyCache } from '../../api/webhook-verification/key-cache';
import { verifyWebhookChecklist } from '../../api/webhook-verification/rfc9421-checklist';
import { mintWebhookSigningKey, signWebhookRequest, type SignedWebhook } from '../fixtures/webhook-signing';

const NOW = 1_776_520_800;
const URL_FOR_OP = 'https://buyer.example.com/webhooks/adcp/seller/adcp-create_media_buy-t:op-1?x=%7e1';
const BODY = { task_id: 'task_1', task_type: 'create_media_buy', status: 'working' };

const key = mintWebhookSigningKey('equivalence-key');
const other = mintWebhookSigningKey('other-key');

interface Case {
  signed?: SignedWebhook;
  headers?: (headers: Record<string, string>) => Record<string, string>;
  body?: Buffer;
  now?: number;
  keys?: Record<string, AdcpJsonWebKey>;
  /** The resolver answers this key whatever kid is asked. */
  answerKey?: AdcpJsonWebKey;
  revoked?: 'revoked' | 'stale';
  /** Deliver the same webhook first (replay) or fill the per-key cap. */
  before?: 'same' | 'cap';
}

type Verdict = { keyid: string } | { error: string; code?: string; step?: number };

function verdictOf(run: () => Promise<string>): Promise<Verdict> {
  return run().then(
    (keyid) => ({ keyid }),
    (err: unknown) =>
      err instanceof WebhookSignatureError || err instanceof RequestSignatureError
        ? { error: err.constructor.name, code: err.code, step: err.failedStep }
        : { error: String(err) },
  );
}

function setUp(testCase: Case) {
  const keys = testCase.keys ?? { [key.publicJwk.kid]: key.publicJwk };
  const jwks: JwksResolver = {
    resolve: async (kid) => testCase.answerKey ?? keys[kid] ?? null,
  };
  const revocationStore: RevocationStore = {
    isRevoked: async () => {
      if (testCase.revoked === 'stale') {
        throw new RequestSignatureError('request_signature_revocation_stale', 9, 'stale');
      }
      return testCase.revoked === 'revoked';
    },
  };
  const replayStore = new InMemoryReplayStore(testCase.before === 'cap' ? { maxEntriesPerKeyid: 1 } : {});
  return { jwks, revocationStore, replayStore };
}

async function both(testCase: Case): Promise<{ ours: Verdict; sdk: Verdict }> {
  const signed =
    testCase.signed ?? signWebhookRequest({ url: URL_FOR_OP, body: BODY, key: key.signerKey, nowSeconds: NOW });
  const headers = testCase.headers ? testCase.headers({ ...signed.headers }) : signed.headers;
  const body = testCase.body ?? signed.body;
  const now = testCase.now ?? NOW;
  const targetUri = canonicalizeTargetUri(signed.url).targetUri;
  const ours = setUp(testCase);
  const sdk = setUp(testCase);
  const runOurs = () =>
    verifyWebhookChecklist(
      { method: 'POST', targetUri, headers, rawBody: body },
      { ...ours, keys: new VerificationKeyCache(), now },
    );
  const runSdk = () =>
    verifyWebhookSignature(
      { method: 'POST', url: targetUri, headers, body: body.toString('utf8') },
      { ...sdk, now: () => now },
    ).then((verified) => verified.keyid);
  if (testCase.before) {
    const first =
      testCase.before === 'same'
        ? signed
        : signWebhookRequest({
            url: signed.url,
            body: BODY,
            key: key.signerKey,
            nowSeconds: NOW,
            nonce: 'cap-filler-0001',
          });
    await verifyWebhookChecklist(
      { method: 'POST', targetUri, headers: first.headers, rawBody: first.body },
      { ...ours, keys: new VerificationKeyCache(), now },
    );
    await verifyWebhookSignature(
      { method: 'POST', url: targetUri, headers: first.headers, body: first.body.toString('utf8') },
      { ...sdk, now: () => now },
    );
  }
  return { ours: await verdictOf(runOurs), sdk: await verdictOf(runSdk) };
}

const replaceIn = (name: string, from: string | RegExp, to: string) => (headers: Record<string, string>) => ({
  ...headers,
  [name]: headers[name].replace(from, to),
});
const without = (name: string) => (headers: Record<string, string>) => {
  const { [name]: _dropped, ...rest } = headers;
  return rest;
};

const cases: Array<[string, Case]> = [
  ['a valid webhook', {}],
  [
    'header names in another case',
    { headers: (h) => Object.fromEntries(Object.entries(h).map(([n, v]) => [n.toUpperCase(), v])) },
  ],
  ['no Signature', { headers: without('signature') }],
  ['no Signature-Input', { headers: without('signature-input') }],
  ['an unparseable Signature-Input', { headers: (h) => ({ ...h, 'signature-input': 'sig1=(' }) }],
  ['an unparseable Signature', { headers: (h) => ({ ...h, signature: 'sig1=:not base64!:' }) }],
  ['a Signature for another label', { headers: replaceIn('signature', /^sig1=/, 'sig2=') }],
  [
    'Signature-Input declaring a label twice',
    { headers: (h) => ({ ...h, 'signature-input': `${h['signature-input']}, sig1=()` }) },
  ],
  ['a missing parameter', { headers: replaceIn('signature-input', /;nonce="[^"]*"/, '') }],
  ['another tag', { headers: replaceIn('signature-input', 'adcp/webhook-signing/v1', 'adcp/request-signing/v1') }],
  ['an alg not allowed', { headers: replaceIn('signature-input', 'alg="ed25519"', 'alg="rsa-pss-sha512"') }],
  ['expired', { now: NOW + 3600 }],
  ['from the future', { now: NOW - 3600 }],
  [
    'a window too long',
    {
      signed: signWebhookRequest({
        url: URL_FOR_OP,
        body: BODY,
        key: key.signerKey,
        nowSeconds: NOW,
        windowSeconds: 900,
      }),
    },
  ],
  ['content-digest not covered', { headers: replaceIn('signature-input', ' "content-digest"', '') }],
  [
    'a derived component outside the profile',
    { headers: replaceIn('signature-input', '"@method"', '"@method" "@path"') },
  ],
  ['a covered header that is absent', { headers: replaceIn('signature-input', '"@method"', '"@method" "x-absent"') }],
  ['Content-Digest covered but absent', { headers: without('content-digest') }],
  [
    'a plain-http target off loopback',
    {
      signed: signWebhookRequest({
        url: 'http://buyer.example.com/webhooks/adcp/s/op',
        body: BODY,
        key: key.signerKey,
        nowSeconds: NOW,
      }),
    },
  ],
  [
    'a plain-http target on loopback',
    {
      signed: signWebhookRequest({
        url: 'http://127.0.0.1:8080/webhooks/adcp/s/op',
        body: BODY,
        key: key.signerKey,
        nowSeconds: NOW,
      }),
    },
  ],
  ['an unknown kid', { keys: {} }],
  ['a resolver answering another kid', { answerKey: other.publicJwk }],
  ['a key without adcp_use', { keys: { [key.publicJwk.kid]: { ...key.publicJwk, adcp_use: undefined } } }],
  ['a key without the verify op', { keys: { [key.publicJwk.kid]: { ...key.publicJwk, key_ops: ['sign'] } } }],
  ['a request-signing key', { keys: { [key.publicJwk.kid]: { ...key.publicJwk, adcp_use: 'request-signing' } } }],
  ['a key that does not import', { keys: { [key.publicJwk.kid]: { ...key.publicJwk, x: 'AAAA' } } }],
  ['another key under the kid', { keys: { [key.publicJwk.kid]: { ...other.publicJwk, kid: key.publicJwk.kid } } }],
  ['a revoked key', { revoked: 'revoked' }],
  ['a stale revocation list', { revoked: 'stale' }],
  ['a replayed nonce', { before: 'same' }],
  ['the per-key cap used up', { before: 'cap' }],
  ['a signature that does not verify', { headers: replaceIn('signature', /^sig1=:(.)/, 'sig1=:A') }],
  ['a body that is not the signed one', { body: Buffer.from(JSON.stringify({ ...BODY, status: 'completed' })) }],
  ['a Content-Digest of another body', { headers: (h) => ({ ...h, 'content-digest': 'sha-256=:AAAA:' }) }],
];

describe('our RFC 9421 checklist answers as the SDK verifier did', () => {
  test.each(cases)('%s', async (_name, testCase) => {
    const { ours, sdk } = await both(testCase);
    expect(ours).toEqual(sdk);
  });

  test('the cases reach every outcome they are meant to (not all the same failure)', async () => {
    const codes = new Set<string>();
    for (const [, testCase] of cases) {
      const { ours } = await both(testCase);
      codes.add('keyid' in ours ? 'verified' : `${ours.code}@${ours.step}`);
    }
    expect([...codes].sort()).toEqual(
      [
        'verified',
        'webhook_signature_header_malformed@1',
        'webhook_signature_params_incomplete@2',
        'webhook_signature_tag_invalid@3',
        'webhook_signature_alg_not_allowed@4',
        'webhook_signature_window_invalid@5',
        'webhook_signature_components_incomplete@6',
        'request_signature_components_unexpected@6',
        'request_signature_components_incomplete@6',
        'webhook_target_uri_malformed@6',
        'webhook_signature_key_unknown@7',
        'request_signature_key_unknown@7',
        'webhook_signature_key_purpose_invalid@8',
        'webhook_mode_mismatch@8',
        'webhook_signature_key_revoked@9',
        'webhook_signature_revocation_stale@9',
        'webhook_signature_replayed@12',
        'webhook_signature_rate_abuse@9',
        'webhook_signature_invalid@10',
        'webhook_signature_digest_mismatch@11',
      ].sort(),
    );
  });
});

test('the UTF-8 check (isUtf8) accepts exactly what the strict decoder used before accepted', () => {
  const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const decodes = (bytes: Buffer) => {
    try {
      strict.decode(bytes);
      return true;
    } catch {
      return false;
    }
  };
  const samples = [
    '{"a":"plain"}',
    'efbbbf7b7d', // BOM then {}
    'c3a9', // é
    'c0af', // overlong /
    'eda080', // a UTF-16 surrogate
    'f4908080', // above U+10FFFF
    'e282', // truncated
    'f09f9880', // an emoji
    'ff',
    '',
  ].map((sample) => (/^[0-9a-f]*$/.test(sample) ? Buffer.from(sample, 'hex') : Buffer.from(sample)));
  let seed = 7;
  for (let i = 0; i < 2000; i++) {
    const bytes = Buffer.alloc(1 + (i % 6));
    for (let j = 0; j < bytes.length; j++) {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      bytes[j] = [0x41, 0x7f, 0x80, 0xbf, 0xc2, 0xe0, 0xed, 0xf0, 0xf4, 0xf5][seed % 10];
    }
    samples.push(bytes);
  }
  for (const bytes of samples)
    expect([bytes.toString('hex'), isUtf8(bytes)]).toEqual([bytes.toString('hex'), decodes(bytes)]);
});
