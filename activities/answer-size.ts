/**
 * Temporal refuses payloads over 2 MB. An answer is measured as the payload codec would store it before an activity
 * returns it, so an answer too large to keep fails the activity for good, saying how to ask for less.
 */
import { gzipSync } from 'node:zlib';
import { ApplicationFailure } from '@temporalio/activity';
import { type AdcpError, describeError } from '../protocol';

/** What stays under this after compression is safe to return. */
export const DEFAULT_MAX_ANSWER_BYTES = 1_900_000;
/** Below this, an answer is small enough that no compression estimate is needed. */
const ANSWER_SIZE_CHECK_FROM = 256 * 1024;

/**
 * The answer's size as Temporal would store it through the payload codec (client/payload-codec.ts): JSON, gzipped
 * when large. Returns the compressed size only when it had to be computed.
 */
export function answerTooLarge(
  answer: unknown,
  maxBytes: number,
): { jsonBytes: number; compressedBytes: number } | undefined {
  const json = JSON.stringify(answer) ?? '';
  const jsonBytes = Buffer.byteLength(json, 'utf8');
  if (jsonBytes < ANSWER_SIZE_CHECK_FROM || jsonBytes <= maxBytes) return undefined;
  const compressedBytes = gzipSync(json).byteLength;
  return compressedBytes > maxBytes ? { jsonBytes, compressedBytes } : undefined;
}

/** Returns `answer`, or fails the activity for good (ANSWER_TOO_LARGE) when history could not keep it. */
export type EnsureStorable = <T>(answer: T, what: string) => T;

export function storableWithin(maxAnswerBytes: number): EnsureStorable {
  return function ensureStorable<T>(answer: T, what: string): T {
    const tooLarge = answerTooLarge(answer, maxAnswerBytes);
    if (!tooLarge) return answer;
    const error: AdcpError = {
      code: 'ANSWER_TOO_LARGE',
      message: `${what} is ${Math.round(tooLarge.jsonBytes / 1024)} KiB of JSON (${Math.round(tooLarge.compressedBytes / 1024)} KiB compressed), over the ${Math.round(maxAnswerBytes / 1024)} KiB an operation can keep.`,
      suggestion:
        'Narrow the request (filters, pagination); asking again returns the same answer, so the seller is not called again for it.',
      recovery: 'terminal',
      details: { jsonBytes: tooLarge.jsonBytes, compressedBytes: tooLarge.compressedBytes, limitBytes: maxAnswerBytes },
    };
    throw ApplicationFailure.create({
      type: 'AnswerTooLarge',
      message: describeError(error),
      nonRetryable: true,
      details: [error],
    });
  };
}
