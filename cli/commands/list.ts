/** `list`: operations from Temporal visibility, filtered and paged (the same filters as GET /v1/operations). */
import type { Command } from 'commander';
import { OPERATION_STATUSES, listOperations, parseOperationListQuery } from '../../client/operation-list';
import { type GlobalOptions, print, printJson, withSession } from '../context';
import { listLines } from '../format';

interface ListOptions {
  status?: string[];
  seller?: string;
  task?: string;
  waiting?: boolean;
  createdAfter?: string;
  createdBefore?: string;
  updatedAfter?: string;
  updatedBefore?: string;
  limit?: string;
  cursor?: string;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function registerListCommand(program: Command): void {
  program
    .command('list')
    .description('List operations from Temporal visibility (running first, then the most recently ended).')
    .option(
      '--status <status>',
      `only these statuses (repeat or comma-separate): ${OPERATION_STATUSES.join(', ')}`,
      collect,
    )
    .option('--seller <agent-id>', 'only operations with this seller')
    .option('--task <task>', 'only this AdCP task, e.g. create_media_buy')
    .option('--waiting', 'only operations waiting on a person (input-required or auth-required)')
    .option('--no-waiting', 'only operations not waiting on a person')
    .option('--created-after <iso-time>', 'started at or after, e.g. 2026-11-30T09:00:00Z')
    .option('--created-before <iso-time>', 'started before')
    .option('--updated-after <iso-time>', 'last status change at or after')
    .option('--updated-before <iso-time>', 'last status change before')
    .option('--limit <n>', 'rows per page (1-200, default 20)')
    .option('--cursor <cursor>', 'the next page: the cursor the previous page printed (same filters)')
    .addHelpText(
      'after',
      `
Examples:
  $ adcp-orchestrator list --waiting
  $ adcp-orchestrator list --seller demo-seller --status failed,rejected --created-after 2026-11-30T00:00:00Z
  $ adcp-orchestrator list --json --limit 100 --cursor <next_cursor>`,
    )
    .action(async (options: ListOptions, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      // The same parser as the HTTP query string, so the CLI and the API accept and refuse the same filters.
      const filters = parseOperationListQuery({
        ...(options.status ? { status: options.status } : {}),
        ...(options.seller !== undefined ? { seller: options.seller } : {}),
        ...(options.task !== undefined ? { task: options.task } : {}),
        ...(options.waiting !== undefined ? { waiting: String(options.waiting) } : {}),
        ...(options.createdAfter !== undefined ? { created_after: options.createdAfter } : {}),
        ...(options.createdBefore !== undefined ? { created_before: options.createdBefore } : {}),
        ...(options.updatedAfter !== undefined ? { updated_after: options.updatedAfter } : {}),
        ...(options.updatedBefore !== undefined ? { updated_before: options.updatedBefore } : {}),
        ...(options.limit !== undefined ? { limit: options.limit } : {}),
        ...(options.cursor !== undefined ? { cursor: options.cursor } : {}),
      });
      await withSession(globals, async ({ client }) => {
        const page = await listOperations(client, filters);
        if (globals.json) {
          printJson(page);
          return;
        }
        for (const line of listLines(page.operations)) print(line);
        if (page.next_cursor) print(`\nMore: adcp-orchestrator list <same filters> --cursor ${page.next_cursor}`);
      });
    });
}
