/**
 * The media buy's reads: `get_media_buys` (the buy's status, revision, actions, health, packages) and windowed or
 * lifetime `get_media_buy_delivery` pulls. Mutations (create, update, sync_creatives) are not here: they run as
 * operations (child workflows) so every guarantee of an operation holds for them.
 *
 * Each activity makes one read through the project's SellerClient (activities/seller-client.ts) and returns the
 * parsed, bounded result (never the raw answer), so a 90-day flight's pulls stay small in history.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { type SellerConfig, type SellerRegistry, ConfigError } from '../config/sellers';
import { type AdcpError, ProtocolViolation } from '../protocol';
import { type DeliveryPull, type MediaBuySnapshot, mediaBuyFromList, parseDeliveryPull } from '../protocol/media-buy';
import { raceSignal } from './mcp-connection';
import { type CallContext, type SellerAnswer, type SellerClient, createSdkSellerClient } from './seller-client';
import { classifyTransportFailure, retryDelayMs } from './transport-errors';
import { deadlineSignal } from './linked-signal';

export interface MediaBuyActivityDependencies {
  sellers: SellerRegistry;
  seller?: SellerClient;
  env?: NodeJS.ProcessEnv;
  /** Hard bound of one read (default 60 s). */
  readTimeoutMs?: number;
  random?: () => number;
}

export interface ReadMediaBuyInput {
  sellerId: string;
  mediaBuyId: string;
  account?: unknown;
}

export interface ReadMediaBuyOutcome {
  found: boolean;
  snapshot?: MediaBuySnapshot;
  note?: string;
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
}

export interface PullDeliveryOutcome {
  found: boolean;
  pull?: DeliveryPull;
  /** The seller refused the windowed pull at this granularity (UNSUPPORTED_GRANULARITY). */
  unsupportedGranularity?: boolean;
  note?: string;
}

const HEARTBEAT_EVERY_MS = 2_000;
const BACKOFF = { initialMs: 1_000, maxMs: 30_000, coefficient: 2, jitter: 0.25 };

export function createMediaBuyActivities(deps: MediaBuyActivityDependencies) {
  const seller = deps.seller ?? createSdkSellerClient();
  const env = deps.env ?? process.env;
  const timeoutMs = deps.readTimeoutMs ?? 60_000;
  const random = deps.random ?? Math.random;

  async function guarded<T>(sellerId: string, work: (context: CallContext) => Promise<T>): Promise<T> {
    const activity = Context.current();
    let context: Omit<CallContext, 'signal'>;
    try {
      context = { agent: deps.sellers.get(sellerId), token: deps.sellers.token(sellerId, env), timeoutMs };
    } catch (error) {
      throw ApplicationFailure.create({ type: 'ConfigError', message: (error as Error).message, nonRetryable: true });
    }
    const deadline = deadlineSignal(activity.cancellationSignal, timeoutMs);
    const { signal } = deadline;
    const ticker = setInterval(() => activity.heartbeat(), HEARTBEAT_EVERY_MS);
    try {
      return await raceSignal(signal, () => work({ ...context, signal }));
    } catch (error) {
      if (error instanceof ApplicationFailure) throw error;
      if (error instanceof ConfigError)
        throw ApplicationFailure.create({ type: 'ConfigError', message: error.message, nonRetryable: true });
      if (error instanceof ProtocolViolation) {
        throw ApplicationFailure.create({ type: 'ProtocolViolation', message: error.message, nonRetryable: true });
      }
      if (activity.cancellationSignal.aborted) throw error;
      const classified = classifyTransportFailure(error, Date.now());
      throw sellerFailure(classified, activity.info.attempt);
    } finally {
      clearInterval(ticker);
      deadline.dispose();
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
      nextRetryDelay: retryDelayMs(error, attempt, BACKOFF, random),
    });
  }

  return {
    /** get_media_buys for one buy: what the seller says about it now. */
    async readMediaBuy(input: ReadMediaBuyInput): Promise<ReadMediaBuyOutcome> {
      return guarded(input.sellerId, async (context) => {
        const answer = await seller.callTask({
          ...context,
          task: 'get_media_buys',
          args: {
            media_buy_ids: [input.mediaBuyId],
            ...(input.account !== undefined ? { account: input.account } : {}),
          },
        });
        const error = answer.snapshot.errors?.[0];
        if (answer.callError && error) {
          if (error.code === 'MEDIA_BUY_NOT_FOUND') return { found: false, note: error.message };
          throw sellerFailure(error, Context.current().info.attempt);
        }
        const snapshot = mediaBuyFromList(answer.snapshot.result, input.mediaBuyId);
        if (!snapshot)
          return { found: false, note: `get_media_buys at ${input.sellerId} does not list ${input.mediaBuyId}` };
        return { found: true, snapshot };
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
        const answer = await seller.callTask({ ...context, task: 'get_media_buy_delivery', args });
        const error = answer.snapshot.errors?.[0];
        if (answer.callError && error) {
          if (error.code === 'UNSUPPORTED_GRANULARITY')
            return { found: false, unsupportedGranularity: true, note: error.message };
          if (error.code === 'MEDIA_BUY_NOT_FOUND') return { found: false, note: error.message };
          throw sellerFailure(error, Context.current().info.attempt);
        }
        const pull = parseDeliveryPull(answer.snapshot.result, input.mediaBuyId);
        if (!pull)
          return {
            found: false,
            note: `get_media_buy_delivery at ${input.sellerId} has no delivery for ${input.mediaBuyId}`,
          };
        return { found: true, pull };
      });
    },
  };
}

