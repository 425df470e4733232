/**
 * Benchmark 1: how long after the seller's state change the operation's workflow holds the terminal state, with
 * RFC 9421-signed webhooks through the gateway (measured) and with polling alone (baseline).
 *
 * Each create_media_buy answers `submitted`; the bench then completes the seller task itself (`advanceTask`, which
 * also sends the signed webhook when one is registered) at a planned offset after the task was created. Offsets
 * are spread evenly over 2.5–13.5 s, across the first poll polls (about 2, 6 and 14 s after submission), so the
 * polling baseline sees changes at every phase of its cycle. Webhook and polling operations get the same offsets
 * and run at the same time, on two workers that differ only in ADCP_PUBLIC_BASE_URL.
 */
import { randomUUID } from 'node:crypto';
import type { OperationState } from '../contract/operation';
import { FIRST_POLL_MS, pollOffsets, planWait } from '../workflows/operation/cadence';
import { describeTypes, historiesOf } from './history';
import type { BenchmarkResult } from './report';
import { sellerKeepsMediaBuysSubmitted, startMediaBuy } from './operations';
import type { BenchStack, BenchWorker } from './stack';
import { sleep } from './async';
import { distribution, ratio } from './stats';

export interface LatencyOptions {
  /** Operations per mode. */
  perMode: number;
  firstChangeMs: number;
  lastChangeMs: number;
}

interface Sample {
  mode: 'webhooks' | 'polling';
  operationId: string;
  changeOffsetMs: number;
  /** When the seller task became completed (the seller's own record). */
  changedAt: number;
  /** The workflow's recorded time of its transition to completed. */
  workflowAt: number;
  /** When `result()` resolved in the bench. */
  resultAt: number;
  source: string;
  webhookRegistered: boolean;
  pollCount: number;
  webhooksApplied: number;
}

