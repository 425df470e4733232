/**
 * One read of a seller's task inside an attempt: the read strategy (activities/read-strategy.ts), with a seller's
 * "not now" (RATE_LIMITED ...) turned into a retry as late as it asked. Shared by the polls and the lost-task lookup.
 */
import type { CallTimeouts, ReadTaskOutcome } from '../contract/activities';
import type { EnsureStorable } from './answer-size';
import { sellerTransientFailure } from './failures';
import {
  type ReadRequest,
  type SellerDescriptionCache,
  SellerRefusedReadForNow,
  readTaskWithStrategy,
} from './read-strategy';
import type { AnswerCheck } from './schema-check';
import type { GuardedCall } from './seller-call';
import type { CallContext, SellerClient } from './seller-client';
import type { RetryBackoffPolicy } from './transport-errors';

export interface TaskReaderDependencies {
  seller: SellerClient;
  descriptions: SellerDescriptionCache;
  random: () => number;
  /** The worker's backoff, for a refusal that names no retry_after. */
  backoff: RetryBackoffPolicy;
}

export type TaskReader = (context: CallContext, request: ReadRequest) => Promise<ReadTaskOutcome>;

export function createTaskReader(deps: TaskReaderDependencies): TaskReader {
  return async function readWithRetryAfter(context, request) {
    try {
      return await readTaskWithStrategy(deps.seller, context, request, deps.descriptions);
    } catch (error) {
      if (!(error instanceof SellerRefusedReadForNow)) throw error;
      throw sellerTransientFailure(error.error, deps.random, deps.backoff);
    }
  };
}

/** What an activity that reads a seller's task needs: the guarded call, the reader, the size check, the timeouts. */
export interface TaskReadDependencies {
  guarded: GuardedCall;
  readWithRetryAfter: TaskReader;
  ensureStorable: EnsureStorable;
  /** The worker's own, for an input that carries none. */
  timeouts: CallTimeouts;
  /** Checks what a read shows against the schemas of the version the seller declares (warn mode); none: unchecked. */
  checkAnswer?: AnswerCheck;
  /** When a seller's "not now" without a retry_after is tried again: the worker's backoff, with jitter. */
  random: () => number;
  backoff: RetryBackoffPolicy;
}
