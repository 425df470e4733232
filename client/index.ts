/**
 * The installable client (`import { OrchestratorClient } from 'adcp-orchestrator'`): what backend code needs to start,
 * follow, answer and cancel AdCP operations and media buys through Temporal, and the data converters its Temporal
 * Client must use. Nothing of the worker, the activities or the HTTP API is reachable from here; the message and
 * state types are also published on their own as `adcp-orchestrator/types`.
 */
export {
  IdempotencyConflictError,
  OperationEndedError,
  OperationNotFoundError,
  OperationParamsError,
  OperationRejectedError,
  OperationRequestError,
  SellerNotFoundError,
} from './operation-errors';
export {
  OrchestratorClient,
  requestFingerprint,
  stateFromClosure,
  type OperationView,
  type OrchestratorClientOptions,
  type StartOperationRequest,
  type StartedOperation,
  type StateSource,
} from './orchestrator-client';
export {
  MediaBuyChangeRefusedError,
  MediaBuyClient,
  MediaBuyNotFoundError,
  MediaBuyRequestError,
  type CreateMediaBuyRequest,
  type MediaBuyClientOptions,
  type MediaBuyView,
} from './media-buy-client';
export {
  DEFAULT_LIST_LIMIT,
  MAX_LIST_LIMIT,
  OPERATION_STATUSES,
  OperationListFilterError,
  listOperations,
  parseOperationListQuery,
  type ListOperationsOptions,
  type ListedStatus,
  type OperationList,
  type OperationListFilters,
  type OperationListRow,
} from './operation-list';
export type { PendingActivityState, PendingActivityView } from './pending-activity';
export { GZIP_ENCODING, GZIP_THRESHOLD_BYTES, GzipPayloadCodec, dataConverter } from './payload-codec';
export {
  ENCRYPTED_ENCODING,
  EncryptionPayloadCodec,
  PayloadDecryptionError,
  encryptedDataConverter,
  loadPayloadKeys,
  payloadCodecs,
  type PayloadKeys,
} from './encryption-codec';
export type { ReconciliationReport } from '../contract/reconciliation';
export * from './types';
