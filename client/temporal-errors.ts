/**
 * How the API and the typed client tell Temporal's gRPC failures apart: unreachable or too slow (retry later) versus
 * a refusal that names a fact about the workflow (it has ended). One place, so the gateway's operations API and its
 * webhook receiver answer the same way.
 */
import { WorkflowUpdateRPCTimeoutOrCancelledError, isGrpcServiceError } from '@temporalio/client';

/** gRPC status codes (grpc/status.proto); @grpc/grpc-js is not a direct dependency. */
const GRPC = { CANCELLED: 1, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5, FAILED_PRECONDITION: 9, UNAVAILABLE: 14 } as const;

/** The gRPC error behind a Temporal client error: the error itself, or the `cause` the client wrapped it in. */
export function grpcCodeOf(error: unknown): number | undefined {
  if (isGrpcServiceError(error)) return error.code;
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  if (isGrpcServiceError(cause)) return cause.code;
  return undefined;
}

/**
 * Temporal did not answer in time or cannot be reached: the caller should retry later (HTTP 503 with Retry-After).
 * An update whose RPC timed out or was cancelled (no worker took it in time) is that too, whatever gRPC code its
 * cause carries. CANCELLED counts as well: the native transport ends a call that way when the connection closes under
 * it (Temporal going away mid-call), and the request was never refused.
 */
export function isTemporalUnavailable(error: unknown): boolean {
  if (error instanceof WorkflowUpdateRPCTimeoutOrCancelledError) return true;
  const code = grpcCodeOf(error);
  return code === GRPC.UNAVAILABLE || code === GRPC.DEADLINE_EXCEEDED || code === GRPC.CANCELLED;
}

/**
 * The workflow was in no state to take the request; for an update, that it closed while (or before) the update was
 * delivered (gRPC FAILED_PRECONDITION or NOT_FOUND on the update RPC).
 */
export function isWorkflowClosedRefusal(error: unknown): boolean {
  const code = grpcCodeOf(error);
  return code === GRPC.FAILED_PRECONDITION || code === GRPC.NOT_FOUND;
}
