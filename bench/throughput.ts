/**
 * Benchmark 2: how many seller webhooks per second the gateway takes into running operations. Measured: RFC
 * 9421-signed POSTs to the URL operations register, /webhooks/adcp/<seller>/<operation>, on the gateway process
 * (api/main.ts: verify the signature against the seller's JWKS and the replay store, parse, signal: one Temporal call
 * per webhook). Baseline: the very same events signalled straight to the
 * workflows with `client.workflow.getHandle(id).signal(...)`: no HTTP, no verification.
 *
 * Every request is signed before the clock starts (the bench key sits in the seller's JWKS next to the seller's
 * own) with a fresh nonce and its own `idempotency_key`, so each one is a new event the workflow applies. Only
 * `200 {"status":"accepted"}` counts; any other answer fails the benchmark. At the end the workflows must report
 * every event of every mode as applied.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { type WebhookEvent, parseWebhookPayload } from '../protocol';
import { createWebhookAuthenticator } from '../api/webhook-verification';
import { type SignedWebhook, asWebhookRequest, signWebhookRequest } from '../test/fixtures/webhook-signing';
import { type WebhookDelivery, webhookReceivedSignal } from '../contract/operation';
import { temporal } from '@temporalio/proto';
import { type CpuTimes, cpuSince, cpuTimes, describeCpuPer } from './cpu';
import { type Phase, timedPhase, totalOf } from './phases';
import type { BenchmarkResult } from './report';
import { sellerKeepsMediaBuysSubmitted, startMediaBuy } from './operations';
import type { BenchStack } from './stack';
import { mapConcurrent, waitFor } from './async';
import { quantile, ratio } from './stats';

export interface ThroughputOptions {
  /** Running operations the events are spread over. */
  operations: number;
  requestsPerRound: number;
  /** Each round runs every mode once (in alternating order). */
  rounds: number;
  /** Requests in flight at once, in both modes. */
  concurrency: number;
  /** Unmeasured events per mode before the first round. */
  warmup: number;
  /** How long the paced run at half the gateway's maximum rate lasts (B2 p99), per mode. */
  pacedSeconds: number;
}

/** Sends `items` at `perSecond`, open-loop (each at its planned moment), and returns each one's latency in ms. */
async function pacedLatencies<T>(
  items: readonly T[],
  perSecond: number,
  task: (item: T) => Promise<void>,
): Promise<number[]> {
  const began = performance.now();
  const latencies: number[] = [];
  await Promise.all(
    items.map(async (item, index) => {
      const wait = began + (index * 1000) / perSecond - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const start = performance.now();
      await task(item);
      latencies.push(performance.now() - start);
    }),
  );
  return latencies;
}

type Mode = 'gateway' | 'direct' | 'describe+signal';

interface Event {
  operationId: string;
  body: string;
}

