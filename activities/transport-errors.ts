/**
 * Classifying what went wrong on the road to a seller (Node, undici, fetch, MCP and A2A JSON-RPC failures) into the
 * one error model, and how long to wait before the next try. Activities only: it knows the shapes of transport
 * libraries' exceptions, which the pure protocol core (protocol/errors.ts, the error model and code tables) must not.
 */
import {
  type AdcpError,
  type Recovery,
  TRANSPORT_ERROR_CODES,
  knownRecovery,
  parseErrors,
  recoveryFor,
  recoveryForHttpStatus,
} from '../protocol/errors';
import { asRecord } from '../protocol/records';

function optionalText(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

// ---------------------------------------------------------------------------------------------------
// Transport failures
// ---------------------------------------------------------------------------------------------------

/**
 * What an activity knows about a failure before any AdCP answer exists. A thrown Error from fetch, the
 * MCP SDK, the A2A SDK or @adcp/sdk can be passed as it is: `code` is numeric on StreamableHTTPError
 * (HTTP status), SseError (HTTP status) and McpError (JSON-RPC code), and a string on Node system errors.
 */
export interface TransportFailure {
  name?: string;
  code?: string | number;
  message?: string;
  /** The HTTP status, when the caller saw the response. */
  httpStatus?: number;
  /** The raw Retry-After header: delay-seconds or an HTTP-date. */
  retryAfterHeader?: string;
  cause?: unknown;
  /** JSON-RPC error data (McpError.data), which may carry an `adcp_error`. */
  data?: unknown;
}

const TIMEOUT_CODES = new Set([
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'ECONNTIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ABORT_ERR',
  'TASK_TIMEOUT',
]);
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENETRESET',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_CONNECT',
]);
const TLS_CODE =
  /^(CERT_|ERR_TLS_|ERR_SSL_|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_(GET|VERIFY)_|ERR_OSSL_)/;
const ERROR_CODE_TOKEN =
  /\b(E[A-Z_]{3,}|UND_ERR_[A-Z_]+|CERT_[A-Z_]+|ERR_TLS_[A-Z_]+|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_[A-Z_]+)\b/g;

const MESSAGE_STATUS_PATTERNS: readonly RegExp[] = [
  /\(HTTP (\d{3})\)/, // SSE transport POST: "Error POSTing to endpoint (HTTP 500): ..."
  /Error POSTing to endpoint: (\d{3})\b/, // Streamable HTTP POST, as @adcp/sdk re-throws it inside MCP -32603
  /\[HTTP (\d{3})\]/, // @adcp/sdk debug text
  /Non-200 status code \((\d{3})\)/, // eventsource (SSE GET)
  /HTTP error for [^!]*! Status: (\d{3})\b/, // A2A JSON-RPC transport
  /HTTP error establishing stream for [^:]*: (\d{3})\b/, // A2A streaming
  /Failed to fetch Agent Card from \S+: (\d{3})\b/, // A2A agent card
  /status code:? (\d{3})\b/i,
  /\bHTTP[ /](\d{3})\b/,
];
const TIMEOUT_TEXT = /timed out|timeout|aborted due to timeout/i;
// undici aborts a body read mid-stream with the bare message "terminated".
const UNREACHABLE_TEXT =
  /fetch failed|socket hang up|other side closed|connection closed|connection (refused|reset)|network error|getaddrinfo|^terminated$/i;
const VIOLATION_TEXT =
  /not valid JSON|Unexpected token|Unexpected end of JSON|JSON\.parse|Unexpected content type|Invalid content type|Invalid response Content-Type|response ID mismatch|missing 'result'|\bnot (valid )?JSON\b|\bnot AdCP\b|Failed to parse/i;
const HTTP_ERROR_TEXT = /Error POSTing to endpoint|Streamable HTTP error|HTTP error/i;
const MAX_MESSAGE = 300;

interface FailureNode {
  record: Record<string, unknown>;
  ctor?: string;
  name?: string;
  message?: string;
}

