/**
 * Reporting-webhook credentials. AdCP 3.x requires `reporting_webhook.authentication` (schemes + credentials of at
 * least 32 characters) on every create_media_buy that registers a reporting webhook, whatever scheme the seller signs
 * with. The credential is one per buy, derived from a server-side master secret and the buy's workflow ID, and it is
 * put into the request here, at the moment of the call: workflow inputs, the call plan and every activity input and
 * result carry only the reporting URL, which names the buy. The gateway's reporting route (api/reporting-webhooks.ts)
 * derives the same credential from the buy ID in the URL to verify.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { log } from '@temporalio/activity';
import { type SellerConfig, ConfigError } from '../config/sellers';
import { type SellerAnswer, type SellerClient, withSellerOverrides } from './seller-client';

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
  // Reads, lists, cancels (and any method added later) are the wrapped client's own.
  return withSellerOverrides(seller, { callTask });
}
