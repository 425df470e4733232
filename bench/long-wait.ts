/**
 * B3, a 24-hour polled wait: a create_media_buy the seller keeps `submitted` for 23 hours and then completes, with no
 * webhook registered, run on the time-skipping test server (the project's provisioned binary; test/harness/
 * time-skipping.ts) so that a day of polls takes seconds. The worker is the product's (createOperationWorker) in the
 * bench process, against the bench's seller. The history is read back with fetchHistory().
 */
import { randomUUID } from 'node:crypto';
import { createMediaBuyParams } from '../test/harness/demo-requests';
import { registry } from '../test/harness/temporal';
import { startTimeSkippingStack } from '../test/harness/time-skipping';
import { describeTypes, historyOf } from './history';
import { sellerKeepsMediaBuysSubmitted } from './operations';
import type { BenchmarkResult } from './report';
import type { BenchStack } from './stack';
import { ratio } from './stats';

const HOUR = 3_600_000;
const GOAL_EVENTS = 50;
const TOKEN_ENV = 'BENCH_LONG_WAIT_TOKEN';

export async function longWaitHistory(stack: BenchStack, options: { waitHours: number }): Promise<BenchmarkResult> {
  await sellerKeepsMediaBuysSubmitted(stack);
  const timeSkipping = await startTimeSkippingStack({
    sellers: registry([{ id: 'bench-long-wait', url: stack.seller.url, protocol: 'mcp', token_env: TOKEN_ENV }]),
    activities: { env: { [TOKEN_ENV]: stack.seller.authToken } },
  });
  try {
    const began = Date.now();
    const { operationId } = await timeSkipping.orchestrator.start({
      sellerId: 'bench-long-wait',
      task: 'create_media_buy',
      params: createMediaBuyParams(),
      idempotencyKey: `bench-long-wait-${randomUUID().slice(0, 8)}`,
    });
    await timeSkipping.env.sleep(options.waitHours * HOUR);
    const task = stack.seller
      .tasks()
      .find((candidate) => candidate.tool === 'create_media_buy' && candidate.status === 'submitted');
    if (!task) throw new Error('The long-wait operation left no submitted task at the seller.');
    stack.seller.advanceTask(task.taskId);
    const state = await timeSkipping.orchestrator.result(operationId);
    if (state.status !== 'completed')
      throw new Error(`The 24-hour wait ended ${state.status}: ${state.failure?.message ?? ''}`);
    const waitedMs = Date.parse(state.updatedAt) - Date.parse(state.startedAt);
    const history = await historyOf(timeSkipping.env.client, operationId);
    const wallMs = Date.now() - began;
    return {
      id: 'long-wait-history',
      title: '5. 24-hour polled wait (B3)',
      measured: `history events of one create_media_buy polled for ${options.waitHours} hours (time-skipping server), completed by a poll`,
      baseline: 'the polls (tasks/get calls) it made meanwhile',
      measurements: [
        {
          metric: `B3 history events, ${options.waitHours}-hour polled wait, vs polls made`,
          unit: 'events',
          measured: history.events,
          baseline: state.pollCount,
          ratio: ratio(history.events, state.pollCount),
          goal: `<= ${GOAL_EVENTS} events`,
          met: history.events <= GOAL_EVENTS,
        },
      ],
      notes: [
        `completed after ${(waitedMs / HOUR).toFixed(2)} hours of workflow time and ${state.pollCount} polls, in ${(wallMs / 1000).toFixed(1)} s of wall time`,
        `events by type: ${describeTypes(history.byType)}`,
      ],
      details: { waitedMs, polls: state.pollCount, history, wallMs },
    };
  } finally {
    await timeSkipping.close();
  }
}
