/**
 * The campaign's reach into its buys: a workflow cannot send an Update to another workflow, so each change a
 * campaign fans out (pause, resume, cancel, a buy's budget) is one activity that reads the buy's state and sends it
 * the `changeMediaBuy` Update through the Temporal client, with an update ID derived from the campaign's change so
 * a retried activity never changes a buy twice. A buy still being created is retried (its validator refuses changes
 * until it has a media_buy_id); a buy that has ended needs no pause, resume or cancel. Each activity heartbeats while
 * it waits on another workflow, so an attempt lost with its worker is retried within the heartbeat timeout, not at the
 * end of its start-to-close timeout (up to 5 minutes for a library sync).
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { type Client, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { type BuyDigest, type BuyOutcome, type CampaignChangeKind, cents, digestOf } from '../contract/campaign';
import {
  CONTINUING_REFUSAL,
  type ChangeRequest,
  type MediaBuyState,
  attachCreativesUpdate,
  changeMediaBuyUpdate,
  mediaBuyStateQuery,
  sendAgainWhileContinuing,
} from '../contract/media-buy';
import {
  type SellerCapabilitiesState,
  sellerCapabilitiesQuery,
  sellerCapabilitiesWorkflowId,
} from '../contract/seller-capabilities';
import { heartbeatUntilDone } from './heartbeat';

export interface CampaignActivityDependencies {
  client: Client;
  /** How long a change a buy refuses for now (it is continuing as new) is sent again in one attempt. */
  sendAgainForMs?: number;
}

export interface ChangeCampaignBuyInput {
  workflowId: string;
  kind: CampaignChangeKind;
  requestedBy: string;
  reason?: string;
  /** budget: the buy's new total, split over its packages in proportion to their budgets. */
  budget?: number;
  /** The update ID: the campaign's change sequence and the seller, so a retry is the same Update. */
  updateId: string;
}

export interface ChangeCampaignBuyOutcome {
  outcome: BuyOutcome;
  status?: string;
  error?: { code: string; message: string };
}

const ENDED = new Set(['completed', 'rejected', 'canceled', 'create_failed']);

/** The new total split over the buy's packages in proportion to their current budgets (cents; rest to the first). */
export function splitBudget(packages: MediaBuyState['packages'], total: number): Record<string, number> {
  const ids = Object.keys(packages).sort();
  if (ids.length === 0) return {};
  const current = ids.map((id) => packages[id].budget ?? 0);
  const sum = current.reduce((a, b) => a + b, 0);
  const shares = ids.map((_, index) => (sum > 0 ? cents((total * current[index]) / sum) : cents(total / ids.length)));
  shares[0] = cents(shares[0] + total - shares.reduce((a, b) => a + b, 0));
  return Object.fromEntries(ids.map((id, index) => [id, shares[index]]));
}

export interface SyncCampaignCreativesInput {
  workflowId: string;
  creatives: Record<string, unknown>[];
  assignments: Record<string, string[]>;
  requestedBy: string;
  /** The campaign, the library version and the seller: a retry is the same Update, never a second sync. */
  updateId: string;
}

/** The buy's answer to an Update, as the campaign counts it. */
function buyOutcome(outcome: string): BuyOutcome {
  return outcome === 'applied' ? 'applied' : outcome === 'refused' ? 'refused' : 'failed';
}

/** The validator's refusal of an Update ("CODE: message"), as an error the campaign reports. */
function refusalOf(error: WorkflowUpdateFailedError): { code: string; message: string } {
  const message = error.cause instanceof Error ? error.cause.message : error.message;
  const match = /^([A-Z_]+): (.*)$/s.exec(message);
  return { code: match?.[1] ?? 'REFUSED', message: match?.[2] ?? message };
}

/** The buy refused the change for now: it is continuing as new (contract/media-buy.ts, CONTINUING_REFUSAL). */
function continuing(error: unknown): boolean {
  return error instanceof WorkflowUpdateFailedError && refusalOf(error).code === CONTINUING_REFUSAL;
}

/** Still continuing after the sends again: the activity's retry sends it once more, with the same update ID. */
function stillContinuing(error: unknown): ApplicationFailure {
  return ApplicationFailure.retryable(
    `The buy is still continuing as new: ${refusalOf(error as WorkflowUpdateFailedError).message}`,
    'BuyContinuing',
  );
}

function buyNotFound(workflowId: string): ChangeCampaignBuyOutcome {
  return { outcome: 'failed', error: { code: 'MEDIA_BUY_NOT_FOUND', message: `No buy ${workflowId}.` } };
}

function sellerOf(state: SellerCapabilitiesState): BuyDigest['seller'] {
  return {
    ...(state.reachable !== undefined ? { reachable: state.reachable } : {}),
    ...(state.circuit ? { circuit: state.circuit.state } : {}),
    ...(state.lastError ? { error: `${state.lastError.code}: ${state.lastError.message}` } : {}),
  };
}