/** The failure and what it wraps (cause, originalError, AggregateError.errors), outermost first. */
function chainOf(failure: unknown): FailureNode[] {
  const nodes: FailureNode[] = [];
  const seen = new Set<unknown>();
  const queue: unknown[] = [failure];
  while (queue.length > 0 && nodes.length < 8) {
    const item = queue.shift();
    if (item === undefined || item === null || seen.has(item)) continue;
    seen.add(item);
    if (typeof item === 'string') {
      nodes.push({ record: { message: item }, message: item });
      continue;
    }
    if (typeof item !== 'object') continue;
    const record = item as Record<string, unknown>;
    const ctorName = (item as { constructor?: { name?: unknown } }).constructor?.name;
    nodes.push({
      record,
      ctor: typeof ctorName === 'string' && ctorName !== 'Object' ? ctorName : undefined,
      name: optionalText(record.name),
      message: optionalText(record.message),
    });
    queue.push(record.cause, record.originalError);
    if (Array.isArray(record.errors)) queue.push(...record.errors.slice(0, 3));
  }
  return nodes;
}

function httpStatusOf(node: FailureNode): number | undefined {
  for (const key of ['httpStatus', 'status', 'statusCode', 'code'] as const) {
    const value = node.record[key];
    if (typeof value === 'number' && Number.isInteger(value) && value >= 100 && value <= 599) return value;
  }
  const response = asRecord(node.record.response);
  const status = response?.status;
  return typeof status === 'number' && status >= 100 && status <= 599 ? status : undefined;
}

function statusFromMessage(message: string): number | undefined {
  for (const pattern of MESSAGE_STATUS_PATTERNS) {
    const match = pattern.exec(message);
    if (match) {
      const status = Number(match[1]);
      if (status >= 100 && status <= 599) return status;
    }
  }
  if (/\bunauthori[sz]ed\b/i.test(message)) return 401;
  if (/\bforbidden\b/i.test(message)) return 403;
  if (/too many requests/i.test(message)) return 429;
  return undefined;
}

/** Retry-After (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date read against `now`. */
export function parseRetryAfterHeader(header: string | undefined, now?: number): number | undefined {
  if (header === undefined) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text);
  // Only something shaped like an HTTP-date ("Fri, 01 May 2026 12:00:00 GMT"): Date.parse('-5') is year -5.
  if (now === undefined || !/^[A-Za-z]{3},? .*\d/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - now) / 1000));
}

function truncate(text: string): string {
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}

/** "SseError: SSE error: Non-200 status code (503)", for the human line. */
function originalText(nodes: FailureNode[]): string {
  const top = nodes[0];
  if (!top) return 'no error detail';
  // McpError/TimeoutError/TypeError name themselves; StreamableHTTPError and SseError only via the constructor.
  const label = top.name && top.name !== 'Error' ? top.name : top.ctor && top.ctor !== 'Error' ? top.ctor : undefined;
  const inner = nodes.slice(1).find((node) => node.message && node.message !== top.message);
  const parts = [label ? `${label}: ${top.message ?? ''}` : (top.message ?? String(top.record.code ?? 'no message'))];
  if (inner?.message) parts.push(`caused by ${inner.message}`);
  return truncate(parts.join('; '));
}

/** AdCP errors carried inside the failure: JSON-RPC data, A2A errorResponse, or a JSON error body in the text. */
function embeddedAdcpErrors(nodes: FailureNode[], fallback: Recovery | undefined): AdcpError[] {
  const candidates: unknown[] = [];
  for (const node of nodes) {
    candidates.push(node.record.data);
    const rpcError = asRecord(asRecord(node.record.errorResponse)?.error);
    if (rpcError) candidates.push(rpcError.data);
    const message = node.message;
    const start = message?.indexOf('{') ?? -1;
    const end = message?.lastIndexOf('}') ?? -1;
    if (message && start >= 0 && end > start) {
      try {
        const body: unknown = JSON.parse(message.slice(start, end + 1));
        candidates.push(body, asRecord(asRecord(body)?.error)?.data, asRecord(body)?.data);
      } catch {
        // Not JSON: the text is classified by its words below.
      }
    }
  }
  for (const candidate of candidates) {
    // A JSON-RPC error object ({code: -32600, message}) parses to UNKNOWN_ERROR; only real AdCP codes count.
    const errors = parseErrors(candidate, fallback).filter((error) => error.code !== 'UNKNOWN_ERROR');
    if (errors.length > 0) return errors;
  }
  return [];
}

type RpcFlavour = 'mcp' | 'a2a' | 'json-rpc';

