/**
 * The gateway's error model (api/problems.ts): what every failure becomes. Nothing is a 500: Temporal's failures,
 * an update whose RPC timed out or was cancelled (whatever gRPC code its cause carries), and anything unexpected are
 * 503 with Retry-After; the caller's faults are 4xx; every body is RFC 9457 with the stable code.
 */
import { WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import { Problem, problemBody, toProblem } from '../../api/problems';
import { JsonBodyError } from '../../api/body';
import { OperationEndedError, OperationNotFoundError } from '../../client/operation-errors';
import { MediaBuyChangeRefusedError } from '../../client/media-buy-client';
import { isTemporalUnavailable } from '../../client/temporal-errors';

/** A gRPC error as grpc-js makes them (what isGrpcServiceError recognises). */
function grpcError(code: number, details: string): Error {
  return Object.assign(new Error(`${code} ${details}`), { code, details, metadata: { get: (): Buffer[] => [] } });
}

test.each([
  ['DEADLINE_EXCEEDED', 4],
  ['CANCELLED', 1],
  ['UNKNOWN', 2],
])('an update RPC that timed out or was cancelled (cause %s) is 503 TEMPORAL_UNAVAILABLE, not 500', (_name, code) => {
  const error = new WorkflowUpdateRPCTimeoutOrCancelledError('Timed out or cancelled waiting for Update', {
    cause: grpcError(code, 'the update RPC'),
  });
  expect(isTemporalUnavailable(error)).toBe(true);
  const problem = toProblem(error);
  expect({ status: problem.status, code: problem.code }).toEqual({ status: 503, code: 'TEMPORAL_UNAVAILABLE' });
  expect(problem.options.headers).toMatchObject({ 'Retry-After': '5' });
});

test.each([
  ['UNAVAILABLE', 14, true],
  ['DEADLINE_EXCEEDED', 4, true],
  // The native transport ends a call CANCELLED when the connection closes under it.
  ['CANCELLED', 1, true],
  ['NOT_FOUND', 5, false],
  ['FAILED_PRECONDITION', 9, false],
])('a plain gRPC %s is Temporal unavailable: %s', (_name, code, unavailable) => {
  expect(isTemporalUnavailable(grpcError(code, 'a call'))).toBe(unavailable);
});

test('anything unexpected is a 503 with Retry-After, never a 500', () => {
  for (const error of [new TypeError("Cannot read properties of undefined (reading 'toNumber')"), 'a string', null]) {
    const problem = toProblem(error);
    expect({ status: problem.status, code: problem.code }).toEqual({ status: 503, code: 'SERVICE_UNAVAILABLE' });
  }
});

test("the caller's faults keep their status and code", () => {
  expect(toProblem(new OperationNotFoundError('adcp-x-1'))).toMatchObject({ status: 404, code: 'OPERATION_NOT_FOUND' });
  const ended = toProblem(new OperationEndedError('adcp-x-1', 'COMPLETED', 'completed'));
  expect(ended).toMatchObject({ status: 409, code: 'OPERATION_ENDED' });
  expect(problemBody(ended).error).toMatchObject({
    code: 'OPERATION_ENDED',
    execution: 'COMPLETED',
    status: 'completed',
  });
  expect(toProblem(new JsonBodyError(400, 'NESTING_TOO_DEEP', 'deep'))).toMatchObject({
    status: 400,
    code: 'NESTING_TOO_DEEP',
  });
  expect(toProblem({ type: 'entity.too.large', status: 413, limit: 1024 })).toMatchObject({
    status: 413,
    code: 'PAYLOAD_TOO_LARGE',
  });
});

test('a change the buy refused for now (continuing as new) is 503 with Retry-After; its other refusals are 409', () => {
  const later = toProblem(new MediaBuyChangeRefusedError('SERVICE_UNAVAILABLE', 'send the same request again'));
  expect({ status: later.status, code: later.code }).toEqual({ status: 503, code: 'SERVICE_UNAVAILABLE' });
  expect(later.options.headers).toEqual({ 'Retry-After': '1' });
  expect(toProblem(new MediaBuyChangeRefusedError('INVALID_STATE', 'paused already'))).toMatchObject({
    status: 409,
    code: 'INVALID_STATE',
  });
});

test('a problem body has the RFC 9457 members, the stable code and the older error object', () => {
  const body = problemBody(new Problem(400, 'INVALID_REQUEST', 'params: required', { field: 'params' }));
  expect(body).toEqual({
    type: 'urn:adcp-orchestrator:problem:INVALID_REQUEST',
    title: 'Bad Request',
    status: 400,
    detail: 'params: required',
    code: 'INVALID_REQUEST',
    field: 'params',
    error: { code: 'INVALID_REQUEST', message: 'params: required', field: 'params' },
  });
});
