/**
 * `npm run fault-test`: the full fault test. Starts its own Temporal dev server, then runs 50 concurrent
 * create_media_buy operations against the scripted seller with 10% of its requests failing (5xx or answered after
 * the call timeout) and 5% landing on hanging sockets, plus 10 operations at a seller that sends its signed final
 * webhook before its answer and loses half of those answers after it acted, plus 6 operations canceled while the
 * others' calls are in flight at the same sellers, while the worker process is SIGKILLed and restarted twice.
 * Exits 1 unless every operation completed, every canceled one ended canceled with at most one buy, and the sellers
 * hold exactly one media buy per completed operation.
 * Options: --operations N --kills K --fault-rate R --hang-rate R --webhook-first N --lost-answer-rate R --cancels N.
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
      log: (line) => console.log(`fault-test: ${line}`),
    });
    console.log(JSON.stringify(report, null, 2));
    const expected = operations + webhookFirstOperations + outOfBandApprovals + lostWithoutWebhooks;
    const ok =
      report.notEnded.length === 0 &&
      report.ended.completed === expected &&
      report.mediaBuys === expected &&
      report.duplicateBuys === 0 &&
      (report.canceled.ended.canceled ?? 0) === cancels &&
      report.canceled.buys <= cancels &&
      report.canceled.unaccountedBuys === 0 &&
      report.orphanBuys.length === 0 &&
      report.buysKnownTwice.length === 0 &&
      report.completedWithoutBuy.length === 0;
    console.log(
      ok
        ? `fault-test: PASS — ${expected} operations completed, ${report.mediaBuys} media buys, ${cancels} canceled (${report.canceled.buys} buys, each canceled at the seller or on record), ${report.faultsInjected} faults, ${report.hangingRequests} unanswered requests, ${report.webhooksFirst.accepted} webhooks before answers, ${report.approvals.admin + report.approvals.completeTask} approvals at the seller (${report.approvals.admin} in its admin flow), ${report.lostWithoutWebhooks} answers lost without webhooks; ${report.buysHeld} buys held, ${report.orphanBuys.length} orphans, ${report.buysKnownTwice.length} claimed twice; ${kills} worker kills, ${report.seconds} s`
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
