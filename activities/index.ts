/**
 * The worker's activities, from one factory: the worker wires real dependencies, tests pass their own.
 *
 * By concern, each from a factory that takes what it uses:
 *   calls.ts           planCall, sendCall: an operation's call, planned once and sent as planned
 *   polls.ts           readTask, awaitTaskMoveOnCadence: the seller's task read once, or polled on a cadence
 *   recovery.ts        findLostTask, cancelAtSeller: a lost call looked up, a cancel told to the seller
 *   resource.ts        readResource: the buy itself, by id or found in the seller's listing
 *   notifications.ts   deliverNotification: signed notifications to the buyer's systems
 *   capabilities.ts    fetchSellerCapabilities: what a seller says it can do
 *   media-buy.ts       readMediaBuy, pullDelivery: a buy's reads
 *   campaign.ts        readCampaignBuys, changeCampaignBuy, syncCampaignCreatives: a campaign's reach into its buys
 *   campaign-allocation.ts  readBuyGovernance: the governance evidence a budget move reports
 *   reconciliation.ts  listOpenOperations, listOpenMediaBuys, listSellerTasks, signalOperations
 * What they share: seller-call.ts (one guarded call), seller-access.ts, failures.ts, heartbeat.ts, timeouts.ts,
 * answer-size.ts, task-reader.ts, schema-check.ts (answers against their version's schemas), request-shaping.ts
 * (fields a seller refuses); the seller client (seller-client.ts) and what wraps it (stored-capabilities.ts,
 * reporting-credentials.ts, seller-spans.ts).
 *
 * The operation's activities and its workflow share contract/activities.ts.
 */
import type { Client } from '@temporalio/client';
import type { SellerRegistry } from '../config/sellers';
import type { NotificationSigningKey } from '../config/notification-key';
import { tracedSellerClient } from './seller-spans';
import { DEFAULT_MAX_ANSWER_BYTES, storableWithin } from './answer-size';
import { type CallActivities, createCallActivities } from './calls';
import { createCampaignActivities } from './campaign';
import { createCampaignAllocationActivities } from './campaign-allocation';
import { createCapabilityActivities } from './capabilities';
import { CircuitBreakerRegistry } from './circuit-breaker';
import { createMediaBuyActivities } from './media-buy';
import { type NotificationActivities, createNotificationActivities } from './notifications';
import { type PollActivities, createPollActivities } from './polls';
import { SellerDescriptionCache } from './read-strategy';
import { createReconciliationActivities } from './reconciliation';
import { type RecoveryActivities, createRecoveryActivities } from './recovery';
import { ShapingMemory } from './request-shaping';
import { type ResourceActivities, createResourceActivities } from './resource';
import { createAnswerCheck, sharedSchemaChecker } from './schema-check';
import { withReportingCredentials } from './reporting-credentials';
import { createGuardedCall, logCircuitTransition } from './seller-call';
import { type SellerClient, createSdkSellerClient } from './seller-client';
import { type StoredCapabilitiesLookup, withStoredWireVersion } from './stored-capabilities';
import { createDeclinedTaskWatcherActivities, createTaskListingActivities } from './task-listing';
import { createTaskReader } from './task-reader';
import { DEFAULT_RETRY_BACKOFF, type RetryBackoffPolicy } from './transport-errors';
import { callTimeouts } from './timeouts';

export { DEFAULT_MAX_ANSWER_BYTES, answerTooLarge } from './answer-size';
export { logCircuitTransition } from './seller-call';
export { DEFAULT_CALL_TIMEOUT_MS, MAX_READ_TIMEOUT_MS, callTimeouts } from './timeouts';

export interface ActivityDependencies {
  sellers: SellerRegistry;
  seller?: SellerClient;
  /** Base URL sellers use to reach the gateway; without it no webhooks are registered and polling carries it all. */
  publicBaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  /** Hard bound of one protocol call (ADCP_CALL_TIMEOUT_MS). */
  callTimeoutMs?: number;
  /** Hard bound of one read; default: the call timeout, at most 2 minutes (see callTimeouts). */
  readTimeoutMs?: number;
  now?: () => number;
  random?: () => number;
  /**
   * How failed seller calls are retried when the seller names no retry_after (ADCP_RETRY_INITIAL_INTERVAL_MS,
   * ADCP_RETRY_MAX_INTERVAL_MS); default DEFAULT_RETRY_BACKOFF, 1 s doubling to 60 s. Decided by the worker, in the
   * activity's failure: workflow code never reads it.
   */
  retryBackoff?: RetryBackoffPolicy;
  /** Per-seller circuit breakers (one registry per worker process); built from `circuitBreaker` when absent. */
  breakers?: CircuitBreakerRegistry;
  circuitBreaker?: { failureThreshold?: number; coolOffMs?: number };
  /** Largest answer (gzip-compressed, as the payload codec stores it) an activity may return. Default 1.9 MB. */
  maxAnswerBytes?: number;
  /** Our RFC 9421 key for notifications to the buyer's systems (config/notification-key.ts); none: none are sent. */
  notificationKey?: NotificationSigningKey;
  /** The sellers' stored capabilities (stored-capabilities.ts): wire version and read strategy; none: probe. */
  storedCapabilities?: StoredCapabilitiesLookup;
  /** Campaign and reconciliation activities reach workflows through it; without it they are not registered. */
  client?: Client;
}

