/**
 * Request bodies, in one place: express's own body parser (body-parser) with one limit for every route that takes a
 * body, and the one check no parser makes: how deep the JSON nests, found by a linear scan of the raw bytes before
 * any recursive code sees them. body-parser decodes gzip, deflate and br with the limit applied after decompression,
 * refuses unknown encodings and charsets (415) and garbage (400); api/problems.ts words each refusal.
 *
 * The codec server takes Temporal payloads, up to 2 MB each in batches, as base64: its parser is this one with the
 * codec protocol's own limit (CODEC_BODY_LIMIT_BYTES).
 */
import { isUtf8 } from 'node:buffer';
import express, { type RequestHandler } from 'express';

/** Largest body of an API request or a webhook, after decompression. */
export const BODY_LIMIT_BYTES = 1024 * 1024;
/** Largest body of a codec server request: a batch of Temporal payloads (each at most 2 MB), base64-encoded. */
export const CODEC_BODY_LIMIT_BYTES = 8 * 1024 * 1024;
export const MAX_JSON_DEPTH = 64;

/**
 * A JSON body the gateway refuses for what it holds: too deep, or a number JSON cannot carry. The code is a private
 * field: body-parser strips the own properties of an error thrown while parsing, and sets `status` itself.
 */
export class JsonBodyError extends Error {
  readonly #code: string;
  status: number;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.#code = code;
  }

  get code(): string {
    return this.#code;
  }
}

/**
 * Whether the JSON text nests objects and arrays deeper than `maxDepth`. One pass, no recursion, no allocation, so a
 * body nested 100,000 levels costs a scan, not a stack. Brackets inside strings do not count. Works on UTF-8 bytes
 * as on strings: every character it looks at is ASCII, and no byte of a multi-byte UTF-8 sequence is.
 */
export function jsonNestingExceeds(text: string | Uint8Array, maxDepth: number): boolean {
  const at = typeof text === 'string' ? (i: number) => text.charCodeAt(i) : (i: number) => text[i]!;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = at(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

function tooDeep(maxDepth: number): JsonBodyError {
  return new JsonBodyError(
    400,
    'NESTING_TOO_DEEP',
    `The JSON nests objects and arrays deeper than ${maxDepth} levels.`,
  );
}

function outOfRange(key: string): JsonBodyError {
  return new JsonBodyError(
    400,
    'NUMBER_OUT_OF_RANGE',
    `The number at "${key}" is outside what JSON numbers can carry (a double); send a smaller number, or a string.`,
  );
}

/** JSON.parse's reviver that refuses 1e309 and its kind (JSON.parse would make them Infinity). */
function finiteNumbers(key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) throw outOfRange(key);
  return value;
}

/**
 * Parses JSON text under the gateway's rules: nesting at most `maxDepth`, every number finite. For bodies read raw
 * (webhooks verify the bytes before they are parsed).
 */
export function parseJsonStrict(text: string, maxDepth = MAX_JSON_DEPTH): unknown {
  if (jsonNestingExceeds(text, maxDepth)) throw tooDeep(maxDepth);
  try {
    return JSON.parse(text, finiteNumbers);
  } catch (error) {
    if (error instanceof JsonBodyError) throw error;
    throw new JsonBodyError(400, 'MALFORMED_JSON', `The body is not valid JSON: ${(error as Error).message}.`);
  }
}

/**
 * The JSON body parser of every route: application/json and application/*+json, any JSON value (routes say which
 * they take), UTF-8 only, nesting bounded before parsing, numbers finite.
 */
export function jsonBody(options: { limitBytes?: number; maxDepth?: number } = {}): RequestHandler {
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  return express.json({
    limit: options.limitBytes ?? BODY_LIMIT_BYTES,
    strict: false,
    type: ['application/json', 'application/*+json'],
    reviver: finiteNumbers,
    verify: (_req, _res, buffer, encoding) => {
      // The nesting scan reads bytes as UTF-8; JSON is UTF-8 (RFC 8259 §8.1).
      if (encoding && encoding.toLowerCase().replace('-', '') !== 'utf8')
        throw new JsonBodyError(
          415,
          'UNSUPPORTED_CHARSET',
          `The body's charset "${encoding.slice(0, 40)}" is not supported; send UTF-8.`,
        );
      // body-parser would decode invalid UTF-8 into U+FFFD silently.
      if (!isUtf8(buffer)) throw new JsonBodyError(400, 'MALFORMED_BODY', 'The body is not valid UTF-8.');
      if (jsonNestingExceeds(buffer, maxDepth)) throw tooDeep(maxDepth);
    },
  });
}

/** The raw bytes of a body of any type (webhook receivers verify signatures over them), under the same limit. */
export function rawBody(): RequestHandler {
  return express.raw({ type: () => true, limit: BODY_LIMIT_BYTES });
}
