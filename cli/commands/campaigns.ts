/** `campaign-moves`: a campaign's budget moves (from, to, amount, why, status), and a person's decision on a plan. */
import type { Command } from 'commander';
import { budgetAllocationView } from '../../api/budget-allocation-view';
import { CampaignClient } from '../../client/campaign-client';
import type { BudgetAllocationState } from '../../contract/campaign';
import {
  CliError,
  EXIT,
  type GlobalOptions,
  defaultRequester,
  positiveInteger,
  print,
  printJson,
  withSession,
} from '../context';

/** The lines `campaign-moves` prints for a campaign's allocation. */
export function moveLines(book: BudgetAllocationState): string[] {
  const view = budgetAllocationView(book);
  const lines = [
    `Budget allocation: ${view.policy.mode} · pool ${view.pool} · ${view.totals.applied} applied, ${view.totals.returned} returned, ${view.totals.failed} failed, ${view.totals.moved} moved`,
  ];
  if (view.proposal)
    lines.push(
      `  plan ${view.proposal.plan} waits for a decision until ${view.proposal.deadline} (moves ${view.proposal.moves.join(', ')})`,
    );
  for (const move of view.moves)
    lines.push(
      `  ${move.id}  ${move.from} → ${move.to}  ${move.moved ?? move.amount}  ${move.status}${move.error ? ` (${move.error.code})` : ''}  ${move.why}`,
    );
  if (view.moves.length === 0) lines.push('  no moves yet');
  return lines;
}

export function registerCampaignCommands(program: Command): void {
  program
    .command('campaign-moves')
    .description(
      "Show a campaign's budget moves (from, to, amount, status, why), or approve or reject the plan that waits.",
    )
    .argument('<campaign>', 'the campaign id (adcp-campaign-<key>)')
    .option('--approve <plan>', 'approve this plan of moves', positiveInteger)
    .option('--reject <plan>', 'reject this plan of moves', positiveInteger)
    .option('--by <who>', 'who decides, for the record', defaultRequester())
    .action(async (id: string, options: { approve?: number; reject?: number; by: string }, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      if (options.approve !== undefined && options.reject !== undefined)
        throw new CliError('Give --approve or --reject, not both.', EXIT.USAGE);
      await withSession(globals, async ({ client, taskQueue }) => {
        const campaigns = new CampaignClient({ client, taskQueue });
        const plan = options.approve ?? options.reject;
        if (plan !== undefined)
          await campaigns.decideBudgetMoves(id, {
            plan,
            decision: options.approve !== undefined ? 'approve' : 'reject',
            decidedBy: options.by,
          });
        const state = await campaigns.state(id);
        if (!state.budgetAllocation) throw new CliError(`Campaign ${id} has no budget allocation.`, EXIT.FAILED);
        if (globals.json) {
          printJson(budgetAllocationView(state.budgetAllocation));
          return;
        }
        for (const line of moveLines(state.budgetAllocation)) print(line);
      });
    });
}
