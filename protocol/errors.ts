/**
 * One error model for everything a seller (or the road to it) can say went wrong.
 * Source: adcp-protocol.md §4 and §11; recoveries checked against the normative `enumMetadata` of the
 * 3.0.6 `enums/error-code.json` bundled in @adcp/sdk. Recovery classes decide retries:
 *   transient   - retry as-is after a delay (RATE_LIMITED, SERVICE_UNAVAILABLE, transport failures)
 *   correctable - the request must change first (field + suggestion say how)
 *   terminal    - nothing the buyer sends will fix it; a person has to act
 *
 * I/O-free and free of Node builtins: workflows import this module.
 */
export type Recovery = 'transient' | 'correctable' | 'terminal';

export interface AdcpError {
  code: string;
  message: string;
  field?: string;
  suggestion?: string;
  /** Seconds the seller asked us to wait before retrying. */
  retryAfterSeconds?: number;
  details?: Record<string, unknown>;
  recovery: Recovery;
}

// ---------------------------------------------------------------------------------------------------
// Code tables
// ---------------------------------------------------------------------------------------------------

/** The 45 codes of the 3.x `error-code` enum: 20 from rc.2 (§4.3) and 25 added in 3.0 GA (§11). */
export const STANDARD_ERROR_CODES = [
  'INVALID_REQUEST',
  'AUTH_REQUIRED',
  'RATE_LIMITED',
  'SERVICE_UNAVAILABLE',
  'POLICY_VIOLATION',
  'PRODUCT_NOT_FOUND',
  'PRODUCT_UNAVAILABLE',
  'PROPOSAL_EXPIRED',
  'BUDGET_TOO_LOW',
  'CREATIVE_REJECTED',
  'UNSUPPORTED_FEATURE',
  'AUDIENCE_TOO_SMALL',
  'ACCOUNT_NOT_FOUND',
  'ACCOUNT_SETUP_REQUIRED',
  'ACCOUNT_AMBIGUOUS',
  'ACCOUNT_PAYMENT_REQUIRED',
  'ACCOUNT_SUSPENDED',
  'COMPLIANCE_UNSATISFIED',
  'BUDGET_EXHAUSTED',
  'CONFLICT',
  'GOVERNANCE_DENIED',
  'BUDGET_EXCEEDED',
  'IDEMPOTENCY_CONFLICT',
  'IDEMPOTENCY_EXPIRED',
  'CREATIVE_DEADLINE_EXCEEDED',
  'INVALID_STATE',
  'MEDIA_BUY_NOT_FOUND',
  'NOT_CANCELLABLE',
  'PACKAGE_NOT_FOUND',
  'CREATIVE_NOT_FOUND',
  'SIGNAL_NOT_FOUND',
  'SESSION_NOT_FOUND',
  'PLAN_NOT_FOUND',
  'REFERENCE_NOT_FOUND',
  'SESSION_TERMINATED',
  'VALIDATION_ERROR',
  'PRODUCT_EXPIRED',
  'PROPOSAL_NOT_COMMITTED',
  'IO_REQUIRED',
  'TERMS_REJECTED',
  'REQUOTE_REQUIRED',
  'VERSION_UNSUPPORTED',
  'CAMPAIGN_SUSPENDED',
  'GOVERNANCE_UNAVAILABLE',
  'PERMISSION_DENIED',
] as const;

export type StandardErrorCode = (typeof STANDARD_ERROR_CODES)[number];

