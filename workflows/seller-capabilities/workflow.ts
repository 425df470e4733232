/**
 * One workflow per seller that keeps its capabilities (get_adcp_capabilities + tools/list), refreshed every
 * `refreshEveryMs` (sooner after a failure) and at once on `capabilitiesChanged`. It never ends on its own; it
 * continues as new every few dozen refreshes, carrying its state. Each change is published in the memo
 * (SELLER_CAPABILITIES_MEMO) so the gateway can answer without a worker.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type { CapabilityActivities } from '../../activities/capabilities';
import {
  DEFAULT_CAPABILITIES_REFRESH_MS,
  DEFAULT_CAPABILITIES_RETRY_MS,
  SELLER_CAPABILITIES_MEMO,
  type SellerCapabilitiesInput,
  type SellerCapabilitiesState,
  capabilitiesChangedSignal,
  sellerCapabilitiesQuery,
} from '../../contract/seller-capabilities';

const REFRESHES_PER_RUN = 50;
const MAX_NOTICES = 20;

const { fetchSellerCapabilities } = proxyActivities<CapabilityActivities>({
  // Two bounded calls (30 s each): the capabilities and the tool list.
  startToCloseTimeout: '90s',
  heartbeatTimeout: '15s',
  retry: { initialInterval: '2s', maximumInterval: '20s', maximumAttempts: 3, nonRetryableErrorTypes: ['ConfigError'] },
});

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export async function adcpSellerCapabilities(input: SellerCapabilitiesInput): Promise<SellerCapabilitiesState> {
  const refreshEveryMs = input.refreshEveryMs ?? DEFAULT_CAPABILITIES_REFRESH_MS;
  const retryEveryMs = input.retryEveryMs ?? DEFAULT_CAPABILITIES_RETRY_MS;
  const state: SellerCapabilitiesState = input.carried ?? {
    sellerId: input.sellerId,
    consecutiveFailures: 0,
    refreshes: 0,
    notices: [],
  };
  let refreshRequested = true;
  if (input.carried) refreshRequested = false;

  setHandler(sellerCapabilitiesQuery, () => state);
  setHandler(capabilitiesChangedSignal, (notice) => {
    if (!notice || typeof notice.requestedBy !== 'string') return;
    state.notices.push({
      at: iso(Date.now()),
      requestedBy: notice.requestedBy,
      ...(notice.reason ? { reason: notice.reason } : {}),
    });
    if (state.notices.length > MAX_NOTICES) state.notices.splice(0, state.notices.length - MAX_NOTICES);
    refreshRequested = true;
  });

  function publish(): void {
    upsertMemo({ [SELLER_CAPABILITIES_MEMO]: state });
    const parts = [
      `seller ${state.sellerId}: ${state.reachable === false ? 'unreachable' : state.reachable ? 'reachable' : 'not asked yet'}`,
    ];
    if (state.capabilities)
      parts.push(`AdCP ${state.capabilities.wireVersion}, ${state.capabilities.tasks.length} tasks`);
    if (state.lastError) parts.push(`last error ${state.lastError.code}`);
    setCurrentDetails(parts.join(' · '));
  }

  let runRefreshes = 0;
  for (;;) {
    if (refreshRequested) {
      refreshRequested = false;
      const outcome = await fetchSellerCapabilities({ sellerId: state.sellerId });
      state.refreshes += 1;
      runRefreshes += 1;
      state.lastCheckedAt = outcome.at;
      state.reachable = outcome.reachable;
      state.circuit = outcome.circuit;
      if (outcome.latencyMs !== undefined) state.latencyMs = outcome.latencyMs;
      if (outcome.capabilities) {
        state.lastRefreshChanged = JSON.stringify(outcome.capabilities) !== JSON.stringify(state.capabilities);
        state.capabilities = outcome.capabilities;
        state.capabilitiesAt = outcome.at;
        state.consecutiveFailures = 0;
        delete state.lastError;
      } else {
        state.consecutiveFailures += 1;
        state.lastError = { ...(outcome.error ?? { code: 'UNKNOWN', message: 'no answer' }), at: outcome.at };
      }
      const waitMs = outcome.capabilities ? refreshEveryMs : retryEveryMs;
      state.nextRefreshAt = iso(Date.now() + waitMs);
      publish();
    }
    if (runRefreshes >= REFRESHES_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      return await continueAsNew<typeof adcpSellerCapabilities>({ ...input, carried: state });
    }
    const dueMs = state.nextRefreshAt ? Date.parse(state.nextRefreshAt) - Date.now() : 0;
    const timedOut = !(await condition(() => refreshRequested, Math.max(dueMs, 1)));
    if (timedOut) refreshRequested = true;
  }
}