function rpcCode(node: FailureNode): { code: number; flavour: RpcFlavour } | undefined {
  const code = node.record.code;
  if (typeof code === 'number' && code <= -32000 && code >= -32768) {
    const flavour: RpcFlavour =
      node.ctor === 'McpError' || node.name === 'McpError' || node.ctor === 'UrlElicitationRequiredError'
        ? 'mcp'
        : 'json-rpc';
    return { code, flavour };
  }
  const rpc = asRecord(asRecord(node.record.errorResponse)?.error);
  if (rpc && typeof rpc.code === 'number') return { code: rpc.code, flavour: 'a2a' };
  return undefined;
}

function rpcCodeFromMessage(message: string): { code: number; flavour: RpcFlavour } | undefined {
  const mcp = /MCP error (-\d+):/.exec(message);
  if (mcp) return { code: Number(mcp[1]), flavour: 'mcp' };
  const a2a = /\(Code: (-\d+)\)/.exec(message);
  if (a2a) return { code: Number(a2a[1]), flavour: 'a2a' };
  return undefined;
}

function codeForRpc(code: number, flavour: RpcFlavour, message = ''): string {
  // MCP reserves -32000/-32001 for client-side connection loss and request timeout; A2A uses -32001 for TaskNotFound.
  if (flavour === 'mcp' && code === -32001) return TRANSPORT_ERROR_CODES.timeout;
  if (flavour === 'mcp' && code === -32000) return TRANSPORT_ERROR_CODES.unreachable;
  // McpServer reports a tool it does not have as InvalidParams; it is the missing method, as when answered in a tool
  // result (protocol/errors.ts parseMcpToolRefusal).
  if (flavour === 'mcp' && code === -32602 && /\bTool \S+ (?:not found|disabled)\b/.test(message))
    return TRANSPORT_ERROR_CODES.rpcMethodNotFound;
  switch (code) {
    case -32602:
      return TRANSPORT_ERROR_CODES.rpcInvalidParams;
    case -32601:
      return TRANSPORT_ERROR_CODES.rpcMethodNotFound;
    case -32603:
      return TRANSPORT_ERROR_CODES.rpcInternalError;
    case -32700:
      return TRANSPORT_ERROR_CODES.rpcParseError;
    case -32600:
      return TRANSPORT_ERROR_CODES.rpcInvalidRequest;
    default:
      return TRANSPORT_ERROR_CODES.rpcOther;
  }
}

const SUGGESTIONS: Readonly<Record<string, string>> = {
  TRANSPORT_TIMEOUT:
    "Retried with backoff. For a mutation the operation looks for what the seller made (its task listing, then its media buys); while it cannot tell, POST /v1/operations/<id>/reconcile reads the seller's media buys again. If it keeps timing out, check the seller and the call timeout.",
  TRANSPORT_UNREACHABLE:
    'Retried with backoff. If it persists, check the seller URL, DNS and that the agent is running.',
  TRANSPORT_TLS: "Fix the seller's certificate or the trust store; retrying will not help.",
  TRANSPORT_HTTP_ERROR: 'Retried with backoff. Pass the HTTP status to the classifier to get a precise class.',
  TRANSPORT_RPC_INVALID_PARAMS: 'The seller rejected the tool arguments; fix the request (field names are snake_case).',
  TRANSPORT_RPC_METHOD_NOT_FOUND:
    "The seller does not expose this tool; check get_adcp_capabilities and the seller's tools/list.",
  TRANSPORT_RPC_INTERNAL_ERROR: 'Retried with backoff; report it to the seller if it persists.',
  TRANSPORT_RPC_PARSE_ERROR: 'The seller could not parse our request: this is a client bug, report it.',
  TRANSPORT_RPC_INVALID_REQUEST:
    'The seller rejected the JSON-RPC request: check the transport (MCP vs A2A) configured for this seller.',
  TRANSPORT_RPC_ERROR: 'Check the JSON-RPC error code and data in details.',
  TRANSPORT_RESPONSE_TOO_LARGE: 'Narrow the request (filters, pagination) or raise maxResponseBytes for this seller.',
  PROTOCOL_VIOLATION:
    'Check that the configured URL is the AdCP agent endpoint and that it speaks the configured protocol.',
  TRANSPORT_UNKNOWN: 'Not recognised as a network or HTTP failure, so not retried; see details and the worker log.',
  RATE_LIMITED: 'Retried after the Retry-After delay (60 s when the seller gives none).',
};

