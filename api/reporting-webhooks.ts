/**
 * POST /webhooks/adcp-reporting/:mediaBuyWorkflowId — where sellers push delivery reports for a buy (the URL the
 * media-buy workflow registered as `reporting_webhook.url`). Verified exactly like task webhooks (the same
 * WebhookAuthenticator, the seller's configured scheme, the raw body), parsed (protocol/media-buy.ts) and signalled
 * to the buy's workflow, which deduplicates, tracks sequence numbers and fills gaps. 2xx means Temporal has it.
 */
import express, { type Request, type Response } from 'express';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { isTemporalUnavailable } from '../client/temporal-errors';
import {
  REPORTING_SECRET_ENV,
  reportingMasterSecret,
  reportingScheme,
  reportingWebhookCredential,
} from '../activities/reporting-credentials';
import type { SellerConfig, SellerRegistry } from '../config/sellers';
import { SA_SELLER, SA_MEDIA_BUY_ID } from '../config/search-attributes';
import { ReportingPayloadError, parseReportingWebhook } from '../protocol/media-buy';
import { MEDIA_BUY_ID_PATTERN, mediaBuyStateQuery, reportReceivedSignal } from '../contract/media-buy';
import { JsonBodyError, parseJsonStrict } from './body';
import type { WebhookAuthenticator, WebhookRequest, WebhookVerification } from './webhook-verification';
import { TEMPORAL_DEADLINE_MS, WEBHOOK_BODY_LIMIT, answer, notAccepted, unavailable } from './webhooks';
import { publishWebhookVerificationFailure } from '../observability/webhook-events';

export interface ReportingWebhookRouterOptions {
  client: Client;
  sellers: SellerRegistry;
  authenticator: WebhookAuthenticator;
  /** The base URL sellers were given; the signed target URI is rebuilt from it. */
  publicBaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  log?: (line: string) => void;
}

const CACHE_SIZE = 10_000;
/** Where the derived credential is handed to the verifier (an overlay on the environment, never process.env). */
const DERIVED_CREDENTIAL_ENV = 'ADCP_REPORTING_CREDENTIAL_FOR_THIS_BUY';

type WebhookConfig = NonNullable<SellerConfig['webhooks']>;

/**
 * The ways a report for this buy may prove it comes from the buy's seller:
 *  - `credential`: the buy's own credential (Bearer token or HMAC-SHA256 key, per the scheme sent on create),
 *    derived from the master secret and the buy ID exactly as the worker derived it (activities/media-buy.ts);
 *  - `signature`: an RFC 9421 signature by the seller's keys, for a seller configured for RFC 9421.
 * A seller on legacy HMAC / Bearer without any master secret keeps its configured verification (which then
 * reports itself misconfigured); a seller with neither way is refused before any Temporal call.
 */
function verificationsFor(
  agent: SellerConfig,
  mediaBuyWorkflowId: string,
  env: NodeJS.ProcessEnv,
): { credential?: { webhooks: WebhookConfig; env: NodeJS.ProcessEnv }; signature?: WebhookConfig } {
  const master = reportingMasterSecret(agent, env);
  const signature = agent.webhooks?.scheme === 'rfc9421' ? agent.webhooks : undefined;
  if (!master) {
    if (agent.webhooks && !signature) return { credential: { webhooks: agent.webhooks, env } };
    return signature ? { signature } : {};
  }
  const scheme = reportingScheme(agent);
  const webhooks = (
    scheme === 'HMAC-SHA256'
      ? { ...agent.webhooks, scheme: 'hmac-sha256', secret_env: DERIVED_CREDENTIAL_ENV }
      : { scheme: 'bearer', token_env: DERIVED_CREDENTIAL_ENV }
  ) as WebhookConfig;
  const credential = reportingWebhookCredential(master, mediaBuyWorkflowId);
  return {
    credential: { webhooks, env: { ...env, [DERIVED_CREDENTIAL_ENV]: credential } },
    ...(signature ? { signature } : {}),
  };
}

function hasHeader(headers: Request['headers'], name: string): boolean {
  return headers[name] !== undefined;
}

/** What the gateway remembers of a buy: its seller (never changes) and its media_buy_id once known. */
interface KnownBuy {
  sellerId: string;
  mediaBuyId?: string;
}

