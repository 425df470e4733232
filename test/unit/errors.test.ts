import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';

import type * as AdcpSdk from '@adcp/sdk';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SseError } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

import {
  type AdcpError,
  type Recovery,
  AUTH_ERROR_CODES,
  DOCUMENTED_ERROR_RECOVERY,
  STANDARD_ERROR_CODES,
  STANDARD_ERROR_RECOVERY,
  UNKNOWN_ERROR_RECOVERY,
  describeError,
  isAuthError,
  isRetryable,
  isStandardErrorCode,
  isTransportError,
  parseErrorObject,
  parseErrors,
  recoveryFor,
} from '../../protocol/errors';
import {
  DEFAULT_RETRY_BACKOFF,
  RATE_LIMITED_DEFAULT_DELAY_MS,
  classifyTransportFailure,
  parseRetryAfterHeader,
  retryDelayMs,
} from '../../activities/transport-errors';
import { snapshotFromMcpToolResult } from '../../protocol/snapshot';

/** The normative 3.x error enum as @adcp/sdk 6.11 bundles it (AdCP 3.0.6): the source the table must match. */
function bundledErrorEnum(): { enum: string[]; enumMetadata: Record<string, { recovery: Recovery }> } {
  const sdkRoot = dirname(require.resolve('@adcp/sdk/package.json'));
  return JSON.parse(readFileSync(join(sdkRoot, 'dist/lib/schemas-data/3.0/enums/error-code.json'), 'utf8'));
}

const SPEC = bundledErrorEnum();

// The @adcp/sdk entry point pulls in ESM-only dependencies (jose) that this Jest setup does not load, so the
// real error classes are loaded from the SDK's own errors module.
const {
  AuthenticationRequiredError,
  IdempotencyConflictError,
  ProtocolError,
  ResponseTooLargeError,
  TaskTimeoutError,
} = jest.requireActual<
  Pick<
    typeof AdcpSdk,
    | 'AuthenticationRequiredError'
    | 'IdempotencyConflictError'
    | 'ProtocolError'
    | 'ResponseTooLargeError'
    | 'TaskTimeoutError'
  >
>(join(dirname(require.resolve('@adcp/sdk/package.json')), 'dist/lib/errors/index.js'));
const SPEC_CASES: Array<[string, Recovery]> = SPEC.enum.map((code) => [code, SPEC.enumMetadata[code].recovery]);

function systemError(message: string, code: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), { code, ...extra });
}

/** What Node's fetch (undici) throws: a TypeError whose cause carries the system or undici code. */
function fetchFailed(cause: Error): TypeError {
  return new TypeError('fetch failed', { cause });
}

function sseError(code: number | undefined, message: string): SseError {
  return new SseError(code, message, undefined as unknown as ConstructorParameters<typeof SseError>[2]);
}

describe('standard error codes (3.x enum, §4.3 + §11)', () => {
  test('the enum has 45 codes and our list is exactly it', () => {
    expect(SPEC.enum).toHaveLength(45);
    expect([...STANDARD_ERROR_CODES].sort()).toEqual([...SPEC.enum].sort());
    expect(Object.keys(STANDARD_ERROR_RECOVERY).sort()).toEqual([...SPEC.enum].sort());
  });

  test.each(SPEC_CASES)('%s defaults to %s when the seller gives no recovery', (code, recovery) => {
    const parsed = parseErrorObject({ code, message: `seller says ${code}` });
    expect(parsed).toEqual({ code, message: `seller says ${code}`, recovery });
    expect(isStandardErrorCode(code)).toBe(true);
    expect(isRetryable(parsed!)).toBe(recovery === 'transient');
  });
});

describe('codes that appear in docs but not in the enum (§4.3)', () => {
  const cases: Array<[string, Recovery, boolean]> = [
    ['INTERNAL_SERVER_ERROR', 'transient', false],
    ['TIMEOUT', 'transient', false],
    ['TOKEN_EXPIRED', 'correctable', true],
    ['INVALID_CREDENTIALS', 'terminal', true],
    ['AUTH_INVALID', 'terminal', true],
    ['AUTH_MISSING', 'correctable', true],
    ['UNAUTHORIZED', 'terminal', true],
    ['PLATFORM_UNAUTHORIZED', 'terminal', true],
    ['INSUFFICIENT_PERMISSIONS', 'terminal', true],
    ['CONTEXT_EXPIRED', 'correctable', false],
    ['MISSING_REQUIRED_FIELD', 'correctable', false],
    ['INVALID_FIELD_VALUE', 'correctable', false],
    ['RESOURCE_NOT_FOUND', 'correctable', false],
    ['INSUFFICIENT_INVENTORY', 'correctable', false],
    ['FORMAT_INCOMPATIBLE', 'correctable', false],
    ['CREATIVE_IN_ACTIVE_DELIVERY', 'correctable', false],
    ['INVALID_DATE_RANGE', 'correctable', false],
    ['ACCOUNT_REQUIRED', 'correctable', false],
  ];

  test.each(cases)('%s defaults to %s (auth: %s)', (code, recovery, auth) => {
    expect(parseErrorObject({ code, message: 'x' })?.recovery).toBe(recovery);
    expect(isAuthError(code)).toBe(auth);
    expect(isStandardErrorCode(code)).toBe(false);
  });

  test('every documented code has a default and none shadows a standard code', () => {
    for (const code of Object.keys(DOCUMENTED_ERROR_RECOVERY)) expect(STANDARD_ERROR_RECOVERY[code]).toBeUndefined();
  });

  test('AUTH_REQUIRED is an auth error; PERMISSION_DENIED (governance token in the request) is not', () => {
    expect(isAuthError('AUTH_REQUIRED')).toBe(true);
    expect(isAuthError({ code: 'AUTH_REQUIRED' })).toBe(true);
    expect(isAuthError('PERMISSION_DENIED')).toBe(false);
    expect(isAuthError('VALIDATION_ERROR')).toBe(false);
    expect(AUTH_ERROR_CODES.has('TRANSPORT_HTTP_401')).toBe(true);
  });
});

