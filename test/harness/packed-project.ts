/**
 * The client as a backend team gets it: `npm pack` of the client workspace (packages/client; prepack builds its
 * dist/), and a scratch project that installs the tarball. The scratch project's lockfile is derived from this
 * repository's package-lock.json (same versions, same integrity hashes): the client's own dependency tree and nothing
 * else, so `npm ci --offline` installs it from the npm cache that `npm ci` of the repository filled, without asking
 * the registry for anything.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

export const repositoryRoot = path.resolve(__dirname, '..', '..');
/** The client workspace: what `npm pack` packs. */
export const clientPackageRoot = path.join(repositoryRoot, 'packages', 'client');
export const CLIENT_PACKAGE = '@adcp-orchestrator/client';

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

/** `npm pack` of the client workspace into `destination` (prepack runs its build). */
export async function packProject(destination: string): Promise<PackedTarball> {
  const { stdout, ms } = await runCommand('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: clientPackageRoot,
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

/** A lock entry as a production dependency of the scratch project (typescript is a dev one here). */
function withoutDevFlag(entry: LockEntry): LockEntry {
  const { dev: _dev, ...rest } = entry;
  return rest;
}

/** Where npm finds `name` for the package at `from` (a lock key): its own node_modules, then each parent's. */
function resolveInLock(packages: Record<string, LockEntry>, from: string, name: string): string | undefined {
  for (let at = from; ;) {
    const candidate = `${at ? `${at}/` : ''}node_modules/${name}`;
    if (packages[candidate]) return candidate;
    if (!at) return undefined;
    const parent = at.lastIndexOf('/node_modules/');
    at = parent < 0 ? '' : at.slice(0, parent);
  }
}

/** The lock entries of `names` (resolved from the root) and of everything they depend on, keyed as in the lock. */
function closureOf(packages: Record<string, LockEntry>, names: string[]): Record<string, LockEntry> {
  const found: Record<string, LockEntry> = {};
  const pending: [string, string][] = names.map((name) => ['', name]);
  while (pending.length > 0) {
    const [from, name] = pending.pop()!;
    const key = resolveInLock(packages, from, name);
    if (!key || found[key]) continue;
    const entry = packages[key]!;
    found[key] = entry;
    const dependencies = {
      ...(entry.dependencies as Record<string, string> | undefined),
      ...(entry.optionalDependencies as Record<string, string> | undefined),
    };
    for (const dependency of Object.keys(dependencies)) pending.push([key, dependency]);
  }
  return found;
}

/**
 * Writes package.json and package-lock.json of a scratch project in `directory` that depends on the client tarball
 * and on `extra` packages of this repository's tree (the backend's own @temporalio/client, typescript for tsc).
 */
export function writeScratchProject(directory: string, tarball: string, extra: string[] = []): void {
  const clientPackage = JSON.parse(readFileSync(path.join(clientPackageRoot, 'package.json'), 'utf8')) as {
    version: string;
    license: string;
    dependencies: Record<string, string>;
    bin?: Record<string, string>;
    engines?: Record<string, string>;
  };
  const lock = JSON.parse(readFileSync(path.join(repositoryRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const tarballSpec = `file:${path.relative(directory, tarball)}`;
  const versionOf = (name: string) => lock.packages[`node_modules/${name}`]!.version!;
  const dependencies = {
    [CLIENT_PACKAGE]: tarballSpec,
    ...Object.fromEntries(extra.map((name) => [name, versionOf(name)])),
  };
  const packages: Record<string, LockEntry> = {
    '': { name: 'scratch', version: '1.0.0', dependencies },
    [`node_modules/${CLIENT_PACKAGE}`]: {
      version: clientPackage.version,
      resolved: tarballSpec,
      integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`,
      license: clientPackage.license,
      dependencies: clientPackage.dependencies,
      ...(clientPackage.bin ? { bin: clientPackage.bin } : {}),
      ...(clientPackage.engines ? { engines: clientPackage.engines } : {}),
    },
  };
  // The client's dependency tree (and the extras') as this repository's lock resolves it, hoisted the same way.
  for (const [key, entry] of Object.entries(
    closureOf(lock.packages, [...Object.keys(clientPackage.dependencies), ...extra]),
  ))
    packages[key] ??= withoutDevFlag(entry);
  writeFileSync(
    path.join(directory, 'package.json'),
    JSON.stringify({ name: 'scratch', version: '1.0.0', private: true, dependencies }, null, 2),
  );
  writeFileSync(
    path.join(directory, 'package-lock.json'),
    JSON.stringify({ name: 'scratch', version: '1.0.0', lockfileVersion: 3, requires: true, packages }, null, 2),
  );
}