function httpSuggestion(status: number): string {
  if (status === 401 || status === 403)
    return 'Check or rotate the credentials configured for this seller; do not resend them in a loop.';
  if (status >= 500) return 'Retried with backoff; the seller (or a proxy in front of it) is failing.';
  if (status >= 300 && status < 400) return 'The seller URL redirects: configure the final URL.';
  const recovery = recoveryForHttpStatus(status);
  if (recovery === 'correctable') return 'The seller refused the request as sent; change it before sending again.';
  if (recovery === 'transient') return 'Retried with backoff.';
  return 'Check the seller URL, path and protocol configured for this seller.';
}

const HEADLINES: Readonly<Record<string, string>> = {
  TRANSPORT_TIMEOUT: 'The seller did not answer in time',
  TRANSPORT_UNREACHABLE: 'Could not reach the seller',
  TRANSPORT_TLS: 'The TLS connection to the seller failed',
  TRANSPORT_HTTP_ERROR: 'The seller answered with an HTTP error',
  TRANSPORT_RPC_INVALID_PARAMS: 'The seller rejected the call parameters',
  TRANSPORT_RPC_METHOD_NOT_FOUND: 'The seller does not know this method',
  TRANSPORT_RPC_INTERNAL_ERROR: 'The seller reported an internal JSON-RPC error',
  TRANSPORT_RPC_PARSE_ERROR: 'The seller could not parse the request',
  TRANSPORT_RPC_INVALID_REQUEST: 'The seller rejected the JSON-RPC request',
  TRANSPORT_RPC_ERROR: 'The seller answered with a JSON-RPC error',
  TRANSPORT_RESPONSE_TOO_LARGE: "The seller's response exceeded the size limit",
  PROTOCOL_VIOLATION: 'The seller answered with something that is not an AdCP response',
  TRANSPORT_UNKNOWN: 'The call to the seller failed',
};

/**
 * Classify a failure that happened before any AdCP answer existed (see TRANSPORT_ERROR_CODES for the table).
 * Signals, most specific first, each looked for from the outermost error inwards: an AdCP error carried in
 * the failure, an HTTP status on the error (or `httpStatus`), error classes and Node/undici codes anywhere in
 * the cause chain, then the wording of the messages (all that is left once an exception has been flattened
 * to text). `now` (epoch ms) turns a Retry-After HTTP-date into seconds; without it such a date is ignored.
 * Check the activity's own cancellation before calling this: the MCP SDK reports an aborted request as
 * McpError -32001, which reads as a timeout.
 */
/** A transport failure named inside the text of a wrapping error (what @adcp/sdk puts in MCP -32603). */
function wrappedTransportCause(message: string): string | undefined {
  const tokens = message.match(ERROR_CODE_TOKEN) ?? [];
  if (tokens.some((token) => TIMEOUT_CODES.has(token)) || TIMEOUT_TEXT.test(message))
    return TRANSPORT_ERROR_CODES.timeout;
  if (
    tokens.some((token) => UNREACHABLE_CODES.has(token)) ||
    /fetch failed|socket hang up|other side closed|connection (refused|reset)/i.test(message)
  ) {
    return TRANSPORT_ERROR_CODES.unreachable;
  }
  return undefined;
}