export async function webhookLatency(stack: BenchStack, options: LatencyOptions): Promise<BenchmarkResult> {
  const { seller } = stack;
  const tasks = await sellerKeepsMediaBuysSubmitted(stack);
  const run = randomUUID().slice(0, 8);
  const step = options.perMode > 1 ? (options.lastChangeMs - options.firstChangeMs) / (options.perMode - 1) : 0;
  const offsets = Array.from({ length: options.perMode }, (_, index) =>
    Math.round(options.firstChangeMs + index * step),
  );

  const measure = async (worker: BenchWorker, index: number): Promise<Sample> => {
    const mode = worker.webhooks ? 'webhooks' : 'polling';
    const operationId = await startMediaBuy(stack, worker, `bench-latency-${run}-${mode}-${index}`);
    const result = worker.orchestrator.result(operationId).then((state) => ({ state, at: Date.now() }));
    result.catch(() => undefined); // awaited below; a failure meanwhile must not count as unhandled
    const task = await tasks.forOperation(operationId);
    await sleep(Date.parse(task.createdAt) + offsets[index] - Date.now());
    const advanced = seller.advanceTask(task.taskId);
    const changedAt = Date.parse(advanced.history[advanced.history.length - 1].at);
    const { state, at } = await result;
    stack.running.delete(operationId);
    const completed = completedTransition(state);
    return {
      mode,
      operationId,
      changeOffsetMs: offsets[index],
      changedAt,
      workflowAt: Date.parse(completed.at),
      resultAt: at,
      source: completed.source,
      webhookRegistered: state.webhookRegistered,
      pollCount: state.pollCount,
      webhooksApplied: state.webhooksApplied,
    };
  };

  const samples = await Promise.all(
    offsets.flatMap((_, index) => [measure(stack.webhookWorker, index), measure(stack.pollingWorker, index)]),
  );
  await seller.webhooksSettled();

  const byMode = (mode: Sample['mode']) => samples.filter((sample) => sample.mode === mode);
  const toWorkflow = (list: Sample[]) => distribution(list.map((sample) => sample.workflowAt - sample.changedAt));
  const toResult = (list: Sample[]) => distribution(list.map((sample) => sample.resultAt - sample.changedAt));
  const webhooks = byMode('webhooks');
  const polling = byMode('polling');
  const hook = { workflow: toWorkflow(webhooks), result: toResult(webhooks) };
  const poll = { workflow: toWorkflow(polling), result: toResult(polling) };

  const completedByWebhook = webhooks.filter((sample) => sample.source === 'webhook').length;
  const completedByPoll = polling.filter((sample) => sample.source === 'poll').length;
  if (webhooks.some((sample) => !sample.webhookRegistered) || polling.some((sample) => sample.webhookRegistered)) {
    throw new Error('Latency benchmark misconfigured: webhook registration does not match the worker it ran on.');
  }
  const deliveries = seller.webhookDeliveries.filter((delivery) => delivery.status === 'completed');
  const acceptedDeliveries = deliveries.filter((delivery) => delivery.delivered && delivery.finalStatus === 200).length;
  // B3: the history of a create_media_buy that a webhook completed, read back from the server.
  const hookHistory = await historiesOf(
    stack.client,
    webhooks.filter((sample) => sample.source === 'webhook').map((sample) => sample.operationId),
  );
  const pollHistory = await historiesOf(
    stack.client,
    polling.map((sample) => sample.operationId),
  );
  const polls = pollOffsets(
    planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false }),
    options.lastChangeMs + 10_000,
  );

  return {
    id: 'webhook-latency',
    title: '1. Webhook vs polling latency',
    measured: 'signed webhook from the seller through the gateway (api/main.ts) into the workflow',
    baseline: 'the same operations with no webhook registered (worker without ADCP_PUBLIC_BASE_URL): polling only',
    measurements: [
      {
        metric: 'change -> workflow state, median',
        unit: 'ms',
        measured: hook.workflow.median,
        baseline: poll.workflow.median,
        ratio: ratio(hook.workflow.median, poll.workflow.median),
      },
      {
        metric: 'change -> workflow state, p95',
        unit: 'ms',
        measured: hook.workflow.p95,
        baseline: poll.workflow.p95,
        ratio: ratio(hook.workflow.p95, poll.workflow.p95),
      },
      {
        metric: 'change -> result() resolves, median',
        unit: 'ms',
        measured: hook.result.median,
        baseline: poll.result.median,
        ratio: ratio(hook.result.median, poll.result.median),
      },
      {
        metric: 'B3 history events, webhook-completed create_media_buy (max)',
        unit: 'events',
        measured: hookHistory.maxEvents,
        baseline: pollHistory.maxEvents,
        ratio: ratio(hookHistory.maxEvents, pollHistory.maxEvents),
        goal: '<= 25 events',
        met: hookHistory.maxEvents <= 25,
      },
    ],
    notes: [
      `${options.perMode} create_media_buy operations per mode, all ${options.perMode * 2} at once; the seller completes each ${options.firstChangeMs / 1000}-${options.lastChangeMs / 1000} s after submission (evenly spread), while the worker polls at ${polls.map((ms) => `${ms / 1000}`).join(', ')} s`,
      '"change -> workflow state" = the workflow\'s own transition time (state.transitions[].at, workflow time) minus the seller\'s state-change time; "result()" adds completing the workflow and the client seeing it',
      `webhook mode: ${completedByWebhook}/${webhooks.length} completed by the webhook${completedByWebhook < webhooks.length ? ' (the others by a poll that came first)' : ''}; ${acceptedDeliveries}/${deliveries.length} completion webhooks answered 200 by the gateway`,
      `polling mode: ${completedByPoll}/${polling.length} completed by a poll`,
      `B3 history (fetchHistory of every operation): webhook-completed median ${hookHistory.medianEvents}, max ${hookHistory.maxEvents} (${describeTypes(hookHistory.sample.byType)}); poll-completed median ${pollHistory.medianEvents}, max ${pollHistory.maxEvents}`,
      `target "well under a poll interval": webhook p95 ${Math.round(hook.workflow.p95)} ms vs the shortest poll interval ${FIRST_POLL_MS / 1000} s (${((hook.workflow.p95 / FIRST_POLL_MS) * 100).toFixed(1)}% of it)`,
    ],
    details: {
      perMode: options.perMode,
      changeOffsetsMs: offsets,
      pollsAfterSubmissionMs: polls,
      webhooks: { toWorkflowMs: hook.workflow, toResultMs: hook.result, completedByWebhook },
      polling: { toWorkflowMs: poll.workflow, toResultMs: poll.result, completedByPoll },
      completionWebhooks: { sent: deliveries.length, acceptedWith200: acceptedDeliveries },
      histories: { webhookCompleted: hookHistory, pollCompleted: pollHistory },
      samples: samples.map((sample) => ({
        mode: sample.mode,
        changeOffsetMs: sample.changeOffsetMs,
        toWorkflowMs: sample.workflowAt - sample.changedAt,
        toResultMs: sample.resultAt - sample.changedAt,
        source: sample.source,
        pollCount: sample.pollCount,
        webhooksApplied: sample.webhooksApplied,
      })),
    },
  };
}

function completedTransition(state: OperationState) {
  const transition = [...state.transitions].reverse().find((candidate) => candidate.to === 'completed');
  if (state.status !== 'completed' || !transition) {
    throw new Error(
      `Operation ${state.operationId} ended ${state.status}, not completed: ${state.failure?.message ?? state.message ?? ''}`,
    );
  }
  return transition;
}
