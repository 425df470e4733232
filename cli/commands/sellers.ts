/** `sellers` (the agents file the worker reads) and `reconcile` (one seller's reconciliation, now). */
import type { Command } from 'commander';
import { reconciliationReportView } from '../../api/operation-view';
import {
  type GlobalOptions,
  agentsFile,
  defaultRequester,
  loadConfiguredSellers,
  print,
  printJson,
  withSession,
} from '../context';

export function registerSellerCommands(program: Command): void {
  program
    .command('sellers')
    .description(
      'List the sellers of the agents file the worker uses (ADCP_AGENTS_FILE, else agents.json, else agents.example.json).',
    )
    .action((_options: unknown, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      const sellers = loadConfiguredSellers();
      // Token variables are named, never read: whether one is set is all the CLI says about it.
      const rows = sellers.sellers.map((agent) => ({
        id: agent.id,
        name: agent.name ?? null,
        url: agent.url,
        protocol: agent.protocol,
        adcp_version: agent.adcp_version ?? '3',
        token_env: agent.token_env ?? null,
        token_set: agent.token_env ? Boolean(process.env[agent.token_env]) : null,
        webhooks: agent.webhooks ? true : false,
      }));
      if (globals.json) {
        printJson({ source: sellers.source, sellers: rows });
        return;
      }
      print(`Sellers from ${agentsFile()}:`);
      for (const row of rows) {
        const token = row.token_env
          ? `token from $${row.token_env}${row.token_set ? '' : ' (not set in this shell)'}`
          : 'no token';
        print(
          `  ${row.id}  ${row.protocol.toUpperCase()} ${row.url}  AdCP ${row.adcp_version}  ${token}${row.name ? `  (${row.name})` : ''}`,
        );
      }
    });

  program
    .command('reconcile')
    .description(
      'Reconcile one seller now: adopt seller tasks whose answer was lost, report the rest, make its open operations poll now.',
    )
    .argument('<seller>', 'the seller, by its id in the agents file')
    .option('--by <who>', 'who asks, for the record', defaultRequester())
    .action(async (seller: string, options: { by: string }, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      await withSession(globals, async ({ orchestrator }) => {
        const report = await orchestrator.reconcile(seller, options.by);
        if (globals.json) {
          printJson(reconciliationReportView(report));
          return;
        }
        print(`Reconciled ${report.sellerId} at ${report.at}: ${report.openOperations} open operation(s).`);
        if (report.sellerError !== undefined)
          print(`  The seller's task list could not be read: ${report.sellerError}`);
        else if (!report.sellerListsTasks)
          print('  The seller does not list its tasks (no tasks/list): nothing to adopt.');
        else
          print(
            `  The seller lists ${report.sellerOpenTasks} open task(s)${report.sellerListTruncated ? ' (truncated)' : ''}.`,
          );
        for (const adopted of report.adopted) print(`  adopted ${adopted.taskId} into ${adopted.operationId}`);
        for (const task of report.unattributed)
          print(
            `  unattributed seller task ${task.taskId} (${task.status}${task.taskType ? `, ${task.taskType}` : ''})`,
          );
        for (const missing of report.missingFromSeller) print(`  missing at the seller: ${missing}`);
        print(`  ${report.pollRequested} operation(s) asked to poll now.`);
      });
    });
}
