/**
 * POST /webhooks/adcp/:sellerId/:operationId — where sellers push task status (and /webhooks/adcp/:operationId, the
 * form of URLs handed out before the seller was put in the path). The raw body is verified with the
 * seller's configured scheme (RFC 9421, legacy HMAC, or Bearer where allowed), parsed into one event type,
 * and signalled to the operation's workflow, which deduplicates and orders. 2xx means Temporal has the event.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { isTemporalUnavailable } from '../client/temporal-errors';
import type { SellerRegistry } from '../config/sellers';
import { SA_SELLER, SA_TASK_ID } from '../config/search-attributes';
import { WebhookPayloadError, isOperationId, parseWebhookPayload } from '../protocol';
import {
  OPERATION_STATE_MEMO,
  type WebhookRefusal,
  webhookReceivedSignal,
  webhookRefusedSignal,
} from '../contract/operation';
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
  /** Counts signed webhooks refused for belonging to another operation or task (shared with /healthz, tests). */
  refusals?: WebhookRefusalCounter;
}

/**
 * Signed webhooks the gateway refused because they contradict what the operation knows (misrouted: another
 * operation's `operation_id`, another task's `task_id`). The gateway has no metrics endpoint; the counts are logged
 * with each refusal and readable here.
 */
export class WebhookRefusalCounter {
  private readonly counts = new Map<WebhookRefusal, number>();

  add(reason: WebhookRefusal): number {
    const count = (this.counts.get(reason) ?? 0) + 1;
    this.counts.set(reason, count);
    return count;
  }

  get(reason: WebhookRefusal): number {
    return this.counts.get(reason) ?? 0;
  }