describe("the seller's recovery wins", () => {
  test.each<[string, string, Recovery]>([
    ['RATE_LIMITED', 'terminal', 'terminal'],
    ['VALIDATION_ERROR', 'transient', 'transient'],
    ['ACCOUNT_SUSPENDED', 'correctable', 'correctable'],
    ['CONFLICT', 'Terminal', 'terminal'],
  ])('%s with recovery %s is %s', (code, sellerRecovery, expected) => {
    expect(parseErrorObject({ code, message: 'x', recovery: sellerRecovery })?.recovery).toBe(expected);
  });

  test('a recovery value outside the enum is ignored in favour of the table', () => {
    expect(parseErrorObject({ code: 'RATE_LIMITED', message: 'x', recovery: 'later' })?.recovery).toBe('transient');
  });
});

describe('unknown codes', () => {
  test('with a recovery: the seller decides', () => {
    expect(parseErrorObject({ code: 'GAM_QUOTA_BURST', message: 'x', recovery: 'transient' })?.recovery).toBe(
      'transient',
    );
  });

  test('without a recovery: terminal, never retried', () => {
    const parsed = parseErrorObject({ code: 'GAM_QUOTA_BURST', message: 'x' })!;
    expect(parsed.recovery).toBe('terminal');
    expect(UNKNOWN_ERROR_RECOVERY).toBe('terminal');
    expect(isRetryable(parsed)).toBe(false);
  });

  test('without a recovery but with a fallback (the HTTP status class): the fallback', () => {
    expect(recoveryFor('GAM_QUOTA_BURST', undefined, 'transient')).toBe('transient');
    expect(recoveryFor('VALIDATION_ERROR', undefined, 'transient')).toBe('correctable');
  });

  test('no code at all: UNKNOWN_ERROR, terminal, message kept', () => {
    expect(parseErrorObject({ message: 'Something broke' })).toEqual({
      code: 'UNKNOWN_ERROR',
      message: 'Something broke',
      recovery: 'terminal',
    });
  });
});

describe('parseErrors over every shape', () => {
  test('the tasks/get error object: field, suggestion, retry_after and recovery read from details', () => {
    const [error] = parseErrors({
      error: {
        code: 'PRODUCT_UNAVAILABLE',
        message: 'gone',
        details: { recovery: 'terminal', field: 'packages[0].product_id', suggestion: 'pick another', retry_after: 5 },
      },
    });
    expect(error).toMatchObject({
      code: 'PRODUCT_UNAVAILABLE',
      recovery: 'terminal',
      field: 'packages[0].product_id',
      suggestion: 'pick another',
      retryAfterSeconds: 5,
    });
  });

  test('errors[] (schema form) with field, suggestion, retry_after and details', () => {
    const errors = parseErrors({
      errors: [
        {
          code: 'BUDGET_TOO_LOW',
          message: 'Minimum is 5000',
          field: 'packages[0].budget',
          suggestion: 'Raise the budget',
          details: { minimum: 5000 },
        },
        { code: 'RATE_LIMITED', message: 'Slow down', retry_after: 30 },
      ],
    });
    expect(errors).toEqual([
      {
        code: 'BUDGET_TOO_LOW',
        message: 'Minimum is 5000',
        field: 'packages[0].budget',
        suggestion: 'Raise the budget',
        details: { minimum: 5000 },
        recovery: 'correctable',
      },
      { code: 'RATE_LIMITED', message: 'Slow down', retryAfterSeconds: 30, recovery: 'transient' },
    ]);
  });

  test('adcp_error (3.0.6 wrapper, as the @adcp/sdk example seller sends it)', () => {
    const errors = parseErrors({
      adcp_error: {
        code: 'VALIDATION_ERROR',
        message: 'idempotency_key is required',
        recovery: 'correctable',
        field: 'idempotency_key',
        issues: [{ path: '/idempotency_key' }],
      },
    });
    expect(errors).toEqual([
      {
        code: 'VALIDATION_ERROR',
        message: 'idempotency_key is required',
        recovery: 'correctable',
        field: 'idempotency_key',
      },
    ]);
  });

  test('the GA two-layer model (same error in errors[] and adcp_error) is reported once', () => {
    const error = { code: 'GOVERNANCE_DENIED', message: 'Spend authority exceeded' };
    expect(parseErrors({ errors: [error], adcp_error: error })).toHaveLength(1);
  });

  test('legacy top-level error_code with recovery and retry_after (EH form)', () => {
    expect(
      parseErrors({
        status: 'failed',
        error_code: 'SERVICE_UNAVAILABLE',
        message: 'Maintenance',
        retry_after: 120,
        recovery: 'transient',
      }),
    ).toEqual([{ code: 'SERVICE_UNAVAILABLE', message: 'Maintenance', retryAfterSeconds: 120, recovery: 'transient' }]);
  });

  test('tasks/get error object {code, message, details}', () => {
    expect(
      parseErrors({
        task_id: 't1',
        status: 'failed',
        error: { code: 'CREATIVE_REJECTED', message: 'Brand safety', details: { creative_id: 'c1' } },
      }),
    ).toEqual([
      { code: 'CREATIVE_REJECTED', message: 'Brand safety', details: { creative_id: 'c1' }, recovery: 'correctable' },
    ]);
  });

  test('retry_after as a numeric string is read; a negative or non-numeric one is dropped', () => {
    expect(parseErrorObject({ code: 'RATE_LIMITED', message: 'x', retry_after: '15' })?.retryAfterSeconds).toBe(15);
    expect(
      parseErrorObject({ code: 'RATE_LIMITED', message: 'x', retry_after: -1 })?.retryAfterSeconds,
    ).toBeUndefined();
    expect(
      parseErrorObject({ code: 'RATE_LIMITED', message: 'x', retry_after: 'soon' })?.retryAfterSeconds,
    ).toBeUndefined();
  });

  test('payloads without errors, and non-objects, give nothing', () => {
    expect(parseErrors({ status: 'completed', media_buy_id: 'mb_1' })).toEqual([]);
    expect(parseErrors(null)).toEqual([]);
    expect(parseErrors('failed')).toEqual([]);
    expect(parseErrors([{ code: 'X', message: 'y' }])).toEqual([]);
  });
});