export async function gatewayThroughput(stack: BenchStack, options: ThroughputOptions): Promise<BenchmarkResult> {
  const { client } = stack;
  const tasks = await sellerKeepsMediaBuysSubmitted(stack);
  const run = randomUUID().slice(0, 8);
  const worker = stack.webhookWorker;

  // Operations that stay submitted for the whole benchmark, each waiting on its seller task.
  const operations = await mapConcurrent(
    Array.from({ length: options.operations }, (_, index) => index),
    options.operations,
    async (index) => {
      const operationId = await startMediaBuy(stack, worker, `bench-throughput-${run}-${index}`);
      const task = await tasks.forOperation(operationId);
      return { operationId, taskId: task.taskId };
    },
  );
  await Promise.all(
    operations.map(({ operationId }) =>
      waitFor(
        async () => (await worker.orchestrator.status(operationId)).state?.status === 'submitted',
        `${operationId} submitted`,
      ),
    ),
  );

  // One timestamp for every event: arrival order then never makes the workflow drop one as out of date.
  const timestamp = new Date().toISOString();
  const makeEvents = (count: number): Event[] =>
    Array.from({ length: count }, (_, index) => {
      const { operationId, taskId } = operations[index % operations.length];
      const body = JSON.stringify({
        idempotency_key: `evt_${randomUUID()}`,
        task_id: taskId,
        task_type: 'create_media_buy',
        status: 'submitted',
        timestamp,
        protocol: 'media-buy',
        message: 'Queued for review (bench event).',
      });
      return { operationId, body };
    });

  // Keep-alive within a phase; fresh connections for each phase. The other modes' phases leave the gateway's sockets
  // idle for about as long as its keep-alive timeout (5 s), and a request sent on a socket the server is closing at
  // that moment fails with "socket hang up" (HTTP/1.1's keep-alive race, which a seller's retry absorbs).
  let agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const freshAgent = () => {
    agent.destroy();
    agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  };
  const gatewayPhase = async (events: Event[]): Promise<Phase<Mode>> => {
    freshAgent();
    const signed = events.map(({ operationId, body }) =>
      signWebhookRequest({
        url: `${stack.gatewayUrl}/webhooks/adcp/${stack.agent.id}/${operationId}`,
        body,
        key: stack.benchKey.signerKey,
      }),
    );
    return timedPhase(stack, 'gateway', signed, options.concurrency, async (request) => {
      const answer = await post(agent, request);
      if (answer.status !== 200 || answer.body.status !== 'accepted') {
        throw new Error(
          `The gateway did not accept a signed webhook: HTTP ${answer.status} ${JSON.stringify(answer.body)}`,
        );
      }
    });
  };
  // The signal the gateway would send for each event, built before the clock starts.
  const deliveries = (events: Event[]) =>
    events.map(({ operationId, body }) => ({ operationId, event: parseWebhookPayload(JSON.parse(body)) }));
  const signal = (operationId: string, event: WebhookEvent) => {
    const delivery: WebhookDelivery = {
      eventKey: event.eventKey,
      snapshot: event.snapshot,
      receivedAt: new Date().toISOString(),
      verifiedBy: 'rfc9421',
      sellerId: stack.agent.id,
    };
    return client.workflow.getHandle(operationId).signal(webhookReceivedSignal, delivery);
  };
  const directPhase = (events: Event[]): Promise<Phase<Mode>> =>
    timedPhase(stack, 'direct', deliveries(events), options.concurrency, ({ operationId, event }) =>
      signal(operationId, event),
    );
  // A lookup before each signal, without HTTP and verification: what a describe per webhook would cost.
  const describeSignalPhase = (events: Event[]): Promise<Phase<Mode>> =>
    timedPhase(stack, 'describe+signal', deliveries(events), options.concurrency, async ({ operationId, event }) => {
      await client.workflow.getHandle(operationId).describe();
      await signal(operationId, event);
    });

  let sent = 0;
  const phases: Phase<Mode>[] = [];
  const paced: { rate: number; gateway?: number[]; direct?: number[] } = { rate: Number.NaN };
  /** The paced runs' CPU and time bounds, like a phase's (their latencies are in `paced`). */
  const pacedWindows: Window[] = [];
  const pacedRun = async <T>(mode: 'gateway' | 'direct', items: readonly T[], task: (item: T) => Promise<void>) => {
    const cpuBefore = cpuTimes(stack);
    const startedAt = Date.now();
    const latencies = await pacedLatencies(items, paced.rate, task);
    pacedWindows.push({ mode, count: items.length, cpu: cpuSince(stack, cpuBefore), startedAt, endedAt: Date.now() });
    return latencies;
  };
  try {
    await gatewayPhase(makeEvents(options.warmup));
    await directPhase(makeEvents(options.warmup));
    sent += options.warmup * 2;
    for (let round = 0; round < options.rounds; round++) {
      // Alternate the order, so slow drift (history growth, JIT, other load) hits every mode alike.
      const order =
        round % 2 === 0
          ? [gatewayPhase, directPhase, describeSignalPhase]
          : [describeSignalPhase, directPhase, gatewayPhase];
      for (const phase of order) {
        phases.push(await phase(makeEvents(options.requestsPerRound)));
        sent += options.requestsPerRound;
      }
    }
    // B2 latency: a steady (open-loop) stream at half the gateway's maximum rate just measured, each request sent at
    // its planned moment whatever the previous ones do; the same for plain signals at the same rate.
    const maxRate = totalOf(phases, 'gateway').perSecond;
    paced.rate = maxRate / 2;
    const pacedCount = Math.max(100, Math.round(paced.rate * options.pacedSeconds));
    const gatewayEvents = makeEvents(pacedCount);
    const signed = gatewayEvents.map(({ operationId, body }) =>
      signWebhookRequest({
        url: `${stack.gatewayUrl}/webhooks/adcp/${stack.agent.id}/${operationId}`,
        body,
        key: stack.benchKey.signerKey,
      }),
    );
    freshAgent();
    paced.gateway = await pacedRun('gateway', signed, async (request) => {
      const answer = await post(agent, request);
      if (answer.status !== 200) throw new Error(`The gateway answered ${answer.status} at half its maximum rate.`);
    });
    sent += pacedCount;
    const directEvents = deliveries(makeEvents(pacedCount));
    paced.direct = await pacedRun('direct', directEvents, ({ operationId, event }) => signal(operationId, event));
    sent += pacedCount;
  } finally {
    agent.destroy();
  }

  // Proof that the events reached the workflows: every event of every mode applied once.
  let applied = 0;
  await waitFor(async () => {
    const states = await Promise.all(operations.map(({ operationId }) => worker.orchestrator.status(operationId)));
    applied = states.reduce((sum, view) => sum + (view.state?.webhooksApplied ?? 0), 0);
    return applied >= sent;
  }, `all ${sent} events applied`).catch((error: Error) => {
    throw new Error(`${error.message}: the workflows applied ${applied} of ${sent} events.`);
  });
  // How many workflow tasks each mode's events cost: the engine's work per event depends on it (see bench/README.md).
  const histories = await Promise.all(
    operations.map(({ operationId }) => client.workflow.getHandle(operationId).fetchHistory()),
  );
  const tasksAtMax = {
    gateway: workflowTasksPerSignal(
      histories,
      phases.filter((phase) => phase.mode === 'gateway'),
    ),
    direct: workflowTasksPerSignal(
      histories,
      phases.filter((phase) => phase.mode === 'direct'),
    ),
  };
  const tasksPaced = {
    gateway: workflowTasksPerSignal(
      histories,
      pacedWindows.filter((window) => window.mode === 'gateway'),
    ),
    direct: workflowTasksPerSignal(
      histories,
      pacedWindows.filter((window) => window.mode === 'direct'),
    ),
  };
  const pacedCpu = (mode: 'gateway' | 'direct') => {
    const window = pacedWindows.find((candidate) => candidate.mode === mode);
    return window ? describeCpuPer(window.cpu, window.count) : 'not measured';
  };
  await Promise.all(
    operations.map(async ({ operationId }) => {
      await client.workflow.getHandle(operationId).terminate('bench: throughput done');
      stack.running.delete(operationId);
    }),
  );

  const gateway = totalOf(phases, 'gateway');
  const direct = totalOf(phases, 'direct');
  const describeSignal = totalOf(phases, 'describe+signal');
  const verification = await verificationCost(stack, makeEvents(options.requestsPerRound));
  const b2 = ratio(gateway.perSecond, direct.perSecond);
  const p99 = { gateway: quantile(paced.gateway ?? [], 0.99), direct: quantile(paced.direct ?? [], 0.99) };
  const p50 = { gateway: quantile(paced.gateway ?? [], 0.5), direct: quantile(paced.direct ?? [], 0.5) };
  // The gateway process's own CPU per webhook at the maximum rate, beside what verifying one costs alone.
  const gatewayCpuMs = (gateway.cpu.gateway ?? Number.NaN) / gateway.count;
  const verificationMs = verification.microsecondsPerRequest / 1000;
  return {
    id: 'gateway-throughput',
    title: '2. Gateway throughput (B2)',
    measured:
      'RFC 9421-signed webhooks POSTed to the gateway process at /webhooks/adcp/<seller>/<operation> (verify, parse, signal: one Temporal call each), 200 accepted',
    baseline:
      'the same events signalled directly with client.workflow.getHandle(id).signal(): no HTTP, no verification',
    measurements: [
      {
        metric: 'B2 events accepted per second',
        unit: 'webhooks/s',
        measured: gateway.perSecond,
        baseline: direct.perSecond,
        ratio: b2,
        goal: '>= 0.8x',
        met: b2 >= 0.8,
      },
      {
        metric: `B2 p99 latency at half max rate (${paced.rate.toFixed(0)}/s)`,
        unit: 'ms',
        measured: p99.gateway,
        baseline: p99.direct,
        ratio: ratio(p99.gateway, p99.direct),
        goal: '<= 50 ms',
        met: p99.gateway <= 50,
      },
      {
        metric: 'B2 gateway CPU per webhook (baseline: RFC 9421 verification alone)',
        unit: 'ms',
        measured: gatewayCpuMs,
        baseline: verificationMs,
        ratio: ratio(gatewayCpuMs, verificationMs),
        goal: '<= 0.6 ms',
        met: gatewayCpuMs <= 0.6,
      },
      {
        metric: 'time per request, median of rounds',
        unit: 'ms',
        measured: gateway.medianMs,
        baseline: direct.medianMs,
        ratio: ratio(gateway.medianMs, direct.medianMs),
      },
    ],
    notes: [
      `${options.rounds} rounds x ${options.requestsPerRound} events per mode (after ${options.warmup} warm-up each), ${options.concurrency} in flight, spread over ${options.operations} running create_media_buy operations (webhook-registered worker)`,
      `all ${gateway.count + options.warmup} gateway requests answered 200 {"status":"accepted"}; the workflows applied ${applied} of the ${sent} events sent in all modes (warm-up included)`,
      `paced at half the gateway's maximum (${paced.rate.toFixed(0)}/s, open loop, ${paced.gateway?.length ?? 0} events per mode): gateway p50 ${p50.gateway.toFixed(1)} ms, p99 ${p99.gateway.toFixed(1)} ms; plain signals at the same rate p50 ${p50.direct.toFixed(1)} ms, p99 ${p99.direct.toFixed(1)} ms`,
      `CPU per event, all processes: gateway ${describeCpuPer(gateway.cpu, gateway.count)}; direct ${describeCpuPer(direct.cpu, direct.count)}`,
      `workflow tasks per event (history events in each mode's time windows): at the maximum rate gateway ${describeTasks(tasksAtMax.gateway)}, direct ${describeTasks(tasksAtMax.direct)}; paced at half the gateway's maximum gateway ${describeTasks(tasksPaced.gateway)}, direct ${describeTasks(tasksPaced.direct)}`,
      `CPU per event while paced at half the gateway's maximum: gateway ${pacedCpu('gateway')}; direct ${pacedCpu('direct')}`,
      `where the gateway's time goes: describe() + signal() straight to Temporal (a lookup before each signal, which the gateway does not make) ran at ${describeSignal.perSecond.toFixed(0)}/s; RFC 9421 verification alone (WebhookAuthenticator.verify in the bench process, one at a time) takes ${verification.microsecondsPerRequest.toFixed(0)} us per request`,
    ],
    details: {
      ...options,
      gateway,
      direct,
      describeSignal,
      verification,
      phases,
      paced,
      pacedWindows,
      workflowTasksPerSignal: { atMaximumRate: tasksAtMax, paced: tasksPaced },
      eventsSent: sent,
      eventsApplied: applied,
    },
  };
}