  snapshot(): Record<WebhookRefusal, number> {
    return { operation_id_mismatch: this.get('operation_id_mismatch'), task_id_mismatch: this.get('task_id_mismatch') };
  }
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

const OPERATION_CACHE_SIZE = 10_000;

/** How long the gateway waits for Temporal before answering 503: a redelivery is safe, the workflow deduplicates. */
export const TEMPORAL_DEADLINE_MS = 4_000;
const RETRY_AFTER_SECONDS = 5;

/** What the gateway remembers of an operation: its seller (never changes), and its seller task once known (idem). */
interface KnownOperation {
  sellerId: string;
  taskId?: string;
}

/** 503 with Retry-After: Temporal did not take the event in time; a redelivery is safe. */
export function unavailable(res: Response): void {
  res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
  answer(res, 503, 'TEMPORAL_UNAVAILABLE', `Not accepting events right now; retry in ${RETRY_AFTER_SECONDS} s.`);
}

function taskIdFrom(
  description: Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['describe']>>,
): string | undefined {
  const fromAttribute = description.typedSearchAttributes.get(SA_TASK_ID);
  if (fromAttribute) return fromAttribute;
  const published = description.memo?.[OPERATION_STATE_MEMO] as { taskId?: unknown } | undefined;
  return typeof published?.taskId === 'string' && published.taskId !== '' ? published.taskId : undefined;
}

export function createWebhookRouter(options: WebhookRouterOptions): express.Router {
  const router = express.Router();
  const log = options.log ?? ((line: string) => console.warn(line));
  const env = options.env ?? process.env;
  const refusals = options.refusals ?? new WebhookRefusalCounter();
  // Bounded map of operation → what we know of it, oldest first out.
  const known = new Map<string, KnownOperation>();
  const remember = (operationId: string, entry: KnownOperation): void => {
    known.set(operationId, entry);
    if (known.size > OPERATION_CACHE_SIZE) known.delete(known.keys().next().value!);
  };
  const refuse = (
    res: Response,
    operationId: string,
    reason: WebhookRefusal,
    message: string,
    extra: Record<string, unknown>,
  ) => {
    const total = refusals.add(reason);
    log(`webhook refused for ${operationId}: ${reason} (${message}) [${reason} refusals so far: ${total}]`);
    // The sender is verified, so telling the operation costs no unauthenticated RPC: its view then shows the
    // refusal too. Best effort: the answer to the seller does not wait on it.
    const notice = {
      reason,
      note: message,
      receivedAt: new Date().toISOString(),
      ...(typeof extra.task_id === 'string' ? { taskId: extra.task_id } : {}),
      ...(typeof extra.operation_id === 'string' ? { operationId: extra.operation_id } : {}),
      ...(typeof extra.status === 'string' ? { status: extra.status } : {}),
    };
    void options.client
      .withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () =>
        options.client.workflow.getHandle(operationId).signal(webhookRefusedSignal, notice),
      )
      .catch(() => undefined);
    answer(
      res,
      409,
      reason === 'operation_id_mismatch' ? 'WEBHOOK_OPERATION_MISMATCH' : 'WEBHOOK_TASK_MISMATCH',
      message,
      {
        reason,
        ...extra,
      },
    );
  };

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
      // Bounded, so a seller hears 503 (and retries) well before its own client times out.
      const describe = () => options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () => handle.describe());
      // An operation's seller never changes: after the first webhook, skip the describe() round trip. Whether it
      // has finished is then learned from the signal (a finished workflow refuses it: answered 200 "ignored").
      /** describe(), or undefined once the seller has been answered 404 (no such operation) or 503. */
      let verified = false;
      const describeOrAnswer = async () => {
        try {
          return await describe();
        } catch (error) {
          // Before verification, a missing operation is answered as a request that did not verify.
          if (error instanceof WorkflowNotFoundError)
            if (verified) answer(res, 404, 'OPERATION_NOT_FOUND', 'No such operation.');
            else notAccepted(res);
          else if (isTemporalUnavailable(error)) unavailable(res);
          else throw error;
          return undefined;
        }
      };
      let operation = known.get(operationId);
      let running = true;
      /** Learns the operation's seller and task from Temporal; false once the seller has been answered. */
      const learn = async (): Promise<boolean> => {
        const description = await describeOrAnswer();
        if (!description) return false;
        const recordedSellerId = description.typedSearchAttributes.get(SA_SELLER);
        running = description.status.name === 'RUNNING';
        if (recordedSellerId) {
          const taskId = taskIdFrom(description);
          operation = { sellerId: recordedSellerId, ...(taskId ? { taskId } : {}) };
          if (running) remember(operationId, operation);
        }
        return true;
      };
      // With the seller in the path, the sender is verified before anything is asked of Temporal: an
      // unauthenticated request costs no RPC and cannot tell which operations exist. The legacy path (URLs given to
      // sellers before) has to look the operation up first to know whose signature to expect.
      if (!sellerInPath && operation === undefined && !(await learn())) return;
      const sellerId = sellerInPath ? String(req.params.sellerId) : operation?.sellerId;
      const agent = sellerId && options.sellers.has(sellerId) ? options.sellers.get(sellerId) : undefined;
      if (!agent?.webhooks) {
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
        agent.id,
        agent.webhooks,
        env,
      );
      if (!verification.ok) {
        publishWebhookVerificationFailure({ webhook: 'task', reason: verification.reason });
        log(`webhook rejected for ${operationId} from ${agent.id}: ${verification.reason} (${verification.logDetail})`);
        if (!sellerInPath && verification.status !== 503) {
          notAccepted(res);
          return;
        }
        if (verification.wwwAuthenticate) res.setHeader('WWW-Authenticate', verification.wwwAuthenticate);
        answer(res, verification.status, 'WEBHOOK_REJECTED', 'Webhook not accepted.', { reason: verification.reason });
        return;
      }
      verified = true;
      if (sellerInPath) {
        if (operation === undefined && !(await learn())) return;
        // A verified seller learns nothing about another seller's operations.
        if (operation?.sellerId !== agent.id) {
          answer(res, 404, 'OPERATION_NOT_FOUND', 'No such operation.');
          return;
        }
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
      // A signed webhook for another operation (3.1 `operation_id`, which we set to the operation ID) must never be
      // applied here, whatever URL it was posted to.
      if (event.operationId !== undefined && event.operationId !== operationId) {
        refuse(
          res,
          operationId,
          'operation_id_mismatch',
          `The payload's operation_id "${event.operationId}" is not this operation ("${operationId}"); post it to that operation's webhook URL.`,
          { operation_id: event.operationId, expected_operation_id: operationId, status: event.snapshot.status },
        );
        return;
      }
      if (!running) {
        answer(res, 200, 'ignored', 'The operation has already finished.');
        return;
      }
      // Nor a webhook about another seller task. The operation's task id never changes once set; until it is known
      // (a webhook may beat the call's answer) the workflow holds the event until it can tell. A2A webhooks are not
      // compared: over @adcp/sdk's A2A adapter the A2A task id tracks the transport call, not the AdCP task.
      const webhookTaskId = event.format === 'mcp' ? event.snapshot.taskId : undefined;
      if (webhookTaskId !== undefined && operation && operation.taskId === undefined) {
        const description = await describeOrAnswer();
        if (!description) return;
        const taskId = taskIdFrom(description);
        if (taskId) {
          operation = { ...operation, taskId };
          remember(operationId, operation);
        }
      }
      if (webhookTaskId !== undefined && operation?.taskId !== undefined && webhookTaskId !== operation.taskId) {
        refuse(
          res,
          operationId,
          'task_id_mismatch',
          `The payload's task_id "${webhookTaskId}" is not this operation's seller task ("${operation.taskId}").`,
          { task_id: webhookTaskId, expected_task_id: operation.taskId, status: event.snapshot.status },
        );
        return;
      }
      try {
        await options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () =>
          handle.signal(webhookReceivedSignal, {
            eventKey: event.eventKey,
            snapshot: event.snapshot,
            receivedAt: new Date().toISOString(),
            ...(event.operationId !== undefined ? { operationId: event.operationId } : {}),
            ...(event.notificationId !== undefined ? { notificationId: event.notificationId } : {}),
            verifiedBy: verification.scheme,
          }),
        );
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) {
          known.delete(operationId);
          answer(res, 200, 'ignored', 'The operation has already finished.');
          return;
        }
        if (isTemporalUnavailable(error)) {
          unavailable(res);
          return;
        }
        throw error;
      }
      answer(res, 200, 'accepted', 'Event recorded.');
    };
  const isJson = (req: Request): boolean =>
    // What sellers send (the SDK's emitter) is exactly this; anything else goes through express's full media-type test.
    (req.headers['content-type'] === 'application/json' && hasBody(req)) || Boolean(req.is('application/json'));
  const rawBody = express.raw({ type: () => true, limit: WEBHOOK_BODY_LIMIT });
  // One route handler rather than three (media type, body, receive): the same steps in the same order, without two
  // more trips through express's router per webhook. Errors go where they went: the body parser's and receive's
  // to express's error handling.
  const accept = (sellerInPath: boolean) => {
    const handle = receive(sellerInPath);
    return (req: Request, res: Response, next: NextFunction): void => {
      if (!isJson(req)) {
        answer(res, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Webhooks must be sent as application/json.');
        return;
      }
      rawBody(req, res, (error?: unknown) => {
        if (error) next(error);
        else handle(req, res).catch(next);
      });
    };
  };
  // Push URLs name the seller (activities/index.ts); the seller-less form serves URLs handed out before.
  router.post('/webhooks/adcp/:sellerId/:operationId', accept(true));
  router.post('/webhooks/adcp/:operationId', accept(false));
  return router;
}