describe('classifyTransportFailure: what fetch (undici) throws', () => {
  const undiciError = (name: string, message: string, code: string): Error =>
    Object.assign(new Error(message), { name, code });
  test.each<[string, string, string, Error]>([
    [
      'connection refused',
      'TRANSPORT_UNREACHABLE',
      'ECONNREFUSED',
      fetchFailed(systemError('connect ECONNREFUSED 10.0.0.1:443', 'ECONNREFUSED', { syscall: 'connect' })),
    ],
    [
      'connection reset',
      'TRANSPORT_UNREACHABLE',
      'ECONNRESET',
      fetchFailed(systemError('read ECONNRESET', 'ECONNRESET')),
    ],
    [
      'DNS name not found',
      'TRANSPORT_UNREACHABLE',
      'ENOTFOUND',
      fetchFailed(systemError('getaddrinfo ENOTFOUND seller.example', 'ENOTFOUND', { syscall: 'getaddrinfo' })),
    ],
    [
      'DNS temporary failure',
      'TRANSPORT_UNREACHABLE',
      'EAI_AGAIN',
      fetchFailed(systemError('getaddrinfo EAI_AGAIN seller.example', 'EAI_AGAIN')),
    ],
    [
      'socket closed by the peer',
      'TRANSPORT_UNREACHABLE',
      'UND_ERR_SOCKET',
      fetchFailed(undiciError('SocketError', 'other side closed', 'UND_ERR_SOCKET')),
    ],
    ['socket hang up (node:http)', 'TRANSPORT_UNREACHABLE', 'ECONNRESET', systemError('socket hang up', 'ECONNRESET')],
    [
      'connect timeout',
      'TRANSPORT_TIMEOUT',
      'UND_ERR_CONNECT_TIMEOUT',
      fetchFailed(undiciError('ConnectTimeoutError', 'Connect Timeout Error', 'UND_ERR_CONNECT_TIMEOUT')),
    ],
    [
      'headers timeout',
      'TRANSPORT_TIMEOUT',
      'UND_ERR_HEADERS_TIMEOUT',
      fetchFailed(undiciError('HeadersTimeoutError', 'Headers Timeout Error', 'UND_ERR_HEADERS_TIMEOUT')),
    ],
    [
      'body timeout',
      'TRANSPORT_TIMEOUT',
      'UND_ERR_BODY_TIMEOUT',
      fetchFailed(undiciError('BodyTimeoutError', 'Body Timeout Error', 'UND_ERR_BODY_TIMEOUT')),
    ],
    [
      'ETIMEDOUT',
      'TRANSPORT_TIMEOUT',
      'ETIMEDOUT',
      fetchFailed(systemError('connect ETIMEDOUT 10.0.0.1:443', 'ETIMEDOUT')),
    ],
    [
      'happy-eyeballs AggregateError',
      'TRANSPORT_UNREACHABLE',
      'ECONNREFUSED',
      fetchFailed(
        Object.assign(
          new AggregateError([
            systemError('connect ECONNREFUSED ::1:443', 'ECONNREFUSED'),
            systemError('connect ECONNREFUSED 127.0.0.1:443', 'ECONNREFUSED'),
          ]),
          {
            code: 'ECONNREFUSED',
          },
        ),
      ),
    ],
  ])('%s → %s (%s)', (_label, code, errorCode, failure) => {
    const error = classifyTransportFailure(failure);
    expect(error).toMatchObject({ code, recovery: 'transient', details: { source: 'transport', errorCode } });
    expect(isRetryable(error)).toBe(true);
    expect(isTransportError(error)).toBe(true);
  });

  test('AbortSignal.timeout → TimeoutError → TRANSPORT_TIMEOUT', () => {
    const error = classifyTransportFailure(
      new DOMException('The operation was aborted due to timeout', 'TimeoutError'),
    );
    expect(error).toMatchObject({
      code: 'TRANSPORT_TIMEOUT',
      recovery: 'transient',
      details: { errorName: 'TimeoutError' },
    });
  });

  test('AbortController.abort → AbortError → TRANSPORT_TIMEOUT', () => {
    expect(classifyTransportFailure(new DOMException('This operation was aborted', 'AbortError')).code).toBe(
      'TRANSPORT_TIMEOUT',
    );
  });

  test('an expired certificate is TRANSPORT_TLS, terminal', () => {
    const error = classifyTransportFailure(fetchFailed(systemError('certificate has expired', 'CERT_HAS_EXPIRED')));
    expect(error).toMatchObject({
      code: 'TRANSPORT_TLS',
      recovery: 'terminal',
      details: { errorCode: 'CERT_HAS_EXPIRED' },
    });
  });

  test('a bug on our side is TRANSPORT_UNKNOWN, terminal, not retried', () => {
    const error = classifyTransportFailure(new TypeError("Cannot read properties of undefined (reading 'status')"));
    expect(error).toMatchObject({ code: 'TRANSPORT_UNKNOWN', recovery: 'terminal' });
  });
});