export function createActivities(deps: ActivityDependencies) {
  const { sellers, client } = deps;
  const env = deps.env ?? process.env;
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;
  const backoff = deps.retryBackoff ?? DEFAULT_RETRY_BACKOFF;
  const timeouts = callTimeouts(deps.callTimeoutMs, deps.readTimeoutMs);
  // One breaker per seller for the whole worker: operations and capability refreshes see the same circuit.
  const breakers =
    deps.breakers ?? new CircuitBreakerRegistry({ ...deps.circuitBreaker, now, onTransition: logCircuitTransition });
  const sdkSeller = deps.seller ?? createSdkSellerClient();
  // An operation's calls: per-buy reporting credentials added at the call (never in history), the wire version the
  // seller's stored capabilities name, and each call in its own client span (a no-op unless tracing is on).
  const seller = tracedSellerClient(
    withStoredWireVersion(withReportingCredentials(sdkSeller, env), deps.storedCapabilities),
  );
  const descriptions = new SellerDescriptionCache(10 * 60_000, now, deps.storedCapabilities);
  const guarded = createGuardedCall({ sellers, env, breakers, now, random, backoff });
  const ensureStorable = storableWithin(deps.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES);
  // Answers checked against the schemas of the version each seller declares (warn mode; rc.2 sellers are not).
  const checkAnswer = createAnswerCheck({
    checker: sharedSchemaChecker(),
    wireVersionOf: async (sellerId) =>
      sellers.get(sellerId).adcp_version === 'rc.2'
        ? 'rc.2'
        : (await deps.storedCapabilities?.get(sellerId))?.wireVersion,
  });
  // What every read needs: the guarded call, the read strategy with the seller's "not now", the size check.
  const reads = {
    guarded,
    readWithRetryAfter: createTaskReader({ seller, descriptions, random, backoff }),
    ensureStorable,
    timeouts,
    checkAnswer,
    random,
    backoff,
  };
  const { publicBaseUrl, notificationKey, readTimeoutMs } = deps;
  // The fields each seller refuses on reads, learned once per process for the operations' and the buys' reads.
  const shapingMemory = new ShapingMemory();
  return {
    ...createCallActivities({
      sellers,
      seller,
      guarded,
      ensureStorable,
      timeouts,
      env,
      random,
      backoff,
      publicBaseUrl,
      checkAnswer,
    }),
    ...createPollActivities(reads),
    ...createRecoveryActivities({ ...reads, seller, descriptions }),
    ...createResourceActivities({ ...reads, seller, shapingMemory }),
    ...createNotificationActivities({ sellers, notificationKey }),
    ...createCapabilityActivities({ sellers, seller: sdkSeller, env, breakers }),
    ...createMediaBuyActivities({
      sellers,
      seller: sdkSeller,
      env,
      shapingMemory,
      random,
      retryBackoff: backoff,
      ...(readTimeoutMs ? { readTimeoutMs } : {}),
    }),
    ...(client && createCampaignActivities({ client })),
    ...(client && createCampaignAllocationActivities({ client })),
    ...(client &&
      createReconciliationActivities({
        sellers,
        client,
        seller: sdkSeller,
        env,
        ...(deps.storedCapabilities ? { storedCapabilities: deps.storedCapabilities } : {}),
      })),
    // The operation workflow registers with its seller's task watcher on every worker: one without a client declines.
    ...(client
      ? createTaskListingActivities({ ...deps, client, seller: sdkSeller, env })
      : createDeclinedTaskWatcherActivities('no Temporal client on this worker')),
  };
}

/** What the operation's workflows proxy: the calls, polls and recovery of contract/activities.ts, and notifications. */
export type OperationActivities = CallActivities &
  PollActivities &
  RecoveryActivities &
  ResourceActivities &
  NotificationActivities;