const STANDARD_RECOVERY_TABLE = {
  INVALID_REQUEST: 'correctable',
  // Correctable when credentials were missing; presented-but-rejected credentials must not be re-sent in a
  // loop (enum text). isAuthError() routes both to the credential path rather than to the buyer.
  AUTH_REQUIRED: 'correctable',
  RATE_LIMITED: 'transient',
  SERVICE_UNAVAILABLE: 'transient',
  POLICY_VIOLATION: 'correctable',
  PRODUCT_NOT_FOUND: 'correctable',
  PRODUCT_UNAVAILABLE: 'correctable',
  PROPOSAL_EXPIRED: 'correctable',
  BUDGET_TOO_LOW: 'correctable',
  CREATIVE_REJECTED: 'correctable',
  UNSUPPORTED_FEATURE: 'correctable',
  AUDIENCE_TOO_SMALL: 'correctable',
  ACCOUNT_NOT_FOUND: 'terminal',
  ACCOUNT_SETUP_REQUIRED: 'correctable',
  ACCOUNT_AMBIGUOUS: 'correctable',
  ACCOUNT_PAYMENT_REQUIRED: 'terminal',
  ACCOUNT_SUSPENDED: 'terminal',
  COMPLIANCE_UNSATISFIED: 'correctable',
  BUDGET_EXHAUSTED: 'terminal',
  // Transient, but "after re-reading state": a blind resend of a stale write conflicts again.
  CONFLICT: 'transient',
  // Added in 3.0 GA (§11).
  GOVERNANCE_DENIED: 'correctable',
  BUDGET_EXCEEDED: 'correctable',
  IDEMPOTENCY_CONFLICT: 'correctable',
  // Correctable, but only after a natural-key check: minting a fresh key blindly is how buys get doubled.
  IDEMPOTENCY_EXPIRED: 'correctable',
  CREATIVE_DEADLINE_EXCEEDED: 'correctable',
  INVALID_STATE: 'correctable',
  MEDIA_BUY_NOT_FOUND: 'correctable',
  NOT_CANCELLABLE: 'correctable',
  PACKAGE_NOT_FOUND: 'correctable',
  CREATIVE_NOT_FOUND: 'correctable',
  SIGNAL_NOT_FOUND: 'correctable',
  SESSION_NOT_FOUND: 'correctable',
  PLAN_NOT_FOUND: 'correctable',
  REFERENCE_NOT_FOUND: 'correctable',
  SESSION_TERMINATED: 'correctable',
  VALIDATION_ERROR: 'correctable',
  PRODUCT_EXPIRED: 'correctable',
  PROPOSAL_NOT_COMMITTED: 'correctable',
  IO_REQUIRED: 'correctable',
  TERMS_REJECTED: 'correctable',
  REQUOTE_REQUIRED: 'correctable',
  VERSION_UNSUPPORTED: 'correctable',
  // Transient per the enum: the suspension lifts when a human resolves the escalation, not when we change the request.
  CAMPAIGN_SUSPENDED: 'transient',
  GOVERNANCE_UNAVAILABLE: 'transient',
  PERMISSION_DENIED: 'correctable',
} as const satisfies Record<StandardErrorCode, Recovery>;

/** Default recovery per standard code (3.x enum, §4.3 and §11), used when the seller gives none. */
export const STANDARD_ERROR_RECOVERY: Readonly<Record<string, Recovery>> = STANDARD_RECOVERY_TABLE;

/**
 * Codes that appear in the docs but not in the enum (§4.3 "Codes that appear in docs but not in the enum"),
 * plus the 3.1 split of AUTH_REQUIRED. Sellers send them; these are our defaults when they omit `recovery`.
 * Input-required reasons (APPROVAL_REQUIRED, BUDGET_EXCEEDS_LIMIT) are not errors and are not listed.
 */
export const DOCUMENTED_ERROR_RECOVERY: Readonly<Record<string, Recovery>> = {
  // Auth (EH, MBS, AUTH, A2A samples). See isAuthError().
  TOKEN_EXPIRED: 'correctable', // refresh the token, then retry once
  AUTH_MISSING: 'correctable', // 3.1: credentials were not sent
  AUTH_INVALID: 'terminal', // 3.1: presented and rejected; rotate, never loop
  INVALID_CREDENTIALS: 'terminal',
  UNAUTHORIZED: 'terminal',
  PLATFORM_UNAUTHORIZED: 'terminal',
  INSUFFICIENT_PERMISSIONS: 'terminal', // someone must grant access on the seller side
  // Validation (EH).
  MISSING_REQUIRED_FIELD: 'correctable',
  INVALID_FIELD_VALUE: 'correctable',
  INVALID_FIELD_FORMAT: 'correctable',
  // Resources and operations (EH).
  RESOURCE_NOT_FOUND: 'correctable',
  INSUFFICIENT_INVENTORY: 'correctable',
  INVALID_TARGETING: 'correctable',
  // System (EH): all transient.
  INTERNAL_SERVER_ERROR: 'transient',
  INTERNAL_ERROR: 'transient',
  TIMEOUT: 'transient',
  // EH Context Recovery: drop context_id and send again - the request changes, so correctable.
  CONTEXT_EXPIRED: 'correctable',
  // create_media_buy / update_media_buy docs.
  FORMAT_INCOMPATIBLE: 'correctable',
  BUDGET_INSUFFICIENT: 'correctable',
  TARGETING_TOO_NARROW: 'correctable',
  INVALID_PRICING_OPTION: 'correctable',
  CREATIVE_ID_EXISTS: 'correctable',
  UPDATE_NOT_ALLOWED: 'correctable',
  // sync_creatives docs.
  INVALID_FORMAT: 'correctable',
  ASSET_PROCESSING_FAILED: 'correctable',
  BRAND_SAFETY_VIOLATION: 'correctable',
  FORMAT_MISMATCH: 'correctable',
  CREATIVE_IN_ACTIVE_DELIVERY: 'correctable',
  // get_media_buy_delivery docs.
  INVALID_DATE_RANGE: 'correctable',
  DATE_RANGE_NOT_SUPPORTED: 'correctable',
  CONTEXT_REQUIRED: 'correctable',
  INVALID_STATUS_FILTER: 'correctable',
  // ACCT: details lists the candidate accounts.
  ACCOUNT_REQUIRED: 'correctable',
  // A2A samples.
  NO_DATA_IN_REGION: 'correctable',
};

