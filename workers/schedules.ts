/**
 * One Temporal Schedule per configured seller runs its reconciliation (workflows/reconciliation/workflow.ts) at a fixed
 * interval. Idempotent: every worker may call it at start; an existing schedule is updated to the current interval.
 * Overlapping runs are skipped, and a run missed while the cluster was down is not made up.
 */
import { type Client, ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import type { SellerRegistry } from '../config/sellers';
import type { reconcileSeller } from '../workflows/reconciliation/workflow';

export const RECONCILIATION_WORKFLOW_TYPE = 'reconcileSeller';

/** Per task queue and seller: deployments sharing a namespace on different queues keep their own schedules. */
export function reconciliationScheduleId(taskQueue: string, sellerId: string): string {
  return `reconciliation:${taskQueue}:${sellerId}`;
}

export async function ensureReconciliationSchedules(options: {
  client: Client;
  sellers: SellerRegistry;
  taskQueue: string;
  intervalMs: number;
  /** Chunks of the seller's buy listing each run's orphan pass reads (default: the workflow's own bound). */
  orphanChunksPerRun?: number;
}): Promise<string[]> {
  const ids: string[] = [];
  for (const agent of options.sellers.sellers) {
    const scheduleId = reconciliationScheduleId(options.taskQueue, agent.id);
    const spec = { intervals: [{ every: options.intervalMs }] };
    const action = {
      type: 'startWorkflow' as const,
      workflowType: RECONCILIATION_WORKFLOW_TYPE,
      taskQueue: options.taskQueue,
      workflowId: `${scheduleId}:scheduled`,
      args: [
        {
          sellerId: agent.id,
          requestedBy: 'schedule',
          scheduleId,
          ...(options.orphanChunksPerRun !== undefined ? { orphanChunksPerRun: options.orphanChunksPerRun } : {}),
        },
      ] as Parameters<typeof reconcileSeller>,
    };
    try {
      await options.client.schedule.create({
        scheduleId,
        spec,
        action,
        policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1m' },
        memo: { purpose: `reconcile operations with seller ${agent.id}` },
      });
    } catch (error) {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
      // A cursor the last run handed to the next (its orphan pass stopped before the listing's end) is kept.
      await options.client.schedule.getHandle(scheduleId).update((previous) => {
        const before =
          previous.action.type === 'startWorkflow'
            ? (previous.action.args?.[0] as { resumeCursor?: unknown } | undefined)?.resumeCursor
            : undefined;
        const [first] = action.args;
        return {
          ...previous,
          spec,
          action:
            typeof before === 'string'
              ? { ...action, args: [{ ...first, resumeCursor: before }] as typeof action.args }
              : action,
        };
      });
    }
    ids.push(scheduleId);
  }
  return ids;
}
