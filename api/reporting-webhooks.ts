/**
 * POST /webhooks/adcp-reporting/:sellerId/:mediaBuyWorkflowId — where sellers push delivery reports for a buy (the
 * URL the media-buy workflow registers as `reporting_webhook.url`), and /webhooks/adcp-reporting/:mediaBuyWorkflowId,
 * the form buys created before the seller was in the path registered. Verify, parse, signal, like task webhooks
 * (api/webhooks.ts): the raw body is verified as the seller the URL names (the buy's derived credential or the
 * seller's RFC 9421 signature, the same WebhookAuthenticator), parsed (protocol/media-buy.ts), and the whole fire is
 * signalled once to the buy's workflow with the seller that verified it. The gateway keeps nothing of any buy and
 * judges no row: the workflow deduplicates, tracks sequence numbers, fills gaps, and refuses a report of another
 * seller or a row about another buy (workflows/media-buy/machine.ts). 2xx means Temporal has it.
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
import { SA_SELLER } from '../config/search-attributes';
import { ReportingPayloadError, parseReportingWebhook } from '../protocol/media-buy';
import {
  MEDIA_BUY_ID_PATTERN,
  type ReportDelivery,
  mediaBuyStateQuery,
  reportReceivedSignal,
} from '../contract/media-buy';
import { JsonBodyError, parseJsonStrict } from './body';
import type { WebhookAuthenticator, WebhookRequest, WebhookVerification } from './webhook-verification';
import { TEMPORAL_DEADLINE_MS, acceptJsonWebhook, answer, notAccepted, unavailable } from './webhooks';
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

type BuyHandle = ReturnType<Client['workflow']['getHandle']>;

export function createReportingWebhookRouter(options: ReportingWebhookRouterOptions): express.Router {
  const router = express.Router();
  const log = options.log ?? ((line: string) => console.warn(line));
  const env = options.env ?? process.env;
  const withDeadline = <T>(call: () => Promise<T>): Promise<T> =>
    options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, call);

  /**
   * The seller of a buy whose URL does not name it (the form registered before the seller was in the path): its
   * search attribute, or on servers without search attributes its state query. One lookup per report, no copy kept.
   */
  async function sellerOf(handle: BuyHandle): Promise<string | undefined> {
    const description = await withDeadline(() => handle.describe());
    const sellerId = description.typedSearchAttributes.get(SA_SELLER);
    if (sellerId) return sellerId;
    return (await withDeadline(() => handle.query(mediaBuyStateQuery))).sellerId;
  }

  const receive =
    (sellerInPath: boolean) =>
    async (req: Request, res: Response): Promise<void> => {
      const id = String(req.params.mediaBuyWorkflowId);
      const rawBody: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      if (!MEDIA_BUY_ID_PATTERN.test(id)) {
        answer(res, 404, 'MEDIA_BUY_NOT_FOUND', 'No such media buy.');
        return;
      }
      const handle = options.client.workflow.getHandle(id);
      // With the seller in the path the report is verified before anything is asked of Temporal: an unauthenticated
      // request costs no call and cannot tell which buys exist. The older form asks Temporal once whose buy it is,
      // and answers a missing buy as it answers a report that did not verify.
      let sellerId: string | undefined = sellerInPath ? String(req.params.sellerId) : undefined;
      if (!sellerInPath) {
        try {
          sellerId = await sellerOf(handle);
        } catch (error) {
          if (error instanceof WorkflowNotFoundError) notAccepted(res);
          else if (isTemporalUnavailable(error)) unavailable(res);
          else {
            log(`reporting webhook for ${id}: cannot look the buy up: ${(error as Error).message}`);
            unavailable(res);
          }
          return;
        }
      }
      const agent = sellerId && options.sellers.has(sellerId) ? options.sellers.get(sellerId) : undefined;
      const ways = agent ? verificationsFor(agent, id, env) : {};
      if (!agent || (!ways.credential && !ways.signature)) {
        log(
          `reporting webhook rejected for ${id}: seller ${sellerId ?? '?'} has no webhook verification configured ` +
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
      // The whole fire, every row: a seller may aggregate several buys in one fire, and the buy takes its own rows.
      const [first, ...more] = parsed.notifications;
      const delivery: ReportDelivery = {
        eventKey: parsed.eventKey,
        notification: first!,
        ...(more.length > 0 ? { notifications: parsed.notifications } : {}),
        receivedAt: new Date().toISOString(),
        verifiedBy: verification.scheme,
        sellerId: agent.id,
      };
      try {
        await withDeadline(() => handle.signal(reportReceivedSignal, delivery));
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) await notRunning(res, handle, agent.id, sellerInPath);
        else if (isTemporalUnavailable(error)) unavailable(res);
        else throw error;
        return;
      }
      answer(res, 200, 'accepted', 'Report recorded.');
    };

  /**
   * The signal found no running buy: one that has ended (200 ignored, so the seller stops) or, with the seller in the
   * path, one that never existed or is another seller's (404). The only path that asks Temporal twice.
   */
  const notRunning = async (res: Response, handle: BuyHandle, sellerId: string, sellerInPath: boolean) => {
    if (!sellerInPath) {
      answer(res, 200, 'ignored', 'The media buy is no longer followed.');
      return;
    }
    try {
      const description = await withDeadline(() => handle.describe());
      const owner = description.typedSearchAttributes.get(SA_SELLER);
      // Without search attributes (a server that has none) an ended buy cannot say whose it was: ignored.
      if (owner === undefined || owner === sellerId) {
        answer(res, 200, 'ignored', 'The media buy is no longer followed.');
        return;
      }
    } catch (error) {
      if (isTemporalUnavailable(error)) {
        unavailable(res);
        return;
      }
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    }
    answer(res, 404, 'MEDIA_BUY_NOT_FOUND', 'No such media buy.');
  };

  const accept = (sellerInPath: boolean) => acceptJsonWebhook(receive(sellerInPath), 'Reports');
  // Reporting URLs name the seller (the media-buy workflow registers them so); the form without it serves buys
  // created before, until none of them is open.
  router.post('/webhooks/adcp-reporting/:sellerId/:mediaBuyWorkflowId', accept(true));
  router.post('/webhooks/adcp-reporting/:mediaBuyWorkflowId', accept(false));
  return router;
}
