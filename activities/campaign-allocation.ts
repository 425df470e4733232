/**
 * What a governed campaign's report of its budget moves needs from the buy that took the money: the buy's
 * governance_context (issued when its create was approved) and the check that approved the increase. Read from the
 * buy's workflow by query, so the buy's history is untouched. (A move's decrease is confirmed by a read at the seller
 * itself: media-buy.ts readMediaBuy.)
 */
import { Context } from '@temporalio/activity';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { mediaBuyStateQuery } from '../contract/media-buy';
import { heartbeatUntilDone } from './heartbeat';

export interface BuyGovernanceEvidence {
  found: boolean;
  mediaBuyId?: string;
  governanceContext?: string;
  /** The last approved check of an update_media_buy (the move's increase). */
  checkId?: string;
}

export function createCampaignAllocationActivities(deps: { client: Client }) {
  return {
    async readBuyGovernance(input: { workflowId: string }): Promise<BuyGovernanceEvidence> {
      // The query waits on the buy's workflow: heartbeats let a worker lost meanwhile be noticed within seconds.
      const stopHeartbeats = heartbeatUntilDone(Context.current());
      try {
        const state = await deps.client.workflow.getHandle(input.workflowId).query(mediaBuyStateQuery);
        const check = [...(state.governance?.checks ?? [])]
          .reverse()
          .find((entry) => entry.tool === 'update_media_buy' && entry.verdict === 'approved');
        return {
          found: true,
          ...(state.mediaBuyId ? { mediaBuyId: state.mediaBuyId } : {}),
          ...(state.governance?.governanceContext ? { governanceContext: state.governance.governanceContext } : {}),
          ...(check?.checkId ? { checkId: check.checkId } : {}),
        };
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return { found: false };
        throw error;
      } finally {
        stopHeartbeats();
      }
    },
  };
}

export type CampaignAllocationActivities = ReturnType<typeof createCampaignAllocationActivities>;
