/**
 * api/webhook-verification/signature-headers.ts reads canonical `Signature-Input` / `Signature` headers without the
 * SDK's general parser. Whatever it reads must be exactly what the SDK's parseSignatureInput / parseSignature answer
 * (the same fields, the same `@signature-params` text, the same error): checked here over the official vectors,
 * hand-picked edge cases, and thousands of random mutations of a real seller's headers.
 */
// @adcp/sdk/signing/server loads the ESM-only `jose` at require time (for code these tests never call).
jest.mock('jose', () => ({}));

import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import * as sdk from '@adcp/sdk/signing/server';
import {
  contentDigestMatchesBody,
  readContentDigestSha256,
  readSignature,
  readSignatureInput,
} from '../../api/webhook-verification/signature-headers';
import { mintWebhookSigningKey, signWebhookRequest } from '../fixtures/webhook-signing';

type Outcome = { value: unknown } | { error: string };

function outcome(read: () => unknown): Outcome {
  try {
    const value = read();
    // Compare bytes as plain arrays: the SDK answers a Uint8Array, the fast path a Uint8Array over a Buffer's memory.
    if (value && typeof value === 'object' && 'bytes' in value) {
      const { bytes, ...rest } = value as { bytes: Uint8Array };
      return { value: { ...rest, bytes: Array.from(bytes) } };
    }
    return { value };
  } catch (err) {
    return { error: `${(err as Error).constructor.name} ${(err as { code?: string }).code} ${(err as Error).message}` };
  }
}

function expectSameInput(header: string): void {
  expect(outcome(() => readSignatureInput(header))).toEqual(outcome(() => sdk.parseSignatureInput(header)));
}

function expectSameSignature(header: string, label: string): void {
  expect(outcome(() => readSignature(header, label))).toEqual(outcome(() => sdk.parseSignature(header, label)));
}

const SIGNING_DIR = path.resolve(__dirname, '../conformance/webhook-signing-3.0.6');
const vectorHeaders = ['positive', 'negative'].flatMap((folder) =>
  readdirSync(path.join(SIGNING_DIR, folder))
    .filter((file) => file.endsWith('.json'))
    .map((file) => {
      const vector = JSON.parse(readFileSync(path.join(SIGNING_DIR, folder, file), 'utf8')) as {
        request: { headers: Record<string, string> };
      };
      const header = (name: string) => sdk.getHeaderValue(vector.request.headers, name);
      return [`${folder}/${file}`, header('Signature-Input'), header('Signature')] as const;
    }),
);

const key = mintWebhookSigningKey('headers-test-key');
const signed = signWebhookRequest({
  url: 'https://buyer.example/webhooks/adcp/seller/adcp-create_media_buy-t:op-1',
  body: { task_id: 'task-1', status: 'working' },
  key: key.signerKey,
});
const SELLER_INPUT = signed.headers['signature-input'];
const SELLER_SIGNATURE = signed.headers['signature'];

