/**
 * The operation's metrics, told of every status change. Temporal's metric meter emits nothing while a workflow
 * replays and writes no history.
 */
import { metricMeter } from '@temporalio/workflow';
import type { OperationState, OperationStatus, TransitionSource } from '../../contract/operation';
import { isTerminalStatus } from './observations';

export function recordTransition(
  state: OperationState,
  from: OperationStatus,
  to: OperationStatus,
  source: TransitionSource,
): void {
  const labels = { task: state.task, agent: state.sellerId };
  metricMeter
    .createCounter('adcp_operation_transitions', 'transitions', 'AdCP operation status changes')
    .add(1, { ...labels, to, source });
  if (from === 'input-required') {
    // Approval time: from entering input-required to the status that followed (answered, rejected, timed out).
    const entered = [...state.transitions]
      .reverse()
      .find((transition) => transition.to === 'input-required' && transition.from !== 'input-required');
    if (entered) {
      metricMeter
        .createHistogram('adcp_operation_input_wait', 'float', 'seconds', 'Time an AdCP operation waited for input')
        .record((Date.now() - Date.parse(entered.at)) / 1000, { ...labels, to });
    }
  }
  if (isTerminalStatus(to)) {
    // Rejection and timeout rates: final statuses with the orchestrator's failure reason ("none" if it had none).
    metricMeter
      .createCounter('adcp_operation_outcomes', 'operations', 'AdCP operations by final status and reason')
      .add(1, { ...labels, status: to, reason: state.failure?.reason ?? 'none' });
    metricMeter
      .createHistogram(
        'adcp_operation_duration',
        'float',
        'seconds',
        'From start to the final status of an AdCP operation',
      )
      .record((Date.now() - Date.parse(state.startedAt)) / 1000, { ...labels, status: to });
  }
}
