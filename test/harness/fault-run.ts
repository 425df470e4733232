/**
 * The fault scenario of the errors issue, shared by its short form in `npm test` and the full form
 * (`npm run fault-test`): N concurrent create_media_buy operations against the scripted seller while a fraction of
 * the seller's answers are 5xx or timeouts (the seller processed the request but answered too late) and the worker
 * process is SIGKILLed and restarted. It reports what a user relies on: every operation ended, and the seller holds
 * exactly one media buy per operation.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { idempotencyKeyFor } from '../../activities/idempotency';
import { OrchestratorClient } from '../../client/orchestrator-client';
import type { ManagedProcess } from '../../scripts/lib/processes';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from './demo-requests';
import { startWorkerProcess, writeAgentsFile } from './worker-process';

export interface FaultScenario {
  address: string;
  operations: number;
  /** Worker SIGKILLs, spread over the run. */
  kills: number;
  /** Share of seller requests (calls and polls) that fail. */
  faultRate: number;
  /** Per-call timeout of the worker; the "timeout" faults hold the answer longer than this. */
  callTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface FaultReport {
  operations: number;
  ended: Record<string, number>;
  notEnded: string[];
  mediaBuys: number;
  operationsWithOneBuy: number;
  /** Operations with more than one buy (or buys no operation's key explains). */
  duplicateBuys: number;
  faultsInjected: number;
  requests: number;
  kills: number;
  seconds: number;
}

export async function runFaultScenario(scenario: FaultScenario): Promise<FaultReport> {
  const log = scenario.log ?? (() => undefined);
  const callTimeoutMs = scenario.callTimeoutMs ?? 2_000;
  const started = Date.now();
  const seller: ScriptedSeller = await startScriptedSeller();
  seller.setDefaultScript('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1 }]);
  const faults = [
    { kind: 'http-status' as const, status: 500 },
    { kind: 'http-status' as const, status: 503 },
    { kind: 'slow-response' as const, ms: callTimeoutMs + 1_500 },
  ];
  seller.chaos('create_media_buy', { rate: scenario.faultRate, faults });
  seller.chaos('tasks/get', { rate: scenario.faultRate, faults });

  const agentsFile = writeAgentsFile([{ id: 'chaos', url: seller.url, protocol: 'mcp', token_env: 'CHAOS_SELLER_TOKEN' }]);
  const taskQueue = `faults-${randomUUID()}`;
  const workerEnv = { CHAOS_SELLER_TOKEN: seller.authToken, ADCP_CALL_TIMEOUT_MS: String(callTimeoutMs), ADCP_RECONCILE_EVERY: 'off' };
  const connection = await Connection.connect({ address: scenario.address });
  const orchestrator = new OrchestratorClient({ client: new Client({ connection }), taskQueue });
  let worker: ManagedProcess | undefined;
  try {
    worker = await startWorkerProcess({ address: scenario.address, taskQueue, agentsFile, env: workerEnv });
    const operationIds = await Promise.all(
      Array.from({ length: scenario.operations }, async () => {
        const started = await orchestrator.start({ agentId: 'chaos', task: 'create_media_buy', params: createMediaBuyParams(), idempotencyKey: randomUUID() });
        return started.operationId;
      }),
    );
    log(`${operationIds.length} operations started`);
    const results = Promise.allSettled(operationIds.map((operationId) => orchestrator.result(operationId)));

    for (let kill = 1; kill <= scenario.kills; kill += 1) {
      // Kill while calls are in flight: after the seller has seen a share of this round's requests.
      const seen = seller.calls.length;
      const target = seen + Math.max(5, Math.floor(scenario.operations / 2));
      const deadline = Date.now() + 60_000;
      while (seller.calls.length < target && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      await worker.stop('SIGKILL');
      log(`worker SIGKILLed (${kill}/${scenario.kills}) after ${seller.calls.length} seller requests`);
      worker = await startWorkerProcess({ address: scenario.address, taskQueue, agentsFile, env: workerEnv });
    }

    const settled = await results;
    const ended: Record<string, number> = {};
    const notEnded: string[] = [];
    settled.forEach((outcome, index) => {
      if (outcome.status === 'fulfilled') ended[outcome.value.status] = (ended[outcome.value.status] ?? 0) + 1;
      else notEnded.push(`${operationIds[index]}: ${String(outcome.reason)}`);
    });
    // Attribute each buy to its operation through the keys the operation may have used (first key, one fresh key).
    const buys = seller.mediaBuys();
    const operationOfKey = new Map(operationIds.flatMap((operationId) => [idempotencyKeyFor(operationId, 'call'), idempotencyKeyFor(operationId, 'call#1')].map((key) => [key, operationId] as const)));
    const byKey = new Map<string, number>(operationIds.map((operationId) => [operationId, 0]));
    for (const buy of buys) {
      const owner = operationOfKey.get(buy.idempotencyKey ?? '') ?? `unattributed:${buy.mediaBuyId}`;
      byKey.set(owner, (byKey.get(owner) ?? 0) + 1);
    }
    return {
      operations: scenario.operations,
      ended,
      notEnded,
      mediaBuys: buys.length,
      operationsWithOneBuy: [...byKey.values()].filter((count) => count === 1).length,
      duplicateBuys: [...byKey.entries()].filter(([owner, count]) => count > 1 || owner.startsWith('unattributed:')).length,
      faultsInjected: seller.calls.filter((call) => call.fault).length,
      requests: seller.calls.length,
      kills: scenario.kills,
      seconds: Math.round((Date.now() - started) / 100) / 10,
    };
  } finally {
    await worker?.stop('SIGKILL').catch(() => undefined);
    await connection.close();
    await seller.close();
  }
}