export function createCampaignActivities(deps: CampaignActivityDependencies) {
  return {
    /** Attach the library to one buy through its `attachCreatives` Update (the buy runs sync_creatives). */
    async syncCampaignCreatives(input: SyncCampaignCreativesInput): Promise<ChangeCampaignBuyOutcome> {
      const handle = deps.client.workflow.getHandle(input.workflowId);
      const stopHeartbeats = heartbeatUntilDone(Context.current());
      try {
        const answer = await sendAgainWhileContinuing(
          continuing,
          () =>
            handle.executeUpdate(attachCreativesUpdate, {
              args: [{ creatives: input.creatives, assignments: input.assignments, requestedBy: input.requestedBy }],
              updateId: input.updateId,
            }),
          deps.sendAgainForMs,
        );
        return {
          outcome: buyOutcome(answer.outcome),
          status: answer.status,
          ...(answer.error ? { error: { code: answer.error.code, message: answer.error.message } } : {}),
        };
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return buyNotFound(input.workflowId);
        if (continuing(error)) throw stillContinuing(error);
        if (error instanceof WorkflowUpdateFailedError) return { outcome: 'refused', error: refusalOf(error) };
        throw error;
      } finally {
        stopHeartbeats();
      }
    },

    /** Every buy's digest, and its seller's reachability from the capabilities workflow (when there is one). */
    async readCampaignBuys(input: { buys: { sellerId: string; workflowId: string }[] }): Promise<BuyDigest[]> {
      const context = Context.current();
      const taskQueue = context.info.taskQueue;
      const stopHeartbeats = heartbeatUntilDone(context);
      try {
        return await Promise.all(
          input.buys.map(async ({ sellerId, workflowId }): Promise<BuyDigest> => {
            let digest: BuyDigest;
            try {
              digest = digestOf(
                sellerId,
                workflowId,
                await deps.client.workflow.getHandle(workflowId).query(mediaBuyStateQuery),
              );
            } catch (error) {
              if (!(error instanceof WorkflowNotFoundError)) throw error;
              digest = { sellerId, workflowId, found: false, packages: [], creatives: {} };
            }
            try {
              const seller: SellerCapabilitiesState = await deps.client.workflow
                .getHandle(sellerCapabilitiesWorkflowId(taskQueue, sellerId))
                .query(sellerCapabilitiesQuery);
              digest.seller = sellerOf(seller);
            } catch {
              // No capabilities workflow for this seller (never asked): nothing known about its reachability.
            }
            return digest;
          }),
        );
      } finally {
        stopHeartbeats();
      }
    },

    async changeCampaignBuy(input: ChangeCampaignBuyInput): Promise<ChangeCampaignBuyOutcome> {
      const handle = deps.client.workflow.getHandle(input.workflowId);
      const stopHeartbeats = heartbeatUntilDone(Context.current());
      try {
        let state: MediaBuyState;
        try {
          state = await handle.query(mediaBuyStateQuery);
        } catch (error) {
          if (error instanceof WorkflowNotFoundError) return buyNotFound(input.workflowId);
          throw error;
        }
        if (ENDED.has(state.status) || state.done) {
          return input.kind === 'budget'
            ? {
                outcome: 'refused',
                status: state.status,
                error: { code: 'INVALID_STATE', message: `The buy is ${state.status}.` },
              }
            : { outcome: 'not_needed', status: state.status };
        }
        if (state.status === 'creating' || !state.mediaBuyId) {
          throw ApplicationFailure.create({
            type: 'BuyNotReady',
            message: `The buy ${input.workflowId} is still being created; the change waits for its media_buy_id.`,
            nextRetryDelay: 1_000,
          });
        }
        if (input.kind === 'pause' && state.status === 'paused') return { outcome: 'not_needed', status: state.status };
        if (input.kind === 'resume' && state.status !== 'paused')
          return { outcome: 'not_needed', status: state.status };
        const request: ChangeRequest = {
          kind: input.kind,
          requestedBy: input.requestedBy,
          ...(input.reason ? { reason: input.reason } : {}),
          ...(input.kind === 'budget' && input.budget !== undefined
            ? { budgets: splitBudget(state.packages, input.budget) }
            : {}),
        };
        try {
          const answer = await sendAgainWhileContinuing(
            continuing,
            () =>
              handle.executeUpdate(changeMediaBuyUpdate, {
                args: [request],
                updateId: input.updateId,
              }),
            deps.sendAgainForMs,
          );
          return {
            outcome: buyOutcome(answer.outcome),
            status: answer.status,
            ...(answer.error ? { error: answer.error } : {}),
          };
        } catch (error) {
          if (continuing(error)) throw stillContinuing(error);
          if (error instanceof WorkflowUpdateFailedError)
            return { outcome: 'refused', status: state.status, error: refusalOf(error) };
          throw error;
        }
      } finally {
        stopHeartbeats();
      }
    },
  };
}

export type CampaignActivities = ReturnType<typeof createCampaignActivities>;