/**
 * Codes meaning "the seller did not accept who we are": credentials missing, expired, rejected, or without
 * access. They need a different owner than other errors (whoever holds the seller credentials, not the
 * buyer who wrote the request), and re-sending a rejected credential in a loop looks like brute force.
 * PERMISSION_DENIED is deliberately absent: in 3.0 it is about governance tokens in the request (correctable).
 */
export const AUTH_ERROR_CODES: ReadonlySet<string> = new Set([
  'AUTH_REQUIRED',
  'AUTH_MISSING',
  'AUTH_INVALID',
  'TOKEN_EXPIRED',
  'INVALID_CREDENTIALS',
  'UNAUTHORIZED',
  'PLATFORM_UNAUTHORIZED',
  'INSUFFICIENT_PERMISSIONS',
  'TRANSPORT_HTTP_401',
  'TRANSPORT_HTTP_403',
]);

/**
 * Recovery for a code nobody documented, when the seller did not say either. The 3.0.6 manifest's
 * `default_unknown_recovery` is "transient"; we deliberately choose terminal: repeating a request whose
 * failure we do not understand can double-spend, and a person reading the error costs less than that.
 */
export const UNKNOWN_ERROR_RECOVERY: Recovery = 'terminal';

/**
 * Codes for failures before any AdCP answer exists (classifyTransportFailure). Stable: workflows, search
 * attributes and dashboards key on them.
 *
 * | Code                              | Raised for                                                               | Recovery    |
 * |-----------------------------------|--------------------------------------------------------------------------|-------------|
 * | TRANSPORT_TIMEOUT                 | AbortError/TimeoutError, ETIMEDOUT, ESOCKETTIMEDOUT, UND_ERR_*_TIMEOUT,  | transient   |
 * |                                   | MCP -32001 "Request timed out", @adcp/sdk TaskTimeoutError, "timed out"  |             |
 * | TRANSPORT_UNREACHABLE             | ECONNREFUSED/ECONNRESET/ECONNABORTED/EPIPE, ENOTFOUND/EAI_AGAIN,         | transient   |
 * |                                   | EHOSTUNREACH/ENETUNREACH, UND_ERR_SOCKET/UND_ERR_CLOSED, "fetch failed", |             |
 * |                                   | "socket hang up", "other side closed", MCP -32000 "Connection closed"    |             |
 * | TRANSPORT_TLS                     | certificate / TLS handshake errors (CERT_*, ERR_TLS_*, SELF_SIGNED_*)    | terminal    |
 * | RATE_LIMITED                      | HTTP 429; retryAfterSeconds from Retry-After (seconds or HTTP-date)      | transient   |
 * | TRANSPORT_HTTP_401, _403          | credentials missing or rejected; isAuthError() is true                   | terminal    |
 * | TRANSPORT_HTTP_408, _409, _425    | request timeout, conflict, too early                                     | transient   |
 * | TRANSPORT_HTTP_400, _413, _414,   | the request as sent was refused; it must change                          | correctable |
 * |   _422, _431                      |                                                                          |             |
 * | TRANSPORT_HTTP_<other 3xx/4xx>    | wrong URL, method or media type; unfollowed redirect: fix configuration  | terminal    |
 * | TRANSPORT_HTTP_5xx                | 500, 502, 503, 504, ... (Retry-After honoured)                           | transient   |
 * | TRANSPORT_HTTP_501, _505          | the server will never support this call                                  | terminal    |
 * | TRANSPORT_HTTP_ERROR              | a non-2xx answer whose status the error text no longer carries           | transient   |
 * |                                   | (MCP "Error POSTing to endpoint" once flattened to a message)            |             |
 * | TRANSPORT_RPC_INVALID_PARAMS      | JSON-RPC -32602 (e.g. tool input validation)                             | correctable |
 * | TRANSPORT_RPC_METHOD_NOT_FOUND    | JSON-RPC -32601: the seller has no such tool/method                      | terminal    |
 * | TRANSPORT_RPC_INTERNAL_ERROR      | JSON-RPC -32603                                                          | transient   |
 * | TRANSPORT_RPC_PARSE_ERROR         | JSON-RPC -32700: the seller could not parse what we sent                 | terminal    |
 * | TRANSPORT_RPC_INVALID_REQUEST     | JSON-RPC -32600                                                          | terminal    |
 * | TRANSPORT_RPC_ERROR               | any other JSON-RPC error code (A2A -32001..-32006, URL elicitation, ...) | terminal    |
 * | TRANSPORT_RESPONSE_TOO_LARGE      | @adcp/sdk ResponseTooLargeError (response over maxResponseBytes)         | terminal    |
 * | PROTOCOL_VIOLATION                | a 2xx answer that is not JSON, not JSON-RPC or not AdCP (SyntaxError,    | terminal    |
 * |                                   | ZodError, ProtocolViolation, "Unexpected content type: text/html")      |             |
 * | TRANSPORT_UNKNOWN                 | anything else (likely a bug on our side)                                 | terminal    |
 *
 * PROTOCOL_VIOLATION is terminal because the HTTP status is looked at first: a proxy error page during a
 * deploy arrives as 502/503 and is transient as TRANSPORT_HTTP_5xx. Garbage with a 2xx status is a seller
 * (or URL) that is wrong, and it will not fix itself within a retry schedule's seconds.
 * When the failure carries an AdCP error (McpError.data.adcp_error, or an error body such as a 429 with
 * `{"adcp_error":{...,"retry_after":12}}`) that error is returned instead, with the HTTP status as the
 * recovery fallback for a code we do not know.
 */
