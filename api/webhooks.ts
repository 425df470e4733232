/**
 * POST /webhooks/adcp/:operationId — where sellers push task status. The raw body is verified with the
 * seller's configured scheme (RFC 9421, legacy HMAC, or Bearer where allowed), parsed into one event type,
 * and signalled to the operation's workflow, which deduplicates and orders. 2xx means Temporal has the event.
 */
import express, { type Request, type Response } from 'express';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import type { AgentRegistry } from '../config/agents';
import { SA_AGENT } from '../config/search-attributes';
import { WebhookPayloadError, isOperationId, parseWebhookPayload } from '../protocol';
import { webhookReceivedSignal } from '../workflows/definitions';
import type { WebhookAuthenticator } from './webhook-verification';

export interface WebhookRouterOptions {
  client: Client;
  agents: AgentRegistry;
  authenticator: WebhookAuthenticator;
  /** The base URL sellers were given; the signed target URI is rebuilt from it. */
  publicBaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  log?: (line: string) => void;
}

export const WEBHOOK_BODY_LIMIT = 1024 * 1024;

function answer(res: Response, status: number, code: string, message: string, extra: Record<string, unknown> = {}): void {
  res.status(status).json(status < 300 ? { status: code, message, ...extra } : { error: { code, message, ...extra } });
}

const SELLER_CACHE_SIZE = 10_000;

/** How long the gateway waits for Temporal before answering 503: a redelivery is safe, the workflow deduplicates. */
const TEMPORAL_DEADLINE_MS = 5_000;

function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: number })?.code ?? (error as { cause?: { code?: number } })?.cause?.code;
  return code === 14 || code === 4 || (error as Error)?.name === 'ServiceError';
}

export function createWebhookRouter(options: WebhookRouterOptions): express.Router {
  const router = express.Router();
  const log = options.log ?? ((line: string) => console.warn(line));
  const env = options.env ?? process.env;
  // Bounded map of operation → seller, oldest first out.
  const sellerOf = new Map<string, string>();
  const remember = (operationId: string, agentId: string): void => {
    sellerOf.set(operationId, agentId);
    if (sellerOf.size > SELLER_CACHE_SIZE) sellerOf.delete(sellerOf.keys().next().value!);
  };

  router.post(
    '/webhooks/adcp/:operationId',
    (req, res, next) => {
      if (!req.is('application/json')) {
        answer(res, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Webhooks must be sent as application/json.');
        return;
      }
      next();
    },
    express.raw({ type: () => true, limit: WEBHOOK_BODY_LIMIT }),
    async (req: Request, res: Response) => {
      const operationId = String(req.params.operationId);
      const rawBody: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      if (!isOperationId(operationId)) {
        answer(res, 404, 'OPERATION_NOT_FOUND', 'No such operation.');
        return;
      }
      const handle = options.client.workflow.getHandle(operationId);
      // An operation's seller never changes: after the first webhook, skip the describe() round trip. Whether it
      // has finished is then learned from the signal (a finished workflow refuses it: answered 200 "ignored").
      let agentId = sellerOf.get(operationId);
      let running = true;
      if (agentId === undefined) {
        try {
          // Bounded, so a seller hears 503 (and retries) well before its own client times out.
          const description = await options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () => handle.describe());
          agentId = description.typedSearchAttributes.get(SA_AGENT);
          running = description.status.name === 'RUNNING';
          if (agentId && running) remember(operationId, agentId);
        } catch (error) {
          if (error instanceof WorkflowNotFoundError) {
            answer(res, 404, 'OPERATION_NOT_FOUND', 'No such operation.');
            return;
          }
          if (isUnavailable(error)) {
            answer(res, 503, 'TEMPORAL_UNAVAILABLE', 'Not accepting events right now; retry later.');
            return;
          }
          throw error;
        }
      }
      const agent = agentId && options.agents.has(agentId) ? options.agents.get(agentId) : undefined;
      if (!agent?.webhooks) {
        log(`webhook rejected for ${operationId}: seller ${agentId ?? '?'} has no webhook verification configured`);
        answer(res, 401, 'WEBHOOK_REJECTED', 'Webhook not accepted.', { reason: 'webhooks_not_configured' });
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
        log(`webhook rejected for ${operationId} from ${agent.id}: ${verification.reason} (${verification.logDetail})`);
        if (verification.wwwAuthenticate) res.setHeader('WWW-Authenticate', verification.wwwAuthenticate);
        answer(res, verification.status, 'WEBHOOK_REJECTED', 'Webhook not accepted.', { reason: verification.reason });
        return;
      }
      let body: unknown;
      try {
        body = JSON.parse(rawBody.toString('utf8'));
      } catch {
        answer(res, 400, 'MALFORMED_JSON', 'The body is not valid JSON.');
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
      try {
        await options.client.withDeadline(Date.now() + TEMPORAL_DEADLINE_MS, () =>
          handle.signal(webhookReceivedSignal, {
            eventKey: event.eventKey,
            snapshot: event.snapshot,
            receivedAt: new Date().toISOString(),
          }),
        );
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) {
          sellerOf.delete(operationId);
          answer(res, 200, 'ignored', 'The operation has already finished.');
          return;
        }
        if (isUnavailable(error)) {
          answer(res, 503, 'TEMPORAL_UNAVAILABLE', 'Not accepting events right now; retry later.');
          return;
        }
        throw error;
      }
      answer(res, 200, 'accepted', 'Event recorded.');
    },
  );
  return router;
}
