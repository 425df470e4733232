/**
 * The project as a backend team gets it: `npm pack` (prepack builds dist/), and a scratch TypeScript project that
 * installs the tarball. The scratch project's lockfile is derived from this repository's package-lock.json (same
 * versions, same integrity hashes, same hoisted layout), so `npm ci --offline` installs it from the npm cache that
 * `npm ci` of the repository filled, without asking the registry for anything.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

export const repositoryRoot = path.resolve(__dirname, '..', '..');

const execFileAsync = promisify(execFile);

export interface CommandResult {
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command to completion; on failure the error names the command and carries its output. */
export async function runCommand(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<CommandResult> {
  const started = Date.now();
  try {
    const { stdout, stderr } = await execFileAsync(command, args, {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      timeout: options.timeoutMs ?? 180_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    return { stdout, stderr, ms: Date.now() - started };
  } catch (error) {
    const failed = error as Error & { stdout?: string; stderr?: string };
    throw new Error(
      `\`${command} ${args.join(' ')}\` in ${options.cwd} failed: ${failed.message}\n--- stdout\n${failed.stdout ?? ''}\n--- stderr\n${failed.stderr ?? ''}`,
    );
  }
}

export interface PackedTarball {
  file: string;
  /** Paths inside the package, as `npm pack --json` lists them. */
  files: string[];
  packMs: number;
}

/** `npm pack` of this repository into `destination` (prepack runs the build). */
export async function packProject(destination: string): Promise<PackedTarball> {
  const { stdout, ms } = await runCommand('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: repositoryRoot,
  });
  // Lifecycle scripts may print before the JSON.
  const report = JSON.parse(stdout.slice(Math.max(0, stdout.search(/^\[/m)))) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  return {
    file: path.join(destination, report[0].filename),
    files: report[0].files.map((entry) => entry.path),
    packMs: ms,
  };
}

interface LockEntry {
  version?: string;
  dev?: boolean;
  [key: string]: unknown;
}

/**
 * Writes package.json and package-lock.json of a scratch backend in `directory` that depends on the tarball, on
 * @temporalio/client (the backend builds its own Temporal Client), and on typescript and @types/node for tsc.
 */
export function writeScratchProject(directory: string, tarball: string): void {
  const repositoryPackage = JSON.parse(readFileSync(path.join(repositoryRoot, 'package.json'), 'utf8')) as {
    version: string;
    license: string;
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
    bin?: Record<string, string>;
    engines?: Record<string, string>;
  };
  const lock = JSON.parse(readFileSync(path.join(repositoryRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const tarballSpec = `file:${path.relative(directory, tarball)}`;
  const dependencies = {
    'adcp-orchestrator': tarballSpec,
    '@temporalio/client': repositoryPackage.dependencies['@temporalio/client'],
  };
  const devDependencies = {
    typescript: repositoryPackage.devDependencies.typescript,
    '@types/node': repositoryPackage.devDependencies['@types/node'],
  };
  const packages: Record<string, LockEntry> = {
    '': { name: 'scratch-backend', version: '1.0.0', dependencies, devDependencies },
    'node_modules/adcp-orchestrator': {
      version: repositoryPackage.version,
      resolved: tarballSpec,
      integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`,
      hasInstallScript: true,
      license: repositoryPackage.license,
      dependencies: repositoryPackage.dependencies,
      ...(repositoryPackage.bin ? { bin: repositoryPackage.bin } : {}),
      ...(repositoryPackage.engines ? { engines: repositoryPackage.engines } : {}),
    },
  };
  // The repository's production tree is the tarball's dependency tree, hoisted the same way.
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (key.startsWith('node_modules/') && !entry.dev) packages[key] = entry;
  }
  for (const name of [...Object.keys(devDependencies), ...dependenciesOf(lock.packages, '@types/node')]) {
    packages[`node_modules/${name}`] ??= lock.packages[`node_modules/${name}`];
  }
  writeFileSync(
    path.join(directory, 'package.json'),
    JSON.stringify(
      { name: 'scratch-backend', version: '1.0.0', private: true, dependencies, devDependencies },
      null,
      2,
    ),
  );
  writeFileSync(
    path.join(directory, 'package-lock.json'),
    JSON.stringify(
      { name: 'scratch-backend', version: '1.0.0', lockfileVersion: 3, requires: true, packages },
      null,
      2,
    ),
  );
}

function dependenciesOf(packages: Record<string, LockEntry>, name: string): string[] {
  const entry = packages[`node_modules/${name}`] as { dependencies?: Record<string, string> } | undefined;
  return Object.keys(entry?.dependencies ?? {});
}
