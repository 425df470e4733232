/**
 * One error model for everything a seller (or the road to it) can say went wrong.
 * Source: adcp-protocol.md §4 and §11; recoveries checked against the normative `enumMetadata` of the
 * 3.0.6 `enums/error-code.json` bundled in @adcp/sdk, and the 3.1 codes against the 3.1.19 enum. Recovery classes
 * decide retries:
 *   transient   - retry as-is after a delay (RATE_LIMITED, SERVICE_UNAVAILABLE, transport failures)
 *   correctable - the request must change first (field + suggestion say how)
 *   terminal    - nothing the buyer sends will fix it; a person has to act
 *
 * I/O-free and free of Node builtins: workflows import this module. Turning a thrown transport failure (Node, undici,
 * MCP, JSON-RPC) into an AdcpError is the activities' business: activities/transport-errors.ts.
 */
import { asRecord } from './records';

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
  /**
   * The orchestrator's, never the seller's: how many attempts of the same call came before the one that ended with
   * this error. Each failed in a way that is retried (lost in transport, a 5xx, a pause), so any of them may have
   * reached the seller: a refusal at the last attempt does not prove that nothing was made.
   */
  earlierAttempts?: number;
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
 * Codes the 3.1 `error-code` enum added (3.1.19 `enums/error-code.json`, recoveries from its `enumMetadata`). 3.1
 * keeps `error.code` an open string: a seller's own `recovery` still wins over these defaults.
 */
export const ADCP_3_1_ERROR_RECOVERY: Readonly<Record<string, Recovery>> = {
  AUTH_MISSING: 'correctable', // credentials were not sent
  AUTH_INVALID: 'terminal', // presented and rejected: rotate, never loop
  AUTHORIZATION_REQUIRED: 'correctable',
  CONFIGURATION_ERROR: 'terminal',
  CREATIVE_VALUE_NOT_ALLOWED: 'correctable',
  UNPRICEABLE_OUTPUT: 'correctable',
  UNSUPPORTED_GRANULARITY: 'correctable',
  UNSUPPORTED_PROVISIONING: 'correctable',
  BUDGET_CAP_REACHED: 'correctable',
  IDEMPOTENCY_IN_FLIGHT: 'transient', // the first request with this key is still running: retry the SAME key after retry_after
  CREATIVE_INACCESSIBLE: 'correctable',
  SIGNAL_TARGETING_INCOMPATIBLE: 'correctable',
  PROPOSAL_NOT_FOUND: 'correctable',
  MULTI_FINALIZE_UNSUPPORTED: 'correctable',
  SCOPE_INSUFFICIENT: 'correctable',
  READ_ONLY_SCOPE: 'correctable',
  FIELD_NOT_PERMITTED: 'correctable',
  PROVENANCE_REQUIRED: 'correctable',
  PROVENANCE_DIGITAL_SOURCE_TYPE_MISSING: 'correctable',
  PROVENANCE_DISCLOSURE_MISSING: 'correctable',
  PROVENANCE_EMBEDDED_MISSING: 'correctable',
  PROVENANCE_VERIFIER_NOT_ACCEPTED: 'correctable',
  PROVENANCE_CLAIM_CONTRADICTED: 'correctable',
  EVALUATOR_AGENT_NOT_ACCEPTED: 'correctable',
  BILLING_NOT_SUPPORTED: 'correctable',
  BILLING_NOT_PERMITTED_FOR_AGENT: 'correctable',
  BILLING_OUT_OF_BAND: 'terminal',
  PAYMENT_TERMS_NOT_SUPPORTED: 'correctable',
  BRAND_REQUIRED: 'correctable',
  AGENT_SUSPENDED: 'terminal',
  AGENT_BLOCKED: 'terminal',
  CREDENTIAL_IN_ARGS: 'terminal',
  ACTION_NOT_ALLOWED: 'correctable',
  PRIVATE_FIELD_IN_PUBLIC_PLACEMENT: 'correctable',
  FORMAT_PROJECTION_FAILED: 'correctable',
  FORMAT_DECLARATION_DIVERGENT: 'correctable',
  FORMAT_DECLARATION_V1_AMBIGUOUS: 'correctable',
  FORMAT_OPTION_UNRESOLVED: 'correctable',
  FORMAT_DECLARATION_V1_LOSSY_MULTI_SIZE: 'correctable',
  FORMAT_NOT_SUPPORTED: 'correctable',
  PIXEL_TRACKER_LOSSY_DOWNGRADE: 'correctable',
  PIXEL_TRACKER_UPGRADE_INFERRED: 'correctable',
  STALE_RESPONSE: 'transient',
  FEED_FETCH_FAILED: 'correctable',
  INVALID_FEED_FORMAT: 'correctable',
  ITEM_VALIDATION_FAILED: 'correctable',
  CATALOG_LIMIT_EXCEEDED: 'correctable',
};

