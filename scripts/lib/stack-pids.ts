/**
 * The pid file of `npm start` (.data/npm-start.json): which processes the last `npm start` ran, so that a start after
 * one that was SIGKILLed (and could not stop its children) finds the project's own leftovers and stops them, instead
 * of failing on "port 7233 already in use".
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RecordedProcess {
  name: string;
  pid: number;
  /** The process leads its own process group (started detached): signal the group. */
  group: boolean;
  /** A fragment of its command line, to be sure a reused pid is not someone else's process. */
  marker: string;
}

export interface StackPids {
  supervisor: number;
  processes: RecordedProcess[];
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The process's command line where the OS shows it (/proc on Linux); undefined elsewhere. */
function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return undefined;
  }
}

/** Alive, and (where the OS lets us look) still running the command we recorded. */
function isOurs(recorded: { pid: number; marker: string }): boolean | 'unknown' {
  if (!isAlive(recorded.pid)) return false;
  const command = commandLine(recorded.pid);
  if (command === undefined) return 'unknown';
  return command.includes(recorded.marker);
}

async function stopRecorded(recorded: RecordedProcess, graceMs = 10_000): Promise<void> {
  const target = recorded.group ? -recorded.pid : recorded.pid;
  try {
    process.kill(target, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (isAlive(recorded.pid) && Date.now() < deadline) await sleep(200);
  if (isAlive(recorded.pid)) {
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      /* gone meanwhile */
    }
  }
}

export class StackPidFile {
  constructor(readonly file: string) {}

  static inDataDir(root: string): StackPidFile {
    return new StackPidFile(path.join(root, '.data', 'npm-start.json'));
  }

  private read(): StackPids | undefined {
    if (!existsSync(this.file)) return undefined;
    try {
      return JSON.parse(readFileSync(this.file, 'utf8')) as StackPids;
    } catch {
      return undefined;
    }
  }

  write(pids: StackPids): void {
    mkdirSync(path.dirname(this.file), { recursive: true });
    writeFileSync(this.file, `${JSON.stringify(pids, null, 2)}\n`);
  }

  remove(): void {
    rmSync(this.file, { force: true });
  }

  /**
   * Refuses when another `npm start` of this project is running; stops what a dead one left behind. Where the OS
   * does not show command lines, names the processes to stop instead of guessing.
   */
  async clearLeftovers(log: (line: string) => void): Promise<void> {
    const previous = this.read();
    if (!previous) return;
    const supervisor = { pid: previous.supervisor, marker: 'start.ts' };
    if (supervisor.pid !== process.pid && isOurs(supervisor) !== false) {
      throw new Error(
        `npm start is already running in this project (pid ${supervisor.pid}). Stop it with Ctrl-C in its terminal, or \`kill ${supervisor.pid}\`.`,
      );
    }
    const leftovers = previous.processes.filter((recorded) => isOurs(recorded) === true);
    const unsure = previous.processes.filter((recorded) => isOurs(recorded) === 'unknown');
    if (unsure.length > 0) {
      throw new Error(
        `An earlier npm start (pid ${previous.supervisor}) ended without stopping its processes: ${unsure
          .map((recorded) => `${recorded.name} (pid ${recorded.pid})`)
          .join(
            ', ',
          )}. Stop them with \`kill ${unsure.map((recorded) => recorded.pid).join(' ')}\`, then delete ${this.file}.`,
      );
    }
    if (leftovers.length > 0) {
      log(
        `An earlier npm start (pid ${previous.supervisor}) ended without stopping its processes; stopping ${leftovers
          .map((recorded) => `${recorded.name} (pid ${recorded.pid})`)
          .join(', ')}.`,
      );
      await Promise.all(leftovers.map((recorded) => stopRecorded(recorded)));
    }
    this.remove();
  }
}