describe('classifyTransportFailure: what the MCP SDK throws', () => {
  test('McpError -32001 "Request timed out" → TRANSPORT_TIMEOUT', () => {
    const error = classifyTransportFailure(
      new McpError(ErrorCode.RequestTimeout, 'Request timed out', { timeout: 60000 }),
    );
    expect(error).toMatchObject({ code: 'TRANSPORT_TIMEOUT', recovery: 'transient', details: { rpcCode: -32001 } });
    expect(error.message).toContain('MCP error -32001: Request timed out');
  });

  test('McpError -32001 wrapping an aborted signal (how the SDK reports AbortSignal.timeout) → TRANSPORT_TIMEOUT', () => {
    expect(
      classifyTransportFailure(
        new McpError(ErrorCode.RequestTimeout, 'TimeoutError: The operation was aborted due to timeout'),
      ).code,
    ).toBe('TRANSPORT_TIMEOUT');
  });

  test('McpError -32603 wrapping a failed Streamable HTTP POST keeps the HTTP status (what @adcp/sdk throws for a 502)', () => {
    const failure = new McpError(
      ErrorCode.InternalError,
      'Error: Streamable HTTP error: Error POSTing to endpoint: 502 Bad Gateway',
    );
    expect(classifyTransportFailure(failure)).toMatchObject({ code: 'TRANSPORT_HTTP_502', recovery: 'transient' });
    expect(classifyTransportFailure(new McpError(ErrorCode.InternalError, 'boom')).code).toBe(
      'TRANSPORT_RPC_INTERNAL_ERROR',
    );
    expect(classifyTransportFailure(new McpError(ErrorCode.InternalError, 'TypeError: fetch failed')).code).toBe(
      'TRANSPORT_UNREACHABLE',
    );
    expect(
      classifyTransportFailure(new McpError(ErrorCode.InternalError, 'Error: connect ECONNREFUSED 127.0.0.1:9')).code,
    ).toBe('TRANSPORT_UNREACHABLE');
  });

  test('McpError -32000 "Connection closed" → TRANSPORT_UNREACHABLE', () => {
    expect(classifyTransportFailure(McpError.fromError(ErrorCode.ConnectionClosed, 'Connection closed')).code).toBe(
      'TRANSPORT_UNREACHABLE',
    );
  });

  test.each<[ErrorCode, string, Recovery]>([
    [ErrorCode.InvalidParams, 'TRANSPORT_RPC_INVALID_PARAMS', 'correctable'],
    [ErrorCode.MethodNotFound, 'TRANSPORT_RPC_METHOD_NOT_FOUND', 'terminal'],
    [ErrorCode.InternalError, 'TRANSPORT_RPC_INTERNAL_ERROR', 'transient'],
    [ErrorCode.ParseError, 'TRANSPORT_RPC_PARSE_ERROR', 'terminal'],
    [ErrorCode.InvalidRequest, 'TRANSPORT_RPC_INVALID_REQUEST', 'terminal'],
    [ErrorCode.UrlElicitationRequired, 'TRANSPORT_RPC_ERROR', 'terminal'],
  ])('McpError %d → %s (%s)', (rpcCode, code, recovery) => {
    expect(classifyTransportFailure(new McpError(rpcCode, 'seller said no'))).toMatchObject({
      code,
      recovery,
      details: { rpcCode },
    });
  });

  test('McpError carrying an adcp_error in data: the AdCP error, not a transport class', () => {
    const failure = new McpError(ErrorCode.InvalidParams, 'Invalid arguments', {
      adcp_error: {
        code: 'VALIDATION_ERROR',
        message: 'Mutating tools require idempotency_key',
        field: 'idempotency_key',
        recovery: 'correctable',
      },
    });
    const error = classifyTransportFailure(failure);
    expect(error).toEqual({
      code: 'VALIDATION_ERROR',
      message: 'Mutating tools require idempotency_key',
      field: 'idempotency_key',
      recovery: 'correctable',
    });
    expect(isTransportError(error)).toBe(false);
  });

  test.each([500, 502, 503, 504])('StreamableHTTPError %d → TRANSPORT_HTTP_%d, transient', (status) => {
    const error = classifyTransportFailure(
      new StreamableHTTPError(status, 'Error POSTing to endpoint: <html>Bad Gateway</html>'),
    );
    expect(error).toMatchObject({
      code: `TRANSPORT_HTTP_${status}`,
      recovery: 'transient',
      details: { source: 'transport', httpStatus: status },
    });
  });

  test('StreamableHTTPError 501 → terminal: the server will never support the call', () => {
    expect(
      classifyTransportFailure(new StreamableHTTPError(501, 'Error POSTing to endpoint: Not Implemented')).recovery,
    ).toBe('terminal');
  });

  test.each([401, 403])('StreamableHTTPError %d → TRANSPORT_HTTP_%d, an auth error, terminal', (status) => {
    const error = classifyTransportFailure(new StreamableHTTPError(status, 'Error POSTing to endpoint: invalid token'));
    expect(error).toMatchObject({ code: `TRANSPORT_HTTP_${status}`, recovery: 'terminal' });
    expect(isAuthError(error)).toBe(true);
    expect(isRetryable(error)).toBe(false);
  });

  test.each<[number, Recovery]>([
    [400, 'correctable'],
    [413, 'correctable'],
    [422, 'correctable'],
    [404, 'terminal'],
    [405, 'terminal'],
    [415, 'terminal'],
    [408, 'transient'],
  ])('StreamableHTTPError %d → %s', (status, recovery) => {
    const error = classifyTransportFailure(new StreamableHTTPError(status, 'Error POSTing to endpoint: nope'));
    expect(error).toMatchObject({ code: `TRANSPORT_HTTP_${status}`, recovery });
    expect(isAuthError(error)).toBe(false);
  });

  test('StreamableHTTPError 429 → RATE_LIMITED; with no retry-after the delay is 60 s', () => {
    const error = classifyTransportFailure(
      new StreamableHTTPError(429, 'Error POSTing to endpoint: Too Many Requests'),
    );
    expect(error).toMatchObject({ code: 'RATE_LIMITED', recovery: 'transient', details: { httpStatus: 429 } });
    expect(error.retryAfterSeconds).toBeUndefined();
    expect(retryDelayMs(error, 1, DEFAULT_RETRY_BACKOFF, () => 0.5)).toBe(60_000);
  });

  test('StreamableHTTPError 429 whose body is an adcp_error: the seller code and retry_after win', () => {
    const failure = new StreamableHTTPError(
      429,
      'Error POSTing to endpoint: {"adcp_error":{"code":"RATE_LIMITED","message":"slow down","retry_after":12}}',
    );
    const error = classifyTransportFailure(failure);
    expect(error).toMatchObject({
      code: 'RATE_LIMITED',
      message: 'slow down',
      retryAfterSeconds: 12,
      recovery: 'transient',
      details: { httpStatus: 429 },
    });
    expect(retryDelayMs(error, 3, DEFAULT_RETRY_BACKOFF, () => 0.5)).toBe(12_000);
  });

  test('a 503 whose body has an unknown code without recovery falls back to the status class (transient)', () => {
    const error = classifyTransportFailure(
      new StreamableHTTPError(
        503,
        'Error POSTing to endpoint: {"errors":[{"code":"UPSTREAM_GAM_DOWN","message":"GAM is down"}]}',
      ),
    );
    expect(error).toMatchObject({ code: 'UPSTREAM_GAM_DOWN', recovery: 'transient' });
  });

  test('a JSON-RPC error body (not AdCP) is classified by the status', () => {
    const failure = new StreamableHTTPError(
      400,
      'Error POSTing to endpoint: {"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}',
    );
    expect(classifyTransportFailure(failure).code).toBe('TRANSPORT_HTTP_400');
  });

  test('StreamableHTTPError -1 "Unexpected content type: text/html" (a 200 web page) → PROTOCOL_VIOLATION, terminal', () => {
    const error = classifyTransportFailure(new StreamableHTTPError(-1, 'Unexpected content type: text/html'));
    expect(error).toMatchObject({ code: 'PROTOCOL_VIOLATION', recovery: 'terminal' });
  });

  test('a 200 JSON body that does not parse (SyntaxError) → PROTOCOL_VIOLATION', () => {
    let thrown: unknown;
    try {
      JSON.parse('not json{');
    } catch (error) {
      thrown = error;
    }
    expect(classifyTransportFailure(thrown)).toMatchObject({
      code: 'PROTOCOL_VIOLATION',
      recovery: 'terminal',
      details: { errorName: 'SyntaxError' },
    });
  });

  test('JSON that is not JSON-RPC (ZodError from the message schema) → PROTOCOL_VIOLATION', () => {
    const result = z.object({ jsonrpc: z.literal('2.0') }).safeParse({ hello: 'world' });
    expect(result.success).toBe(false);
    expect(classifyTransportFailure(result.error).code).toBe('PROTOCOL_VIOLATION');
  });

  test('an answer that is not AdCP (our ProtocolViolation) → PROTOCOL_VIOLATION', () => {
    let thrown: unknown;
    try {
      snapshotFromMcpToolResult({ content: [{ type: 'text', text: 'hello, I am not a seller' }] });
    } catch (error) {
      thrown = error;
    }
    expect((thrown as Error).name).toBe('ProtocolViolation');
    expect(classifyTransportFailure(thrown).code).toBe('PROTOCOL_VIOLATION');
  });

  test('SSE fallback: SseError 503 → TRANSPORT_HTTP_503', () => {
    expect(classifyTransportFailure(sseError(503, 'Non-200 status code (503)')).code).toBe('TRANSPORT_HTTP_503');
  });

  test('SSE fallback: SseError with no code around "fetch failed: connect ECONNREFUSED" (what @adcp/sdk rethrows) → TRANSPORT_UNREACHABLE', () => {
    const error = classifyTransportFailure(
      sseError(undefined, 'TypeError: fetch failed: connect ECONNREFUSED 127.0.0.1:4000'),
    );
    expect(error).toMatchObject({ code: 'TRANSPORT_UNREACHABLE', details: { errorCode: 'ECONNREFUSED' } });
  });

  test('SSE fallback: SseError 200 "Invalid content type" → PROTOCOL_VIOLATION (a 2xx is not an HTTP error)', () => {
    expect(classifyTransportFailure(sseError(200, 'Invalid content type, expected "text/event-stream"')).code).toBe(
      'PROTOCOL_VIOLATION',
    );
  });

  test('UnauthorizedError (OAuth flow needed) → TRANSPORT_HTTP_401', () => {
    const error = classifyTransportFailure(new UnauthorizedError());
    expect(error.code).toBe('TRANSPORT_HTTP_401');
    expect(isAuthError(error)).toBe(true);
  });
});

