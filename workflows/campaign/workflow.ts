/**
 * One campaign = one workflow, from a brief to every seller's buy. It runs a discovery (a child `adcpDiscovery`),
 * takes a selection (a person's `selectProducts` Update, or the input's product policy), waits at the approval gate
 * (`approveCampaign`, recording who), then starts one `adcpMediaBuy` child per chosen seller with a buy key from the
 * campaign and the seller, so a retried start finds the same buy and never buys twice. After that it holds the
 * campaign: `changeCampaign` pauses, resumes or cancels every buy (fanned out by activity, since a workflow cannot
 * send Updates) or changes one buy's budget under the budget guard; it ends when every buy has ended.
 *
 * The rules are the campaign's machine (machine.ts): the handlers here hand it facts, the loop does what its
 * `nextStep()` says and starts the children, timers and activities it asks for.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowFailure,
  ParentClosePolicy,
  allHandlersFinished,
  condition,
  continueAsNew,
  executeChild,
  isCancellation,
  log,
  metricMeter,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { CampaignActivities, ChangeCampaignBuyOutcome } from '../../activities/campaign';
import type { BuyGovernanceEvidence, CampaignAllocationActivities } from '../../activities/campaign-allocation';
import type { MediaBuyActivities } from '../../activities/media-buy';
import { SA_SELLER, SA_CAMPAIGN, SA_MEDIA_BUY_STATUS, SA_PRINCIPAL, SA_TENANT } from '../../config/search-attributes';
import {
  type CampaignBuy,
  type CampaignInput,
  type CampaignState,
  approveCampaignUpdate,
  campaignStateQuery,
  changeCampaignUpdate,
  decideBudgetMovesUpdate,
  setBudgetAllocationUpdate,
  selectProductsUpdate,
  setCampaignCreativesUpdate,
} from '../../contract/campaign';
import { DISCOVERY_WORKFLOW_TYPE, type DiscoveryState } from '../../contract/discovery';
import { MEDIA_BUY_WORKFLOW_TYPE, type MediaBuyInput, type MediaBuyState } from '../../contract/media-buy';
import { buyGovernanceOf } from '../governance/machine';
import { reportOutcome, syncCampaignPlan } from '../governance/workflow';
import { type BuyChangeOutcome, CampaignMachine, type CampaignLog, type QueuedChange } from './machine';
import type { MoveStep, MoveStepResult } from './moves';
import { type ProposalBuyContext, followProposalBuy } from './proposals';

export const CAMPAIGN_STATE_MEMO = 'adcp_campaign';

// Every activity that waits on a buy's workflow heartbeats (activities/campaign.ts): an attempt lost with its worker
// is retried after the 5 s heartbeat timeout, not after its start-to-close timeout (docs/deployment.md).
const { readCampaignBuys } = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '30s',
  heartbeatTimeout: '5s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 3 },
});

// The Update waits for the buy's sync_creatives operation; the update ID makes a retried attempt the same sync.
const { syncCampaignCreatives } = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '5m',
  heartbeatTimeout: '5s',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 3 },
});

const { changeCampaignBuy } = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '30s',
  heartbeatTimeout: '5s',
  // A buy still being created is retried (BuyNotReady) for as long as a create may take to answer.
  scheduleToCloseTimeout: '24h',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

// A budget move's change: bounded, so a seller that does not answer fails the move (nothing is raised) rather than
// holding the campaign's loop for a day; the update ID makes every retry the same change at the buy.
const { changeCampaignBuy: changeBuyForMove } = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '30s',
  heartbeatTimeout: '5s',
  scheduleToCloseTimeout: '30m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

// The read that confirms a move's decrease: get_media_buys at the seller, as the buy's own reads.
const { readMediaBuy } = proxyActivities<MediaBuyActivities>({
  startToCloseTimeout: '70s',
  heartbeatTimeout: '15s',
  retry: {
    initialInterval: '2s',
    backoffCoefficient: 2,
    maximumInterval: '60s',
    maximumAttempts: 5,
    nonRetryableErrorTypes: ['ConfigError', 'ProtocolViolation', 'SellerError'],
  },
});

const { readBuyGovernance } = proxyActivities<CampaignAllocationActivities>({
  startToCloseTimeout: '30s',
  heartbeatTimeout: '5s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 3 },
});

const logTo: CampaignLog = (level, message, fields) => log[level](message, fields);

function errorOf(failure: unknown): { code: string; message: string } {
  let cause: unknown = failure;
  while (cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) cause = cause.cause;
  if (cause instanceof ApplicationFailure) return { code: cause.type ?? 'FAILED', message: cause.message };
  return { code: 'FAILED', message: cause instanceof Error ? cause.message : String(cause) };
}

/** One run of the campaign's workflow: its machine, and what only the workflow can hold (scopes, in-flight starts). */
interface Run {
  machine: CampaignMachine;
  input: CampaignInput;
  indexed: boolean;
  /** The finalize calls in flight, by seller (proposals.ts): a cancel cancels them. */
  finalizing: Map<string, CancellationScope>;
  /** Sellers whose buy by proposal is being started (its child workflow not yet confirmed). */
  starting: Set<string>;
}

