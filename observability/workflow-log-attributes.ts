/**
 * Workflow interceptor module (bundled into the workflow code, so deterministic and free of Node builtins): the
 * operation's correlation fields on every line a workflow logs through `log` from @temporalio/workflow. Seller and
 * task come from the search attributes the starter sets (there from the first line) or else the workflow input.
 * It only adds log attributes: no commands, nothing in history, replays unchanged.
 */
import { type WorkflowInterceptorsFactory, workflowInfo } from '@temporalio/workflow';
import { SA_SELLER, SA_TASK } from '../config/search-attributes';

export const interceptors: WorkflowInterceptorsFactory = () => {
  let fromInput: { seller?: string; task?: string } = {};
  return {
    inbound: [
      {
        execute(input, next) {
          const first = input.args[0] as Record<string, unknown> | undefined;
          if (first && typeof first === 'object') {
            fromInput = {
              ...(typeof first.sellerId === 'string' ? { seller: first.sellerId } : {}),
              ...(typeof first.task === 'string' ? { task: first.task } : {}),
            };
          }
          return next(input);
        },
      },
    ],
    outbound: [
      {
        getLogAttributes(input, next) {
          const info = workflowInfo();
          const seller = info.typedSearchAttributes.get(SA_SELLER) ?? fromInput.seller;
          const task = info.typedSearchAttributes.get(SA_TASK) ?? fromInput.task;
          return next({
            ...input,
            operationId: info.workflowId,
            ...(seller ? { seller } : {}),
            ...(task ? { task } : {}),
          });
        },
      },
    ],
  };
};