export const TRANSPORT_ERROR_CODES = {
  timeout: 'TRANSPORT_TIMEOUT',
  unreachable: 'TRANSPORT_UNREACHABLE',
  tls: 'TRANSPORT_TLS',
  httpUnknownStatus: 'TRANSPORT_HTTP_ERROR',
  rpcInvalidParams: 'TRANSPORT_RPC_INVALID_PARAMS',
  rpcMethodNotFound: 'TRANSPORT_RPC_METHOD_NOT_FOUND',
  rpcInternalError: 'TRANSPORT_RPC_INTERNAL_ERROR',
  rpcParseError: 'TRANSPORT_RPC_PARSE_ERROR',
  rpcInvalidRequest: 'TRANSPORT_RPC_INVALID_REQUEST',
  rpcOther: 'TRANSPORT_RPC_ERROR',
  responseTooLarge: 'TRANSPORT_RESPONSE_TOO_LARGE',
  protocolViolation: 'PROTOCOL_VIOLATION',
  unknown: 'TRANSPORT_UNKNOWN',
} as const;

const TRANSPORT_RECOVERY: Readonly<Record<string, Recovery>> = {
  TRANSPORT_TIMEOUT: 'transient',
  TRANSPORT_UNREACHABLE: 'transient',
  TRANSPORT_TLS: 'terminal',
  TRANSPORT_HTTP_ERROR: 'transient',
  TRANSPORT_RPC_INVALID_PARAMS: 'correctable',
  TRANSPORT_RPC_METHOD_NOT_FOUND: 'terminal',
  TRANSPORT_RPC_INTERNAL_ERROR: 'transient',
  TRANSPORT_RPC_PARSE_ERROR: 'terminal',
  TRANSPORT_RPC_INVALID_REQUEST: 'terminal',
  TRANSPORT_RPC_ERROR: 'terminal',
  TRANSPORT_RESPONSE_TOO_LARGE: 'terminal',
  PROTOCOL_VIOLATION: 'terminal',
  TRANSPORT_UNKNOWN: 'terminal',
};