export async function adcpCampaign(input: CampaignInput): Promise<CampaignState> {
  const indexed = input.indexed ?? workflowInfo().typedSearchAttributes.get(SA_CAMPAIGN) !== undefined;
  const machine = new CampaignMachine(input, { now: Date.now, log: logTo });
  const run: Run = { machine, input, indexed, finalizing: new Map(), starting: new Set() };
  registerHandlers(run);
  if (!machine.continued) {
    await plan(run);
    await startBuys(run);
  }
  return await hold(run);
}

/** Memo (only when it changed, unless forced) and the human line. */
function publish(run: Run, force = true): void {
  const memo = run.machine.memoToWrite(force);
  if (memo) upsertMemo({ [CAMPAIGN_STATE_MEMO]: memo });
  setCurrentDetails(run.machine.details());
  // Metrics are not emitted while a workflow replays, and write no history.
  for (const move of run.machine.moves.drainEnded()) {
    const labels = { status: move.status, mode: move.mode, currency: run.input.currency ?? 'USD' };
    metricMeter
      .createCounter('adcp_campaign_budget_moves', 'moves', 'Campaign budget moves by how they ended')
      .add(1, labels);
    if (move.status === 'applied' && move.moved)
      metricMeter
        .createCounter('adcp_campaign_budget_moved', 'cents', 'Money moved between sellers by budget moves (cents)')
        .add(Math.round(move.moved * 100), labels);
  }
}

function registerHandlers(run: Run): void {
  const { machine } = run;
  setHandler(campaignStateQuery, () => machine.state);
  setHandler(
    selectProductsUpdate,
    (request) => {
      const answer = machine.select(request);
      publish(run);
      return answer;
    },
    { validator: (request) => machine.validateSelection(request) },
  );
  setHandler(
    approveCampaignUpdate,
    (request) => {
      const answer = machine.approve(request);
      publish(run);
      return answer;
    },
    { validator: (request) => machine.validateApproval(request) },
  );
  setHandler(
    changeCampaignUpdate,
    async (request) => {
      const { sequence, answer } = machine.requestChange(request);
      if (answer) return answer;
      await condition(() => machine.changeAnswer(sequence) !== undefined);
      return machine.changeAnswer(sequence)!;
    },
    { validator: (request) => machine.validateChange(request) },
  );
  setHandler(
    setBudgetAllocationUpdate,
    (request) => {
      const answer = machine.setBudgetAllocation(request);
      publish(run);
      return answer;
    },
    { validator: (request) => machine.validateBudgetAllocation(request) },
  );
  setHandler(
    decideBudgetMovesUpdate,
    (request) => {
      const answer = machine.decideMoves(request);
      publish(run);
      return answer;
    },
    { validator: (request) => machine.validateMovesDecision(request) },
  );
  setHandler(
    setCampaignCreativesUpdate,
    (request) => {
      const answer = machine.setLibrary(request);
      publish(run);
      return answer;
    },
    { validator: (request) => machine.validateLibrary(request) },
  );
}

/** Governance plan, discovery, selection, and the approval gate. */
async function plan(run: Run): Promise<void> {
  const { machine, input, indexed } = run;
  publish(run);
  // Governance: the buyer's plan goes to the governance agent while planning (workflows/governance/workflow.ts).
  if (input.governance) {
    machine.planSynced(await syncCampaignPlan(input, indexed));
    publish(run);
  }
  const discovery: DiscoveryState = await executeChild(DISCOVERY_WORKFLOW_TYPE, {
    workflowId: machine.state.discoveryId,
    args: [machine.discoveryInput(indexed)],
    parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    staticSummary: `discovery for campaign ${input.campaignKey}`,
    ...(input.tenant !== undefined ? { memo: { tenant: input.tenant } } : {}),
    ...(indexed
      ? { typedSearchAttributes: [{ key: SA_CAMPAIGN, value: input.campaignKey }, ...tenantAttributes(input)] }
      : {}),
  });
  machine.discovered(discovery);
  publish(run);
  await condition(() => machine.approvedOrCanceled());
}

/** The AdcpTenant/AdcpPrincipal search attributes of the campaign's children: none without a tenant. */
function tenantAttributes(input: CampaignInput) {
  if (input.tenant === undefined) return [];
  return [
    { key: SA_TENANT, value: input.tenant },
    ...(input.principal !== undefined ? [{ key: SA_PRINCIPAL, value: input.principal }] : []),
  ];
}

