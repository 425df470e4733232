/**
 * The errors the typed client throws for operations, in a module of their own so the client's modules (the client,
 * the operation list) share them without importing each other. The HTTP API maps each to its status.
 */

export class OperationRequestError extends Error {
  override readonly name = 'OperationRequestError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The params break a rule no seller should be asked to judge (protocol/requests.ts checkMediaBuyParams: a flight that
 * ends before it starts, a negative budget): refused before any workflow starts (HTTP 422 INVALID_PARAMS).
 */
export class OperationParamsError extends OperationRequestError {}

export class OperationNotFoundError extends Error {
  override readonly name = 'OperationNotFoundError';
  constructor(readonly operationId: string) {
    super(`No operation ${operationId}.`);
  }
}

/** No seller with that id is configured (agents.json). */
export class SellerNotFoundError extends Error {
  override readonly name = 'SellerNotFoundError';
  constructor(readonly sellerId: string) {
    super(`No seller "${sellerId}" is configured; the sellers are listed in agents.json (ADCP_AGENTS_FILE).`);
  }
}

export class IdempotencyConflictError extends Error {
  override readonly name = 'IdempotencyConflictError';
  constructor(readonly operationId: string) {
    super(
      `Operation ${operationId} exists with a different request. An idempotency key names one request; use a new key for a new one.`,
    );
  }
}

/** The workflow refused a request (its validator said why), e.g. input for an operation that asked for none. */
export class OperationRejectedError extends Error {
  override readonly name: string = 'OperationRejectedError';
}

/** The operation has ended, so it takes no more requests (also when it ended while the request was on its way). */
export class OperationEndedError extends OperationRejectedError {
  override readonly name = 'OperationEndedError';
  constructor(
    readonly operationId: string,
    /** How the workflow execution closed (COMPLETED, TERMINATED, ...). */
    readonly execution: string,
    /** The operation's final AdCP status, when known. */
    readonly status: string | undefined,
  ) {
    super(
      `Operation ${operationId} has ended${status ? ` ${status}` : ''} (${execution}); it takes no more requests. Read it with GET /v1/operations/${operationId}.`,
    );
  }
}
