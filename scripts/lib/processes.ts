import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';

/** A child process in its own process group, so stopping it also stops what it spawned (npx, tsx). */
export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  output(): string;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

const TAIL = 8_000;

export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; echo?: boolean } = {},
): ManagedProcess {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  const record = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-TAIL);
    if (options.echo) process.stdout.write(chunk.toString('utf8').replace(/^(?=.)/gm, `[${name}] `));
  };
  child.stdout?.on('data', record);
  child.stderr?.on('data', record);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    name,
    child,
    output: () => tail,
    async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const group = -child.pid!;
      try {
        process.kill(group, signal);
      } catch {
        return;
      }
      const timer = setTimeout(() => {
        try {
          process.kill(group, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }, graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Resolves once something accepts TCP connections on host:port. */
export async function waitForListening(
  port: number,
  host = '127.0.0.1',
  timeoutMs = 60_000,
  watch?: ManagedProcess,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (watch && (watch.child.exitCode !== null || watch.child.signalCode !== null)) {
      throw new Error(`${watch.name} exited before listening on ${port}:\n${watch.output()}`);
    }
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ port, host }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  throw new Error(`Nothing listened on ${host}:${port} within ${timeoutMs} ms.${watch ? `\n${watch.output()}` : ''}`);
}

export async function isListening(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