/**
 * Codes that appear in the docs but not in the enum (§4.3 "Codes that appear in docs but not in the enum"),
 * Sellers send them; these are our defaults when they omit `recovery`.
 * Input-required reasons (APPROVAL_REQUIRED, BUDGET_EXCEEDS_LIMIT) are not errors and are not listed.
 */
export const DOCUMENTED_ERROR_RECOVERY: Readonly<Record<string, Recovery>> = {
  // Auth (EH, MBS, AUTH, A2A samples). See isAuthError().
  TOKEN_EXPIRED: 'correctable', // refresh the token, then retry once
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
 * |                                   | (also McpServer's -32602 "Tool <name> not found" / "disabled")           |             |
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

function optionalText(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function normaliseRecovery(value: unknown): Recovery | undefined {
  if (typeof value !== 'string') return undefined;
  const lower = value.trim().toLowerCase();
  return RECOVERIES.has(lower) ? (lower as Recovery) : undefined;
}

/** The recovery our tables give a code, or undefined when no table knows it. */
export function knownRecovery(code: string): Recovery | undefined {
  const key = code.trim().toUpperCase();
  const known =
    STANDARD_ERROR_RECOVERY[key] ??
    ADCP_3_1_ERROR_RECOVERY[key] ??
    DOCUMENTED_ERROR_RECOVERY[key] ??
    TRANSPORT_RECOVERY[key];
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
  return normaliseRecovery(sellerRecovery) ?? knownRecovery(code) ?? fallback ?? UNKNOWN_ERROR_RECOVERY;
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
  return sellerResponseRefusal(error) ?? error;
}

/**
 * A seller built on @adcp/sdk's createAdcpServer validates its OWN responses against the schemas when NODE_ENV is not
 * `production` (`validation.responses: 'strict'`), and replaces an answer that fails with VALIDATION_ERROR
 * ("<tool> response failed schema validation at /...", details.side = 'response'), recovery correctable. The buyer
 * cannot correct that: the request was fine and the seller's answer was not. Labelled terminal, owned by the seller.
 */
function sellerResponseRefusal(error: AdcpError): AdcpError | undefined {
  if (error.code !== 'VALIDATION_ERROR') return undefined;
  const side = error.details?.side;
  if (side !== 'response' && !/\bresponse failed schema validation\b/i.test(error.message)) return undefined;
  return {
    ...error,
    recovery: 'terminal',
    suggestion:
      "The seller's own answer failed the seller's schema validation; the request is not at fault. Report it to the seller (its response does not match the AdCP schema it validates against, or it runs response validation in strict mode).",
    details: { ...error.details, origin: 'seller-response' },
  };
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
  add(parseControllerError(source));
  return found;
}

/**
 * Recovery of the comply_test_controller's own error codes (compliance/comply-test-controller-response.json,
 * ControllerError): a missing or illegal target is the caller's to correct (seed the entity first, ask for a legal
 * transition, fix params); a scenario the seller does not implement or a sandbox that refuses is not.
 */
const CONTROLLER_ERROR_RECOVERY: Readonly<Record<string, Recovery>> = {
  INVALID_TRANSITION: 'correctable',
  INVALID_STATE: 'correctable',
  NOT_FOUND: 'correctable',
  INVALID_PARAMS: 'correctable',
  UNKNOWN_SCENARIO: 'terminal',
  FORBIDDEN: 'terminal',
  JCS_NON_FINITE_NUMBER: 'terminal',
  INTERNAL_ERROR: 'transient', // as the documented code; force_* scenarios converge when replayed
};

/**
 * The comply_test_controller's error answer `{success: false, error: <code>, error_detail?, current_state?}` (3.x
 * ControllerError). Its `error` is a code string, which the other shapes read as free text or not at all, and its
 * detail is in `error_detail`. `current_state` (where the entity is) goes to details.
 */
function parseControllerError(source: Record<string, unknown>): AdcpError | undefined {
  if (source.success !== false || typeof source.error !== 'string' || !/^[A-Z][A-Z0-9_]+$/.test(source.error))
    return undefined;
  const code = source.error;
  const error: AdcpError = {
    code,
    message: optionalText(source.error_detail) ?? `The seller's test controller answered ${code}.`,
    recovery: normaliseRecovery(source.recovery) ?? CONTROLLER_ERROR_RECOVERY[code] ?? recoveryFor(code),
  };
  if (source.current_state !== undefined) error.details = { current_state: source.current_state };
  return error;
}

/**
 * The MCP TypeScript SDK's McpServer answers a tools/call it refuses before the tool runs (no such tool, the tool is
 * disabled, arguments its input schema rejects) not with a JSON-RPC error but with an `isError` result whose only text
 * is "MCP error <code>: <message>" (@modelcontextprotocol/sdk server/mcp.js, CallTool handler). Read as the JSON-RPC
 * error it wraps, so the refusal gets the code and recovery it gets when a server throws it
 * (activities/transport-errors.ts): arguments refused are the buyer's to correct (with the first failing path as
 * `field`), a tool the seller lacks is terminal. Only these refusals: the tool did not run, so nothing at the seller
 * changed. Any other text (a handler that failed after it ran) is left to the caller's default.
 */
export function parseMcpToolRefusal(text: string): AdcpError | undefined {
  const match = /^MCP error (-\d+): ([\s\S]*)$/.exec(text.trim());
  if (!match) return undefined;
  const rpcCode = Number(match[1]);
  const message = match[2].trim();
  if ((rpcCode === -32602 && /^Tool \S+ (?:not found|disabled)$/.test(message)) || rpcCode === -32601) {
    return {
      code: TRANSPORT_ERROR_CODES.rpcMethodNotFound,
      message,
      recovery: 'terminal',
      suggestion: "The seller does not expose this tool; check get_adcp_capabilities and the seller's tools/list.",
      details: { source: 'mcp-tool-result', rpc_code: rpcCode },
    };
  }
  const validation = /^Input validation error: ([\s\S]*)$/.exec(message);
  if (rpcCode !== -32602 || !validation) return undefined;
  // McpServer lists one zod issue per line: "<issue message> at <dot.path>" (no " at" for a root-level issue).
  const issues = validation[1]
    .replace(/^Invalid arguments for tool \S+: /, '')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const field = issues.map((issue) => / at ([\w.[\]-]+)$/.exec(issue)?.[1]).find((path) => path !== undefined);
  return {
    code: TRANSPORT_ERROR_CODES.rpcInvalidParams,
    message,
    recovery: 'correctable',
    ...(field ? { field } : {}),
    suggestion: "The seller's input schema refused the arguments; fix the request (see field and details.issues).",
    details: { source: 'mcp-tool-result', rpc_code: rpcCode, issues },
  };
}

// ---------------------------------------------------------------------------------------------------
// Description
// ---------------------------------------------------------------------------------------------------

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
