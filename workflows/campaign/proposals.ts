/**
 * A campaign's buy by proposal, from approval to a settled buy (the campaign workflow runs one per seller whose
 * proposal it accepted, in the background, like any buy it follows):
 *
 * 1. a `draft` proposal is finalized first: a get_products refine call (`action: "finalize"`) as a child
 *    `adcpOperation`, answered by a `committed` proposal; a committed (or status-less) proposal is bought as is;
 * 2. the buy is the seller's `adcpMediaBuy` child whose create_media_buy carries `proposal_id` and `total_budget`;
 * 3. when the seller refuses that create with REQUOTE_REQUIRED (or the proposal expired or is unknown to it), no
 *    buy exists at the seller: the campaign records the requote, finalizes the accepted proposal afresh and buys the
 *    new committed proposal under the next key (`<buy key>.requote-<n>`), at most MAX_REQUOTES times; past that a
 *    person decides. Every key is deterministic, so a retried start finds the same buy and nothing is bought twice.
 */
import {
  CancellationScope,
  type ChildWorkflowHandle,
  ParentClosePolicy,
  executeChild,
  isCancellation,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { SA_SELLER, SA_STATUS, SA_TASK, SA_TENANT } from '../../config/search-attributes';
import { finalizedProposalOf } from '../../protocol/catalogue';
import { operationIdFor } from '../../protocol/ids';
import type { CampaignAlertKind, CampaignBuy, CampaignInput } from '../../contract/campaign';
import { MAX_REQUOTES, finalizeParams, proposalBuyParams, requoteCodeOf } from './proposal-rules';
import {
  OPERATION_WORKFLOW_TYPE,
  type OperationInput,
  type OperationState,
  operationStateFromFailure,
} from '../../contract/operation';
import { type MediaBuyInput, type MediaBuyState, mediaBuyWorkflowId } from '../../contract/media-buy';

export interface ProposalBuyContext {
  input: CampaignInput;
  indexed: boolean;
  /** Sellers whose buy by proposal is being followed here: the campaign's reads do not end them meanwhile. */
  followed: Set<string>;
  /** The currency of the accepted proposals' budget guidance, by seller (when the campaign names none). */
  currencyOf(sellerId: string): string | undefined;
  /** Start the seller's media-buy child exactly as the campaign starts any buy. */
  startBuy(
    buy: CampaignBuy,
    buyInput: MediaBuyInput,
  ): Promise<ChildWorkflowHandle<(input: MediaBuyInput) => Promise<MediaBuyState>>>;
  /** What the campaign does when a buy's workflow ends (statuses, alerts, the guard's release). */
  ended(buy: CampaignBuy, state: MediaBuyState): void;
  failed(buy: CampaignBuy, failure: unknown): void;
  alert(kind: CampaignAlertKind, sellerId: string, note: string): void;
  publish(): void;
  /** Whether the campaign was canceled: a follower then starts nothing more at its seller (no finalize, no buy). */
  canceled(): boolean;
  /** The finalize calls in flight, by seller: a cancel cancels them (the operation's seller call with them). */
  finalizing: Map<string, CancellationScope>;
  /** Sellers whose buy is being started (not yet confirmed): a cancel waits for them, then cancels the buy. */
  starting: Set<string>;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** The buy's create_media_buy arguments for one committed proposal. */
export function withProposalParams(
  context: Pick<ProposalBuyContext, 'input' | 'currencyOf'>,
  buy: CampaignBuy,
  buyInput: MediaBuyInput,
  proposalId: string,
): MediaBuyInput {
  return {
    ...buyInput,
    buyKey: buy.buyKey,
    params: proposalBuyParams(context.input, proposalId, buy.proposal!.budget, context.currencyOf(buy.sellerId)),
  };
}

/** Finalize one proposal at its seller: the committed proposal it answered, or why not. */
async function finalize(
  context: ProposalBuyContext,
  buy: CampaignBuy,
  sourceProposalId: string,
): Promise<{ proposalId: string; expiresAt?: string } | { error: string }> {
  const proposal = buy.proposal!;
  const { input } = context;
  const operationId = operationIdFor(
    'get_products',
    `${input.campaignKey}.${buy.sellerId}.finalize-${proposal.finalized.length + 1}`,
  );
  const record: (typeof proposal.finalized)[number] = { from: sourceProposalId, operationId, at: iso(Date.now()) };
  proposal.finalized.push(record);
  context.publish();
  const operationInput: OperationInput = {
    sellerId: buy.sellerId,
    task: 'get_products',
    params: finalizeParams(input.discoveryParams, sourceProposalId),
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
    ...(input.principal !== undefined ? { principal: input.principal } : {}),
  };
  let operation: OperationState;
  try {
    operation = await executeChild(OPERATION_WORKFLOW_TYPE, {
      workflowId: operationId,
      args: [operationInput],
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      staticSummary: `finalize proposal ${sourceProposalId} at ${buy.sellerId} for campaign ${input.campaignKey}`,
      ...(context.indexed
        ? {
            typedSearchAttributes: [
              { key: SA_TASK, value: 'get_products' },
              { key: SA_SELLER, value: buy.sellerId },
              { key: SA_STATUS, value: 'pending' },
              ...(input.tenant !== undefined ? [{ key: SA_TENANT, value: input.tenant }] : []),
            ],
          }
        : {}),
    });
  } catch (failure) {
    const ended = operationStateFromFailure(failure);
    if (!ended) throw failure;
    operation = ended;
  }
  if (operation.status !== 'completed') {
    const error = operation.errors?.[0];
    record.error = error
      ? `${error.code}: ${error.message}`
      : (operation.failure?.message ?? `get_products (finalize) ended ${operation.status}`);
    return { error: record.error };
  }
  const committed = finalizedProposalOf(buy.sellerId, operation.result, sourceProposalId);
  if (!committed) {
    record.error = `get_products (finalize) of ${sourceProposalId} answered no committed proposal`;
    return { error: record.error };
  }
  record.to = committed.proposalId;
  return { proposalId: committed.proposalId, ...(committed.expiresAt ? { expiresAt: committed.expiresAt } : {}) };
}

/** Give up on this seller's buy: nothing was bought, so nothing is committed; a person takes it from here. */
function giveUp(context: ProposalBuyContext, buy: CampaignBuy, status: string, message: string): void {
  buy.finalStatus = status;
  buy.finalMessage = message;
  buy.committedBudget = 0;
  delete buy.pendingBudget;
  buy.proposal!.needsPerson = message;
  context.alert('proposal_requote', buy.sellerId, message);
  context.publish();
}

/** The campaign was canceled before this seller's buy existed: nothing was bought, so nothing is committed. */
export function stopForCancel(context: Pick<ProposalBuyContext, 'publish'>, buy: CampaignBuy): void {
  buy.finalStatus = 'canceled';
  buy.finalMessage = `The campaign was canceled before the buy at ${buy.sellerId} was created; nothing was bought.`;
  buy.committedBudget = 0;
  delete buy.pendingBudget;
  context.publish();
}

/** finalize() in a scope the campaign's cancel cancels (the child operation is canceled, its seller call with it). */
async function cancellableFinalize(
  context: ProposalBuyContext,
  buy: CampaignBuy,
  sourceProposalId: string,
): Promise<{ proposalId: string; expiresAt?: string } | { error: string }> {
  const scope = new CancellationScope();
  context.finalizing.set(buy.sellerId, scope);
  try {
    return await scope.run(() => finalize(context, buy, sourceProposalId));
  } catch (failure) {
    if (isCancellation(failure) && context.canceled()) return { error: 'canceled with the campaign' };
    throw failure;
  } finally {
    context.finalizing.delete(buy.sellerId);
  }
}

/** Finalize (if draft), buy, and quote again on REQUOTE_REQUIRED: the life of one seller's buy by proposal. */
export async function followProposalBuy(
  context: ProposalBuyContext,
  buy: CampaignBuy,
  /** The buy's media-buy input as for any buy of the campaign (its key, reporting URL, tenant), params replaced. */
  buyInputOf: (buy: CampaignBuy) => MediaBuyInput,
): Promise<void> {
  context.followed.add(buy.sellerId);
  try {
    await follow(context, buy, buyInputOf);
  } finally {
    context.followed.delete(buy.sellerId);
  }
}

async function follow(
  context: ProposalBuyContext,
  buy: CampaignBuy,
  buyInputOf: (buy: CampaignBuy) => MediaBuyInput,
): Promise<void> {
  const proposal = buy.proposal!;
  const baseKey = buy.buyKey;
  let proposalId = proposal.boughtProposalId ?? proposal.proposalId;
  let needsFinalize = proposal.status === 'draft' && proposal.boughtProposalId === undefined;
  for (let attempt = proposal.requotes.length; ; attempt += 1) {
    if (needsFinalize) {
      // After a requote the accepted proposal is finalized afresh: the seller's current firm terms and hold.
      const source = attempt > 0 ? proposal.proposalId : proposalId;
      if (context.canceled()) return stopForCancel(context, buy);
      const finalized = await cancellableFinalize(context, buy, source);
      // A cancel that arrived meanwhile wins over what the finalize answered: no buy is started after it.
      if (context.canceled()) return stopForCancel(context, buy);
      if ('error' in finalized) {
        giveUp(context, buy, 'finalize_failed', `finalizing proposal ${source} failed: ${finalized.error}`);
        return;
      }
      proposalId = finalized.proposalId;
      if (finalized.expiresAt) proposal.expiresAt = finalized.expiresAt;
    }
    if (context.canceled()) return stopForCancel(context, buy);
    proposal.boughtProposalId = proposalId;
    if (attempt > 0) {
      buy.buyKey = `${baseKey}.requote-${attempt}`;
      buy.workflowId = mediaBuyWorkflowId(buy.buyKey);
      // What the campaign read was the refused attempt's.
      delete buy.status;
      delete buy.mediaBuyId;
    }
    context.publish();
    let ended: MediaBuyState;
    try {
      context.starting.add(buy.sellerId);
      let child: Awaited<ReturnType<ProposalBuyContext['startBuy']>>;
      try {
        child = await context.startBuy(buy, withProposalParams(context, buy, buyInputOf(buy), proposalId));
      } finally {
        context.starting.delete(buy.sellerId);
      }
      buy.startedAt = iso(Date.now());
      ended = await child.result();
    } catch (failure) {
      // Started before (a reset campaign): the buy exists under its key; it is not bought again.
      if (failure instanceof WorkflowExecutionAlreadyStartedError) {
        buy.startedAt = iso(Date.now());
        return;
      }
      context.failed(buy, failure);
      return;
    }
    const code = requoteCodeOf(ended);
    if (code === undefined) {
      context.followed.delete(buy.sellerId);
      context.ended(buy, ended);
      return;
    }
    const message = ended.failure?.message ?? code;
    proposal.requotes.push({ proposalId, code, message, buyWorkflowId: buy.workflowId, at: iso(Date.now()) });
    if (proposal.requotes.length > MAX_REQUOTES) {
      giveUp(
        context,
        buy,
        'requote_required',
        `${buy.sellerId} refused proposal ${proposalId} again (${code}); a person must choose new terms.`,
      );
      return;
    }
    context.alert('proposal_requote', buy.sellerId, `${code} for proposal ${proposalId}: quoting again`);
    needsFinalize = true;
  }
}