/** A span of the run in which one mode sent its events. */
interface Window {
  mode: string;
  count: number;
  cpu: CpuTimes;
  startedAt: number;
  endedAt: number;
}

interface TaskCount {
  signals: number;
  workflowTasks: number;
  perSignal: number;
}

const EventType = temporal.api.enums.v1.EventType;

function epochMs(time: temporal.api.history.v1.IHistoryEvent['eventTime']): number {
  return Number(time?.seconds ?? 0) * 1000 + Math.floor((time?.nanos ?? 0) / 1e6);
}

/**
 * Signals received and workflow tasks completed inside the windows, from the operations' histories. Every event of this
 * benchmark reaches its workflow as a signal and issues no command, so the count of tasks per signal is how well the
 * server batched signals into workflow tasks: several signals that arrive while a task runs share the next one.
 */
function workflowTasksPerSignal(
  histories: readonly { events?: temporal.api.history.v1.IHistoryEvent[] | null }[],
  windows: readonly Pick<Window, 'startedAt' | 'endedAt'>[],
): TaskCount {
  let signals = 0;
  let workflowTasks = 0;
  for (const history of histories) {
    for (const event of history.events ?? []) {
      const at = epochMs(event.eventTime);
      if (!windows.some((window) => at >= window.startedAt && at <= window.endedAt)) continue;
      if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) signals++;
      else if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) workflowTasks++;
    }
  }
  return { signals, workflowTasks, perSignal: signals > 0 ? workflowTasks / signals : Number.NaN };
}