describe('signature headers read without the general parser', () => {
  test.each(vectorHeaders)('%s: the same as the SDK', (_name, input, signature) => {
    if (input !== undefined) expectSameInput(input);
    if (signature !== undefined) {
      const label = outcome(() => sdk.parseSignatureInput(input ?? ''));
      expectSameSignature(signature, 'value' in label ? (label.value as { label: string }).label : 'sig1');
    }
  });

  test("a seller's canonical headers are read by the fast path, not the SDK parser", () => {
    const expectedInput = sdk.parseSignatureInput(SELLER_INPUT);
    const expectedBytes = Array.from(sdk.parseSignature(SELLER_SIGNATURE, 'sig1').bytes);
    const parseInput = jest.spyOn(sdk, 'parseSignatureInput');
    const parseSignature = jest.spyOn(sdk, 'parseSignature');
    try {
      const input = readSignatureInput(SELLER_INPUT);
      const signature = readSignature(SELLER_SIGNATURE, input.label);
      expect(parseInput).not.toHaveBeenCalled();
      expect(parseSignature).not.toHaveBeenCalled();
      expect(input).toEqual(expectedInput);
      expect(Array.from(signature.bytes)).toEqual(expectedBytes);
      expect(signature.bytes).toHaveLength(64);
      // Forms the fast path does not take go to the SDK parsers.
      readSignatureInput(` ${SELLER_INPUT}`);
      readSignature(`${SELLER_SIGNATURE}, sig2=:AA==:`, 'sig1');
      expect(parseInput).toHaveBeenCalledTimes(1);
      expect(parseSignature).toHaveBeenCalledTimes(1);
    } finally {
      parseInput.mockRestore();
      parseSignature.mockRestore();
    }
  });

  const base = '("@method" "@target-uri" "@authority" "content-type" "content-digest")';
  const params =
    ';created=1776520800;expires=1776521100;nonce="n-1";keyid="k1";alg="ed25519";tag="adcp/webhook-signing/v1"';
  test.each([
    ['canonical', `sig1=${base}${params}`],
    ['another label', `sig2=${base}${params}`],
    ['two members', `sig2=${base}${params}, sig1=${base}${params}`],
    ['the same label twice', `sig1=${base}${params}, sig1=${base}`],
    ['leading zeros', `sig1=${base};created=01776520800;expires=1776521100`],
    ['negative zero', `sig1=${base};created=-0;expires=1`],
    ['negative integer', `sig1=${base};created=-5;expires=1`],
    ['a 16-digit integer', `sig1=${base};created=1234567890123456`],
    ['a decimal', `sig1=${base};created=1.5`],
    ['a string where an integer belongs', `sig1=${base};created="1"`],
    ['an integer where a string belongs', `sig1=${base};nonce=5`],
    ['a token parameter', `sig1=${base};alg=ed25519`],
    ['a boolean parameter', `sig1=${base};req;created=1`],
    ['an unknown parameter', `sig1=${base}${params};extra="x";n=3`],
    ['a repeated parameter', `sig1=${base};nonce="a";nonce="b"`],
    ['escapes in a string', `sig1=("@method" "a\\"b");nonce="c\\\\d"`],
    ['a component with parameters', `sig1=("@method";req "content-type")${params}`],
    ['a token component', `sig1=(content-type)${params}`],
    ['an empty list', `sig1=()${params}`],
    ['double spaces', `sig1=("@method"  "@authority")${params}`],
    ['space inside the list', `sig1=( "@method")${params}`],
    ['space after a semicolon', `sig1=${base}; created=1`],
    ['an upper-case label', `Sig1=${base}${params}`],
    ['not a list', `sig1="@method"${params}`],
    ['a trailing comma', `sig1=${base}${params},`],
    ['non-ASCII in a string', `sig1=("@méthod")${params}`],
    ['a control character', `sig1=("@method\u0001")${params}`],
    ['empty', ''],
  ])('Signature-Input, %s: the same as the SDK', (_name, header) => expectSameInput(header));

  test.each([
    ['canonical', 'sig1=:AAECAwQ=:', 'sig1'],
    ['two pads', 'sig1=:AA==:', 'sig1'],
    ['unpadded', 'sig1=:AAE:', 'sig1'],
    ['unused bits set', 'sig1=:AB==:', 'sig1'],
    ['length 1 mod 4', 'sig1=:AAAAA:', 'sig1'],
    ['bad padding', 'sig1=:AAA==:', 'sig1'],
    ['pad in the middle', 'sig1=:AA=A:', 'sig1'],
    ['only padding', 'sig1=:==:', 'sig1'],
    ['empty', 'sig1=:::', 'sig1'],
    ['nothing', 'sig1=::', 'sig1'],
    ['base64url', 'sig1=:-_8=:', 'sig1'],
    ['base64url unpadded', 'sig1=:-_8:', 'sig1'],
    ['another label', 'sig2=:AAECAwQ=:', 'sig1'],
    ['two members', 'sig2=:AA==:, sig1=:AAECAwQ=:', 'sig1'],
    ['not a byte sequence', 'sig1="AAECAwQ="', 'sig1'],
    ['spaces', 'sig1=: AAECAwQ= :', 'sig1'],
  ])('Signature, %s: the same as the SDK', (_name, header, label) => expectSameSignature(header, label));

  const digest = signed.headers['content-digest'];
  test.each([
    ['a seller', digest],
    ['unpadded', digest.replace(/=+:$/, ':')],
    ['two members', `sha-512=:AAAA:, ${digest}`],
    ['a parameter', `${digest};x=1`],
    ['base64url', 'sha-256=:-_8=:'],
    ['bad padding', 'sha-256=:AAA==:'],
    ['length 1 mod 4', 'sha-256=:AAAAA:'],
    ['empty', 'sha-256=::'],
    ['no sha-256', 'sha-512=:AAAA:'],
    ['upper case', digest.toUpperCase()],
    ['not a dictionary', `${digest},`],
  ])('Content-Digest, %s: the same as the SDK', (_name, header) => {
    expect(outcome(() => readContentDigestSha256(header))).toEqual(outcome(() => sdk.parseContentDigest(header)));
    for (const body of [signed.body, Buffer.from('another body')]) {
      expect(contentDigestMatchesBody(header, body)).toBe(sdk.contentDigestMatches(header, body));
    }
  });

  test("a seller's Content-Digest matches its body and no other", () => {
    expect(contentDigestMatchesBody(digest, signed.body)).toBe(true);
    expect(contentDigestMatchesBody(digest, Buffer.concat([signed.body, Buffer.from(' ')]))).toBe(false);
  });

  test('random mutations of real headers read the same as with the SDK', () => {
    const alphabet = [
      '"',
      '\\',
      '(',
      ')',
      ';',
      '=',
      ',',
      ' ',
      ':',
      '0',
      '9',
      '-',
      '_',
      '+',
      '/',
      'a',
      'Z',
      '*',
      '.',
      '\t',
    ];
    let seed = 42;
    const random = (below: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % below;
    };
    const mutate = (text: string) => {
      let result = text;
      for (let edits = 1 + random(3); edits > 0; edits--) {
        const at = random(result.length + 1);
        const char = alphabet[random(alphabet.length)];
        const kind = random(3);
        result =
          kind === 0
            ? result.slice(0, at) + char + result.slice(at)
            : kind === 1
              ? result.slice(0, at) + result.slice(at + 1)
              : result.slice(0, at) + char + result.slice(at + 1);
      }
      return result;
    };
    for (let i = 0; i < 4000; i++) {
      expectSameInput(mutate(SELLER_INPUT));
      expectSameSignature(mutate(SELLER_SIGNATURE), 'sig1');
      const mutatedDigest = mutate(digest);
      expect(outcome(() => readContentDigestSha256(mutatedDigest))).toEqual(
        outcome(() => sdk.parseContentDigest(mutatedDigest)),
      );
    }
  });
});