export function classifyTransportFailure(
  failure: TransportFailure | Error | string | unknown,
  now?: number,
): AdcpError {
  const nodes = chainOf(failure);
  const structuralStatus = nodes.map(httpStatusOf).find((status) => status !== undefined);
  const messageStatus =
    structuralStatus === undefined
      ? nodes.map((n) => (n.message ? statusFromMessage(n.message) : undefined)).find((s) => s !== undefined)
      : undefined;
  const status = structuralStatus ?? messageStatus;
  const header = nodes.map((node) => optionalText(node.record.retryAfterHeader)).find((value) => value !== undefined);
  const retryAfterSeconds = parseRetryAfterHeader(header, now);
  const original = originalText(nodes);

  const build = (code: string, extra: Record<string, unknown> = {}): AdcpError => {
    const httpStatus =
      (extra.httpStatus as number | undefined) ?? (status !== undefined && status >= 300 ? status : undefined);
    const error: AdcpError = {
      code,
      message: `${HEADLINES[code] ?? (httpStatus === 429 ? 'The seller is rate limiting us' : `The seller answered HTTP ${httpStatus ?? '?'}`)} (${original}).`,
      recovery: recoveryFor(code),
      suggestion: SUGGESTIONS[code] ?? (httpStatus !== undefined ? httpSuggestion(httpStatus) : undefined),
      details: { source: 'transport', ...(httpStatus !== undefined ? { httpStatus } : {}), ...extra },
    };
    if (error.suggestion === undefined) delete error.suggestion;
    if (retryAfterSeconds !== undefined && (error.recovery === 'transient' || code === 'RATE_LIMITED')) {
      error.retryAfterSeconds = retryAfterSeconds;
    }
    return error;
  };
  const forStatus = (httpStatus: number): AdcpError =>
    httpStatus === 429 ? build('RATE_LIMITED', { httpStatus }) : build(`TRANSPORT_HTTP_${httpStatus}`, { httpStatus });

  // 1. The seller's own words, when the failure carries an AdCP error.
  const fallback = status !== undefined && status >= 300 ? recoveryForHttpStatus(status) : undefined;
  const embedded = embeddedAdcpErrors(nodes, fallback)[0];
  if (embedded) {
    // An AdCP answer, not a transport failure: no `source: 'transport'`, so circuit breakers see a working seller.
    const error: AdcpError = { ...embedded };
    if (status !== undefined) error.details = { ...embedded.details, httpStatus: status };
    if (error.retryAfterSeconds === undefined && retryAfterSeconds !== undefined)
      error.retryAfterSeconds = retryAfterSeconds;
    return error;
  }

  // 2. A structural HTTP error status (StreamableHTTPError.code, SseError.code, httpStatus).
  if (structuralStatus !== undefined && structuralStatus >= 300) return forStatus(structuralStatus);

  // 3. Error classes and codes anywhere in the chain.
  for (const node of nodes) {
    const { record, ctor, name } = node;
    const code = typeof record.code === 'string' ? record.code : undefined;
    if (
      name === 'AbortError' ||
      name === 'TimeoutError' ||
      ctor === 'TaskTimeoutError' ||
      (code && TIMEOUT_CODES.has(code))
    ) {
      return build(TRANSPORT_ERROR_CODES.timeout, code ? { errorCode: code } : { errorName: name ?? ctor });
    }
    if (code && UNREACHABLE_CODES.has(code)) return build(TRANSPORT_ERROR_CODES.unreachable, { errorCode: code });
    if (code && TLS_CODE.test(code)) return build(TRANSPORT_ERROR_CODES.tls, { errorCode: code });
    if (code === 'RESPONSE_TOO_LARGE' || ctor === 'ResponseTooLargeError')
      return build(TRANSPORT_ERROR_CODES.responseTooLarge);
    if (ctor === 'UnauthorizedError' || code === 'AUTHENTICATION_REQUIRED' || ctor === 'AuthenticationRequiredError')
      return forStatus(401);
    if (code && knownRecovery(code) && code !== 'UNKNOWN_ERROR') {
      // A client-side error that already speaks AdCP (@adcp/sdk IdempotencyConflictError, VersionUnsupportedError).
      return {
        code,
        message: truncate(node.message ?? code),
        recovery: recoveryFor(code),
        details: { source: 'transport', client: ctor ?? name },
      };
    }
    const rpc = rpcCode(node);
    // The SDK wraps a failed HTTP POST in an internal JSON-RPC error: the HTTP status is the better evidence.
    if (rpc && rpc.code === -32603 && messageStatus !== undefined && messageStatus >= 300)
      return forStatus(messageStatus);
    // ...and a failed fetch or a timeout wrapped the same way is that, not a seller error.
    const wrapped = rpc && rpc.code === -32603 && node.message ? wrappedTransportCause(node.message) : undefined;
    if (wrapped) return build(wrapped);
    if (rpc) return build(codeForRpc(rpc.code, rpc.flavour, node.message), { rpcCode: rpc.code });
    if (ctor === 'StreamableHTTPError' && record.code === -1) return build(TRANSPORT_ERROR_CODES.protocolViolation);
    if (name === 'SyntaxError' || name === 'ZodError' || name === 'ProtocolViolation' || ctor === 'ZodError') {
      return build(TRANSPORT_ERROR_CODES.protocolViolation, { errorName: name ?? ctor });
    }
  }

  // 4. A status named only in the text.
  if (messageStatus !== undefined && messageStatus >= 300) return forStatus(messageStatus);

  // 5. The wording: what is left once an exception has been flattened to a message.
  for (const node of nodes) {
    const message = node.message;
    if (!message) continue;
    const rpc = rpcCodeFromMessage(message);
    if (rpc) return build(codeForRpc(rpc.code, rpc.flavour, message), { rpcCode: rpc.code });
    const tokens = message.match(ERROR_CODE_TOKEN) ?? [];
    const tls = tokens.find((token) => TLS_CODE.test(token));
    if (tls) return build(TRANSPORT_ERROR_CODES.tls, { errorCode: tls });
    const timeout = tokens.find((token) => TIMEOUT_CODES.has(token));
    if (timeout) return build(TRANSPORT_ERROR_CODES.timeout, { errorCode: timeout });
    const unreachable = tokens.find((token) => UNREACHABLE_CODES.has(token));
    if (unreachable) return build(TRANSPORT_ERROR_CODES.unreachable, { errorCode: unreachable });
    if (TIMEOUT_TEXT.test(message)) return build(TRANSPORT_ERROR_CODES.timeout);
    if (VIOLATION_TEXT.test(message)) return build(TRANSPORT_ERROR_CODES.protocolViolation);
    if (UNREACHABLE_TEXT.test(message)) return build(TRANSPORT_ERROR_CODES.unreachable);
    if (HTTP_ERROR_TEXT.test(message)) return build(TRANSPORT_ERROR_CODES.httpUnknownStatus);
    // @adcp/sdk flattens an A2A JSON-RPC error to its message; the code and data are gone.
    if (/^A2A agent returned error:/.test(message)) return build(TRANSPORT_ERROR_CODES.rpcOther);
  }

  // 6. A 2xx exchange we could not use is the seller's answer breaking the protocol.
  if (status !== undefined && status < 300) return build(TRANSPORT_ERROR_CODES.protocolViolation);
  return build(TRANSPORT_ERROR_CODES.unknown);
}

