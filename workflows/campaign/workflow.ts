/**
 * One campaign = one workflow, from a brief to every seller's buy. It runs a discovery (a child `adcpDiscovery`),
 * takes a selection (a person's `selectProducts` Update, or the input's allocation policy), waits at the approval
 * gate (`approveCampaign`, recording who), then starts one `adcpMediaBuy` child per chosen seller with a buy key
 * from the campaign and the seller, so a retried start finds the same buy and never buys twice. After that it holds
 * the campaign: `changeCampaign` pauses, resumes or cancels every buy (fanned out by activity, since a workflow
 * cannot send Updates) or changes one buy's budget under the budget guard; it ends when every buy has ended.
 *
 * Handlers record and validate; the loop acts, one change at a time. The budget guard runs in the Update's
 * validator and reserves in the handler before its first await, so concurrent changes are checked one after
 * another against what is already reserved: the sum of committed budgets never exceeds the campaign's.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  ChildWorkflowFailure,
  type CancellationScope,
  ParentClosePolicy,
  allHandlersFinished,
  condition,
  continueAsNew,
  executeChild,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { CampaignActivities, ChangeCampaignBuyOutcome } from '../../activities/campaign';
import { SA_SELLER, SA_CAMPAIGN, SA_MEDIA_BUY_STATUS, SA_PRINCIPAL, SA_TENANT } from '../../config/search-attributes';
import {
  type ApprovalRequest,
  type CampaignAlertKind,
  type CampaignBuy,
  type CampaignCarried,
  type CampaignChangeAnswer,
  type CampaignChangeRecord,
  type CampaignChangeRequest,
  type CampaignInput,
  type CampaignPhase,
  type CampaignState,
  type SelectionRequest,
  approveCampaignUpdate,
  campaignBuyKey,
  campaignStateQuery,
  changeCampaignUpdate,
  selectProductsUpdate,
  setCampaignCreativesUpdate,
  type BuyDigest,
  cents,
  digestOf,
} from '../../contract/campaign';
import {
  assignmentsFor,
  buyParamsFor,
  coverageFor,
  mergeLibrary,
  pacingOf,
  plannedSpend,
  sumDelivery,
  validateCreatives,
  guardedTotal,
  type ProductIndex,
  indexCatalogue,
  productKey,
  linesBySeller,
  policySelection,
  sumBudgets,
  validateCampaignChange,
} from './machine';
import {
  type ProposalIndex,
  buyProposalOf,
  indexProposals,
  proposalCreatesSettling,
  proposalsOfSelection,
  selectionTotal,
  validateSelectionWithProposals,
} from './proposal-rules';
import { type ProposalBuyContext, followProposalBuy, stopForCancel } from './proposals';
import {
  DISCOVERY_WORKFLOW_TYPE,
  type DiscoveryInput,
  type DiscoveryState,
  discoveryWorkflowId,
} from '../../contract/discovery';
import { buyGovernanceOf, syncCampaignPlan } from '../governance/workflow';
import {
  MEDIA_BUY_WORKFLOW_TYPE,
  type MediaBuyInput,
  type MediaBuyState,
  type ReportingFrequency,
  mediaBuyWorkflowId,
} from '../../contract/media-buy';

export const CAMPAIGN_STATE_MEMO = 'adcp_campaign';
const MAX_CHANGES = 50;
const MAX_ALERTS = 50;
const HOUR = 3_600_000;
/** The first poll of the buys after a change; the wait doubles while nothing changes, up to the interval. */
const FIRST_POLL_MS = 2_000;
const DEFAULT_POLL_INTERVAL_MS = HOUR;
const DEFAULT_UNDER_DELIVERY_THRESHOLD = 0.8;
const DEFAULT_UNDER_DELIVERY_GRACE_MS = 24 * HOUR;
/** Continue as new well before Temporal's suggestion: a 90-day campaign stays a chain of bounded runs. */
const DEFAULT_HISTORY_EVENT_LIMIT = 2_000;
const MAX_SYNC_ATTEMPTS = 3;
const ENDED_BUY_STATUSES = new Set(['completed', 'rejected', 'canceled', 'create_failed']);

const { readCampaignBuys } = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 3 },
});

// The Update waits for the buy's sync_creatives operation; the update ID makes a retried attempt the same sync.
const { syncCampaignCreatives } = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '5m',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 3 },
});

const { changeCampaignBuy } = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '30s',
  // A buy still being created is retried (BuyNotReady) for as long as a create may take to answer.
  scheduleToCloseTimeout: '24h',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function errorOf(failure: unknown): { code: string; message: string } {
  let cause: unknown = failure;
  while (cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) cause = cause.cause;
  if (cause instanceof ApplicationFailure) return { code: cause.type ?? 'FAILED', message: cause.message };
  return { code: 'FAILED', message: cause instanceof Error ? cause.message : String(cause) };
}