describe('classifyTransportFailure: what @adcp/sdk throws', () => {
  test('TaskTimeoutError → TRANSPORT_TIMEOUT', () => {
    expect(classifyTransportFailure(new TaskTimeoutError('task_1', 120000)).code).toBe('TRANSPORT_TIMEOUT');
  });

  test('ResponseTooLargeError → TRANSPORT_RESPONSE_TOO_LARGE, terminal', () => {
    expect(classifyTransportFailure(new ResponseTooLargeError(1024, 4096, 'https://seller.example/mcp'))).toMatchObject(
      {
        code: 'TRANSPORT_RESPONSE_TOO_LARGE',
        recovery: 'terminal',
      },
    );
  });

  test('AuthenticationRequiredError → TRANSPORT_HTTP_401', () => {
    expect(classifyTransportFailure(new AuthenticationRequiredError('https://seller.example/mcp')).code).toBe(
      'TRANSPORT_HTTP_401',
    );
  });

  test('IdempotencyConflictError keeps its AdCP code and the table recovery', () => {
    expect(classifyTransportFailure(new IdempotencyConflictError('key-0123456789abcdef'))).toMatchObject({
      code: 'IDEMPOTENCY_CONFLICT',
      recovery: 'correctable',
    });
  });

  test('ProtocolError wrapping a refused connection → TRANSPORT_UNREACHABLE', () => {
    const failure = new ProtocolError(
      'mcp',
      'call failed',
      fetchFailed(systemError('connect ECONNREFUSED 10.0.0.1:443', 'ECONNREFUSED')),
    );
    expect(classifyTransportFailure(failure).code).toBe('TRANSPORT_UNREACHABLE');
  });
});

