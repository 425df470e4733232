/**
 * The media buy's reads: `get_media_buys` (the buy's status, revision, actions, health, packages) and windowed or
 * lifetime `get_media_buy_delivery` pulls. Mutations (create, update, sync_creatives) are not here: they run as
 * operations (child workflows) so every guarantee of an operation holds for them.
 *
 * Each activity makes one read through the project's SellerClient (activities/seller-client.ts) and returns the
 * parsed, bounded result (never the raw answer), so a 90-day flight's pulls stay small in history.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { type SellerRegistry, ConfigError } from '../config/sellers';
import { type AdcpError, ProtocolViolation } from '../protocol';
import { type DeliveryPull, type MediaBuySnapshot, mediaBuyFromList, parseDeliveryPull } from '../protocol/media-buy';
import { configFailure } from './failures';
import { boundAttempt } from './heartbeat';
import { raceSignal } from './mcp-connection';
import { sellerAccess } from './seller-access';
import type { RequestShaping, ShapingRecord } from '../protocol/request-shaping';
import { ShapingMemory, callShaped } from './request-shaping';
import { type CallContext, type SellerClient, createSdkSellerClient } from './seller-client';
import {
  DEFAULT_RETRY_BACKOFF,
  type RetryBackoffPolicy,
  classifyTransportFailure,
  retryDelayMs,
} from './transport-errors';

export interface MediaBuyActivityDependencies {
  sellers: SellerRegistry;
  seller?: SellerClient;
  env?: NodeJS.ProcessEnv;
  /** Hard bound of one read (default 60 s). */
  readTimeoutMs?: number;
  random?: () => number;
  /** How a failed read's retries back off when the seller names no retry_after (default DEFAULT_RETRY_BACKOFF). */
  retryBackoff?: RetryBackoffPolicy;
  /** What this process learned about the fields each seller refuses on reads (shared with the operations' reads). */
  shapingMemory?: ShapingMemory;
}

export interface ReadMediaBuyInput {
  sellerId: string;
  mediaBuyId: string;
  account?: unknown;
  /** Fields this seller's reads leave out, by tool, as the buy's workflow recorded them (request shaping). */
  requestShaping?: RequestShaping;
}

export interface ReadMediaBuyOutcome {
  found: boolean;
  snapshot?: MediaBuySnapshot;
  note?: string;
  /** Fields left out of this read because the seller refused them: the buy's workflow keeps them. */
  shaping?: ShapingRecord[];
}

export interface PullDeliveryInput {
  sellerId: string;
  mediaBuyId: string;
  account?: unknown;
  /** YYYY-MM-DD, inclusive; absent with endDate for lifetime numbers. */
  startDate?: string;
  /** YYYY-MM-DD, exclusive. */
  endDate?: string;
  /** Per-window slices shaped like the webhook fires at this frequency. */
  timeGranularity?: 'hourly' | 'daily' | 'monthly';
  requestShaping?: RequestShaping;
}

export interface PullDeliveryOutcome {
  found: boolean;
  pull?: DeliveryPull;
  /** The seller refused the windowed pull at this granularity (UNSUPPORTED_GRANULARITY). */
  unsupportedGranularity?: boolean;
  note?: string;
  shaping?: ShapingRecord[];
}

/** A buy's reads back off as the operation's calls, but never longer than this between two reads. */
const MAX_READ_BACKOFF_MS = 30_000;

