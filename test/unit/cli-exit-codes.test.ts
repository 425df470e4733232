/**
 * The CLI's exit codes for each error a command can meet, and the human line for the call in flight. The child-process
 * tests (test/integration/cli.test.ts) check the same codes end to end; this pins every mapping, including the ones
 * that are hard to provoke there.
 */
import {
  IdempotencyConflictError,
  OperationEndedError,
  OperationNotFoundError,
  OperationRejectedError,
  OperationRequestError,
  SellerNotFoundError,
} from '../../client/operation-errors';
import { OperationListFilterError } from '../../client/operation-list';
import { ConfigError } from '../../config/sellers';
import { CliError, EXIT, exitFor } from '../../cli/context';
import { activityLine, endedBadly } from '../../cli/format';

/** gRPC status codes (grpc/status.proto); @grpc/grpc-js is not a direct dependency. */
const GrpcStatus = { DEADLINE_EXCEEDED: 4, UNAVAILABLE: 14 } as const;

function grpcError(code: number): Error {
  return Object.assign(new Error(`${code} UNAVAILABLE: connection refused`), {
    code,
    details: 'connection refused',
    metadata: {},
  });
}

test.each<[string, unknown, number]>([
  ['operation not found', new OperationNotFoundError('adcp-get_products-x'), EXIT.NOT_FOUND],
  ['seller not found', new SellerNotFoundError('nobody'), EXIT.NOT_FOUND],
  ['invalid request', new OperationRequestError('params', 'params must be a JSON object'), EXIT.USAGE],
  ['invalid list filter', new OperationListFilterError('status', 'status must be one of ...'), EXIT.USAGE],
  ['bad agents file', new ConfigError('agents.json is invalid'), EXIT.USAGE],
  ['refused by the operation', new OperationRejectedError('no question is open'), EXIT.FAILED],
  ['operation ended', new OperationEndedError('adcp-get_products-x', 'COMPLETED', 'completed'), EXIT.FAILED],
  ['idempotency conflict', new IdempotencyConflictError('adcp-get_products-x'), EXIT.FAILED],
  ['Temporal unavailable', grpcError(GrpcStatus.UNAVAILABLE), EXIT.TEMPORAL_UNAVAILABLE],
  ['Temporal too slow', grpcError(GrpcStatus.DEADLINE_EXCEEDED), EXIT.TEMPORAL_UNAVAILABLE],
  ["the CLI's own", new CliError('Temporal at x is unavailable', EXIT.TEMPORAL_UNAVAILABLE), EXIT.TEMPORAL_UNAVAILABLE],
  ['anything else', new Error('boom'), EXIT.FAILED],
])('%s', (_name, error, code) => {
  expect(exitFor(error).code).toBe(code);
  expect(exitFor(error).message.length).toBeGreaterThan(0);
});

test('the call-in-flight line names the attempt, the last error and when the next retry runs', () => {
  const now = Date.parse('2026-11-30T09:00:00Z');
  const line = activityLine(
    {
      activityId: '2',
      activityType: 'sendCall',
      state: 'scheduled',
      attempt: 3,
      maximumAttempts: 5,
      lastFailure: { message: 'TRANSPORT_HTTP_503: The seller answered HTTP 503', type: 'TransportError' },
      nextAttemptAt: '2026-11-30T09:00:04.000Z',
      waitingOnSeller: false,
      paused: false,
    },
    now,
  );
  expect(line).toBe(
    'sendCall attempt 3/5 (scheduled) · last error: TRANSPORT_HTTP_503: The seller answered HTTP 503 [TransportError] · next retry 2026-11-30 09:00:04Z (in 4 s)',
  );
});

test('an operation ended badly: failed, rejected or canceled, or a workflow that did not complete', () => {
  const view = (status: string | undefined, running: boolean, execution: string) =>
    ({
      operationId: 'x',
      running,
      execution,
      live: true,
      stateSource: 'query',
      ...(status ? { state: { status } } : {}),
    }) as never;
  expect(endedBadly(view('completed', false, 'COMPLETED'))).toBe(false);
  expect(endedBadly(view('submitted', true, 'RUNNING'))).toBe(false);
  for (const status of ['failed', 'rejected', 'canceled'])
    expect(endedBadly(view(status, false, 'COMPLETED'))).toBe(true);
  expect(endedBadly(view('failed', false, 'FAILED'))).toBe(true);
  expect(endedBadly(view(undefined, false, 'TERMINATED'))).toBe(true);
});
