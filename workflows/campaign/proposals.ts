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
import type { CampaignBuy } from '../../contract/campaign';
import {
  OPERATION_WORKFLOW_TYPE,
  type OperationInput,
  type OperationState,
  operationStateFromFailure,
} from '../../contract/operation';
import type { MediaBuyInput, MediaBuyState } from '../../contract/media-buy';
import type { CampaignMachine } from './machine';
import { finalizeParams, proposalBuyParams, requoteCodeOf } from './proposal-rules';

export interface ProposalBuyContext {
  machine: CampaignMachine;
  indexed: boolean;
  /** Start the seller's media-buy child exactly as the campaign starts any buy. */
  startBuy(
    buy: CampaignBuy,
    buyInput: MediaBuyInput,
  ): Promise<ChildWorkflowHandle<(input: MediaBuyInput) => Promise<MediaBuyState>>>;
  /** The workflow failed to follow a buy (its child failed): what the campaign does for any buy. */
  failed(buy: CampaignBuy, failure: unknown): void;
  publish(): void;
  /** The finalize calls in flight, by seller: a cancel cancels them (the operation's seller call with them). */
  finalizing: Map<string, CancellationScope>;
  /** Sellers whose buy is being started (not yet confirmed): a cancel waits for them, then cancels the buy. */
  starting: Set<string>;
}

/** The buy's create_media_buy arguments for one committed proposal. */
export function withProposalParams(
  machine: CampaignMachine,
  buy: CampaignBuy,
  buyInput: MediaBuyInput,
  proposalId: string,
): MediaBuyInput {
  return {
    ...buyInput,
    buyKey: buy.buyKey,
    params: proposalBuyParams(machine.input, proposalId, buy.proposal!.budget, machine.proposalCurrency(buy.sellerId)),
  };
}

/** Finalize one proposal at its seller: the committed proposal it answered, or why not. */
async function finalize(
  context: ProposalBuyContext,
  buy: CampaignBuy,
  sourceProposalId: string,
): Promise<{ proposalId: string; expiresAt?: string } | { error: string }> {
  const { machine } = context;
  const input = machine.input;
  const operationId = operationIdFor(
    'get_products',
    `${input.campaignKey}.${buy.sellerId}.finalize-${buy.proposal!.finalized.length + 1}`,
  );
  machine.finalizeStarted(buy.sellerId, sourceProposalId, operationId);
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
  const answer = finalizeAnswerOf(buy.sellerId, sourceProposalId, operation);
  machine.finalizeEnded(buy.sellerId, answer);
  return answer;
}

/** What a finalize operation answered: the committed proposal, or why there is none. */
function finalizeAnswerOf(
  sellerId: string,
  sourceProposalId: string,
  operation: OperationState,
): { proposalId: string; expiresAt?: string } | { error: string } {
  if (operation.status !== 'completed') {
    const error = operation.errors?.[0];
    return {
      error: error
        ? `${error.code}: ${error.message}`
        : (operation.failure?.message ?? `get_products (finalize) ended ${operation.status}`),
    };
  }
  const committed = finalizedProposalOf(sellerId, operation.result, sourceProposalId);
  if (!committed) return { error: `get_products (finalize) of ${sourceProposalId} answered no committed proposal` };
  return { proposalId: committed.proposalId, ...(committed.expiresAt ? { expiresAt: committed.expiresAt } : {}) };
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
    if (isCancellation(failure) && context.machine.cancelRequested) return { error: 'canceled with the campaign' };
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
  const followed = context.machine.followedProposals;
  followed.add(buy.sellerId);
  try {
    await follow(context, buy, buyInputOf);
  } finally {
    followed.delete(buy.sellerId);
  }
}

async function follow(
  context: ProposalBuyContext,
  buy: CampaignBuy,
  buyInputOf: (buy: CampaignBuy) => MediaBuyInput,
): Promise<void> {
  const { machine } = context;
  const sellerId = buy.sellerId;
  const proposal = buy.proposal!;
  const baseKey = buy.buyKey;
  const stop = () => {
    machine.stopForCancel(sellerId);
    context.publish();
  };
  let proposalId = proposal.boughtProposalId ?? proposal.proposalId;
  let needsFinalize = proposal.status === 'draft' && proposal.boughtProposalId === undefined;
  for (let attempt = proposal.requotes.length; ; attempt += 1) {
    if (needsFinalize) {
      // After a requote the accepted proposal is finalized afresh: the seller's current firm terms and hold.
      const source = attempt > 0 ? proposal.proposalId : proposalId;
      if (machine.cancelRequested) return stop();
      const finalized = await cancellableFinalize(context, buy, source);
      // A cancel that arrived meanwhile wins over what the finalize answered: no buy is started after it.
      if (machine.cancelRequested) return stop();
      if ('error' in finalized) {
        machine.proposalGiveUp(sellerId, 'finalize_failed', `finalizing proposal ${source} failed: ${finalized.error}`);
        context.publish();
        return;
      }
      proposalId = finalized.proposalId;
    }
    if (machine.cancelRequested) return stop();
    machine.proposalBuyStarting(sellerId, proposalId, attempt, baseKey);
    context.publish();
    let ended: MediaBuyState;
    try {
      context.starting.add(sellerId);
      let child: Awaited<ReturnType<ProposalBuyContext['startBuy']>>;
      try {
        child = await context.startBuy(buy, withProposalParams(machine, buy, buyInputOf(buy), proposalId));
      } finally {
        context.starting.delete(sellerId);
      }
      machine.buyStarted(sellerId);
      ended = await child.result();
    } catch (failure) {
      // Started before (a reset campaign): the buy exists under its key; it is not bought again.
      if (failure instanceof WorkflowExecutionAlreadyStartedError) {
        machine.buyStarted(sellerId);
        return;
      }
      context.failed(buy, failure);
      return;
    }
    const code = requoteCodeOf(ended);
    if (code === undefined) {
      machine.followedProposals.delete(sellerId);
      machine.buyEnded(sellerId, ended);
      context.publish();
      return;
    }
    if (machine.proposalRequoted(sellerId, proposalId, code, ended.failure?.message ?? code) === 'give_up') {
      context.publish();
      return;
    }
    needsFinalize = true;
  }
}
