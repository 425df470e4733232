/**
 * The gateway's request log (pino-http): one pino line per request when its response ends, with a request ID the
 * caller can quote (its own `X-Request-Id` when it sent a sane one, else the trace ID of its `traceparent`, else a new
 * UUID; always answered in `X-Request-Id`), the route template, status and time, and the operation's correlation
 * fields (operation ID, seller, task) where the route knows them: routes name them with describeOperation().
 */
import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { pinoHttp } from 'pino-http';
import { type Logger, createLogger } from './logger';
import { routeTemplate } from './gateway-metrics';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/;

export interface OperationFields {
  operationId?: string;
  seller?: string;
  task?: string;
}

const OPERATION_FIELDS = Symbol('adcp.operationFields');
type Locals = Record<string | symbol, unknown>;

/** Names the operation a request is about, for its log line (merged with what the route learned before). */
export function describeOperation(res: Response, fields: OperationFields): void {
  const locals = res.locals as Locals;
  const known = (locals[OPERATION_FIELDS] as OperationFields | undefined) ?? {};
  const defined = Object.fromEntries(Object.entries(fields).filter(([, value]) => typeof value === 'string'));
  locals[OPERATION_FIELDS] = { ...known, ...defined };
}

let fallbackLogger: Logger | undefined;

/**
 * The logger for lines about this request: the request log's child logger (its lines carry the request ID), or, for a
 * gateway mounted without the request log (tests), a gateway logger of its own. Error handlers log through it, never
 * through console.
 */
export function requestLoggerOf(res: Response): Logger {
  const own = (res as Response & { log?: Logger }).log;
  if (own) return own;
  fallbackLogger ??= createLogger({ service: 'gateway' });
  return fallbackLogger;
}

/** The request ID of this request (set by requestLogging). */
export function requestIdOf(res: Response): string | undefined {
  return typeof res.locals.requestId === 'string' ? res.locals.requestId : undefined;
}

const OPERATION_PATH = /^\/v1\/operations\/([^/?#]{1,300})/;
/** `/webhooks/adcp/:operationId` (URLs handed out before) or `/webhooks/adcp/:sellerId/:operationId`. */
const WEBHOOK_PATH = /^\/webhooks\/adcp\/([^/?#]{1,300})(?:\/([^/?#]{1,300}))?/;

function operationIdInPath(url: string): string | undefined {
  const webhook = WEBHOOK_PATH.exec(url);
  const raw = webhook ? (webhook[2] ?? webhook[1]) : OPERATION_PATH.exec(url)?.[1];
  if (raw === undefined) return undefined;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

const ALL_ZERO = /^0+$/;

function requestIdFor(req: Request): string {
  const given = req.headers['x-request-id'];
  if (typeof given === 'string' && given && REQUEST_ID.test(given)) return given;
  const traceparent = req.headers.traceparent;
  if (typeof traceparent === 'string') {
    const trace = TRACEPARENT.exec(traceparent)?.[1];
    if (trace && !ALL_ZERO.test(trace)) return trace;
  }
  return randomUUID();
}

export function requestLogging(logger: Logger): RequestHandler {
  const fields = (req: Request, res: Response, durationMs: number) => {
    const operation = ((res.locals as Locals)[OPERATION_FIELDS] as OperationFields | undefined) ?? {};
    // The operation ID is in the URL of most routes, also when the route failed before it could describe it.
    const fromPath = operationIdInPath(req.originalUrl);
    return {
      method: req.method,
      route: routeTemplate(req),
      status: res.statusCode,
      durationMs,
      ...(fromPath ? { operationId: fromPath } : {}),
      ...operation,
    };
  };
  return pinoHttp<Request, Response>({
    logger,
    genReqId: (req, res) => {
      const requestId = requestIdFor(req);
      res.locals.requestId = requestId;
      res.setHeader('X-Request-Id', requestId);
      return requestId;
    },
    customAttributeKeys: { reqId: 'requestId' },
    // The request's lines carry its ID only; the access line says what this log needs, not the whole request.
    quietReqLogger: true,
    quietResLogger: true,
    customLogLevel: (_req, res, error) =>
      error || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info',
    customSuccessObject: (req, res, value: { responseTime: number }) => fields(req, res, value.responseTime),
    customErrorObject: (req, res, _error, value: { responseTime: number }) => fields(req, res, value.responseTime),
    customSuccessMessage: (_req, res) => (res.statusCode >= 400 ? 'request refused' : 'request'),
    customErrorMessage: () => 'request failed',
  }) as unknown as RequestHandler;
}