// ---------------------------------------------------------------------------------------------------
// Retry timing
// ---------------------------------------------------------------------------------------------------

export interface RetryBackoffPolicy {
  initialMs: number;
  maxMs: number;
  coefficient: number;
  /** Spread as a fraction: 0.25 means ×U(0.75, 1.25). */
  jitter: number;
}

/** §4.4 / §13.8: 1 s → 60 s exponential, ±25 % jitter. */
export const DEFAULT_RETRY_BACKOFF: Readonly<RetryBackoffPolicy> = {
  initialMs: 1_000,
  maxMs: 60_000,
  coefficient: 2,
  jitter: 0.25,
};

/** §4.4: sleep 60 s on RATE_LIMITED when the seller gives no retry_after. */
export const RATE_LIMITED_DEFAULT_DELAY_MS = 60_000;

/**
 * Milliseconds to wait before retry number `attempt` (1 = the first retry). The seller's retry_after wins
 * (exactly, no jitter: it said when); RATE_LIMITED without one waits 60 s; otherwise
 * min(initial·coefficient^(attempt-1), max) × U(1-jitter, 1+jitter). `random` returns [0, 1) and is injected
 * so the same code runs in activities (Math.random) and tests (fixed values).
 */
export function retryDelayMs(
  error: Pick<AdcpError, 'code' | 'retryAfterSeconds'>,
  attempt: number,
  policy: RetryBackoffPolicy,
  random: () => number,
): number {
  if (
    error.retryAfterSeconds !== undefined &&
    Number.isFinite(error.retryAfterSeconds) &&
    error.retryAfterSeconds >= 0
  ) {
    return Math.round(error.retryAfterSeconds * 1000);
  }
  if (error.code === 'RATE_LIMITED') return RATE_LIMITED_DEFAULT_DELAY_MS;
  const step = Number.isFinite(attempt) && attempt >= 1 ? Math.floor(attempt) : 1;
  const base = Math.min(policy.initialMs * Math.pow(policy.coefficient, step - 1), policy.maxMs);
  const jitter = Math.min(Math.max(policy.jitter, 0), 1);
  const draw = Math.min(Math.max(random(), 0), 1);
  return Math.max(0, Math.round(base * (1 - jitter + 2 * jitter * draw)));
}