export function createReportingWebhookRouter(options: ReportingWebhookRouterOptions): express.Router {
  const router = express.Router();
  const log = options.log ?? ((line: string) => console.warn(line));
  const env = options.env ?? process.env;
  const known = new Map<string, KnownBuy>();
  const remember = (id: string, entry: KnownBuy) => {
    known.set(id, entry);
    if (known.size > CACHE_SIZE) known.delete(known.keys().next().value!);
  };

  /** The buy's seller and media_buy_id: from its search attributes, or (unindexed servers) from its state query. */
  async function lookUp(id: string): Promise<KnownBuy | undefined> {
    const cached = known.get(id);
    if (cached?.mediaBuyId) return cached;
    const handle = options.client.workflow.getHandle(id);
    const description = await options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () => handle.describe());
    let sellerId = description.typedSearchAttributes.get(SA_SELLER);
    let mediaBuyId = description.typedSearchAttributes.get(SA_MEDIA_BUY_ID);
    if (!sellerId || !mediaBuyId) {
      const state = await options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () =>
        handle.query(mediaBuyStateQuery),
      );
      sellerId ??= state.sellerId;
      mediaBuyId ??= state.mediaBuyId;
    }
    if (!sellerId) return undefined;
    const entry = { sellerId, ...(mediaBuyId ? { mediaBuyId } : {}) };
    remember(id, entry);
    return entry;
  }

  router.post(
    '/webhooks/adcp-reporting/:mediaBuyWorkflowId',
    (req, res, next) => {
      if (!req.is('application/json')) {
        answer(res, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Reports must be sent as application/json.');
        return;
      }
      next();
    },
    express.raw({ type: () => true, limit: WEBHOOK_BODY_LIMIT }),
    async (req: Request, res: Response) => {
      const id = String(req.params.mediaBuyWorkflowId);
      const rawBody: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      if (!MEDIA_BUY_ID_PATTERN.test(id)) {
        answer(res, 404, 'MEDIA_BUY_NOT_FOUND', 'No such media buy.');
        return;
      }
      let buy: KnownBuy | undefined;
      try {
        buy = await lookUp(id);
      } catch (error) {
        // Answered as a report that did not verify: an unauthenticated caller cannot tell which buys exist.
        if (error instanceof WorkflowNotFoundError) notAccepted(res);
        else if (isTemporalUnavailable(error)) unavailable(res);
        else {
          log(`reporting webhook for ${id}: cannot look the buy up: ${(error as Error).message}`);
          unavailable(res);
        }
        return;
      }
      const agent = buy && options.sellers.has(buy.sellerId) ? options.sellers.get(buy.sellerId) : undefined;
      const ways = agent ? verificationsFor(agent, id, env) : {};
      if (!agent || (!ways.credential && !ways.signature)) {
        log(
          `reporting webhook rejected for ${id}: seller ${buy?.sellerId ?? '?'} has no webhook verification configured ` +
            `and no reporting credential can be derived (${REPORTING_SECRET_ENV} unset)`,
        );
        publishWebhookVerificationFailure({ webhook: 'reporting', reason: 'webhooks_not_configured' });
        notAccepted(res);
        return;
      }
      const base = options.publicBaseUrl ?? `${req.protocol}://${req.get('host')}`;
      const request: WebhookRequest = {
        method: req.method,
        url: `${base}${req.originalUrl}`,
        headers: req.headers,
        rawBody,
      };
      // Either way is enough. The credential is tried when its header is there (or there is no other way); the
      // signature when signature headers are there (or the credential failed or is absent). The answer to a report
      // that passes neither is the rejection of the way it attempted (the signature's when it carried one).
      const credentialHeader = reportingScheme(agent) === 'HMAC-SHA256' ? 'x-adcp-signature' : 'authorization';
      const signed = hasHeader(req.headers, 'signature-input') || hasHeader(req.headers, 'signature');
      let verification: WebhookVerification | undefined;
      if (ways.credential && (hasHeader(req.headers, credentialHeader) || !ways.signature || !signed)) {
        verification = await options.authenticator.verify(
          request,
          agent.id,
          ways.credential.webhooks,
          ways.credential.env,
        );
      }
      if (ways.signature && !verification?.ok && (signed || !verification)) {
        verification = await options.authenticator.verify(request, agent.id, ways.signature, env);
      }
      verification ??= await options.authenticator.verify(
        request,
        agent.id,
        ways.credential!.webhooks,
        ways.credential!.env,
      );
      if (!verification.ok) {
        publishWebhookVerificationFailure({ webhook: 'reporting', reason: verification.reason });
        log(
          `reporting webhook rejected for ${id} from ${agent.id}: ${verification.reason} (${verification.logDetail})`,
        );
        if (verification.status === 503) unavailable(res);
        else notAccepted(res);
        return;
      }
      let parsed: ReturnType<typeof parseReportingWebhook>;
      try {
        // Strict (api/hardening.ts): nesting bounded before any recursive code, no number JSON cannot carry.
        parsed = parseReportingWebhook(parseJsonStrict(rawBody.toString('utf8')));
      } catch (error) {
        if (error instanceof ReportingPayloadError)
          answer(res, 400, 'INVALID_WEBHOOK', error.message, { field: error.field });
        else if (error instanceof JsonBodyError) answer(res, error.status, error.code, error.message);
        else answer(res, 400, 'MALFORMED_JSON', 'The body is not valid JSON.');
        return;
      }
      if (!parsed.eventKey) {
        answer(
          res,
          400,
          'INVALID_WEBHOOK',
          'idempotency_key: a reporting webhook carries the idempotency_key receivers dedupe by.',
          { field: 'idempotency_key' },
        );
        return;
      }
      // A seller may aggregate several buys in one fire; this URL names one buy, and only its rows are taken here.
      const mine = parsed.notifications.filter(
        (notification) => !buy!.mediaBuyId || notification.mediaBuyId === buy!.mediaBuyId,
      );
      const others = parsed.notifications
        .filter((notification) => !mine.includes(notification))
        .map((notification) => notification.mediaBuyId);
      if (mine.length === 0) {
        answer(
          res,
          409,
          'WEBHOOK_MEDIA_BUY_MISMATCH',
          `The report is for ${others.join(', ')}, not for this buy (${buy!.mediaBuyId}); post it to that buy's reporting URL.`,
        );
        return;
      }
      const handle = options.client.workflow.getHandle(id);
      try {
        for (const notification of mine) {
          await options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () =>
            handle.signal(reportReceivedSignal, {
              eventKey:
                parsed.notifications.length > 1 ? `${parsed.eventKey}:${notification.mediaBuyId}` : parsed.eventKey!,
              notification,
              receivedAt: new Date().toISOString(),
              verifiedBy: verification.scheme,
            }),
          );
        }
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) {
          known.delete(id);
          answer(res, 200, 'ignored', 'The media buy is no longer followed.');
          return;
        }
        if (isTemporalUnavailable(error)) {
          unavailable(res);
          return;
        }
        throw error;
      }
      answer(res, 200, 'accepted', 'Report recorded.', others.length > 0 ? { ignored_media_buy_ids: others } : {});
    },
  );
  return router;
}
