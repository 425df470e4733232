/**
 * `npm run fault-test`: the full fault test. Starts its own Temporal dev server, then runs 50 concurrent
 * create_media_buy operations against the scripted seller with 10% of its requests failing (5xx or answered after
 * the call timeout) while the worker process is SIGKILLed and restarted twice. Exits 1 unless every operation
 * completed and the seller holds exactly 50 media buys. Options: --operations N --kills K --fault-rate R.
 */
import { closeMCPConnections } from '@adcp/sdk';
import { freePort, startDevServer } from '../config/dev-server';
import { runFaultScenario } from '../test/harness/fault-run';

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  if (index < 0) return fallback;
  const value = Number(process.argv[index + 1]);
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} needs a non-negative number, got ${process.argv[index + 1]}`);
  return value;
}

async function main(): Promise<void> {
  const operations = option('operations', 50);
  const kills = option('kills', 2);
  const faultRate = option('fault-rate', 0.1);
  const server = await startDevServer({ port: await freePort(), headless: true });
  try {
    const report = await runFaultScenario({ address: server.address, operations, kills, faultRate, log: (line) => console.log(`fault-test: ${line}`) });
    console.log(JSON.stringify(report, null, 2));
    const ok = report.notEnded.length === 0 && report.ended.completed === operations && report.mediaBuys === operations && report.duplicateBuys === 0;
    console.log(ok ? `fault-test: PASS — ${operations} operations completed, ${report.mediaBuys} media buys, ${report.faultsInjected} faults, ${kills} worker kills, ${report.seconds} s` : 'fault-test: FAIL');
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