describe('classifyTransportFailure: messages only (what survives in an @adcp/sdk result.error)', () => {
  test.each<[string, string, Recovery]>([
    ['MCP error -32001: Request timed out', 'TRANSPORT_TIMEOUT', 'transient'],
    ['fetch failed', 'TRANSPORT_UNREACHABLE', 'transient'],
    ['SSE error: TypeError: fetch failed: getaddrinfo EAI_AGAIN seller.example', 'TRANSPORT_UNREACHABLE', 'transient'],
    ['SSE error: TypeError: fetch failed: connect ETIMEDOUT 10.0.0.1:443', 'TRANSPORT_TIMEOUT', 'transient'],
    ['socket hang up', 'TRANSPORT_UNREACHABLE', 'transient'],
    ['SSE error: Non-200 status code (502)', 'TRANSPORT_HTTP_502', 'transient'],
    ['Error POSTing to endpoint (HTTP 500): Internal Server Error', 'TRANSPORT_HTTP_500', 'transient'],
    ['Streamable HTTP error: Error POSTing to endpoint: <html>Bad Gateway</html>', 'TRANSPORT_HTTP_ERROR', 'transient'],
    ['HTTP error for message/send! Status: 503 Service Unavailable. Response: down', 'TRANSPORT_HTTP_503', 'transient'],
    [
      'Failed to fetch Agent Card from https://seller.example/.well-known/agent-card.json: 404 Not Found',
      'TRANSPORT_HTTP_404',
      'terminal',
    ],
    ['JSON-RPC error: Task not found (Code: -32001) Data: {}', 'TRANSPORT_RPC_ERROR', 'terminal'],
    ['Streamable HTTP error: Unexpected content type: text/html', 'PROTOCOL_VIOLATION', 'terminal'],
    ['Unauthorized', 'TRANSPORT_HTTP_401', 'terminal'],
    ['A2A agent returned error: Invalid params', 'TRANSPORT_RPC_ERROR', 'terminal'],
  ])('%j → %s', (message, code, recovery) => {
    expect(classifyTransportFailure({ message })).toMatchObject({ code, recovery });
    expect(classifyTransportFailure(message)).toMatchObject({ code, recovery });
  });
});

