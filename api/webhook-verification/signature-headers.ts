/**
 * `Signature-Input`, `Signature` and `Content-Digest` as sellers send them, read without a general RFC 8941 parser.
 * The SDK's parseSignatureInput/parseSignature/parseContentDigest run a full structured-field parse (and re-serialise
 * the inner list) for every webhook; what @adcp/sdk's signer (and any plain signer) emits is one dictionary member in
 * canonical form, which a single anchored pattern reads. Anything else (several members, whitespace variants, escapes,
 * tokens, booleans, decimals, leading zeros, repeated parameters, mixed base64 alphabets) goes to the SDK's parsers, so
 * every header yields exactly what the SDK would answer: the same label, components, parameters, `@signature-params`
 * text and bytes, or the same error.
 */
import * as crypto from 'node:crypto';
import {
  parseContentDigest,
  parseSignature,
  parseSignatureInput,
  type ParsedSignature,
  type ParsedSignatureInput,
} from '@adcp/sdk/signing/server';

// RFC 8941: a key, an sf-string without escapes (serialises as written), an integer without leading zeros or -0.
const KEY = '[a-z*][a-z0-9_.*-]*';
const STRING = '"[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]*"';
const INTEGER = '(?:0|-?[1-9][0-9]{0,14})';
const CANONICAL_INPUT = new RegExp(
  `^(${KEY})=(\\((?:${STRING}(?: ${STRING})*)?\\)((?:;${KEY}=(?:${STRING}|${INTEGER}))*))$`,
);
const PARAMETER = new RegExp(`;(${KEY})=(?:"([^"]*)"|(${INTEGER}))`, 'g');
const COMPONENT = /"([^"]*)"/g;
const STRING_PARAMS: ReadonlySet<string> = new Set(['nonce', 'keyid', 'alg', 'tag']);
const INTEGER_PARAMS: ReadonlySet<string> = new Set(['created', 'expires']);

/** The canonical single-member form, or undefined to leave the header to the SDK's parser. */
function readCanonicalInput(header: string): ParsedSignatureInput | undefined {
  const match = CANONICAL_INPUT.exec(header);
  if (!match) return undefined;
  const [, label, signatureParamsValue, parameterText] = match;
  const innerList = signatureParamsValue.slice(0, signatureParamsValue.length - parameterText.length);
  const components: string[] = [];
  for (const component of innerList.matchAll(COMPONENT)) components.push(component[1]);
  const params: Record<string, string | number> = {};
  for (const [, key, text, integer] of parameterText.matchAll(PARAMETER)) {
    // A repeated parameter keeps its first position with its last value in RFC 8941: the SDK's business.
    if (Object.hasOwn(params, key)) return undefined;
    if (integer !== undefined) {
      if (STRING_PARAMS.has(key)) return undefined;
      params[key] = Number(integer);
    } else {
      if (INTEGER_PARAMS.has(key)) return undefined;
      params[key] = text;
    }
  }
  return { label, components, signatureParamsValue, params: params as unknown as ParsedSignatureInput['params'] };
}

/** RFC 9421 `Signature-Input`, as parseSignatureInput from @adcp/sdk reads it (and throws what it throws). */
export function readSignatureInput(header: string): ParsedSignatureInput {
  return readCanonicalInput(header) ?? parseSignatureInput(header);
}

const STANDARD_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const URL_SAFE_BASE64 = /^[A-Za-z0-9_-]*$/;

/** Standard base64, padded or unpadded, of a length atob accepts: atob and Buffer then decode to the same bytes. */
function isStandardBase64(text: string): boolean {
  if (!STANDARD_BASE64.test(text)) return false;
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  if (padding > 0 && text.length % 4 !== 0) return false;
  return (text.length - padding) % 4 !== 1;
}

/**
 * Base64 the SDK accepts, in the forms where it and Buffer decode to the same bytes: standard (padded, or unpadded of a
 * length atob takes), or base64url without padding (what @adcp/sdk's signer sends). Mixed alphabets go to the SDK.
 */
function isPlainBase64(text: string): boolean {
  return URL_SAFE_BASE64.test(text) ? text.length % 4 !== 1 : isStandardBase64(text);
}

/** RFC 9421 `Signature` for `label`, as parseSignature from @adcp/sdk reads it (and throws what it throws). */
export function readSignature(header: string, label: string): ParsedSignature {
  const prefix = `${label}=:`;
  if (header.startsWith(prefix) && header.endsWith(':') && header.length > prefix.length) {
    const value = header.slice(prefix.length, -1);
    if (isPlainBase64(value)) return { label, bytes: new Uint8Array(Buffer.from(value, 'base64')) };
  }
  return parseSignature(header, label);
}

const SHA256_ONLY = 'sha-256=:';

/** The `sha-256` member of an RFC 9530 Content-Digest, as parseContentDigest from @adcp/sdk reads it. */
export function readContentDigestSha256(header: string): Buffer | null {
  if (header.startsWith(SHA256_ONLY) && header.endsWith(':') && header.length > SHA256_ONLY.length) {
    const value = header.slice(SHA256_ONLY.length, -1);
    if (isStandardBase64(value)) return Buffer.from(value, 'base64');
  }
  return parseContentDigest(header);
}

/** One-shot hashing where node has it (20.12 and later; package.json allows 20.3): no Hash object per webhook. */
const sha256: (data: Uint8Array) => Buffer =
  typeof crypto.hash === 'function'
    ? (data) => crypto.hash('sha256', data, 'buffer')
    : (data) => crypto.createHash('sha256').update(data).digest();

/** contentDigestMatches from @adcp/sdk over the body bytes: the header's sha-256 is the body's (constant time). */
export function contentDigestMatchesBody(header: string, body: Uint8Array): boolean {
  const expected = readContentDigestSha256(header);
  if (!expected) return false;
  const actual = sha256(body);
  return expected.length === actual.length && crypto.timingSafeEqual(expected, actual);
}