/** The AdcpTenant/AdcpPrincipal search attributes of the campaign's children: none without a tenant. */
function tenantAttributes(input: CampaignInput) {
  if (input.tenant === undefined) return [];
  return [
    { key: SA_TENANT, value: input.tenant },
    ...(input.principal !== undefined ? [{ key: SA_PRINCIPAL, value: input.principal }] : []),
  ];
}

export async function adcpCampaign(input: CampaignInput): Promise<CampaignState> {
  const info = workflowInfo();
  const indexed = input.indexed ?? info.typedSearchAttributes.get(SA_CAMPAIGN) !== undefined;
  const carried = input.carried;
  const state: CampaignState = carried?.state ?? {
    campaignKey: input.campaignKey,
    brief: input.brief,
    totalBudget: input.totalBudget,
    ...(input.currency ? { currency: input.currency } : {}),
    flight: input.flight,
    phase: 'discovering',
    requestedBy: input.requestedBy,
    discoveryId: discoveryWorkflowId(input.campaignKey),
    buys: {},
    committedBudget: 0,
    changes: [],
    changeCount: 0,
    alerts: [],
    startedAt: iso(Date.now()),
    updatedAt: iso(Date.now()),
    // Tenancy: only campaigns created with a tenant carry these fields.
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
    ...(input.principal !== undefined ? { principal: input.principal } : {}),
    ...(input.creatives && input.creatives.length > 0
      ? {
          library: {
            version: 1,
            creatives: input.creatives,
            updatedAt: iso(Date.now()),
            updatedBy: input.requestedBy,
          },
        }
      : {}),
  };
  if (carried) state.run = (state.run ?? 1) + 1;
  /** The formats of the chosen products (what coverage needs of the catalogue; carried across runs). */
  const productFormats = new Map<string, string[]>(carried?.productFormats ?? []);
  /** Each buy's packages as last read (for creative assignments). */
  const packagesOf = new Map<string, BuyDigest['packages']>();
  let products: ProductIndex = new Map();
  const formatsOf = (key: string) => productFormats.get(key) ?? products.get(key)?.formats;
  let proposals: ProposalIndex = new Map();
  /** Sellers whose buy by proposal this run follows until it settles (not carried: a continued run has no follower). */
  const followedProposals = new Set<string>();
  const queue: { record: CampaignChangeRecord; request: CampaignChangeRequest }[] = [];
  const finished = new Map<number, CampaignChangeAnswer>();
  let changeSequence = carried?.changeSequence ?? 0;
  let cancelRequested: CampaignChangeRecord | undefined;
  /**
   * A cancel was asked for: it stops the buys by proposal not yet made. A finalize in flight is canceled and its buy
   * ends `canceled` with nothing committed, none starts a buy after the cancel, a buy being started is waited for (the
   * fan-out then cancels it), and the campaign closes only after the canceled finalize has ended.
   */
  const canceledForProposals = () => cancelRequested !== undefined;
  /** The finalize calls in flight, by seller (campaign-proposals.ts). */
  const finalizing = new Map<string, CancellationScope>();
  /** Sellers whose buy by proposal is being started (its child workflow not yet confirmed). */
  const startingProposalBuys = new Set<string>();

  function touch(): void {
    state.updatedAt = iso(Date.now());
    state.committedBudget = guardedTotal(state.buys);
  }

  function memoOf() {
    return {
      phase: state.phase,
      committedBudget: state.committedBudget,
      totalBudget: state.totalBudget,
      buys: Object.keys(state.buys),
    };
  }
  let lastMemo = '';

  function publish(): void {
    touch();
    const memo = memoOf();
    lastMemo = JSON.stringify(memo);
    upsertMemo({ [CAMPAIGN_STATE_MEMO]: memo });
    describeCampaign();
  }

  /** After a poll of the buys: the memo is written only when it changed, so a quiet poll adds no event for it. */
  function publishChanges(): void {
    touch();
    if (JSON.stringify(memoOf()) !== lastMemo) publish();
    else describeCampaign();
  }

  function describeCampaign(): void {
    const ended = Object.values(state.buys).filter((buy) => buy.finalStatus).length;
    const open = state.alerts.filter((entry) => !entry.clearedAt).length;
    const pacing = state.delivery?.pacing;
    setCurrentDetails(
      `campaign ${state.campaignKey}: ${state.phase} · ${Object.keys(state.buys).length} buys (${ended} ended) · committed ${state.committedBudget}/${state.totalBudget}` +
        (state.delivery ? ` · spend ${state.delivery.spend}${pacing != null ? ` (pacing ${pacing})` : ''}` : '') +
        (open > 0 ? ` · ${open} open alerts` : ''),
    );
  }

  /** Raise an alert once per key (kind, seller, creative) until it is cleared: kept in state, and a log line. */
  function alert(kind: CampaignAlertKind, sellerId: string, note: string, creativeId?: string): void {
    const key = [kind, sellerId, ...(creativeId ? [creativeId] : [])].join(':');
    if (state.alerts.some((entry) => (entry.key ?? `${entry.kind}:${entry.sellerId}`) === key && !entry.clearedAt))
      return;
    state.alerts.push({ at: iso(Date.now()), kind, sellerId, note, key, ...(creativeId ? { creativeId } : {}) });
    if (state.alerts.length > MAX_ALERTS) {
      const oldestCleared = state.alerts.findIndex((entry) => entry.clearedAt);
      state.alerts.splice(oldestCleared >= 0 ? oldestCleared : 0, 1);
    }
    log.warn(`Campaign alert raised: ${kind}`, { campaignKey: state.campaignKey, sellerId, creativeId, note });
  }

  function clearAlert(kind: CampaignAlertKind, sellerId: string, note: string, creativeId?: string): void {
    const key = [kind, sellerId, ...(creativeId ? [creativeId] : [])].join(':');
    const open = state.alerts.find((entry) => entry.key === key && !entry.clearedAt);
    if (!open) return;
    open.clearedAt = iso(Date.now());
    log.info(`Campaign alert cleared: ${kind}`, { campaignKey: state.campaignKey, sellerId, creativeId, note });
  }

  // ---- handlers ------------------------------------------------------------------------------------------------
  setHandler(campaignStateQuery, () => state);

  setHandler(
    selectProductsUpdate,
    (request: SelectionRequest) => {
      state.selection = { ...request, at: iso(Date.now()) };
      delete state.approval; // a new selection needs a new approval
      state.phase = 'awaiting_approval';
      publish();
      return { accepted: true as const, committedBudget: selectionTotal(request) };
    },
    {
      validator: (request) => {
        // Without proposals exactly validateSelection (campaign-proposal-rules.ts).
        const verdict = validateSelectionWithProposals(
          state.phase,
          state.totalBudget,
          products,
          proposals,
          request,
          Date.now(),
        );
        if (!verdict.ok) throw new Error(`${verdict.code}: ${verdict.message}`);
      },
    },
  );

  setHandler(
    approveCampaignUpdate,
    (request: ApprovalRequest) => {
      state.approval = { ...request, at: iso(Date.now()) };
      publish();
      return {
        accepted: true as const,
        buys: [
          ...linesBySeller(state.selection!.lines).keys(),
          ...proposalsOfSelection(state.selection).map((accepted) => accepted.sellerId),
        ],
      };
    },
    {
      validator: (request) => {
        if (!request || typeof request.approvedBy !== 'string' || request.approvedBy.trim() === '')
          throw new Error('INVALID_REQUEST: approvedBy must say who approves the spend.');
        if (state.phase !== 'awaiting_approval' || !state.selection)
          throw new Error(
            `INVALID_STATE: The campaign is ${state.phase}; approval comes after a selection and before buying.`,
          );
        if (state.approval) throw new Error(`INVALID_STATE: Already approved by ${state.approval.approvedBy}.`);
      },
    },
  );

  setHandler(
    changeCampaignUpdate,
    async (request: CampaignChangeRequest) => {
      // Re-checked here, before any await: the validator of a later Update sees this reservation.
      const verdict = validateCampaignChange(state, request);
      const sequence = ++changeSequence;
      const record: CampaignChangeRecord = {
        sequence,
        kind: request.kind,
        requestedBy: request.requestedBy,
        ...(request.reason ? { reason: request.reason } : {}),
        ...(request.sellerId ? { sellerId: request.sellerId } : {}),
        ...(request.budget !== undefined ? { budget: request.budget } : {}),
        requestedAt: iso(Date.now()),
        outcome: 'queued',
        buys: {},
      };
      state.changes.push(record);
      state.changeCount += 1;
      if (state.changes.length > MAX_CHANGES) state.changes.shift();
      if (!verdict.ok) {
        record.outcome = 'failed';
        record.finishedAt = record.requestedAt;
        return { sequence, outcome: record.outcome, committedBudget: state.committedBudget, buys: {} };
      }
      if (request.kind === 'budget') {
        const buy = state.buys[request.sellerId!];
        if (request.budget! > buy.committedBudget)
          buy.pendingBudget = Math.max(buy.pendingBudget ?? 0, request.budget!);
        touch();
      }
      if (request.kind === 'cancel') cancelRequested ??= record;
      queue.push({ record, request });
      await condition(() => finished.has(sequence));
      return finished.get(sequence)!;
    },
    {
      validator: (request) => {
        const verdict = validateCampaignChange(state, request);
        if (!verdict.ok) throw new Error(`${verdict.code}: ${verdict.message}`);
      },
    },
  );

  setHandler(
    setCampaignCreativesUpdate,
    (request) => {
      const creatives = mergeLibrary(state.library?.creatives ?? [], request);
      state.library = {
        version: (state.library?.version ?? 0) + 1,
        creatives,
        updatedAt: iso(Date.now()),
        updatedBy: request.requestedBy,
      };
      log.info('Campaign creative library changed', {
        campaignKey: state.campaignKey,
        version: state.library.version,
        creatives: creatives.length,
      });
      publish();
      return { version: state.library.version, creatives: creatives.length };
    },
    {
      validator: (request) => {
        const verdict = validateCreatives(request);
        if (!verdict.ok) throw new Error(`${verdict.code}: ${verdict.message}`);
        if (state.phase === 'canceled' || state.phase === 'ended')
          throw new Error(`INVALID_STATE: The campaign is ${state.phase}; its library no longer changes.`);
      },
    },
  );

  // A continued campaign holds its buys: discovery, selection and buying happened in an earlier run.
  if (carried) return await hold();

  // ---- discovery -------------------------------------------------------------------------------------------------
  publish();
  // Governance: the buyer's plan goes to the governance agent while planning (workflows/governance/workflow.ts).
  if (input.governance) {
    state.governance = await syncCampaignPlan(input, indexed);
    publish();
  }
  const discoveryInput: DiscoveryInput = {
    discoveryKey: input.campaignKey,
    brief: input.brief,
    sellerIds: input.sellerIds,
    ...(input.skipped ? { skipped: input.skipped } : {}),
    timeBudgetMs: input.timeBudgetMs,
    ...(input.discoveryParams ? { params: input.discoveryParams } : {}),
    ...(input.preferences ? { preferences: input.preferences } : {}),
    requestedBy: input.requestedBy,
    indexed,
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
    ...(input.principal !== undefined ? { principal: input.principal } : {}),
  };
  const discovery: DiscoveryState = await executeChild(DISCOVERY_WORKFLOW_TYPE, {
    workflowId: state.discoveryId,
    args: [discoveryInput],
    parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    staticSummary: `discovery for campaign ${input.campaignKey}`,
    ...(input.tenant !== undefined ? { memo: { tenant: input.tenant } } : {}),
    ...(indexed
      ? {
          typedSearchAttributes: [{ key: SA_CAMPAIGN, value: input.campaignKey }, ...tenantAttributes(input)],
        }
      : {}),
  });
  products = indexCatalogue(discovery.catalogue);
  proposals = indexProposals(discovery.proposals ?? []);
  state.discovery = {
    status: discovery.status,
    partial: discovery.partial,
    sellers: discovery.sellers,
    incomplete: discovery.incomplete,
    products: discovery.catalogue.length,
  };
  for (const seller of Object.values(discovery.sellers)) {
    if (seller.status === 'failed' || seller.status === 'timed_out')
      alert('seller_unavailable', seller.sellerId, `discovery: ${seller.status} (${seller.error?.message ?? ''})`);
  }

  // ---- selection and approval ------------------------------------------------------------------------------------
  if (input.allocation && !cancelRequested) {
    const lines = policySelection(discovery.catalogue, input.totalBudget, input.allocation);
    if (lines.length > 0) {
      state.selection = { lines, selectedBy: `policy:${input.allocation.kind}`, at: iso(Date.now()), byPolicy: true };
      state.phase = 'awaiting_approval';
    } else state.phase = 'selecting';
  } else state.phase = 'selecting';
  publish();
  await condition(() => !!state.approval || !!cancelRequested);

  // ---- buying ------------------------------------------------------------------------------------------------------
  function buyInputOf(buy: CampaignBuy): MediaBuyInput {
    const productFrequencies = buy.lines
      .map((line) => products.get(productKey(line.sellerId, line.productId))?.reportingFrequencies ?? [])
      .filter((frequencies) => frequencies.length > 0) as ReportingFrequency[][];
    return {
      buyKey: buy.buyKey,
      sellerId: buy.sellerId,
      params: buyParamsFor(input, buy.lines),
      requestedBy: state.approval!.approvedBy,
      indexed,
      // The campaign's buys are its tenant's: their AdcpTenant, their seller credentials, their reads.
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
      ...(input.governance ? { governance: buyGovernanceOf(input.campaignKey, input.governance) } : {}),
      ...(input.reportingBaseUrl
        ? {
            reporting: {
              url: `${input.reportingBaseUrl}/webhooks/adcp-reporting/${encodeURIComponent(buy.workflowId)}`,
              ...(productFrequencies.length > 0 ? { productFrequencies } : {}),
            },
          }
        : {}),
    };
  }

  function startBuyChild(buy: CampaignBuy, buyInput: MediaBuyInput) {
    return startChild(MEDIA_BUY_WORKFLOW_TYPE, {
      workflowId: buy.workflowId,
      args: [buyInput],
      // A buy is money at a seller: it outlives anything that happens to the campaign's workflow.
      parentClosePolicy: ParentClosePolicy.ABANDON,
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      staticSummary: `media buy ${buy.buyKey} at ${buy.sellerId} for campaign ${input.campaignKey}`,
      ...(input.tenant !== undefined ? { memo: { tenant: input.tenant } } : {}),
      ...(indexed
        ? {
            typedSearchAttributes: [
              { key: SA_SELLER, value: buy.sellerId },
              { key: SA_MEDIA_BUY_STATUS, value: 'creating' },
              { key: SA_CAMPAIGN, value: input.campaignKey },
              ...tenantAttributes(input),
            ],
          }
        : {}),
    });
  }

  function recordBuyEnded(buy: CampaignBuy, ended: MediaBuyState): void {
    // The buy's last word (settled delivery, creative reviews) for the campaign's view; state only, no commands.
    fold(buy, digestOf(buy.sellerId, buy.workflowId, ended));
    buy.finalStatus = ended.status;
    if (ended.failure?.message) buy.finalMessage = ended.failure.message;
    if (ended.status === 'rejected') alert('buy_rejected', buy.sellerId, 'the seller rejected the buy');
    if (ended.status === 'create_failed')
      alert('buy_failed', buy.sellerId, ended.failure?.message ?? 'create_media_buy failed');
    if (ended.status === 'rejected' || ended.status === 'create_failed') buy.committedBudget = 0;
    delete buy.pendingBudget;
    publish();
  }

  function recordBuyFailed(buy: CampaignBuy, failure: unknown): void {
    buy.finalStatus = 'workflow_failed';
    buy.finalMessage = errorOf(failure).message;
    alert('buy_failed', buy.sellerId, buy.finalMessage);
    publish();
  }

  const proposalContext: ProposalBuyContext = {
    input,
    indexed,
    followed: followedProposals,
    currencyOf: (sellerId) => {
      const accepted = state.buys[sellerId]?.proposal?.proposalId;
      return accepted ? proposals.get(productKey(sellerId, accepted))?.budgetGuidance?.currency : undefined;
    },
    startBuy: startBuyChild,
    ended: recordBuyEnded,
    failed: recordBuyFailed,
    alert,
    publish,
    canceled: canceledForProposals,
    finalizing,
    starting: startingProposalBuys,
  };

  if (!cancelRequested) {
    state.phase = 'buying';
    publish();
    for (const line of state.selection!.lines) {
      const key = productKey(line.sellerId, line.productId);
      productFormats.set(key, products.get(key)?.formats ?? []);
    }
    for (const [sellerId, lines] of linesBySeller(state.selection!.lines)) {
      const buyKey = campaignBuyKey(input.campaignKey, sellerId);
      const workflowId = mediaBuyWorkflowId(buyKey);
      state.buys[sellerId] = { sellerId, buyKey, workflowId, lines, committedBudget: sumBudgets(lines) };
    }
    // Sellers bought by proposal (campaign-proposals.ts): same per-seller key, the proposal's budget is committed.
    for (const accepted of proposalsOfSelection(state.selection)) {
      const buyKey = campaignBuyKey(input.campaignKey, accepted.sellerId);
      state.buys[accepted.sellerId] = {
        sellerId: accepted.sellerId,
        buyKey,
        workflowId: mediaBuyWorkflowId(buyKey),
        lines: [],
        committedBudget: cents(accepted.budget),
        proposal: buyProposalOf(accepted, proposals.get(productKey(accepted.sellerId, accepted.proposalId))),
      };
    }
    publish();
    for (const buy of Object.values(state.buys)) {
      const buyInput = buyInputOf(buy);
      if (buy.proposal) {
        // Finalized if draft, bought, quoted again on REQUOTE_REQUIRED: followed in the background (campaign-proposals.ts).
        void followProposalBuy(proposalContext, buy, buyInputOf);
        continue;
      }
      try {
        const child = await startBuyChild(buy, buyInput);
        buy.startedAt = iso(Date.now());
        // Followed in the background: a buy that ends (rejected, failed, settled) is recorded as it happens.
        void child.result().then(
          (ended: MediaBuyState) => recordBuyEnded(buy, ended),
          (failure: unknown) => recordBuyFailed(buy, failure),
        );
      } catch (failure) {
        // Started before (a reset campaign): the buy exists under its key; it is not bought again.
        if (!(failure instanceof WorkflowExecutionAlreadyStartedError)) throw failure;
        buy.startedAt = iso(Date.now());
      }
    }
    state.phase = 'live';
    publish();
  }
  return await hold();

  // ---- changes ---------------------------------------------------------------------------------------------------
  async function fanOut(
    record: CampaignChangeRecord,
    request: CampaignChangeRequest,
    sellerIds: string[],
  ): Promise<void> {
    const outcomes = await Promise.all(
      sellerIds.map(async (sellerId): Promise<[string, ChangeCampaignBuyOutcome]> => {
        const buy = state.buys[sellerId];
        if (buy.finalStatus && request.kind !== 'budget')
          return [sellerId, { outcome: 'not_needed', status: buy.finalStatus }];
        try {
          return [
            sellerId,
            await changeCampaignBuy({
              workflowId: buy.workflowId,
              kind: request.kind,
              requestedBy: request.requestedBy,
              ...(request.reason ? { reason: request.reason } : {}),
              ...(request.budget !== undefined ? { budget: request.budget } : {}),
              updateId: `${input.campaignKey}.change-${record.sequence}.${sellerId}`,
            }),
          ];
        } catch (failure) {
          return [sellerId, { outcome: 'failed', error: errorOf(failure) }];
        }
      }),
    );
    for (const [sellerId, outcome] of outcomes) record.buys[sellerId] = outcome;
  }

  async function runChange(queued: { record: CampaignChangeRecord; request: CampaignChangeRequest }): Promise<void> {
    const { record, request } = queued;
    record.outcome = 'running';
    publish();
    if (request.kind === 'budget') {
      const buy = state.buys[request.sellerId!];
      await fanOut(record, request, [buy.sellerId]);
      const applied = record.buys[buy.sellerId]?.outcome === 'applied';
      if (applied) buy.committedBudget = cents(request.budget!);
      // The raise in flight is released either way; a later one still queued keeps its own reservation.
      const stillQueued = queue
        .filter(
          (other) => other !== queued && other.request.kind === 'budget' && other.request.sellerId === buy.sellerId,
        )
        .map((other) => other.request.budget!);
      const highest = Math.max(0, ...stillQueued);
      if (highest > buy.committedBudget) buy.pendingBudget = highest;
      else delete buy.pendingBudget;
      record.outcome = applied ? 'applied' : 'failed';
    } else {
      if (request.kind === 'cancel' && canceledForProposals()) {
        // Buys by proposal not yet made are stopped: nothing was bought, and no buy starts after this. A finalize in
        // flight is canceled (its operation ends once its seller call has answered; the campaign closes after it), and
        // a buy being started is waited for, so that the fan-out below cancels it at the seller.
        for (const [sellerId, scope] of finalizing) {
          scope.cancel();
          stopForCancel({ publish }, state.buys[sellerId]);
        }
        await condition(() => startingProposalBuys.size === 0);
      }
      const sellerIds = Object.keys(state.buys);
      await fanOut(record, request, sellerIds);
      const outcomes = Object.values(record.buys).map((buy) => buy.outcome);
      const good = outcomes.filter((outcome) => outcome === 'applied' || outcome === 'not_needed').length;
      record.outcome = good === outcomes.length ? 'applied' : good > 0 ? 'partial' : 'failed';
      if (request.kind === 'pause' && good > 0) state.phase = 'paused';
      if (request.kind === 'resume' && good > 0) state.phase = 'live';
      if (request.kind === 'cancel') state.phase = 'canceled';
    }
    record.finishedAt = iso(Date.now());
    touch();
    finished.set(record.sequence, {
      sequence: record.sequence,
      outcome: record.outcome,
      committedBudget: state.committedBudget,
      buys: record.buys,
    });
    publish();
  }

  // ---- following the buys: creatives, delivery and pacing, alerts ------------------------------------------------
  // Declarations only below: this part of the function is reached through hoisting (hold), never run in order.

  /** Whether a buy should get the library now (it exists at the seller, has not ended, lacks this version). */
  function needsSync(buy: CampaignBuy, version: number, retry: boolean): boolean {
    if (buy.finalStatus || !buy.mediaBuyId || ENDED_BUY_STATUSES.has(buy.status ?? '')) return false;
    const sync = buy.creativeSync;
    if (!sync || sync.version < version) return true;
    return retry && sync.version === version && sync.outcome === 'failed' && (sync.attempts ?? 1) < MAX_SYNC_ATTEMPTS;
  }

  function libraryWaiting(): boolean {
    const library = state.library;
    if (!library || library.creatives.length === 0) return false;
    return Object.values(state.buys).some((buy) => needsSync(buy, library.version, false));
  }

  /** Record what a buy's workflow says; true when something that calls for a sooner poll changed. */
  function fold(buy: CampaignBuy, digest: BuyDigest): boolean {
    if (!digest.found) return false;
    const before = JSON.stringify([buy.status, buy.mediaBuyId, buy.creatives]);
    if (digest.status) buy.status = digest.status;
    if (digest.mediaBuyId) buy.mediaBuyId = digest.mediaBuyId;
    if (digest.startTime) buy.startTime = digest.startTime;
    if (digest.endTime) buy.endTime = digest.endTime;
    buy.creatives = digest.creatives;
    packagesOf.set(buy.sellerId, digest.packages);
    if (digest.mediaBuyId)
      buy.delivery = {
        impressions: digest.totals?.impressions ?? 0,
        spend: digest.totals?.spend ?? 0,
        ...(digest.totals?.clicks !== undefined ? { clicks: digest.totals.clicks } : {}),
        plannedSpend: buy.delivery?.plannedSpend ?? 0,
        pacing: buy.delivery?.pacing ?? null,
        at: iso(Date.now()),
      };
    if (digest.status === 'rejected')
      alert('buy_rejected', buy.sellerId, digest.failure ?? 'the seller rejected the buy');
    // A buy by proposal being followed (campaign-proposals.ts) ends when its follower says: a refused create may be
    // quoted again under the next key.
    const followed = followedProposals.has(buy.sellerId);
    if (digest.status === 'create_failed' && !followed)
      alert('buy_failed', buy.sellerId, digest.failure ?? 'create_media_buy failed');
    // A buy that has settled ends for the campaign too (in a continued run there is no child handle to say so).
    if (digest.done && !buy.finalStatus && !followed) {
      buy.finalStatus = digest.status;
      if (digest.failure) buy.finalMessage = digest.failure;
      if (digest.status === 'rejected' || digest.status === 'create_failed') buy.committedBudget = 0;
      delete buy.pendingBudget;
    }
    if (digest.seller) {
      const down = digest.seller.reachable === false || digest.seller.circuit === 'open';
      const note = digest.seller.error ?? `circuit ${digest.seller.circuit ?? 'unknown'}`;
      if (down) alert('seller_unavailable', buy.sellerId, `seller down: ${note}`);
      else if (digest.seller.reachable === true)
        clearAlert('seller_unavailable', buy.sellerId, 'seller reachable again');
    }
    return JSON.stringify([buy.status, buy.mediaBuyId, buy.creatives]) !== before;
  }

  /** Send the library to every buy that lacks its version (through the buy's attachCreatives Update). */
  async function syncLibrary(): Promise<boolean> {
    const library = state.library;
    if (!library || library.creatives.length === 0) return false;
    const targets = Object.values(state.buys).filter((buy) => needsSync(buy, library.version, true));
    if (targets.length === 0) return false;
    await Promise.all(
      targets.map(async (buy) => {
        const attempts = buy.creativeSync?.version === library.version ? (buy.creativeSync.attempts ?? 1) + 1 : 1;
        let outcome: ChangeCampaignBuyOutcome;
        try {
          outcome = await syncCampaignCreatives({
            workflowId: buy.workflowId,
            creatives: library.creatives,
            assignments: assignmentsFor(packagesOf.get(buy.sellerId) ?? [], buy.lines, formatsOf, library.creatives),
            requestedBy: `campaign:${state.campaignKey}`,
            updateId: `${input.campaignKey}.creatives-v${library.version}.${buy.sellerId}.${attempts}`,
          });
        } catch (failure) {
          outcome = { outcome: 'failed', error: errorOf(failure) };
        }
        const result = outcome.outcome === 'applied' ? 'applied' : outcome.outcome === 'refused' ? 'refused' : 'failed';
        buy.creativeSync = {
          version: library.version,
          outcome: result,
          at: iso(Date.now()),
          attempts,
          ...(outcome.error ? { error: `${outcome.error.code}: ${outcome.error.message}` } : {}),
        };
        if (result !== 'applied')
          log.warn('Campaign creative sync did not apply', {
            campaignKey: state.campaignKey,
            sellerId: buy.sellerId,
            version: library.version,
            outcome: result,
            error: buy.creativeSync.error,
          });
      }),
    );
    return true;
  }

  /** Coverage, delivery and pacing per buy and in total, and the alerts they raise or clear. */
  function evaluate(): void {
    const nowMs = Date.now();
    const threshold = input.monitoring?.underDeliveryThreshold ?? DEFAULT_UNDER_DELIVERY_THRESHOLD;
    const graceMs = input.monitoring?.underDeliveryGraceMs ?? DEFAULT_UNDER_DELIVERY_GRACE_MS;
    const library = state.library?.creatives ?? [];
    const deliveries = [];
    for (const buy of Object.values(state.buys)) {
      buy.coverage = coverageFor(buy.lines, formatsOf, library);
      for (const [creativeId, review] of Object.entries(buy.creatives ?? {})) {
        const rejected = review.status === 'rejected' || review.action === 'failed';
        if (rejected)
          alert(
            'creative_rejected',
            buy.sellerId,
            `${creativeId}: ${review.error ?? review.status ?? review.action}`,
            creativeId,
          );
        else if (review.status === 'approved') clearAlert('creative_rejected', buy.sellerId, 'approved', creativeId);
      }
      if (!buy.delivery || buy.status === 'rejected' || buy.status === 'create_failed') continue;
      const startMs = Date.parse(buy.startTime ?? state.flight.startTime);
      const endMs = Date.parse(buy.endTime ?? state.flight.endTime);
      const planned = plannedSpend(buy.committedBudget, startMs, endMs, nowMs);
      buy.delivery.plannedSpend = planned;
      buy.delivery.pacing = nowMs >= startMs ? pacingOf(buy.delivery.spend, planned) : null;
      deliveries.push(buy.delivery);
      const pacing = buy.delivery.pacing;
      if (buy.status === 'active' && nowMs >= startMs + graceMs && pacing !== null && pacing < threshold)
        alert(
          'under_delivery',
          buy.sellerId,
          `pacing ${pacing}: spend ${buy.delivery.spend} of ${planned} planned by now (threshold ${threshold})`,
        );
      else if (pacing !== null && pacing >= threshold)
        clearAlert('under_delivery', buy.sellerId, `pacing ${pacing} (threshold ${threshold})`);
    }
    if (deliveries.length > 0) state.delivery = sumDelivery(deliveries, iso(nowMs));
  }

  /** One poll of the buys: read them (one activity), sync the library where it is missing, evaluate. */
  async function poll(): Promise<boolean> {
    let changed = false;
    const open = Object.values(state.buys).filter((buy) => !buy.finalStatus);
    if (open.length > 0) {
      try {
        const digests = await readCampaignBuys({
          buys: open.map((buy) => ({ sellerId: buy.sellerId, workflowId: buy.workflowId })),
        });
        for (const digest of digests)
          if (state.buys[digest.sellerId]) changed = fold(state.buys[digest.sellerId], digest) || changed;
      } catch (failure) {
        log.warn('Campaign could not read its buys; polling again later', {
          campaignKey: state.campaignKey,
          error: errorOf(failure).message,
        });
      }
    }
    changed = (await syncLibrary()) || changed;
    evaluate();
    state.monitoring = { polls: (state.monitoring?.polls ?? 0) + 1, lastPollAt: iso(Date.now()) };
    publishChanges();
    return changed;
  }

  // ---- holding the campaign: changes, creatives, delivery, alerts ------------------------------------------------
  async function hold(): Promise<CampaignState> {
    const allBuysEnded = () => Object.values(state.buys).every((buy) => buy.finalStatus !== undefined);
    const monitored = Object.keys(state.buys).length > 0;
    const pollIntervalMs = Math.max(input.monitoring?.intervalMs ?? DEFAULT_POLL_INTERVAL_MS, FIRST_POLL_MS);
    let pollDelayMs = FIRST_POLL_MS;
    let nextPollAtMs = Date.now() + (carried ? 0 : FIRST_POLL_MS);
    while ((state.phase as CampaignPhase) !== 'canceled') {
      if (queue.length > 0) {
        const next = queue[0];
        await runChange(next);
        queue.shift();
        continue;
      }
      if (Object.keys(state.buys).length === 0 || allBuysEnded()) break;
      if (!monitored) {
        await condition(() => queue.length > 0 || allBuysEnded());
        continue;
      }
      if (Date.now() >= nextPollAtMs || libraryWaiting()) {
        const changed = await poll();
        pollDelayMs = changed ? FIRST_POLL_MS : Math.min(pollDelayMs * 2, pollIntervalMs);
        nextPollAtMs = Date.now() + pollDelayMs;
        continue;
      }
      const info = workflowInfo();
      if (
        (info.historyLength >= (input.historyEventLimit ?? DEFAULT_HISTORY_EVENT_LIMIT) ||
          info.continueAsNewSuggested) &&
        // Not while a buy by proposal may still be quoted again: its follower does not carry over.
        !proposalCreatesSettling(state.buys, followedProposals)
      ) {
        await condition(allHandlersFinished);
        if (queue.length === 0) {
          const next: CampaignCarried = { state, changeSequence, productFormats: [...productFormats] };
          const { creatives: _creatives, carried: _carried, ...rest } = input;
          log.info('Campaign continues as new', {
            campaignKey: state.campaignKey,
            run: state.run ?? 1,
            historyLength: info.historyLength,
          });
          // The buys are abandoned children: they keep running, and the next run follows them by their IDs.
          return await continueAsNew<typeof adcpCampaign>({ ...rest, indexed, carried: next });
        }
        continue;
      }
      const libraryVersion = state.library?.version ?? 0;
      await condition(
        () => queue.length > 0 || allBuysEnded() || (state.library?.version ?? 0) !== libraryVersion,
        Math.max(nextPollAtMs - Date.now(), 1),
      );
    }
    // A cancel before any buy existed: nothing to fan out.
    if (cancelRequested && !finished.has(cancelRequested.sequence)) {
      state.phase = 'canceled';
      cancelRequested.outcome = 'applied';
      cancelRequested.finishedAt = iso(Date.now());
      for (const queued of queue) {
        queued.record.outcome = queued.record === cancelRequested ? 'applied' : 'failed';
        finished.set(queued.record.sequence, {
          sequence: queued.record.sequence,
          outcome: queued.record.outcome,
          committedBudget: state.committedBudget,
          buys: {},
        });
      }
      queue.length = 0;
    }
    // Requests queued behind the cancel are answered (not run): the campaign has ended.
    for (const queued of queue.splice(0)) {
      queued.record.outcome = 'failed';
      finished.set(queued.record.sequence, {
        sequence: queued.record.sequence,
        outcome: 'failed',
        committedBudget: state.committedBudget,
        buys: {},
      });
    }
    if ((state.phase as CampaignPhase) !== 'canceled') state.phase = 'ended';
    publish();
    // A finalize the cancel stopped ends once its seller call has answered: the campaign leaves nothing running there.
    if (canceledForProposals()) await condition(() => finalizing.size === 0);
    // A canceled campaign ends once every buy has answered its cancel; the buys' own workflows (abandoned children) go
    // on to settle their delivery with a lifetime pull, as they do for any canceled buy.
    await condition(allHandlersFinished);
    return state;
  }
}
