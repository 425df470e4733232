/**
 * The correlation fields every log line about an operation carries: `operationId` (the workflow ID), `seller` and
 * `task`, added to Temporal's own (workflowId, runId, activity fields) through the activity interceptors'
 * getLogAttributes. The workflow side is observability/workflow-log-attributes.ts (it runs in the workflow sandbox).
 */
import type { Context } from '@temporalio/activity';
import type { ActivityInterceptors } from '@temporalio/worker';

export interface OperationLogFields {
  operationId?: string;
  seller?: string;
  task?: string;
}

/** What an operation's activity or workflow input says about it: the agent (seller), the task, the operation. */
export function operationFieldsOf(input: unknown): OperationLogFields {
  if (typeof input !== 'object' || input === null) return {};
  const record = input as Record<string, unknown>;
  // sendCall takes { plan }: the plan names the operation, seller and task.
  if (record.sellerId === undefined && typeof record.plan === 'object') return operationFieldsOf(record.plan);
  return {
    ...(typeof record.operationId === 'string' ? { operationId: record.operationId } : {}),
    ...(typeof record.sellerId === 'string' ? { seller: record.sellerId } : {}),
    ...(typeof record.task === 'string' ? { task: record.task } : {}),
  };
}

/** Activity interceptors: the first argument's seller and task on every line the activity logs. */
export function activityLogInterceptors(context: Context): ActivityInterceptors {
  let fields: OperationLogFields = {};
  return {
    inbound: {
      execute(input, next) {
        fields = operationFieldsOf(input.args[0]);
        return next(input);
      },
    },
    outbound: {
      getLogAttributes(input, next) {
        const operationId = fields.operationId ?? context.info.workflowExecution?.workflowId;
        return next({ ...input, ...fields, ...(operationId ? { operationId } : {}) });
      },
    },
  };
}
