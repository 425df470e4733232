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
  ParentClosePolicy,
  allHandlersFinished,
  condition,
  executeChild,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { CampaignActivities, ChangeCampaignBuyOutcome } from '../activities/campaign';
import { SA_AGENT, SA_CAMPAIGN, SA_MEDIA_BUY_STATUS, SA_PRINCIPAL, SA_TENANT } from '../config/search-attributes';
import {
  type ApprovalRequest,
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
} from './campaign-definitions';
import {
  buyParamsFor,
  cents,
  guardedTotal,
  type ProductIndex,
  indexCatalogue,
  productKey,
  linesBySeller,
  policySelection,
  sumBudgets,
  validateCampaignChange,
  validateSelection,
} from './campaign-state';
import {
  DISCOVERY_WORKFLOW_TYPE,
  type DiscoveryInput,
  type DiscoveryState,
  discoveryWorkflowId,
} from './discovery-definitions';
import {
  MEDIA_BUY_WORKFLOW_TYPE,
  type MediaBuyInput,
  type MediaBuyState,
  type ReportingFrequency,
  mediaBuyWorkflowId,
} from './media-buy-definitions';

export const CAMPAIGN_STATE_MEMO = 'adcp_campaign';
const MAX_CHANGES = 50;
const MAX_ALERTS = 50;

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
  const state: CampaignState = {
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
    // Tenancy (#12): only campaigns created with a tenant carry these fields (older histories are unchanged).
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
    ...(input.principal !== undefined ? { principal: input.principal } : {}),
  };
  let products: ProductIndex = new Map();
  const queue: { record: CampaignChangeRecord; request: CampaignChangeRequest }[] = [];
  const finished = new Map<number, CampaignChangeAnswer>();
  let changeSequence = 0;
  let cancelRequested: CampaignChangeRecord | undefined;

  function touch(): void {
    state.updatedAt = iso(Date.now());
    state.committedBudget = guardedTotal(state.buys);
  }

  function publish(): void {
    touch();
    upsertMemo({
      [CAMPAIGN_STATE_MEMO]: {
        phase: state.phase,
        committedBudget: state.committedBudget,
        totalBudget: state.totalBudget,
        buys: Object.keys(state.buys),
      },
    });
    const ended = Object.values(state.buys).filter((buy) => buy.finalStatus).length;
    setCurrentDetails(
      `campaign ${state.campaignKey}: ${state.phase} · ${Object.keys(state.buys).length} buys (${ended} ended) · committed ${state.committedBudget}/${state.totalBudget}`,
    );
  }

  function alert(kind: CampaignState['alerts'][number]['kind'], agentId: string, note: string): void {
    state.alerts.push({ at: iso(Date.now()), kind, agentId, note });
    if (state.alerts.length > MAX_ALERTS) state.alerts.shift();
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
      return { accepted: true as const, committedBudget: sumBudgets(request.lines) };
    },
    {
      validator: (request) => {
        const verdict = validateSelection(state.phase, state.totalBudget, products, request);
        if (!verdict.ok) throw new Error(`${verdict.code}: ${verdict.message}`);
      },
    },
  );

  setHandler(
    approveCampaignUpdate,
    (request: ApprovalRequest) => {
      state.approval = { ...request, at: iso(Date.now()) };
      publish();
      return { accepted: true as const, buys: [...linesBySeller(state.selection!.lines).keys()] };
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
        ...(request.agentId ? { agentId: request.agentId } : {}),
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
        const buy = state.buys[request.agentId!];
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

  // ---- discovery -------------------------------------------------------------------------------------------------
  publish();
  const discoveryInput: DiscoveryInput = {
    discoveryKey: input.campaignKey,
    brief: input.brief,
    agentIds: input.agentIds,
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
  state.discovery = {
    status: discovery.status,
    partial: discovery.partial,
    sellers: discovery.sellers,
    incomplete: discovery.incomplete,
    products: discovery.catalogue.length,
  };
  for (const seller of Object.values(discovery.sellers)) {
    if (seller.status === 'failed' || seller.status === 'timed_out')
      alert('seller_unavailable', seller.agentId, `discovery: ${seller.status} (${seller.error?.message ?? ''})`);
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
  if (!cancelRequested) {
    state.phase = 'buying';
    publish();
    for (const [agentId, lines] of linesBySeller(state.selection!.lines)) {
      const buyKey = campaignBuyKey(input.campaignKey, agentId);
      const workflowId = mediaBuyWorkflowId(buyKey);
      state.buys[agentId] = { agentId, buyKey, workflowId, lines, committedBudget: sumBudgets(lines) };
    }
    publish();
    for (const buy of Object.values(state.buys)) {
      const productFrequencies = buy.lines
        .map((line) => products.get(productKey(line.agentId, line.productId))?.reportingFrequencies ?? [])
        .filter((frequencies) => frequencies.length > 0) as ReportingFrequency[][];
      const buyInput: MediaBuyInput = {
        buyKey: buy.buyKey,
        agentId: buy.agentId,
        params: buyParamsFor(input, buy.lines),
        requestedBy: state.approval!.approvedBy,
        indexed,
        // The campaign's buys are its tenant's: their AdcpTenant, their seller credentials, their reads.
        ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
        ...(input.principal !== undefined ? { principal: input.principal } : {}),
        ...(input.reportingBaseUrl
          ? {
              reporting: {
                url: `${input.reportingBaseUrl}/webhooks/adcp-reporting/${encodeURIComponent(buy.workflowId)}`,
                ...(productFrequencies.length > 0 ? { productFrequencies } : {}),
              },
            }
          : {}),
      };
      try {
        const child = await startChild(MEDIA_BUY_WORKFLOW_TYPE, {
          workflowId: buy.workflowId,
          args: [buyInput],
          // A buy is money at a seller: it outlives anything that happens to the campaign's workflow.
          parentClosePolicy: ParentClosePolicy.ABANDON,
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          staticSummary: `media buy ${buy.buyKey} at ${buy.agentId} for campaign ${input.campaignKey}`,
          ...(input.tenant !== undefined ? { memo: { tenant: input.tenant } } : {}),
          ...(indexed
            ? {
                typedSearchAttributes: [
                  { key: SA_AGENT, value: buy.agentId },
                  { key: SA_MEDIA_BUY_STATUS, value: 'creating' },
                  { key: SA_CAMPAIGN, value: input.campaignKey },
                  ...tenantAttributes(input),
                ],
              }
            : {}),
        });
        buy.startedAt = iso(Date.now());
        // Followed in the background: a buy that ends (rejected, failed, settled) is recorded as it happens.
        void child.result().then(
          (ended: MediaBuyState) => {
            buy.finalStatus = ended.status;
            if (ended.failure?.message) buy.finalMessage = ended.failure.message;
            if (ended.status === 'rejected') alert('buy_rejected', buy.agentId, 'the seller rejected the buy');
            if (ended.status === 'create_failed')
              alert('buy_failed', buy.agentId, ended.failure?.message ?? 'create_media_buy failed');
            if (ended.status === 'rejected' || ended.status === 'create_failed') buy.committedBudget = 0;
            delete buy.pendingBudget;
            publish();
          },
          (failure: unknown) => {
            buy.finalStatus = 'workflow_failed';
            buy.finalMessage = errorOf(failure).message;
            alert('buy_failed', buy.agentId, buy.finalMessage);
            publish();
          },
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

  // ---- changes ---------------------------------------------------------------------------------------------------
  async function fanOut(
    record: CampaignChangeRecord,
    request: CampaignChangeRequest,
    agentIds: string[],
  ): Promise<void> {
    const outcomes = await Promise.all(
      agentIds.map(async (agentId): Promise<[string, ChangeCampaignBuyOutcome]> => {
        const buy = state.buys[agentId];
        if (buy.finalStatus && request.kind !== 'budget')
          return [agentId, { outcome: 'not_needed', status: buy.finalStatus }];
        try {
          return [
            agentId,
            await changeCampaignBuy({
              workflowId: buy.workflowId,
              kind: request.kind,
              requestedBy: request.requestedBy,
              ...(request.reason ? { reason: request.reason } : {}),
              ...(request.budget !== undefined ? { budget: request.budget } : {}),
              updateId: `${input.campaignKey}.change-${record.sequence}.${agentId}`,
            }),
          ];
        } catch (failure) {
          return [agentId, { outcome: 'failed', error: errorOf(failure) }];
        }
      }),
    );
    for (const [agentId, outcome] of outcomes) record.buys[agentId] = outcome;
  }

  async function runChange(queued: { record: CampaignChangeRecord; request: CampaignChangeRequest }): Promise<void> {
    const { record, request } = queued;
    record.outcome = 'running';
    publish();
    if (request.kind === 'budget') {
      const buy = state.buys[request.agentId!];
      await fanOut(record, request, [buy.agentId]);
      const applied = record.buys[buy.agentId]?.outcome === 'applied';
      if (applied) buy.committedBudget = cents(request.budget!);
      // The raise in flight is released either way; a later one still queued keeps its own reservation.
      const stillQueued = queue
        .filter((other) => other !== queued && other.request.kind === 'budget' && other.request.agentId === buy.agentId)
        .map((other) => other.request.budget!);
      const highest = Math.max(0, ...stillQueued);
      if (highest > buy.committedBudget) buy.pendingBudget = highest;
      else delete buy.pendingBudget;
      record.outcome = applied ? 'applied' : 'failed';
    } else {
      const agentIds = Object.keys(state.buys);
      await fanOut(record, request, agentIds);
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

  const allBuysEnded = () => Object.values(state.buys).every((buy) => buy.finalStatus !== undefined);
  while ((state.phase as CampaignPhase) !== 'canceled') {
    if (queue.length > 0) {
      const next = queue[0];
      await runChange(next);
      queue.shift();
      continue;
    }
    if (Object.keys(state.buys).length === 0 || allBuysEnded()) break;
    await condition(() => queue.length > 0 || allBuysEnded());
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
  // A canceled campaign ends once every buy has answered its cancel; the buys' own workflows (abandoned children) go
  // on to settle their delivery with a lifetime pull, as they do for any canceled buy.
  await condition(allHandlersFinished);
  return state;
}
