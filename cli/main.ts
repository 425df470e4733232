/**
 * adcp-orchestrator: the operator's command line. It talks to Temporal directly through the typed client (the
 * gateway need not run): `npm run cli -- <command>`, or `adcp-orchestrator <command>` once installed.
 */
import { Command, CommanderError } from 'commander';
import { registerCampaignCommands } from './commands/campaigns';
import { registerListCommand } from './commands/list';
import { registerOperationCommands } from './commands/operations';
import { registerSellerCommands } from './commands/sellers';
import { registerWatchCommand } from './commands/watch';
import { EXIT, EXIT_CODES_HELP, exitFor, printJson } from './context';

export function buildProgram(): Command {
  const program = new Command('adcp-orchestrator')
    .description(
      'Start, follow, list, answer and cancel AdCP operations run by the adcp-orchestrator workers on Temporal.',
    )
    .option('--json', 'machine-readable output: one JSON document (watch: one JSON object per line)')
    .option('--address <host:port>', 'Temporal frontend (default: TEMPORAL_ADDRESS, else 127.0.0.1:7233)')
    .option('--namespace <namespace>', 'Temporal namespace (default: TEMPORAL_NAMESPACE, else "default")')
    .option('--task-queue <name>', 'the workers\' task queue (default: ADCP_TASK_QUEUE, else "adcp-operations")')
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', EXIT_CODES_HELP)
    // Usage errors exit 2 (commander would exit 1, which here means "the operation failed").
    .exitOverride();
  registerOperationCommands(program);
  registerWatchCommand(program);
  registerListCommand(program);
  registerSellerCommands(program);
  registerCampaignCommands(program);
  for (const command of program.commands)
    command.addHelpText('after', EXIT_CODES_HELP).showHelpAfterError('(run with --help for usage)');
  return program;
}

export async function main(argv: string[] = process.argv): Promise<number> {
  // `adcp-orchestrator list | head`: a reader that stops early is not an error.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(EXIT.OK);
    throw error;
  });
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.OK;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are answers, not errors; commander has already printed the usage message.
      return error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.help' ||
        error.code === 'commander.version'
        ? EXIT.OK
        : EXIT.USAGE;
    }
    const { code, message } = exitFor(error);
    if (argv.includes('--json')) printJson({ error: { message, exit_code: code } });
    else process.stderr.write(`adcp-orchestrator: ${message}\n`);
    return code;
  }
}

if (require.main === module) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`adcp-orchestrator: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exitCode = EXIT.FAILED;
    },
  );
}