export type MediaBuyActivities = ReturnType<typeof createMediaBuyActivities>;

// ---- reporting-webhook credentials -----------------------------------------------------------------------------
//
// AdCP 3.x requires `reporting_webhook.authentication` (schemes + credentials of at least 32 characters) on every
// create_media_buy that registers a reporting webhook, whatever scheme the seller signs with. The credential is one
// per buy, derived from a server-side master secret and the buy's workflow ID, and it is put into the request here,
// at the moment of the call: workflow inputs, the call plan and every activity input and result carry only the
// reporting URL, which names the buy. The gateway's reporting route (api/reporting-webhooks.ts) derives the same
// credential from the buy ID in the URL to verify.

/** The master secret reporting-webhook credentials derive from (at least 32 characters). */
export const REPORTING_SECRET_ENV = 'ADCP_REPORTING_WEBHOOK_SECRET';
const REPORTING_DERIVATION = 'adcp-orchestrator/reporting-webhook/v1';
const REPORTING_PATH = '/webhooks/adcp-reporting/';
const MIN_REPORTING_SECRET_LENGTH = 32;

/** The AdCP legacy scheme a seller's configured webhook authentication calls for; undefined for RFC 9421. */
export function legacyReportingScheme(agent: SellerConfig): 'HMAC-SHA256' | 'Bearer' | undefined {
  if (agent.webhooks?.scheme === 'hmac-sha256') return 'HMAC-SHA256';
  if (agent.webhooks?.scheme === 'bearer') return 'Bearer';
  return undefined;
}

/**
 * The scheme sent in `reporting_webhook.authentication.schemes` for this seller: its legacy scheme when it is
 * configured for one, else Bearer. Bearer is the least intrusive of the two the schema allows: it asks the seller
 * for one header and does not stop it from also signing its reports with RFC 9421, which the gateway accepts too.
 */
export function reportingScheme(agent: SellerConfig): 'HMAC-SHA256' | 'Bearer' {
  return legacyReportingScheme(agent) ?? 'Bearer';
}

/**
 * The master secret: ADCP_REPORTING_WEBHOOK_SECRET, else the seller's own configured webhook secret (its
 * `secret_env` / `token_env`), so a seller set up for legacy task webhooks needs nothing more for reports.
 * Undefined when neither is set or the one set is shorter than 32 characters.
 */
export function reportingMasterSecret(agent: SellerConfig, env: NodeJS.ProcessEnv): string | undefined {
  const own = env[REPORTING_SECRET_ENV];
  const webhooks = agent.webhooks as { secret_env?: string; token_env?: string } | undefined;
  const name = webhooks?.secret_env ?? webhooks?.token_env;
  const master = own || (name ? env[name] || undefined : undefined);
  return master && master.length >= MIN_REPORTING_SECRET_LENGTH ? master : undefined;
}

/** One buy's reporting credential: HMAC-SHA256(master, derivation label + buy workflow ID), base64url (43 characters). */
export function reportingWebhookCredential(masterSecret: string, mediaBuyWorkflowId: string): string {
  return createHmac('sha256', masterSecret).update(`${REPORTING_DERIVATION}:${mediaBuyWorkflowId}`).digest('base64url');
}

/**
 * Without a master secret, a seller not on legacy webhooks still gets a credential (the schema requires one), derived
 * from this key, which lives only in this process's memory: stable across retries in this process, never written
 * anywhere, and never accepted by the gateway (which cannot know it). Its reports are then taken by RFC 9421
 * signature only; a seller with no webhook verification configured cannot be verified at all, and the buy is
 * followed by reads and delivery pulls.
 */
const PROCESS_ONLY_REPORTING_KEY = randomBytes(32).toString('base64url');