/** Recovery for an HTTP status that came back instead of an AdCP answer (see the table above). */
export function recoveryForHttpStatus(status: number): Recovery {
  if (status === 429 || status === 408 || status === 409 || status === 425) return 'transient';
  if (status === 501 || status === 505) return 'terminal';
  if (status >= 500 && status <= 599) return 'transient';
  if (status === 400 || status === 413 || status === 414 || status === 422 || status === 431) return 'correctable';
  return 'terminal';
}

const RECOVERIES: ReadonlySet<string> = new Set(['transient', 'correctable', 'terminal']);
const TRANSPORT_HTTP_CODE = /^TRANSPORT_HTTP_(\d{3})$/;

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

function optionalText(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function normaliseRecovery(value: unknown): Recovery | undefined {
  if (typeof value !== 'string') return undefined;
  const lower = value.trim().toLowerCase();
  return RECOVERIES.has(lower) ? (lower as Recovery) : undefined;
}

/** The recovery our tables give a code, or undefined when no table knows it. */
function tableRecovery(code: string): Recovery | undefined {
  const key = code.trim().toUpperCase();
  const known = STANDARD_ERROR_RECOVERY[key] ?? DOCUMENTED_ERROR_RECOVERY[key] ?? TRANSPORT_RECOVERY[key];
  if (known) return known;
  const http = TRANSPORT_HTTP_CODE.exec(key);
  return http ? recoveryForHttpStatus(Number(http[1])) : undefined;
}

/**
 * Recovery for a code: the seller's own word first, then the standard table, then the documented-but-not-
 * enumerated codes, then our transport codes, then `fallback` (e.g. the HTTP status class the error came
 * with, §4.1 "then the status"), then UNKNOWN_ERROR_RECOVERY.
 */
export function recoveryFor(code: string, sellerRecovery?: unknown, fallback?: Recovery): Recovery {
  return normaliseRecovery(sellerRecovery) ?? tableRecovery(code) ?? fallback ?? UNKNOWN_ERROR_RECOVERY;
}

/** True when the code is one of the 45 standard codes of the 3.x enum. */
export function isStandardErrorCode(code: string): code is StandardErrorCode {
  return Object.prototype.hasOwnProperty.call(STANDARD_RECOVERY_TABLE, code);
}

/** True for codes about credentials or access (AUTH_ERROR_CODES): route them to whoever owns the credentials. */
export function isAuthError(codeOrError: string | Pick<AdcpError, 'code'>): boolean {
  const code = typeof codeOrError === 'string' ? codeOrError : codeOrError.code;
  return AUTH_ERROR_CODES.has(code.trim().toUpperCase());
}

/** Retry as-is (after retryDelayMs) only what the seller or the transport called transient (§4.4). */
export function isRetryable(error: Pick<AdcpError, 'recovery'>): boolean {
  return error.recovery === 'transient';
}

/** True when the error came from the road to the seller rather than from an AdCP answer. */
export function isTransportError(error: Pick<AdcpError, 'code' | 'details'>): boolean {
  return (
    error.code.startsWith('TRANSPORT_') || error.code === 'PROTOCOL_VIOLATION' || error.details?.source === 'transport'
  );
}

// ---------------------------------------------------------------------------------------------------
// Parsing AdCP error objects
// ---------------------------------------------------------------------------------------------------

function retryAfterValue(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : undefined;
  if (typeof value === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(value)) return Number(value);
  return undefined;
}

/**
 * One error object in any of the shapes sellers use (`errors[]` entries, `adcp_error`, `tasks/get.error`).
 * `fallbackRecovery` applies to a code no table knows when the seller gave no recovery (e.g. the HTTP
 * status class the object arrived with).
 */
export function parseErrorObject(raw: unknown, fallbackRecovery?: Recovery): AdcpError | undefined {
  const source = asRecord(raw);
  if (!source) return undefined;
  const code = optionalText(source.code) ?? optionalText(source.error_code);
  const message = optionalText(source.message) ?? optionalText(source.error) ?? code;
  if (!code && !message) return undefined;
  // The tasks/get `error` object puts everything but code and message under `details`: read them there too.
  const details = asRecord(source.details);
  const pick = (key: string): unknown => source[key] ?? details?.[key];
  const error: AdcpError = {
    code: code ?? 'UNKNOWN_ERROR',
    message: message ?? 'The seller reported an error without a message.',
    recovery: recoveryFor(code ?? 'UNKNOWN_ERROR', pick('recovery'), fallbackRecovery),
  };
  const field = optionalText(pick('field'));
  if (field) error.field = field;
  const suggestion = optionalText(pick('suggestion'));
  if (suggestion) error.suggestion = suggestion;
  const retryAfter = retryAfterValue(pick('retry_after'));
  if (retryAfter !== undefined) error.retryAfterSeconds = retryAfter;
  if (details) error.details = details;
  return error;
}

/**
 * Every error a payload carries: `errors[]` (schema form), `adcp_error` (3.0.6 wrapper),
 * top-level `error_code` (legacy EH form) and `error` (tasks/get form). The GA two-layer model puts the
 * same error in `errors[]` and `adcp_error`; it is reported once.
 */
export function parseErrors(payload: unknown, fallbackRecovery?: Recovery): AdcpError[] {
  const source = asRecord(payload);
  if (!source) return [];
  const found: AdcpError[] = [];
  const seen = new Set<string>();
  const add = (parsed: AdcpError | undefined): void => {
    if (!parsed) return;
    const key = `${parsed.code}\u0000${parsed.message}\u0000${parsed.field ?? ''}`;
    if (seen.has(key)) return;
    seen.add(key);
    found.push(parsed);
  };
  if (Array.isArray(source.errors)) {
    for (const entry of source.errors) add(parseErrorObject(entry, fallbackRecovery));
  }
  add(parseErrorObject(source.adcp_error, fallbackRecovery));
  if (typeof source.error_code === 'string') add(parseErrorObject(source, fallbackRecovery));
  if (asRecord(source.error)) add(parseErrorObject(source.error, fallbackRecovery));
  return found;
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

function codeForRpc(code: number, flavour: RpcFlavour): string {
  // MCP reserves -32000/-32001 for client-side connection loss and request timeout; A2A uses -32001 for TaskNotFound.
  if (flavour === 'mcp' && code === -32001) return TRANSPORT_ERROR_CODES.timeout;
  if (flavour === 'mcp' && code === -32000) return TRANSPORT_ERROR_CODES.unreachable;
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
    'Retried with backoff. For a mutation, reconcile (tasks/list, get_media_buys) or resend with the same idempotency_key; if it keeps timing out, check the seller and the call timeout.',
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
  if (tokens.some((token) => TIMEOUT_CODES.has(token)) || TIMEOUT_TEXT.test(message)) return TRANSPORT_ERROR_CODES.timeout;
  if (tokens.some((token) => UNREACHABLE_CODES.has(token)) || /fetch failed|socket hang up|other side closed|connection (refused|reset)/i.test(message)) {
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
    if (code && tableRecovery(code) && code !== 'UNKNOWN_ERROR') {
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
    if (rpc && rpc.code === -32603 && messageStatus !== undefined && messageStatus >= 300) return forStatus(messageStatus);
    // ...and a failed fetch or a timeout wrapped the same way is that, not a seller error.
    const wrapped = rpc && rpc.code === -32603 && node.message ? wrappedTransportCause(node.message) : undefined;
    if (wrapped) return build(wrapped);
    if (rpc) return build(codeForRpc(rpc.code, rpc.flavour), { rpcCode: rpc.code });
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
    if (rpc) return build(codeForRpc(rpc.code, rpc.flavour), { rpcCode: rpc.code });
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
// Retry timing and description
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

/** One human line: "CODE: message (field: x; suggestion: y; retry after: 30 s)". */
export function describeError(
  error: Pick<AdcpError, 'code' | 'message' | 'field' | 'suggestion' | 'retryAfterSeconds'>,
): string {
  const extras: string[] = [];
  if (error.field) extras.push(`field: ${error.field}`);
  if (error.suggestion) extras.push(`suggestion: ${error.suggestion}`);
  if (error.retryAfterSeconds !== undefined) extras.push(`retry after: ${error.retryAfterSeconds} s`);
  const message = error.message.trim();
  return `${error.code}: ${message}${extras.length > 0 ? ` (${extras.join('; ')})` : ''}`;
}