describe('classifyTransportFailure: explicit HTTP status and Retry-After', () => {
  const now = Date.parse('2026-05-01T12:00:00Z');

  test('429 with Retry-After in seconds', () => {
    const error = classifyTransportFailure({ httpStatus: 429, retryAfterHeader: '30', message: 'Too Many Requests' });
    expect(error).toMatchObject({ code: 'RATE_LIMITED', retryAfterSeconds: 30, recovery: 'transient' });
    expect(retryDelayMs(error, 1, DEFAULT_RETRY_BACKOFF, () => 0.99)).toBe(30_000);
  });

  test('429 with Retry-After as an HTTP-date, relative to now', () => {
    const error = classifyTransportFailure({ httpStatus: 429, retryAfterHeader: 'Fri, 01 May 2026 12:01:30 GMT' }, now);
    expect(error.retryAfterSeconds).toBe(90);
  });

  test('an HTTP-date in the past means now; without `now` a date is ignored (then 60 s for RATE_LIMITED)', () => {
    expect(parseRetryAfterHeader('Fri, 01 May 2026 11:00:00 GMT', now)).toBe(0);
    const error = classifyTransportFailure({ httpStatus: 429, retryAfterHeader: 'Fri, 01 May 2026 12:01:30 GMT' });
    expect(error.retryAfterSeconds).toBeUndefined();
    expect(retryDelayMs(error, 1, DEFAULT_RETRY_BACKOFF, () => 0.5)).toBe(RATE_LIMITED_DEFAULT_DELAY_MS);
  });

  test('503 with Retry-After is honoured', () => {
    expect(classifyTransportFailure({ httpStatus: 503, retryAfterHeader: '5' })).toMatchObject({
      code: 'TRANSPORT_HTTP_503',
      retryAfterSeconds: 5,
    });
  });

  test('Retry-After on a non-retryable answer is not carried', () => {
    expect(classifyTransportFailure({ httpStatus: 401, retryAfterHeader: '5' }).retryAfterSeconds).toBeUndefined();
  });

  test('garbage Retry-After is ignored', () => {
    expect(parseRetryAfterHeader('soon', now)).toBeUndefined();
    expect(parseRetryAfterHeader('-5', now)).toBeUndefined();
  });

  test('a 2xx exchange with an unusable body → PROTOCOL_VIOLATION', () => {
    expect(classifyTransportFailure({ httpStatus: 200, message: 'body is not AdCP' }).code).toBe('PROTOCOL_VIOLATION');
  });

  test('the human line says what happened and keeps the original text', () => {
    const error = classifyTransportFailure(
      fetchFailed(systemError('connect ECONNREFUSED 10.0.0.1:443', 'ECONNREFUSED')),
    );
    expect(describeError(error)).toMatch(
      /^TRANSPORT_UNREACHABLE: Could not reach the seller \(TypeError: fetch failed; caused by connect ECONNREFUSED 10\.0\.0\.1:443\)\. \(suggestion: .+\)$/,
    );
  });
});

describe('classifyTransportFailure: real failures on loopback', () => {
  const servers: Server[] = [];

  async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
    const server = createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  }

  async function mcpFailure(url: string, requestTimeoutMs?: number): Promise<unknown> {
    const client = new Client({ name: 'adcp-orchestrator-test', version: '0.0.0' });
    try {
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url)),
        requestTimeoutMs ? { timeout: requestTimeoutMs } : undefined,
      );
      return new Error('expected the connection to fail');
    } catch (error) {
      return error;
    } finally {
      await client.close().catch(() => undefined);
    }
  }

  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('fetch to a closed port → TRANSPORT_UNREACHABLE (ECONNREFUSED)', async () => {
    const url = await serve(() => undefined);
    const closing = servers.pop()!;
    await new Promise((resolve) => closing.close(resolve));
    const failure = await fetch(url).then(
      () => new Error('expected a refusal'),
      (error: unknown) => error,
    );
    expect(classifyTransportFailure(failure)).toMatchObject({
      code: 'TRANSPORT_UNREACHABLE',
      details: { errorCode: 'ECONNREFUSED' },
    });
  });

  test('fetch with AbortSignal.timeout to a seller that never answers → TRANSPORT_TIMEOUT', async () => {
    const url = await serve(() => undefined);
    const failure = await fetch(url, { signal: AbortSignal.timeout(50) }).then(
      () => new Error('expected a timeout'),
      (error: unknown) => error,
    );
    expect(classifyTransportFailure(failure).code).toBe('TRANSPORT_TIMEOUT');
  });

  test('MCP client against a seller that never answers → TRANSPORT_TIMEOUT', async () => {
    const url = await serve(() => undefined);
    expect(classifyTransportFailure(await mcpFailure(url, 100)).code).toBe('TRANSPORT_TIMEOUT');
  });

  test.each<[number, string, string, string, Recovery]>([
    [502, 'text/html', '<html><body>502 Bad Gateway</body></html>', 'TRANSPORT_HTTP_502', 'transient'],
    [401, 'text/plain', 'invalid token', 'TRANSPORT_HTTP_401', 'terminal'],
    [
      429,
      'application/json',
      '{"adcp_error":{"code":"RATE_LIMITED","message":"slow down","retry_after":12}}',
      'RATE_LIMITED',
      'transient',
    ],
    [200, 'text/html', '<html>Welcome to our website</html>', 'PROTOCOL_VIOLATION', 'terminal'],
    [200, 'application/json', 'not json{', 'PROTOCOL_VIOLATION', 'terminal'],
  ])('MCP client against HTTP %d %s → %s', async (status, contentType, body, code, recovery) => {
    const url = await serve((_req, res) => {
      res.writeHead(status, { 'content-type': contentType });
      res.end(body);
    });
    expect(classifyTransportFailure(await mcpFailure(url))).toMatchObject({ code, recovery });
  });
});

