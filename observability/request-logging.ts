/**
 * The gateway's request log: one pino line per request when its response ends, with a request ID the caller can
 * quote (its own `X-Request-Id` when it sent a sane one, else the trace ID of its `traceparent`, else a new UUID;
 * always answered in `X-Request-Id`), the route template, status and time, and the operation's correlation fields
 * (operation ID, seller, task) where the route knows them: routes name them with describeOperation().
 */
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
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
const REQUEST_LOGGER = Symbol('adcp.requestLogger');

type Locals = Record<string | symbol, unknown>;

/** Names the operation a request is about, for its log line (merged with what the route learned before). */
export function describeOperation(res: Response, fields: OperationFields): void {
  const locals = res.locals as Locals;
  const known = (locals[OPERATION_FIELDS] as OperationFields | undefined) ?? {};
  const defined = Object.fromEntries(Object.entries(fields).filter(([, value]) => typeof value === 'string'));
  locals[OPERATION_FIELDS] = { ...known, ...defined };
}

/** What requestLoggerOf() makes a request's child logger from, when a line needs one. */
class RequestLoggerSource {
  constructor(
    readonly logger: Logger,
    readonly requestId: string,
  ) {}
}

let fallbackLogger: Logger | undefined;

/**
 * The logger for lines about this request: requestLogging's child logger (its lines carry the request ID), or, for a
 * gateway mounted without the request log (tests), a gateway logger of its own. Error handlers log through it, never
 * through console.
 */
export function requestLoggerOf(res: Response): Logger {
  const locals = res.locals as Locals;
  const own = locals[REQUEST_LOGGER] as Logger | RequestLoggerSource | undefined;
  if (own instanceof RequestLoggerSource) {
    // Made on first use: most requests log only their one line at the end, which needs no child.
    const child = own.logger.child({ requestId: own.requestId });
    locals[REQUEST_LOGGER] = child;
    return child;
  }
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
  return (req: Request, res: Response, next: NextFunction) => {
    const requestId = requestIdFor(req);
    const started = process.hrtime.bigint();
    res.locals.requestId = requestId;
    (res.locals as Locals)[REQUEST_LOGGER] = new RequestLoggerSource(logger, requestId);
    res.setHeader('X-Request-Id', requestId);
    res.once('finish', () => {
      const operation = ((res.locals as Locals)[OPERATION_FIELDS] as OperationFields | undefined) ?? {};
      // The operation ID is in the URL of most routes, also when the route failed before it could describe it.
      const fromPath = operationIdInPath(req.originalUrl);
      const status = res.statusCode;
      const fields = {
        requestId,
        method: req.method,
        route: routeTemplate(req),
        status,
        durationMs: Math.round(Number(process.hrtime.bigint() - started) / 1e5) / 10,
        ...(fromPath ? { operationId: fromPath } : {}),
        ...operation,
      };
      if (status >= 500) logger.error(fields, 'request failed');
      else if (status >= 400) logger.warn(fields, 'request refused');
      else logger.info(fields, 'request');
    });
    next();
  };
}
