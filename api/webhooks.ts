/**
 * POST /webhooks/adcp/:sellerId/:operationId — where sellers push task status (and /webhooks/adcp/:operationId, the
 * form of URLs handed out before the seller was put in the path). Verify, parse, signal: the raw body is verified
 * with the scheme configured for the seller the URL names (RFC 9421, legacy HMAC, or Bearer where allowed), parsed
 * into one event type, and signalled to the operation's workflow, with the seller that verified it. The gateway keeps
 * nothing of any operation and judges nothing about it: the workflow deduplicates, orders, and refuses an event that
 * is not its own (another seller, operation or task; workflows/operation/observations.ts). A verified webhook to a
 * running operation costs one Temporal call, the signal. 2xx means Temporal has the event.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { isTemporalUnavailable } from '../client/temporal-errors';
import type { SellerRegistry } from '../config/sellers';
import { SA_SELLER } from '../config/search-attributes';
import { WebhookPayloadError, isOperationId, parseWebhookPayload } from '../protocol';
import { type WebhookDelivery, webhookReceivedSignal } from '../contract/operation';
import { JsonBodyError, parseJsonStrict } from './body';
import { Problem, sendProblem } from './problems';
import { publishWebhookVerificationFailure } from '../observability/webhook-events';
import type { WebhookAuthenticator } from './webhook-verification';

export interface WebhookRouterOptions {
  client: Client;
  sellers: SellerRegistry;
  authenticator: WebhookAuthenticator;
  /** The base URL sellers were given; the signed target URI is rebuilt from it. */
  publicBaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  log?: (line: string) => void;
}

export const WEBHOOK_BODY_LIMIT = 1024 * 1024;

/** type-is's own test of whether a request has a body (req.is() answers null without one), word for word. */
function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || !Number.isNaN(Number(req.headers['content-length']));
}

/** A webhook answer: `{status, message}` for 2xx, a problem (api/problems.ts) otherwise (task and reporting webhooks). */
export function answer(
  res: Response,
  status: number,
  code: string,
  message: string,
  extra: Record<string, unknown> = {},
): void {
  if (status >= 300) {
    const field = typeof extra.field === 'string' ? { field: extra.field } : {};
    sendProblem(res, new Problem(status, code, message, { extra, ...field }));
    return;
  }
  const body = { status: code, message, ...extra };
  // Written directly rather than through res.json(): the same status, Content-Type and body, without the ETag and
  // freshness work express does for every body (meaningless for the answer to a POST).
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(body));
}

/**
 * The answer to a webhook that did not verify where the receiver had to look its operation (or buy) up first to know
 * whose signature to expect: the same whether or not that exists, so it tells an unauthenticated caller nothing.
 */
export function notAccepted(res: Response): void {
  answer(res, 401, 'WEBHOOK_REJECTED', 'Webhook not accepted.');
}

/** How long the gateway waits for Temporal before answering 503: a redelivery is safe, the workflow deduplicates. */
export const TEMPORAL_DEADLINE_MS = 4_000;
const RETRY_AFTER_SECONDS = 5;

/** 503 with Retry-After: Temporal did not take the event in time; a redelivery is safe. */
export function unavailable(res: Response): void {
  res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
  answer(res, 503, 'TEMPORAL_UNAVAILABLE', `Not accepting events right now; retry in ${RETRY_AFTER_SECONDS} s.`);
}