describe('retryDelayMs', () => {
  const transient: AdcpError = { code: 'TRANSPORT_HTTP_503', message: 'x', recovery: 'transient' };
  const policy = { initialMs: 1_000, maxMs: 60_000, coefficient: 2, jitter: 0.25 };

  test.each([
    [1, 1_000],
    [2, 2_000],
    [3, 4_000],
    [6, 32_000],
    [7, 60_000],
    [20, 60_000],
  ])('attempt %d without jitter effect (random 0.5) waits %d ms', (attempt, expected) => {
    expect(retryDelayMs(transient, attempt, policy, () => 0.5)).toBe(expected);
  });

  test('jitter spreads the delay over ×[0.75, 1.25]', () => {
    expect(retryDelayMs(transient, 3, policy, () => 0)).toBe(3_000);
    expect(retryDelayMs(transient, 3, policy, () => 0.999999)).toBe(5_000);
    for (let draw = 0; draw < 1; draw += 0.01) {
      const delay = retryDelayMs(transient, 4, policy, () => draw);
      expect(delay).toBeGreaterThanOrEqual(6_000);
      expect(delay).toBeLessThanOrEqual(10_000);
    }
  });

  test('jitter applies on top of the cap, so the longest wait is maxMs × 1.25', () => {
    expect(retryDelayMs(transient, 50, policy, () => 0.999999)).toBe(75_000);
  });

  test("the seller's retry_after wins over the schedule, exactly and without jitter", () => {
    const error: AdcpError = { ...transient, retryAfterSeconds: 12 };
    expect(retryDelayMs(error, 1, policy, () => 0)).toBe(12_000);
    expect(retryDelayMs(error, 9, policy, () => 0.999)).toBe(12_000);
    expect(retryDelayMs({ ...transient, retryAfterSeconds: 0 }, 5, policy, () => 0.5)).toBe(0);
  });

  test('RATE_LIMITED without retry_after waits 60 s; with one, it waits what the seller said', () => {
    const limited: AdcpError = { code: 'RATE_LIMITED', message: 'x', recovery: 'transient' };
    expect(retryDelayMs(limited, 1, policy, () => 0)).toBe(60_000);
    expect(retryDelayMs(limited, 4, policy, () => 0.9)).toBe(60_000);
    expect(retryDelayMs({ ...limited, retryAfterSeconds: 5 }, 1, policy, () => 0.9)).toBe(5_000);
  });

  test('an attempt below 1 or not a number counts as the first', () => {
    expect(retryDelayMs(transient, 0, policy, () => 0.5)).toBe(1_000);
    expect(retryDelayMs(transient, Number.NaN, policy, () => 0.5)).toBe(1_000);
  });

  test('the default policy is §4.4: 1 s → 60 s, doubling, ±25 %', () => {
    expect(DEFAULT_RETRY_BACKOFF).toEqual(policy);
  });
});

describe('describeError', () => {
  test('code, message, field and suggestion on one line', () => {
    expect(
      describeError({
        code: 'BUDGET_TOO_LOW',
        message: 'Minimum is 5000',
        field: 'packages[0].budget',
        suggestion: 'Raise the budget',
        recovery: 'correctable',
      } as AdcpError),
    ).toBe('BUDGET_TOO_LOW: Minimum is 5000 (field: packages[0].budget; suggestion: Raise the budget)');
  });

  test('no parentheses when there is nothing to add', () => {
    expect(describeError({ code: 'ACCOUNT_SUSPENDED', message: 'Account suspended' })).toBe(
      'ACCOUNT_SUSPENDED: Account suspended',
    );
  });

  test('retry_after is shown when the seller gave one', () => {
    expect(describeError({ code: 'RATE_LIMITED', message: 'Slow down', retryAfterSeconds: 30 })).toBe(
      'RATE_LIMITED: Slow down (retry after: 30 s)',
    );
  });
});