export function createMediaBuyActivities(deps: MediaBuyActivityDependencies) {
  const seller = deps.seller ?? createSdkSellerClient();
  const env = deps.env ?? process.env;
  const timeoutMs = deps.readTimeoutMs ?? 60_000;
  const random = deps.random ?? Math.random;
  const backoff = deps.retryBackoff ?? DEFAULT_RETRY_BACKOFF;
  const readBackoff = { ...backoff, maxMs: Math.min(backoff.maxMs, MAX_READ_BACKOFF_MS) };
  const shapingMemory = deps.shapingMemory ?? new ShapingMemory();
  const at = () => new Date().toISOString();

  async function guarded<T>(sellerId: string, work: (context: CallContext) => Promise<T>): Promise<T> {
    const activity = Context.current();
    const context: Omit<CallContext, 'signal'> = { ...sellerAccess(deps.sellers, sellerId, env), timeoutMs };
    const bounds = boundAttempt(timeoutMs, activity);
    const { signal } = bounds;
    try {
      return await raceSignal(signal, () => work({ ...context, signal }));
    } catch (error) {
      if (error instanceof ApplicationFailure) throw error;
      if (error instanceof ConfigError) throw configFailure(error.message);
      if (error instanceof ProtocolViolation) {
        throw ApplicationFailure.create({ type: 'ProtocolViolation', message: error.message, nonRetryable: true });
      }
      if (activity.cancellationSignal.aborted) throw error;
      const classified = classifyTransportFailure(error, Date.now());
      throw sellerFailure(classified, activity.info.attempt);
    } finally {
      bounds.end();
    }
  }

  function sellerFailure(error: AdcpError, attempt: number): ApplicationFailure {
    const message = `${error.code}: ${error.message}`;
    if (error.recovery !== 'transient')
      return ApplicationFailure.create({ type: 'SellerError', message, nonRetryable: true, details: [error] });
    return ApplicationFailure.create({
      type: 'SellerTransientError',
      message,
      details: [error],
      nextRetryDelay: retryDelayMs(error, attempt, readBackoff, random),
    });
  }

  return {
    /** get_media_buys for one buy: what the seller says about it now. */
    async readMediaBuy(input: ReadMediaBuyInput): Promise<ReadMediaBuyOutcome> {
      return guarded(input.sellerId, async (context) => {
        const { answer, shaping } = await callShaped(
          seller,
          context,
          {
            tool: 'get_media_buys',
            args: {
              media_buy_ids: [input.mediaBuyId],
              ...(input.account !== undefined ? { account: input.account } : {}),
            },
            ...(input.requestShaping ? { shaping: input.requestShaping } : {}),
            at,
          },
          shapingMemory,
        );
        const shaped = shaping.length > 0 ? { shaping } : {};
        const error = answer.snapshot.errors?.[0];
        if (answer.callError && error) {
          if (error.code === 'MEDIA_BUY_NOT_FOUND') return { found: false, note: error.message, ...shaped };
          throw sellerFailure(error, Context.current().info.attempt);
        }
        const snapshot = mediaBuyFromList(answer.snapshot.result, input.mediaBuyId);
        if (!snapshot)
          return {
            found: false,
            note: `get_media_buys at ${input.sellerId} does not list ${input.mediaBuyId}`,
            ...shaped,
          };
        return { found: true, snapshot, ...shaped };
      });
    },

    /** get_media_buy_delivery for one buy: lifetime numbers, or a date range with per-window slices. */
    async pullDelivery(input: PullDeliveryInput): Promise<PullDeliveryOutcome> {
      return guarded(input.sellerId, async (context) => {
        const args: Record<string, unknown> = {
          media_buy_ids: [input.mediaBuyId],
          // The default filter is ["active"]: a paused or completed buy's delivery is wanted too.
          status_filter: ['pending_creatives', 'pending_start', 'active', 'paused', 'completed'],
          ...(input.account !== undefined ? { account: input.account } : {}),
          ...(input.startDate ? { start_date: input.startDate } : {}),
          ...(input.endDate ? { end_date: input.endDate } : {}),
          ...(input.timeGranularity ? { time_granularity: input.timeGranularity, include_window_breakdown: true } : {}),
        };
        const { answer, shaping } = await callShaped(
          seller,
          context,
          {
            tool: 'get_media_buy_delivery',
            args,
            ...(input.requestShaping ? { shaping: input.requestShaping } : {}),
            at,
          },
          shapingMemory,
        );
        const shaped = shaping.length > 0 ? { shaping } : {};
        const error = answer.snapshot.errors?.[0];
        if (answer.callError && error) {
          if (error.code === 'UNSUPPORTED_GRANULARITY')
            return { found: false, unsupportedGranularity: true, note: error.message, ...shaped };
          if (error.code === 'MEDIA_BUY_NOT_FOUND') return { found: false, note: error.message, ...shaped };
          throw sellerFailure(error, Context.current().info.attempt);
        }
        const pull = parseDeliveryPull(answer.snapshot.result, input.mediaBuyId);
        if (!pull)
          return {
            found: false,
            note: `get_media_buy_delivery at ${input.sellerId} has no delivery for ${input.mediaBuyId}`,
            ...shaped,
          };
        return { found: true, pull, ...shaped };
      });
    },
  };
}

export type MediaBuyActivities = ReturnType<typeof createMediaBuyActivities>;