export function createWebhookRouter(options: WebhookRouterOptions): express.Router {
  const router = express.Router();
  const log = options.log ?? ((line: string) => console.warn(line));
  const env = options.env ?? process.env;
  /** Bounded, so a seller hears 503 (and retries) well before its own client times out. */
  const withDeadline = <T>(call: () => Promise<T>): Promise<T> =>
    options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, call);

  const receive =
    (sellerInPath: boolean) =>
    async (req: Request, res: Response): Promise<void> => {
      const operationId = String(req.params.operationId);
      const rawBody: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      if (!isOperationId(operationId)) {
        answer(res, 404, 'OPERATION_NOT_FOUND', 'No such operation.');
        return;
      }
      const handle = options.client.workflow.getHandle(operationId);
      // With the seller in the path, the sender is verified before anything is asked of Temporal: an unauthenticated
      // request costs no call and cannot tell which operations exist. The seller-less form (URLs handed out before
      // the seller was in the path) carries nothing that names a key for every scheme (an HMAC or Bearer webhook has
      // no key id), so it asks Temporal once whose operation this is, and answers a missing one as it answers a
      // request that did not verify.
      let sellerId: string | undefined = sellerInPath ? String(req.params.sellerId) : undefined;
      let running = true;
      if (!sellerInPath) {
        try {
          const description = await withDeadline(() => handle.describe());
          sellerId = description.typedSearchAttributes.get(SA_SELLER);
          running = description.status.name === 'RUNNING';
        } catch (error) {
          if (error instanceof WorkflowNotFoundError) notAccepted(res);
          else if (isTemporalUnavailable(error)) unavailable(res);
          else throw error;
          return;
        }
      }
      const seller = sellerId && options.sellers.has(sellerId) ? options.sellers.get(sellerId) : undefined;
      if (!seller?.webhooks) {
        log(`webhook rejected for ${operationId}: seller ${sellerId ?? '?'} has no webhook verification configured`);
        publishWebhookVerificationFailure({ webhook: 'task', reason: 'webhooks_not_configured' });
        if (sellerInPath)
          answer(res, 401, 'WEBHOOK_REJECTED', 'Webhook not accepted.', { reason: 'webhooks_not_configured' });
        else notAccepted(res);
        return;
      }
      const base = options.publicBaseUrl ?? `${req.protocol}://${req.get('host')}`;
      const verification = await options.authenticator.verify(
        { method: req.method, url: `${base}${req.originalUrl}`, headers: req.headers, rawBody },
        seller.id,
        seller.webhooks,
        env,
      );
      if (!verification.ok) {
        publishWebhookVerificationFailure({ webhook: 'task', reason: verification.reason });
        log(
          `webhook rejected for ${operationId} from ${seller.id}: ${verification.reason} (${verification.logDetail})`,
        );
        if (!sellerInPath && verification.status !== 503) {
          notAccepted(res);
          return;
        }
        if (verification.wwwAuthenticate) res.setHeader('WWW-Authenticate', verification.wwwAuthenticate);
        answer(res, verification.status, 'WEBHOOK_REJECTED', 'Webhook not accepted.', { reason: verification.reason });
        return;
      }
      let body: unknown;
      try {
        // Strict (api/hardening.ts): a signed body nested 6,000 deep answers 400 (sellers retry 5xx for ever) before
        // any recursive code sees it, and a number JSON cannot carry (1e309) is refused rather than stored as null.
        body = parseJsonStrict(rawBody.toString('utf8'));
      } catch (error) {
        if (error instanceof JsonBodyError) answer(res, error.status, error.code, error.message);
        else answer(res, 400, 'MALFORMED_JSON', 'The body is not valid JSON.');
        return;
      }
      let event;
      try {
        event = parseWebhookPayload(body);
      } catch (error) {
        if (error instanceof WebhookPayloadError) {
          answer(res, 400, 'INVALID_WEBHOOK', error.message, { field: error.field });
          return;
        }
        throw error;
      }
      if (!running) {
        answer(res, 200, 'ignored', 'The operation has already finished.');
        return;
      }
      const delivery: WebhookDelivery = {
        eventKey: event.eventKey,
        snapshot: event.snapshot,
        receivedAt: new Date().toISOString(),
        ...(event.operationId !== undefined ? { operationId: event.operationId } : {}),
        ...(event.notificationId !== undefined ? { notificationId: event.notificationId } : {}),
        verifiedBy: verification.scheme,
        sellerId: seller.id,
      };
      try {
        await withDeadline(() => handle.signal(webhookReceivedSignal, delivery));
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) await notRunning(res, handle, seller.id);
        else if (isTemporalUnavailable(error)) unavailable(res);
        else throw error;
        return;
      }
      answer(res, 200, 'accepted', 'Event recorded.');
    };

  /**
   * The signal found no running workflow: tell an operation of this seller that has ended (200 ignored, so the seller
   * stops) from one that does not exist or is another seller's (404). The only path that asks Temporal twice.
   */
  const notRunning = async (
    res: Response,
    handle: ReturnType<Client['workflow']['getHandle']>,
    sellerId: string,
  ): Promise<void> => {
    try {
      const description = await withDeadline(() => handle.describe());
      if (description.typedSearchAttributes.get(SA_SELLER) === sellerId) {
        answer(res, 200, 'ignored', 'The operation has already finished.');
        return;
      }
    } catch (error) {
      if (isTemporalUnavailable(error)) {
        unavailable(res);
        return;
      }
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    }
    answer(res, 404, 'OPERATION_NOT_FOUND', 'No such operation.');
  };

  const accept = (sellerInPath: boolean) => acceptJsonWebhook(receive(sellerInPath), 'Webhooks');
  // Push URLs name the seller (activities/index.ts); the seller-less form serves URLs handed out before.
  router.post('/webhooks/adcp/:sellerId/:operationId', accept(true));
  router.post('/webhooks/adcp/:operationId', accept(false));
  return router;
}

const isJson = (req: Request): boolean =>
  // What sellers send (the SDK's emitter) is exactly this; anything else goes through express's full media-type test.
  (req.headers['content-type'] === 'application/json' && hasBody(req)) || Boolean(req.is('application/json'));
const rawBody = express.raw({ type: () => true, limit: WEBHOOK_BODY_LIMIT });

/**
 * A webhook route (task and reporting webhooks): a JSON media type, then the raw body (kept for the signature), then
 * `handle`.
 * One route handler rather than three (media type, body, receive): the same steps in the same order, without two
 * more trips through express's router per webhook. Errors go where they went: the body parser's and receive's
 * to express's error handling.
 */
export function acceptJsonWebhook(
  handle: (req: Request, res: Response) => Promise<void>,
  what: string,
): (req: Request, res: Response, next: NextFunction) => void {
  return (req, res, next) => {
    if (!isJson(req)) {
      answer(res, 415, 'UNSUPPORTED_MEDIA_TYPE', `${what} must be sent as application/json.`);
      return;
    }
    rawBody(req, res, (error?: unknown) => {
      if (error) next(error);
      else handle(req, res).catch(next);
    });
  };
}
