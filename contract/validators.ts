/**
 * Update validators' checks, without zod. Every module the workflow bundle imports is instantiated once per workflow
 * execution (Temporal isolates module state per workflow), so a schema library costs memory in every parked
 * operation. These plain checks apply exactly the rules of protocol/requests.ts (`providedInputSchema`,
 * `actorSchema`, `principalSchema`, `cancelRequestSchema`, `credentialsRefreshSchema`), which the API and the typed
 * client use; test/unit/validators.test.ts holds the two equal.
 */
const ACTOR_MAX = 200;
const PRINCIPAL_MAX = 400;
const REASON_MAX = 2000;

/** Why `value` is not a valid answer to an input-required question, or undefined when it is. */
export function providedInputProblem(value: unknown): string | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    return 'input: must be an object with an input field';
  const provided = value as Record<string, unknown>;
  for (const key of Object.keys(provided)) {
    if (key !== 'input' && key !== 'providedBy' && key !== 'requestId' && key !== 'principal')
      return `${key}: is not a field of an answer`;
  }
  const input = provided.input;
  if (!input || typeof input !== 'object' || Array.isArray(input))
    return 'input: must be a JSON object of the fields to send to the seller';
  if (Object.keys(input).length === 0) return 'input: must not be empty: send the fields the seller asked for';
  if (provided.providedBy !== undefined) {
    const problem = actorProblem(provided.providedBy);
    if (problem) return `providedBy: ${problem}`;
  }
  if (provided.requestId !== undefined && typeof provided.requestId !== 'string') return 'requestId: must be a string';
  return principalField(provided.principal);
}

/** Why `value` is not an authenticated principal as the audit trail records it (`tenant/id`), or undefined. */
export function principalProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length < 1) return 'must not be empty';
  if (value.length > PRINCIPAL_MAX) return `must be at most ${PRINCIPAL_MAX} characters`;
  return undefined;
}

function principalField(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const problem = principalProblem(value);
  return problem ? `principal: ${problem}` : undefined;
}

/** Why `value` is not a cancel request (who asked, why, and the authenticated principal), or undefined. */
export function cancelRequestProblem(value: unknown): string | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    return 'cancel: must be an object with requestedBy and reason';
  const request = value as Record<string, unknown>;
  for (const key of Object.keys(request)) {
    if (key !== 'requestedBy' && key !== 'reason' && key !== 'principal')
      return `${key}: is not a field of a cancel request`;
  }
  const actor = actorProblem(request.requestedBy);
  if (actor) return `requestedBy: ${actor}`;
  if (typeof request.reason !== 'string') return 'reason: must be a string';
  if (request.reason.length < 1) return 'reason: must not be empty';
  if (request.reason.length > REASON_MAX) return `reason: must be at most ${REASON_MAX} characters`;
  return principalField(request.principal);
}

/** Why `value` is not a credentials-refreshed notice, or undefined when it is. */
export function credentialsRefreshProblem(value: unknown): string | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    return 'credentials: must be an object with refreshedBy';
  const refresh = value as Record<string, unknown>;
  for (const key of Object.keys(refresh)) {
    if (key !== 'refreshedBy' && key !== 'principal') return `${key}: is not a field of a credentials refresh`;
  }
  const actor = actorProblem(refresh.refreshedBy);
  if (actor) return `refreshedBy: ${actor}`;
  return principalField(refresh.principal);
}

/** Why `value` does not name who did something (a person or a system), or undefined when it does. */
export function actorProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length < 1) return 'must not be empty';
  if (value.length > ACTOR_MAX) return `must be at most ${ACTOR_MAX} characters`;
  return undefined;
}

/** The most buys one reconcile request may offer an operation (`OperationReconcileRequest.among`). */
export const MAX_RECONCILE_AMONG = 500;
