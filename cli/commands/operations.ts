/** `start`, `status`, `answer`, `cancel`: one operation at a time, through the typed client. */
import { randomUUID } from 'node:crypto';
import type { Command } from 'commander';
import { operationView } from '../../api/operation-view';
import { pendingActivityHttpView } from '../../client/pending-activity';
import {
  EXIT,
  type GlobalOptions,
  defaultRequester,
  pendingActivities,
  positiveInteger,
  print,
  printJson,
  readJsonObject,
  withSession,
} from '../context';
import { endedBadly, operationLines } from '../format';
import { watchOperation } from './watch';

export function registerOperationCommands(program: Command): void {
  program
    .command('start')
    .description('Start an AdCP operation (or find the one its --key already started).')
    .requiredOption('-s, --seller <agent-id>', 'the seller, by its id in the agents file')
    .requiredOption('-t, --task <task>', 'the AdCP task, e.g. get_products, create_media_buy')
    .option('-p, --params <json|@file>', 'the task arguments: a JSON object, @file.json, or @- for stdin', '{}')
    .option(
      '-k, --key <idempotency-key>',
      'your key for this operation: the same key always means the same operation (default: random)',
    )
    .option('--budget <seconds>', "how long the operation may take (default: the task's budget)", positiveInteger)
    .option('-w, --watch', 'then follow it, as `watch` does')
    .option('--interval <seconds>', 'with --watch: seconds between polls', positiveInteger, 2)
    .addHelpText(
      'after',
      `
Examples:
  $ adcp-orchestrator start --seller demo-seller --task get_products --params '{"brief": "coffee", "buying_mode": "brief"}'
  $ adcp-orchestrator start -s demo-seller -t create_media_buy -p @buy.json -k po-4711 --watch`,
    )
    .action(
      async (
        options: {
          seller: string;
          task: string;
          params: string;
          key?: string;
          budget?: number;
          watch?: boolean;
          interval: number;
        },
        command: Command,
      ) => {
        const globals = command.optsWithGlobals<GlobalOptions>();
        const params = await readJsonObject(options.params, '--params');
        await withSession(globals, async ({ orchestrator, client }) => {
          const started = await orchestrator.start({
            sellerId: options.seller,
            task: options.task,
            params,
            ...(options.key !== undefined ? { idempotencyKey: options.key } : {}),
            ...(options.budget !== undefined ? { budgetMs: options.budget * 1000 } : {}),
          });
          const status = started.state?.status ?? 'pending';
          if (globals.json)
            printJson({ event: 'started', operation_id: started.operationId, created: started.created, status });
          else
            print(
              `${started.created ? 'Started' : 'Found the operation for this key:'} ${started.operationId} (${status})`,
            );
          if (options.watch) {
            process.exitCode = await watchOperation({ orchestrator, client }, started.operationId, {
              intervalMs: options.interval * 1000,
              json: globals.json === true,
              header: false,
            });
          }
        });
      },
    );

  program
    .command('status')
    .description(
      'Show an operation: its status, the call in flight (attempt, last error, next retry), the question it waits on, its result.',
    )
    .argument('<operation-id>', 'the operation id, e.g. adcp-create_media_buy-po-4711')
    .addHelpText(
      'after',
      '\nExits 1 when the operation ended failed, rejected or canceled; 0 while it runs or when it completed.',
    )
    .action(async (operationId: string, _options: unknown, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      await withSession(globals, async ({ orchestrator, client }) => {
        const view = await orchestrator.status(operationId);
        const activities = view.running ? await pendingActivities(client, operationId) : [];
        if (globals.json)
          printJson({ ...operationView(view, {}), pending_activities: activities.map(pendingActivityHttpView) });
        else for (const line of operationLines(view, activities)) print(line);
        process.exitCode = endedBadly(view) ? EXIT.FAILED : EXIT.OK;
      });
    });

  program
    .command('answer')
    .description('Answer the question of an operation that waits in input-required (the provideInput update).')
    .argument('<operation-id>', 'the operation that asked')
    .requiredOption(
      '-i, --input <json|@file>',
      'the answer: a JSON object merged into the resumed call, e.g. \'{"approved": true}\'',
    )
    .option(
      '-k, --key <idempotency-key>',
      'your key for this answer: repeating the command with it answers once (default: random)',
    )
    .option('--by <who>', 'who answers, for the record', defaultRequester())
    .action(async (operationId: string, options: { input: string; key?: string; by: string }, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      const input = await readJsonObject(options.input, '--input');
      await withSession(globals, async ({ orchestrator }) => {
        const answer = await orchestrator.provideInput(operationId, {
          input,
          providedBy: options.by,
          idempotencyKey: options.key ?? randomUUID(),
        });
        if (globals.json) printJson({ operation_id: operationId, accepted: answer.accepted, round: answer.round });
        else print(`Answer accepted for ${operationId} (round ${answer.round}); the operation resumes.`);
      });
    });

  program
    .command('cancel')
    .description('Cancel an operation: the call in flight is aborted, the seller told where the protocol has a way.')
    .argument('<operation-id>', 'the operation to cancel')
    .option('-r, --reason <text>', 'why, for the record', 'canceled from the command line')
    .option('--by <who>', 'who cancels, for the record', defaultRequester())
    .action(async (operationId: string, options: { reason: string; by: string }, command: Command) => {
      const globals = command.optsWithGlobals<GlobalOptions>();
      await withSession(globals, async ({ orchestrator }) => {
        const answer = await orchestrator.cancel(operationId, { requestedBy: options.by, reason: options.reason });
        if (globals.json)
          printJson({ operation_id: operationId, accepted: answer.accepted, status_when_requested: answer.status });
        else print(`Cancel accepted for ${operationId} (it was ${answer.status}); it ends canceled.`);
      });
    });
}
