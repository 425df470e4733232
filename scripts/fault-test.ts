/**
 * `npm run fault-test`: the full fault test. Starts its own Temporal dev server, then runs 50 concurrent
 * create_media_buy operations against the scripted seller with 10% of its requests failing (5xx or answered after
 * the call timeout) and 5% landing on hanging sockets, plus 10 operations at a seller that sends its signed final
 * webhook before its answer and loses half of those answers after it acted, plus 6 operations canceled while the
 * others' calls are in flight at the same sellers, plus 6 operations approved at a seller that keeps its own task
 * records, 6 at a seller without task reads or webhooks that loses half of its create answers, and 8 at a seller that
 * serves MCP Tasks and keeps each create's MCP task pending for 10 to 20 call timeouts without webhooks, while the
 * worker process is SIGKILLed and restarted twice.
 * Exits 1 unless every operation ended completed, or failed with nothing at any seller from it (no buy, no open task;
 * checked at the sellers by its keys; `--strict` requires every one completed), every canceled one ended canceled with
 * at most one buy, the sellers hold exactly one media buy per completed operation, every MCP Tasks operation ended
 * completed with its one buy, read by MCP tasks/get, and each seller's reconciliation orphan pass, run at the end,
 * finds every buy it lists known to exactly one workflow (no orphans, none claimed twice).
 * Options: --operations N --kills K --fault-rate R --hang-rate R --webhook-first N --lost-answer-rate R --cancels N
 * --approvals N --lost-without-webhooks N --mcp-tasks N --strict.
 */
import { closeMCPConnections } from '@adcp/sdk';
import { freePort, startDevServer } from './lib/dev-server';
import { runFaultScenario } from '../test/harness/fault-run';

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  if (index < 0) return fallback;
  const value = Number(process.argv[index + 1]);
  if (!Number.isFinite(value) || value < 0)
    throw new Error(`--${name} needs a non-negative number, got ${process.argv[index + 1]}`);
  return value;
}

async function main(): Promise<void> {
  const operations = option('operations', 50);
  const kills = option('kills', 2);
  const faultRate = option('fault-rate', 0.1);
  const hangRate = option('hang-rate', 0.05);
  const webhookFirstOperations = option('webhook-first', 10);
  const lostAnswerRate = option('lost-answer-rate', 0.5);
  const cancels = option('cancels', 6);
  const outOfBandApprovals = option('approvals', 6);
  const lostWithoutWebhooks = option('lost-without-webhooks', 6);
  const mcpTasks = option('mcp-tasks', 8);
  const strict = process.argv.includes('--strict');
  const server = await startDevServer({ port: await freePort(), headless: true });
  try {
    const report = await runFaultScenario({
      address: server.address,
      operations,
      kills,
      faultRate,
      hangRate,
      webhookFirstOperations,
      lostAnswerRate,
      cancels,
      outOfBandApprovals,
      lostWithoutWebhooks,
      mcpTasks,
      log: (line) => console.log(`fault-test: ${line}`),
    });
    console.log(JSON.stringify(report, null, 2));
    // The reconciliation orphan pass must agree: every buy a seller lists known to exactly one workflow.
    const passes = Object.values(report.reconciliation);
    const passFigures = Object.entries(report.reconciliation)
      .map(([sellerId, pass]) =>
        pass.listed
          ? `${sellerId}: ${pass.count} listed, ${pass.known} known, ${pass.adopted} adopted, ${pass.orphans.length} orphans, ${pass.claimedTwice.length} claimed twice`
          : `${sellerId}: not listed (${pass.note ?? 'no listing'})`,
      )
      .join('; ');
    console.log(`fault-test: reconciliation orphan pass — ${passFigures}`);
    const group = report.mcpTasks;
    console.log(
      `fault-test: MCP Tasks seller — ${group.ended.completed ?? 0}/${mcpTasks} completed, ${group.buys} buys held, ${group.oneBuyEach} operations knowing their one buy, ${group.readByMcpTasks} holding their MCP task and read by MCP tasks/get (${group.createCalls} create calls, ${group.taskReads} MCP tasks/get); tasks pending ${group.pendingSeconds.min}-${group.pendingSeconds.max} s`,
    );
    // Nothing may fail here: the seller takes every create, only slowly.
    const mcpTasksOk =
      (group.ended.completed ?? 0) === mcpTasks &&
      group.buys === mcpTasks &&
      group.oneBuyEach === mcpTasks &&
      group.readByMcpTasks === mcpTasks;
    const expected = operations + webhookFirstOperations + outOfBandApprovals + lostWithoutWebhooks + mcpTasks;
    // A failed operation is honest only when no seller holds anything from it (verified at the sellers, by its keys).
    const failed = Object.entries(report.ended)
      .filter(([status]) => status.startsWith('failed'))
      .reduce((sum, [, count]) => sum + count, 0);
    const completed = report.ended.completed ?? 0;
    const failedFigures = Object.entries(report.ended)
      .filter(([status]) => status !== 'completed')
      .map(([status, count]) => `${count} ${status}`)
      .join(', ');
    console.log(
      `fault-test: ${completed}/${expected} completed${failedFigures ? `, ${failedFigures}` : ''}; failed at the sellers: ${report.failedAtSeller.holdNothing} hold nothing (${report.failedAtSeller.reachedSeller} had a create the seller took), ${report.failedAtSeller.holdSomething.length} hold something${report.failedAtSeller.holdSomething.length ? ` (${report.failedAtSeller.holdSomething.join('; ')})` : ''}`,
    );
    const ok =
      report.notEnded.length === 0 &&
      (strict ? completed === expected : completed + failed === expected) &&
      failed === report.failedAtSeller.holdNothing &&
      report.failedAtSeller.holdSomething.length === 0 &&
      report.mediaBuys === completed &&
      report.duplicateBuys === 0 &&
      (report.canceled.ended.canceled ?? 0) === cancels &&
      report.canceled.buys <= cancels &&
      report.canceled.unaccountedBuys === 0 &&
      report.orphanBuys.length === 0 &&
      report.buysKnownTwice.length === 0 &&
      report.completedWithoutBuy.length === 0 &&
      mcpTasksOk &&
      passes.every((pass) => pass.orphans.length === 0 && pass.claimedTwice.length === 0) &&
      passes.some((pass) => pass.listed);
    console.log(
      ok
        ? `fault-test: PASS — ${completed} of ${expected} operations completed (${failed} failed, the sellers holding nothing from them), ${report.mediaBuys} media buys, ${cancels} canceled (${report.canceled.buys} buys, each canceled at the seller or on record), ${report.faultsInjected} faults, ${report.hangingRequests} unanswered requests, ${report.webhooksFirst.accepted} webhooks before answers, ${report.approvals.admin + report.approvals.completeTask} approvals at the seller (${report.approvals.admin} in its admin flow), ${report.lostWithoutWebhooks} answers lost without webhooks, ${group.readByMcpTasks} MCP tasks pending ${group.pendingSeconds.min}-${group.pendingSeconds.max} s read to completion by MCP tasks/get; ${report.buysHeld} buys held, ${report.orphanBuys.length} orphans, ${report.buysKnownTwice.length} claimed twice; ${kills} worker kills, ${report.seconds} s`
        : 'fault-test: FAIL',
    );
    process.exitCode = ok ? 0 : 1;
  } finally {
    await closeMCPConnections().catch(() => undefined);
    await server.stop();
  }
}

main().catch((error) => {
  console.error(`fault-test: ${error instanceof Error ? error.stack : String(error)}`);
  process.exit(1);
});
