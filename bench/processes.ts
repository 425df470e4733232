/**
 * The worker and the gateway run as their own OS processes from the repo's real entry points (the compiled worker,
 * dist/app/workers/main.js, as `npm run worker` runs it; api/main.ts), so the bench process (seller, load generators)
 * does not share their event loop and the worker's memory can be read on its own.
 */
import { type ChildProcess, fork } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '..');
const OUTPUT_TAIL_CHARS = 8_000;

export interface NodeProcess {
  name: string;
  child: ChildProcess;
  /** The last few KB of stdout and stderr, for error messages. */
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * The environment a child gets: this process's, minus every TEMPORAL_* and ADCP_* variable (so a developer's
 * shell settings cannot point the bench at another server or seller list), plus `env`.
 */
export function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(TEMPORAL_|ADCP_)/.test(name)));
  return { ...base, ...env };
}

/**
 * Runs a TypeScript entry point under tsx with an IPC channel (used by the memory probe). `tsx: false` runs a
 * JavaScript entry point (scripts/worker.cjs, the compiled worker) with plain node, as `npm run worker` does.
 */
export function startNodeScript(
  name: string,
  script: string,
  options: { env: NodeJS.ProcessEnv; execArgv?: string[]; tsx?: boolean },
): NodeProcess {
  const child = fork(path.join(ROOT, script), [], {
    cwd: ROOT,
    env: options.env,
    execArgv: [...(options.execArgv ?? []), ...(options.tsx === false ? [] : ['--import', 'tsx'])],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // A bench that exits without stop() (an exception, Ctrl-C) must not leave servers behind.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  void exited.then(() => process.removeListener('exit', killOnExit));
  const hasExited = () => child.exitCode !== null || child.signalCode !== null;
  return {
    name,
    child,
    output: () => tail,
    async stop(graceMs = 15_000) {
      if (hasExited()) return;
      child.kill('SIGTERM');
      const escalate = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(escalate);
    },
  };
}

/** Resolves once `ready()` is true; fails early, with the process output, if the process exits first. */
export async function waitUntil(
  process: NodeProcess,
  what: string,
  ready: () => boolean | Promise<boolean>,
  timeoutMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (process.child.exitCode !== null || process.child.signalCode !== null) {
      throw new Error(`${process.name} exited before ${what}:\n${process.output()}`);
    }
    if (await ready()) return;
    if (Date.now() > deadline)
      throw new Error(`${process.name}: no ${what} within ${timeoutMs} ms:\n${process.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
