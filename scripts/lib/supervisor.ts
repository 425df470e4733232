/**
 * How `npm start` keeps its processes running (scripts/start.ts): each one is restarted when it exits on its own,
 * after a delay that doubles with each exit in a row (1 s, 2 s, 4 s ... 30 s) and starts over once the process has
 * stayed up for a healthy stretch (60 s); a restart that fails to come up counts as an exit and is tried again.
 * Stopping (Ctrl-C) marks every process as stopping before any is stopped, so a process that the terminal's SIGINT
 * ends on its own at the same moment (the Temporal dev server, which shares the terminal's process group) is not
 * taken for a crash.
 */

export interface BackoffOptions {
  startMs: number;
  maxMs: number;
  /** A process up this long before it exited starts the count over. */
  stableAfterMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { startMs: 1_000, maxMs: 30_000, stableAfterMs: 60_000 };

/** The delays between restarts of one process. */
export class RestartBackoff {
  private inARow = 0;

  constructor(private readonly options: BackoffOptions = DEFAULT_BACKOFF) {}

  /** The process exited (or failed to start) after `ranMs` up: how long to wait, and how many exits in a row. */
  exited(ranMs: number): { delayMs: number; inARow: number } {
    this.inARow = ranMs >= this.options.stableAfterMs ? 1 : this.inARow + 1;
    const delayMs = Math.min(this.options.maxMs, this.options.startMs * 2 ** (this.inARow - 1));
    return { delayMs, inARow: this.inARow };
  }
}

/** A started process: when it ends, and how to end it. */
export interface RunningProcess {
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}

export interface SupervisedOptions {
  name: string;
  /** Starts the process; resolves once it is up. */
  start: () => Promise<RunningProcess>;
  /** Where the supervisor's lines go (default stderr). */
  log?: (line: string) => void;
  /** Called after every (re)start, e.g. to rewrite the pid file. */
  changed?: () => void;
  backoff?: BackoffOptions;
  now?: () => number;
}

/** One process the supervisor keeps running. */
export class Supervised {
  private current: RunningProcess | undefined;
  private stopping = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly backoff: RestartBackoff;
  private readonly log: (line: string) => void;
  private readonly now: () => number;
  /** How many times it was started (the first start included). */
  starts = 0;

  constructor(private readonly options: SupervisedOptions) {
    this.backoff = new RestartBackoff(options.backoff);
    this.log = options.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.now = options.now ?? Date.now;
  }

  get name(): string {
    return this.options.name;
  }

  get process(): RunningProcess | undefined {
    return this.current;
  }

  /** The first start: a failure is the caller's to report (nothing is retried before the stack ever came up). */
  async start(): Promise<RunningProcess> {
    const running = await this.launch();
    this.watch(running, this.now());
    return running;
  }

  private async launch(): Promise<RunningProcess> {
    this.starts += 1;
    const running = await this.options.start();
    this.current = running;
    this.options.changed?.();
    return running;
  }

  private watch(running: RunningProcess, upSince: number): void {
    void running.exited.then(({ code, signal }) => {
      if (this.stopping || this.current !== running) return;
      this.scheduleRestart(`exited (${signal ?? `code ${code}`})`, this.now() - upSince);
    });
  }

  private scheduleRestart(why: string, ranMs: number): void {
    const { delayMs, inARow } = this.backoff.exited(ranMs);
    this.log(`${this.name} ${why}; restarting in ${delayMs / 1000} s (restart ${inARow} in a row).`);
    this.timer = setTimeout(() => {
      if (this.stopping) return;
      this.launch().then(
        (running) => (this.stopping ? void running.stop() : this.watch(running, this.now())),
        (error: unknown) => {
          if (this.stopping) return;
          this.scheduleRestart(`did not start (${error instanceof Error ? error.message : String(error)})`, 0);
        },
      );
    }, delayMs);
  }

  /** Marks it as stopping: from now on an exit is expected, not a crash. Synchronous. */
  beginStop(): void {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
  }

  async stop(): Promise<void> {
    this.beginStop();
    await this.current?.stop();
  }
}

/** Stops every process, in the given order, after marking all of them as stopping. */
export async function stopAll(processes: readonly Supervised[]): Promise<void> {
  for (const process of processes) process.beginStop();
  for (const process of processes) await process.stop();
}