function startBuyChild(run: Run, buy: CampaignBuy, buyInput: MediaBuyInput) {
  const { input, indexed } = run;
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

function buyFailed(run: Run, buy: CampaignBuy, failure: unknown): void {
  run.machine.buyFailed(buy.sellerId, errorOf(failure).message);
  publish(run);
}

/** One child per chosen seller, each followed in the background: a buy that ends is recorded as it happens. */
async function startBuys(run: Run): Promise<void> {
  const { machine, indexed } = run;
  const buys = machine.startBuying();
  if (!buys) return;
  publish(run);
  const proposalContext: ProposalBuyContext = {
    machine,
    indexed,
    startBuy: (buy, buyInput) => startBuyChild(run, buy, buyInput),
    failed: (buy, failure) => buyFailed(run, buy, failure),
    publish: () => publish(run),
    finalizing: run.finalizing,
    starting: run.starting,
  };
  for (const buy of buys) {
    if (buy.proposal) {
      // Finalized if draft, bought, quoted again on REQUOTE_REQUIRED: followed in the background (proposals.ts).
      void followProposalBuy(proposalContext, buy, (next) => machine.mediaBuyInputOf(next, indexed));
      continue;
    }
    try {
      const child = await startBuyChild(run, buy, machine.mediaBuyInputOf(buy, indexed));
      machine.buyStarted(buy.sellerId);
      void child.result().then(
        (ended: MediaBuyState) => {
          machine.buyEnded(buy.sellerId, ended);
          publish(run);
        },
        (failure: unknown) => buyFailed(run, buy, failure),
      );
    } catch (failure) {
      // Started before (a reset campaign): the buy exists under its key; it is not bought again.
      if (!(failure instanceof WorkflowExecutionAlreadyStartedError)) throw failure;
      machine.buyStarted(buy.sellerId);
    }
  }
  machine.buyingStarted();
  publish(run);
}

/** Holding the campaign: changes, polls of the buys (creatives, delivery, alerts), continue-as-new, the end. */
async function hold(run: Run): Promise<CampaignState> {
  const { machine, input, indexed } = run;
  for (;;) {
    const info = workflowInfo();
    const step = machine.nextStep({
      length: info.historyLength,
      continueAsNewSuggested: info.continueAsNewSuggested,
    });
    if (step.kind === 'close') break;
    if (step.kind === 'change') await runChange(run, step.change);
    else if (step.kind === 'poll') await poll(run);
    else if (step.kind === 'move') await runMoveStep(run, step.step);
    else if (step.kind === 'continue_as_new') {
      await condition(allHandlersFinished);
      if (!machine.readyToContinueAsNew()) continue;
      const { creatives: _creatives, carried: _carried, ...rest } = input;
      log.info('Campaign continues as new', {
        campaignKey: input.campaignKey,
        run: machine.state.run ?? 1,
        historyLength: info.historyLength,
      });
      // The buys are abandoned children: they keep running, and the next run follows them by their IDs.
      return await continueAsNew<typeof adcpCampaign>({ ...rest, indexed, carried: machine.carried() });
    } else {
      const key = machine.wakeKey();
      const woken = () => machine.wakeKey() !== key;
      if (step.untilMs === undefined) await condition(woken);
      else await condition(woken, Math.max(step.untilMs - Date.now(), 1));
    }
  }
  machine.close();
  publish(run);
  // A finalize the cancel stopped ends once its seller call has answered: the campaign leaves nothing running there.
  if (machine.cancelRequested) await condition(() => run.finalizing.size === 0);
  // A canceled campaign ends once every buy has answered its cancel; the buys' own workflows (abandoned children) go
  // on to settle their delivery with a lifetime pull, as they do for any canceled buy.
  await condition(allHandlersFinished);
  return machine.state;
}

/** One change, to its end: a cancel first stops the buys by proposal not yet made, then every buy hears it. */
async function runChange(run: Run, change: QueuedChange): Promise<void> {
  const { machine } = run;
  machine.changeStarted(change);
  publish(run);
  if (change.request.kind === 'cancel') {
    // Nothing was bought by a proposal still being finalized, and no buy starts after this: its finalize is canceled
    // (its operation ends once its seller call has answered; the campaign closes after it). A buy being started is
    // waited for, so that the fan-out below cancels it at the seller.
    for (const [sellerId, scope] of run.finalizing) {
      scope.cancel();
      machine.stopForCancel(sellerId);
    }
    publish(run);
    await condition(() => run.starting.size === 0);
  }
  const outcomes = await Promise.all(
    machine.changeTargets(change).map(async (sellerId): Promise<[string, BuyChangeOutcome]> => {
      const settled = machine.settledWithoutCall(change, sellerId);
      if (settled) return [sellerId, settled];
      try {
        const outcome: ChangeCampaignBuyOutcome = await changeCampaignBuy(machine.buyChangeInput(change, sellerId));
        return [sellerId, outcome];
      } catch (failure) {
        return [sellerId, { outcome: 'failed', error: errorOf(failure) }];
      }
    }),
  );
  machine.changeFinished(change, Object.fromEntries(outcomes));
  publish(run);
}

/** One poll of the buys: read them (one activity), sync the library where it is missing, evaluate. */
async function poll(run: Run): Promise<void> {
  const { machine } = run;
  let changed = false;
  const targets = machine.pollTargets();
  if (targets.length > 0) {
    try {
      changed = machine.read(await readCampaignBuys({ buys: targets }));
    } catch (failure) {
      log.warn('Campaign could not read its buys; polling again later', {
        campaignKey: machine.state.campaignKey,
        error: errorOf(failure).message,
      });
    }
  }
  const syncs = machine.librarySyncs();
  await Promise.all(
    syncs.map(async (sync) => {
      let outcome: BuyChangeOutcome;
      try {
        outcome = await syncCampaignCreatives({
          workflowId: sync.workflowId,
          creatives: sync.creatives,
          assignments: sync.assignments,
          requestedBy: `campaign:${machine.state.campaignKey}`,
          updateId: sync.updateId,
        });
      } catch (failure) {
        outcome = { outcome: 'failed', error: errorOf(failure) };
      }
      machine.librarySynced(sync, outcome);
    }),
  );
  machine.evaluate();
  machine.polled(changed || syncs.length > 0);
  publish(run, false);
}

/**
 * One step of a budget move's saga (moves.ts says which): a buy's change, the read that confirms a decrease, or the
 * report to the governance agent. A campaign cancel that arrives meanwhile interrupts it: the machine then counts
 * the step's effect at the seller as unknown (never as money free for another buy), and the cancel runs next.
 */
async function runMoveStep(run: Run, step: MoveStep): Promise<void> {
  const { machine } = run;
  machine.moveStepStarted(step);
  publish(run);
  const work = new CancellationScope();
  const watch = new CancellationScope();
  void watch
    .run(() => condition(() => machine.cancelRequested))
    .then(
      () => work.cancel(),
      () => undefined,
    );
  let result: MoveStepResult;
  try {
    result = await work.run(() => moveStepResult(run, step));
  } catch (failure) {
    if (!isCancellation(failure)) throw failure;
    result = { kind: 'interrupted' };
  } finally {
    watch.cancel();
  }
  machine.moveStepDone(step, result);
  publish(run);
}

async function moveStepResult(run: Run, step: MoveStep): Promise<MoveStepResult> {
  const { input } = run;
  if (step.kind === 'report') return await reportMoves(run, step);
  if (step.kind === 'decrease' || step.kind === 'increase') {
    try {
      const outcome = await changeBuyForMove({
        workflowId: step.workflowId,
        kind: 'budget',
        requestedBy: `campaign:${input.campaignKey}`,
        reason: step.reason,
        budget: step.budget,
        updateId: step.updateId,
      });
      return { kind: 'change', outcome };
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      return { kind: 'change', outcome: { outcome: 'failed', error: errorOf(failure) } };
    }
  }
  if (step.kind === 'confirm') {
    const buy = run.machine.state.buys[step.sellerId];
    try {
      const read = await readMediaBuy({
        sellerId: step.sellerId,
        mediaBuyId: buy.mediaBuyId!,
        ...(input.buyParams?.account !== undefined ? { account: input.buyParams.account } : {}),
      });
      const budgets = (read.snapshot?.packages ?? []).map((pkg) => pkg.budget);
      if (!read.found || budgets.length === 0 || budgets.some((budget) => budget === undefined))
        return {
          kind: 'unread',
          error: { code: 'BUDGET_NOT_READ', message: read.note ?? 'the read names no package budgets' },
        };
      return { kind: 'read', budget: budgets.reduce((sum: number, budget) => sum + budget!, 0) };
    } catch (failure) {
      if (isCancellation(failure)) throw failure;
      return { kind: 'unread', error: errorOf(failure) };
    }
  }
  throw new Error(`unknown move step ${JSON.stringify(step)}`);
}

/** The report: against the governance context of the buy that took the money, not waited for. */
async function reportMoves(run: Run, step: Extract<MoveStep, { kind: 'report' }>): Promise<MoveStepResult> {
  const { input } = run;
  const governance = input.governance!;
  const evidence: BuyGovernanceEvidence = await readBuyGovernance({ workflowId: step.workflowId }).catch(() => ({
    found: false,
  }));
  const operationId = await reportOutcome(
    {
      settings: buyGovernanceOf(input.campaignKey, governance),
      ownerKey: input.campaignKey,
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
      indexed: run.indexed,
    },
    run.machine.moves.moveReport(step, evidence),
  );
  return { kind: 'reported', ...(operationId ? { operationId } : {}) };
}
