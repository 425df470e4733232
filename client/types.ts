/**
 * The message and state types of the orchestrator's workflows (`adcp-orchestrator/types`): operation and media-buy
 * state, their inputs, the signal/query/update definitions (stable names, shared with the workflows), and the request
 * shapes the client validates. Type-only imports of these pull no client code at run time beyond the definitions.
 */
export * from '../contract/operation';
export * from '../contract/media-buy';
export * from '../protocol/requests';
export type * from '../protocol';