function describeTasks(count: TaskCount): string {
  return `${count.perSignal.toFixed(2)} (${count.workflowTasks} tasks for ${count.signals} signals)`;
}

/** The CPU cost of verifying one signed webhook, in-process and sequentially (no HTTP, no Temporal). */
async function verificationCost(
  stack: BenchStack,
  events: Event[],
): Promise<{ requests: number; microsecondsPerRequest: number }> {
  const config = stack.agent.webhooks;
  if (!config) throw new Error(`Seller ${stack.agent.id} has no webhooks configuration.`);
  const authenticator = createWebhookAuthenticator();
  const requests = events.map(({ operationId, body }) =>
    asWebhookRequest(
      signWebhookRequest({
        url: `${stack.gatewayUrl}/webhooks/adcp/${stack.agent.id}/${operationId}`,
        body,
        key: stack.benchKey.signerKey,
      }),
    ),
  );
  const began = performance.now();
  for (const request of requests) {
    const verdict = await authenticator.verify(request, stack.agent.id, config);
    if (!verdict.ok)
      throw new Error(`In-process verification rejected a bench webhook: ${verdict.reason} (${verdict.logDetail})`);
  }
  return { requests: requests.length, microsecondsPerRequest: ((performance.now() - began) * 1000) / requests.length };
}

function post(agent: http.Agent, request: SignedWebhook): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      request.url,
      { method: 'POST', agent, headers: { ...request.headers, 'content-length': String(request.body.length) } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: Record<string, unknown>;
          try {
            body = JSON.parse(text) as Record<string, unknown>;
          } catch {
            body = { text };
          }
          resolve({ status: response.statusCode ?? 0, body });
        });
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end(request.body);
  });
}