export type ReportingAuthentication = {
  scheme: 'HMAC-SHA256' | 'Bearer';
  credentials: string;
  /** Why the gateway cannot verify reports by this credential (no master secret), for the worker's log. */
  unverifiable?: string;
};

/**
 * The `reporting_webhook.authentication` a buy's create carries:
 *  - a master secret (above): the buy's derived credential, with the seller's legacy scheme or Bearer;
 *  - none, and the seller is on legacy HMAC / Bearer webhooks: a configuration error (its reports could not be
 *    verified at all);
 *  - none otherwise: a process-only credential the gateway never accepts (see PROCESS_ONLY_REPORTING_KEY), with
 *    the reason logged.
 */
export function reportingAuthentication(
  agent: SellerConfig,
  mediaBuyWorkflowId: string,
  env: NodeJS.ProcessEnv,
): ReportingAuthentication {
  const scheme = reportingScheme(agent);
  const master = reportingMasterSecret(agent, env);
  if (master) return { scheme, credentials: reportingWebhookCredential(master, mediaBuyWorkflowId) };
  const legacy = legacyReportingScheme(agent);
  if (legacy) {
    throw new ConfigError(
      `Seller "${agent.id}" signs webhooks with ${legacy}, so its reporting webhook needs a credential: set ` +
        `${REPORTING_SECRET_ENV} (at least ${MIN_REPORTING_SECRET_LENGTH} characters) for the worker and the gateway.`,
    );
  }
  return {
    scheme,
    credentials: reportingWebhookCredential(PROCESS_ONLY_REPORTING_KEY, mediaBuyWorkflowId),
    unverifiable:
      `${REPORTING_SECRET_ENV} is not set, so the gateway cannot verify the buy's reporting credential: ` +
      (agent.webhooks?.scheme === 'rfc9421'
        ? `reports from seller "${agent.id}" are accepted by RFC 9421 signature only.`
        : `seller "${agent.id}" has no webhook verification configured either, so its reports will be refused and ` +
          `delivery is pulled instead.`) +
      ` Set ${REPORTING_SECRET_ENV} (at least ${MIN_REPORTING_SECRET_LENGTH} characters) for the worker and the gateway.`,
  };
}

/** The buy workflow ID a reporting URL names (`<base>/webhooks/adcp-reporting/<id>`), if it is one of ours. */
export function mediaBuyIdOfReportingUrl(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  let pathname: string;
  try {
    pathname = new URL(url).pathname;
  } catch {
    return undefined;
  }
  const at = pathname.lastIndexOf(REPORTING_PATH);
  if (at < 0) return undefined;
  const id = decodeURIComponent(pathname.slice(at + REPORTING_PATH.length));
  return id && !id.includes('/') ? id : undefined;
}

/** Replaces every string that contains `secret` (a seller echoing the request back) so it never reaches history. */
function redact<T>(value: T, secret: string): T {
  if (typeof value === 'string') return (value.includes(secret) ? '[redacted]' : value) as T;
  if (Array.isArray(value)) return value.map((item) => redact(item, secret)) as T;
  if (value && typeof value === 'object') {
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) copy[key] = redact(item, secret);
    return copy as T;
  }
  return value;
}

/**
 * A SellerClient that fills in `reporting_webhook.authentication` on create_media_buy (see reportingAuthentication
 * above: the buy's credential derived at the call), and keeps the credential out of the answer it returns. A request
 * that already carries credentials or a reporting URL that is not ours passes unchanged.
 */
export function withReportingCredentials(seller: SellerClient, env: NodeJS.ProcessEnv = process.env): SellerClient {
  const callTask = async (request: Parameters<SellerClient['callTask']>[0]): Promise<SellerAnswer> => {
    const reporting = request.args.reporting_webhook as Record<string, unknown> | undefined;
    const buyId = mediaBuyIdOfReportingUrl(reporting?.url);
    const given = reporting?.authentication as { credentials?: unknown } | undefined;
    if (request.task !== 'create_media_buy' || !reporting || !buyId || given?.credentials)
      return seller.callTask(request);
    const decided = reportingAuthentication(request.agent, buyId, env);
    if (decided.unverifiable) {
      log.warn(`Reporting webhook for ${buyId}: ${decided.unverifiable}`, {
        sellerId: request.agent.id,
        mediaBuyWorkflowId: buyId,
      });
    }
    const answer = await seller.callTask({
      ...request,
      args: {
        ...request.args,
        reporting_webhook: {
          ...reporting,
          authentication: { schemes: [decided.scheme], credentials: decided.credentials },
        },
      },
    });
    return redact(answer, decided.credentials);
  };
  // Every other method (reads, lists, cancels, and any added later) is the wrapped client's own, bound to it.
  return new Proxy(seller, {
    get(target, property) {
      if (property === 'callTask') return callTask;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
