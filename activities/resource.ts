/**
 * Reads of the resource itself, the media buy, when the task route does not say what the seller made: by id
 * (`get_media_buys {media_buy_ids: [id]}`) to confirm a buy a task record or webhook names, or by listing (every
 * status, every page, account-scoped) matched against what the create sent (protocol/resource-match.ts) when no id is
 * known. A resource read is never a task observation: it confirms or finds the buy, and its row is what the buy now is.
 *
 * Every read goes through request shaping (activities/request-shaping.ts). Free of Temporal, so it is tested with a
 * fake SellerClient; the activity wrappers add timeouts, heartbeats and retries.
 */
import type { ReadResourceInput, ReadResourceOutcome } from '../contract/activities';
import { type AdcpError, describeError } from '../protocol';
import { MEDIA_BUY_STATUSES } from '../protocol/media-buy';
import { type SentCreate, listedBuy, matchListedBuy } from '../protocol/resource-match';
import { type RequestShaping, type ShapingRecord, withShaping } from '../protocol/request-shaping';
import { asRecord } from '../protocol/records';
import { sellerTransientFailure } from './failures';
import { type ShapingMemory, callShaped } from './request-shaping';
import { type CallContext, type SellerClient, isUnknownToolError } from './seller-client';
import type { TaskReadDependencies } from './task-reader';

/** A listing of more pages than this is not read to its end: the outcome says it is incomplete. */
export const MAX_LISTING_PAGES = 20;
const PAGE_SIZE = 100;

export interface ResourceRead {
  /** By id: the buy a task record, a webhook or a result named. */
  mediaBuyId?: string;
  /** By listing: what the create sent (used when no id is known). */
  sent?: SentCreate;
  account?: unknown;
  /** Buys other operations already know: never adopted by a listing. */
  exclude?: readonly string[];
  /** Only these buys may be adopted (the orphans reconciliation offers); a listing without them is not "absent". */
  among?: readonly string[];
  shaping?: RequestShaping;
  maxPages?: number;
}

export type ResourceReadOutcome = ReadResourceOutcome;

/** The seller refused the read for now (rate limit, overload): the activity retries it as late as asked. */
export class ResourceReadRefusedForNow extends Error {
  override readonly name = 'ResourceReadRefusedForNow';
  constructor(readonly error: AdcpError) {
    super(describeError(error));
  }
}

interface Page {
  rows: Record<string, unknown>[];
  next?: string;
  unreadable?: AdcpError;
  shaping: ShapingRecord[];
}

async function readPage(
  seller: SellerClient,
  context: CallContext,
  args: Record<string, unknown>,
  read: ResourceRead,
  at: () => string,
  memory: ShapingMemory | undefined,
): Promise<Page> {
  const withAccount = read.account !== undefined ? { ...args, account: read.account } : args;
  let shaped;
  try {
    shaped = await callShaped(
      seller,
      context,
      { tool: 'get_media_buys', args: withAccount, ...(read.shaping ? { shaping: read.shaping } : {}), at },
      memory,
    );
  } catch (error) {
    if (context.signal.aborted || !isUnknownToolError(error)) throw error;
    return {
      rows: [],
      shaping: [],
      unreadable: {
        code: 'UNSUPPORTED_FEATURE',
        message: `${context.agent.id} has no get_media_buys`,
        recovery: 'terminal',
      },
    };
  }
  const { answer, shaping } = shaped;
  if (answer.callError || answer.snapshot.status === 'failed') {
    const error: AdcpError = answer.snapshot.errors?.[0] ?? {
      code: 'READ_REFUSED',
      message: answer.snapshot.message ?? 'The seller refused get_media_buys.',
      recovery: 'terminal',
    };
    if (error.recovery === 'transient') throw new ResourceReadRefusedForNow(error);
    return { rows: [], shaping, unreadable: error };
  }
  const result = answer.snapshot.result ?? {};
  const rows = Array.isArray(result.media_buys)
    ? result.media_buys.map((row) => asRecord(row)).filter((row): row is Record<string, unknown> => !!row)
    : [];
  const pagination = asRecord(result.pagination);
  const next = pagination?.has_more === true && typeof pagination.cursor === 'string' ? pagination.cursor : undefined;
  return { rows, shaping, ...(next ? { next } : {}) };
}

/**
 * Every buy the seller lists (every status, every page up to `maxPages`, from `startCursor` where a previous read
 * stopped), as it lists them; `nextCursor` leads to the rest when the pages ran out before the listing did.
 */
export async function listBuys(
  seller: SellerClient,
  context: CallContext,
  read: Pick<ResourceRead, 'account' | 'shaping' | 'maxPages'> & { startCursor?: string },
  at: () => string,
  memory?: ShapingMemory,
): Promise<{
  rows: Record<string, unknown>[];
  complete: boolean;
  nextCursor?: string;
  unreadable?: AdcpError;
  shaping: ShapingRecord[];
}> {
  const rows: Record<string, unknown>[] = [];
  const shaping: ShapingRecord[] = [];
  let cursor: string | undefined = read.startCursor;
  const maxPages = read.maxPages ?? MAX_LISTING_PAGES;
  for (let pageIndex = 0; pageIndex < maxPages; pageIndex++) {
    // Every status: AdCP's default filter (["active"] when no ids are given) would hide a buy pending creatives.
    const page = await readPage(
      seller,
      context,
      {
        status_filter: [...MEDIA_BUY_STATUSES],
        pagination: { max_results: PAGE_SIZE, ...(cursor ? { cursor } : {}) },
      },
      { ...read, shaping: withShaping(read.shaping, shaping) },
      at,
      memory,
    );
    shaping.push(...page.shaping);
    if (page.unreadable) return { rows, complete: false, unreadable: page.unreadable, shaping };
    rows.push(...page.rows);
    cursor = page.next;
    if (!cursor) return { rows, complete: true, shaping };
  }
  return { rows, complete: false, nextCursor: cursor, shaping };
}

