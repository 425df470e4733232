/**
 * Finds the Temporal binaries the project runs: the CLI (`temporal server start-dev`) and the time-skipping
 * test server. Same order as scripts/provision-temporal.mjs, which puts them in .temporal/bin (keep the two
 * in step): the env var, then the PATH, then the project's own copy.
 */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';

export interface ResolveOptions {
  /** Defaults to process.env (read for the override variable and PATH). */
  env?: NodeJS.ProcessEnv;
  /** Defaults to the folder holding the project's package.json. */
  projectRoot?: string;
}

interface BinarySpec {
  label: string;
  name: string;
  envVar: string;
  getIt: string;
}

const CLI: BinarySpec = {
  label: 'Temporal CLI',
  name: 'temporal',
  envVar: 'TEMPORAL_CLI_PATH',
  getIt: 'put `temporal` on PATH (macOS: `brew install temporal`; any OS: https://temporal.download)',
};

const TEST_SERVER: BinarySpec = {
  label: 'Temporal time-skipping test server',
  name: 'temporal-test-server',
  envVar: 'TEMPORAL_TEST_SERVER_PATH',
  getIt: 'put `temporal-test-server` on PATH (native builds are attached to the temporalio/sdk-java GitHub releases)',
};

/** The folder holding package.json, found upwards from this file (works from source and from a build). */
export function findProjectRoot(start: string = __dirname): string {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`No package.json found in ${start} or any folder above it.`);
  }
}

/** Where the provisioning script puts the binaries. */
export function projectBinDir(projectRoot: string = findProjectRoot()): string {
  return join(projectRoot, '.temporal', 'bin');
}

export function resolveTemporalCli(options: ResolveOptions = {}): string {
  return resolveBinary(CLI, options);
}

export function resolveTestServer(options: ResolveOptions = {}): string {
  return resolveBinary(TEST_SERVER, options);
}

function resolveBinary(spec: BinarySpec, { env = process.env, projectRoot }: ResolveOptions): string {
  const override = env[spec.envVar];
  if (override) {
    if (isExecutableFile(override)) return override;
    throw new Error(
      `${spec.envVar}=${override} is not an executable file (${describeMissing(override)}). ` +
        `Point ${spec.envVar} at the ${spec.label} binary, or unset it to use \`${spec.name}\` on PATH or the project's copy.`,
    );
  }
  const executableName = process.platform === 'win32' ? `${spec.name}.exe` : spec.name;
  const searchPath = (env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const dir of searchPath) {
    const candidate = join(dir, executableName);
    if (isExecutableFile(candidate)) return candidate;
  }
  const local = join(projectBinDir(projectRoot ?? findProjectRoot()), executableName);
  if (isExecutableFile(local)) return local;
  throw new Error(
    [
      `${spec.label} (${spec.name}) not found. Tried:`,
      `  - ${spec.envVar}: not set`,
      `  - PATH: no executable \`${executableName}\` in ${searchPath.length ? searchPath.join(delimiter) : '(empty PATH)'}`,
      `  - project copy: ${local} (${describeMissing(local)})`,
      `Fix one of: run \`npm run provision:temporal\` (downloads the pinned binaries into .temporal/bin); ` +
        `${spec.getIt}; or set ${spec.envVar}=/path/to/${spec.name}.`,
    ].join('\n'),
  );
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function describeMissing(path: string): string {
  try {
    return statSync(path).isFile() ? 'not executable' : 'not a file';
  } catch {
    return 'does not exist';
  }
}
