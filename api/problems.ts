/**
 * The gateway's one error model: RFC 9457 problem details (`application/problem+json`) for every route, the webhook
 * receivers and the codec server included. A body carries the RFC's members (`type`, `title`, `status`, `detail`,
 * `instance`), the stable `code` callers switch on (and `field` for a bad request), and, for callers written against
 * the older shape, the same facts as `error: {code, message, field?, ...}`.
 *
 * Every failure that is not the caller's (Temporal, a worker, a webhook verifier, a nonce store, anything unexpected)
 * answers 503 with Retry-After: the request may be sent again, and nothing about the gateway is a 500.
 */
import { STATUS_CODES } from 'node:http';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { CampaignNotFoundError, CampaignRefusedError, CampaignRequestError } from '../client/campaign-client';
import {
  MediaBuyChangeRefusedError,
  MediaBuyNotFoundError,
  MediaBuyParamsError,
  MediaBuyRequestError,
} from '../client/media-buy-client';
import {
  IdempotencyConflictError,
  OperationEndedError,
  OperationNotFoundError,
  OperationParamsError,
  OperationRejectedError,
  OperationRequestError,
  SellerNotFoundError,
} from '../client/operation-errors';
import { SellerUnknownError } from '../client/seller-capabilities-client';
import { isTemporalUnavailable } from '../client/temporal-errors';
import { JsonBodyError } from './body';
import { errorFields } from '../observability/logger';
import { requestLoggerOf } from '../observability/request-logging';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** Seconds a caller should wait before sending a request that answered 503 again. */
export const RETRY_AFTER_SECONDS = 5;

/** The `type` of a problem: a URN per code, so it names the problem without pointing at a site that is not ours. */
export function problemType(code: string): string {
  return `urn:adcp-orchestrator:problem:${code}`;
}

/** A refusal the gateway answers as a problem; thrown by routes, or sent directly with sendProblem(). */
export class Problem extends Error {
  override readonly name = 'Problem';
  constructor(
    readonly status: number,
    readonly code: string,
    /** The `detail`: what happened, what was expected, what to do. */
    message: string,
    readonly options: {
      /** The request field at fault (dotted path), for 400 and 422. */
      field?: string;
      /** More members of the legacy `error` object (e.g. the final `status` of an ended operation). */
      extra?: Record<string, unknown>;
      /** Extension members of the problem itself (RFC 9457 §3.2), beside `code`. */
      members?: Record<string, unknown>;
      headers?: Record<string, string>;
    } = {},
  ) {
    super(message);
  }
}

/** 503 TEMPORAL_UNAVAILABLE with Retry-After: Temporal (or a worker, for what an operation must answer) was too slow. */
export function temporalUnavailable(
  detail = `Temporal (or a worker, for requests an operation must answer) did not answer in time; retry in ${RETRY_AFTER_SECONDS} s.`,
): Problem {
  return new Problem(503, 'TEMPORAL_UNAVAILABLE', detail, {
    headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
  });
}

/** 503 SERVICE_UNAVAILABLE with Retry-After: something the gateway depends on failed; the request may be retried. */
export function serviceUnavailable(
  detail = `The gateway could not complete the request; retry in ${RETRY_AFTER_SECONDS} s.`,
): Problem {
  return new Problem(503, 'SERVICE_UNAVAILABLE', detail, { headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } });
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance?: string;
  code: string;
  field?: string;
  error: { code: string; message: string; field?: string } & Record<string, unknown>;
}

/** The request's path as the caller sent it, without the query (which may carry what should not be echoed). */
function instanceOf(req: Request | undefined): string | undefined {
  if (!req) return undefined;
  const url = req.originalUrl ?? req.url ?? '';
  const path = url.split('?')[0] ?? '';
  return path ? path.slice(0, 300) : undefined;
}

export function problemBody(problem: Problem, req?: Request): ProblemBody {
  const field = problem.options.field;
  const instance = instanceOf(req);
  return {
    type: problemType(problem.code),
    title: STATUS_CODES[problem.status] ?? 'Error',
    status: problem.status,
    detail: problem.message,
    ...(instance ? { instance } : {}),
    code: problem.code,
    ...(field ? { field } : {}),
    ...problem.options.members,
    error: { code: problem.code, message: problem.message, ...(field ? { field } : {}), ...problem.options.extra },
  };
}

/**
 * Writes the problem. Written directly rather than through res.json(): the same bytes from every module (webhook
 * receivers answer this way too), with no ETag or freshness work for an error.
 */
export function sendProblem(res: Response, problem: Problem, req: Request | undefined = res.req): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const [name, value] of Object.entries(problem.options.headers ?? {})) res.setHeader(name, value);
  // Every 503 says when to come back.
  if (problem.status === 503 && !res.getHeader('Retry-After'))
    res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
  res.statusCode = problem.status;
  res.setHeader('Content-Type', `${PROBLEM_CONTENT_TYPE}; charset=utf-8`);
  res.setHeader('Cache-Control', 'no-store');
  res.end(JSON.stringify(problemBody(problem, req)));
}

/** Shorthand for middleware that refuses a request: `refuse(res, 400, 'INVALID_REQUEST', 'why')`. */
export function refuse(
  res: Response,
  status: number,
  code: string,
  message: string,
  options: Problem['options'] = {},
): void {
  sendProblem(res, new Problem(status, code, message, options));
}