/**
 * One resource read: by id when `mediaBuyId` is given, else the listing matched by `sent`. Throws only what a retry
 * may fix (transport failures, a seller's "not now").
 */
export async function readResource(
  seller: SellerClient,
  context: CallContext,
  read: ResourceRead,
  at: () => string,
  memory?: ShapingMemory,
): Promise<ResourceReadOutcome> {
  if (read.mediaBuyId) {
    const mediaBuyId = read.mediaBuyId;
    const page = await readPage(seller, context, { media_buy_ids: [mediaBuyId] }, read, at, memory);
    if (page.unreadable)
      return {
        found: false,
        unreadable: page.unreadable,
        shaping: page.shaping,
        note: `get_media_buys of ${mediaBuyId} at ${context.agent.id} failed: ${describeError(page.unreadable)}`,
      };
    const row = listedBuy(page.rows, mediaBuyId);
    if (!row)
      return {
        found: false,
        absent: true,
        shaping: page.shaping,
        note: `get_media_buys at ${context.agent.id} does not return media buy ${mediaBuyId}`,
      };
    return {
      found: true,
      mediaBuyId,
      row,
      matchedBy: 'media_buy_id',
      shaping: page.shaping,
      note: `media buy ${mediaBuyId} read at ${context.agent.id}: ${String(row.status ?? row.media_buy_status ?? 'no status')}`,
    };
  }
  if (!read.sent) throw new Error('readResource needs a mediaBuyId or what the create sent');

  const maxPages = read.maxPages ?? MAX_LISTING_PAGES;
  const { rows, complete, unreadable, shaping } = await listBuys(seller, context, read, at, memory);
  if (unreadable)
    return {
      found: false,
      unreadable,
      shaping,
      note: `the media buys at ${context.agent.id} could not be listed: ${describeError(unreadable)}`,
    };
  const among = read.among ? new Set(read.among) : undefined;
  const offered = among ? rows.filter((row) => among.has(String(row.media_buy_id))) : rows;
  const match = matchListedBuy(offered, read.sent, new Set(read.exclude ?? []));
  if (match.found)
    return {
      found: true,
      mediaBuyId: match.mediaBuyId,
      row: match.row,
      matchedBy: match.matchedBy,
      shaping,
      note: `media buy ${match.mediaBuyId} found in the listing at ${context.agent.id} by ${match.matchedBy}`,
    };
  return {
    found: false,
    ...(match.candidates.length > 0 ? { candidates: match.candidates } : {}),
    absent: complete && match.candidates.length === 0 && !among,
    shaping,
    note: `${match.note}${complete ? '' : ` (only the first ${maxPages} pages were read)`}`,
  };
}

export interface ResourceActivityDependencies extends TaskReadDependencies {
  seller: SellerClient;
  /** What this process learned about the fields each seller refuses. */
  shapingMemory: ShapingMemory;
}

export function createResourceActivities(deps: ResourceActivityDependencies) {
  const { guarded, ensureStorable, seller } = deps;
  return {
    /**
     * A read of the buy an operation made or acts on (contract/activities.ts ReadResourceInput): by id, or by the
     * listing matched against what the create sent. Read-only. What it found is checked against the schemas of the
     * version the seller declares.
     */
    async readResource(input: ReadResourceInput): Promise<ReadResourceOutcome> {
      return guarded(
        input.sellerId,
        (input.timeouts ?? deps.timeouts).readMs,
        async (context) => {
          let outcome: ReadResourceOutcome;
          try {
            outcome = await readResource(
              seller,
              context,
              {
                ...(input.mediaBuyId ? { mediaBuyId: input.mediaBuyId } : {}),
                ...(input.sent ? { sent: input.sent } : {}),
                ...(input.account !== undefined ? { account: input.account } : {}),
                ...(input.exclude ? { exclude: input.exclude } : {}),
                ...(input.among ? { among: input.among } : {}),
                ...(input.requestShaping ? { shaping: input.requestShaping } : {}),
              },
              () => new Date().toISOString(),
              deps.shapingMemory,
            );
          } catch (error) {
            if (!(error instanceof ResourceReadRefusedForNow)) throw error;
            throw sellerTransientFailure(error.error, deps.random, deps.backoff);
          }
          if (outcome.row && deps.checkAnswer) {
            const schemaWarnings = await deps.checkAnswer(input.sellerId, 'get_media_buys', {
              media_buys: [outcome.row],
            });
            if (schemaWarnings.length > 0) outcome = { ...outcome, schemaWarnings };
          }
          return ensureStorable(outcome, `The media buys read at ${input.sellerId}`);
        },
        input.tenant,
      );
    },
  };
}

export type ResourceActivities = ReturnType<typeof createResourceActivities>;