/** What body-parser (express.json / express.raw) throws for a body it refuses. */
interface BodyParserError {
  type?: string;
  status?: number;
  statusCode?: number;
  expose?: boolean;
  message?: string;
  limit?: number;
  charset?: string;
  encoding?: string;
  /** zlib's code (Z_DATA_ERROR, ...) when a compressed body does not decompress. */
  code?: unknown;
}

function bodyParserProblem(error: BodyParserError, req?: Request): Problem | undefined {
  if (error instanceof JsonBodyError) return new Problem(error.status, error.code, error.message);
  switch (error.type) {
    case 'entity.too.large':
      return new Problem(
        413,
        'PAYLOAD_TOO_LARGE',
        `The body is larger than ${error.limit ?? 'the limit of'} bytes (after decompression); send a smaller one.`,
      );
    case 'entity.parse.failed':
      return new Problem(400, 'MALFORMED_JSON', `The body is not valid JSON: ${error.message ?? 'parse error'}.`);
    case 'charset.unsupported':
      return new Problem(
        415,
        'UNSUPPORTED_CHARSET',
        `The body's charset "${String(error.charset ?? '').slice(0, 40)}" is not supported; send UTF-8.`,
      );
    case 'encoding.unsupported':
      return new Problem(
        415,
        'UNSUPPORTED_CONTENT_ENCODING',
        `The body's Content-Encoding "${String(error.encoding ?? '').slice(0, 40)}" is not supported; send identity, gzip, deflate or br.`,
      );
    case 'request.aborted':
      return new Problem(400, 'MALFORMED_BODY', 'The request was aborted before its body arrived.');
    case 'request.size.invalid':
      return new Problem(400, 'MALFORMED_BODY', 'The body is shorter or longer than its Content-Length.');
    case 'stream.encoding.set':
    case 'stream.not.readable':
      return undefined;
  }
  if (typeof error.code === 'string' && error.code.startsWith('Z_')) {
    const encoding = String(req?.headers['content-encoding'] ?? 'compressed').slice(0, 40);
    return new Problem(
      400,
      'MALFORMED_BODY',
      `The body is not valid ${encoding} data (${error.message ?? error.code}).`,
    );
  }
  const status = error.status ?? error.statusCode;
  // Any other refusal of a body parser (garbage gzip, an unreadable body) is the caller's.
  if (typeof status === 'number' && status >= 400 && status < 500 && (error.type !== undefined || error.expose)) {
    return new Problem(status, 'MALFORMED_BODY', `The body could not be read: ${error.message ?? 'unreadable'}.`);
  }
  return undefined;
}

/** The problem for anything a route or middleware threw. Never a 5xx other than 503. */
export function toProblem(error: unknown, req?: Request): Problem {
  if (error instanceof Problem) return error;
  const body = bodyParserProblem((error ?? {}) as BodyParserError, req);
  if (body) return body;
  if (error instanceof OperationParamsError || error instanceof MediaBuyParamsError)
    return new Problem(422, 'INVALID_PARAMS', error.message, { field: error.field });
  if (error instanceof OperationRequestError)
    return new Problem(400, 'INVALID_REQUEST', error.message, { field: error.field });
  if (error instanceof OperationNotFoundError) return new Problem(404, 'OPERATION_NOT_FOUND', error.message);
  if (error instanceof SellerNotFoundError || error instanceof SellerUnknownError)
    return new Problem(404, 'SELLER_NOT_FOUND', error.message);
  if (error instanceof IdempotencyConflictError)
    return new Problem(409, 'IDEMPOTENCY_CONFLICT', error.message, { field: 'idempotency_key' });
  if (error instanceof OperationEndedError)
    return new Problem(409, 'OPERATION_ENDED', error.message, {
      extra: { execution: error.execution, ...(error.status ? { status: error.status } : {}) },
    });
  if (error instanceof OperationRejectedError) return new Problem(409, 'REJECTED_BY_OPERATION', error.message);
  if (error instanceof MediaBuyRequestError)
    return new Problem(400, 'INVALID_REQUEST', error.message, { field: error.field });
  if (error instanceof MediaBuyNotFoundError) return new Problem(404, 'MEDIA_BUY_NOT_FOUND', error.message);
  if (error instanceof MediaBuyChangeRefusedError)
    return error.code === 'SERVICE_UNAVAILABLE'
      ? new Problem(503, error.code, error.message, { headers: { 'Retry-After': '1' } })
      : new Problem(409, error.code, error.message);
  if (error instanceof CampaignRequestError)
    return new Problem(400, 'INVALID_REQUEST', error.message, { field: error.field });
  if (error instanceof CampaignNotFoundError) return new Problem(404, 'NOT_FOUND', error.message);
  if (error instanceof CampaignRefusedError)
    return new Problem(error.code === 'INVALID_REQUEST' ? 400 : 409, error.code, error.message);
  if (isTemporalUnavailable(error)) return temporalUnavailable();
  return serviceUnavailable();
}

/**
 * The last error handler of every app: the problem for the error, logged when it is not the caller's fault (a 503
 * that is not Temporal's plain unavailability is logged with its stack, so an unexpected failure is still seen).
 */
export function problemHandler(): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const problem = toProblem(error, req);
    if (problem.status >= 500 && problem.code !== 'TEMPORAL_UNAVAILABLE')
      requestLoggerOf(res).error(
        { ...errorFields(error), status: problem.status, path: req.path.slice(0, 200) },
        'unexpected error',
      );
    sendProblem(res, problem, req);
  };
}

/** Wraps an async handler so a rejection reaches the error handler (express 5 does this for routes, not for `use`). */
export function asyncHandler(handler: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return (req, res, next) => {
    handler(req, res).catch(next);
  };
}
