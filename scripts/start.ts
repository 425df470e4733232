/**
 * `npm start`: the whole stack on one machine, supervised. With no TEMPORAL_ADDRESS it runs the embedded Temporal dev
 * server (SQLite under .data/, so a restart keeps every operation; Web UI on 8233), the worker and the gateway, prints
 * where each is, restarts any of them that dies (with backoff), and stops all of them on Ctrl-C. With TEMPORAL_ADDRESS
 * set it runs only the worker and the gateway against that server (namespace, TLS and API key from the usual Temporal
 * variables). The pids go to .data/npm-start.json, so a start after a SIGKILLed one stops its leftovers first.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { describeDevelopmentKey, generateApiKey, loadAuthConfig } from '../api/auth';
import { loadRuntimeConfig } from '../config/runtime';
import { temporalSettings } from '../config/temporal-connection';
import { WORKER_NODE_FLAGS } from '../config/worker-tuning';
import { DEMO_SELLER_TOKEN } from './lib/demo-seller';
import { type DevServer, type DevServerOptions, ensureSearchAttributes, startDevServer } from './lib/dev-server';
import { type ManagedProcess, startProcess } from './lib/processes';
import { type RecordedProcess, StackPidFile } from './lib/stack-pids';

const root = path.resolve(__dirname, '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');

/** Restart delays: 1 s, 2 s, 4 s ... up to 30 s; a child that ran a minute starts over at 1 s. */
const BACKOFF_START_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
const STABLE_AFTER_MS = 60_000;

function nextDelay(failures: number): number {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_START_MS * 2 ** Math.max(0, failures - 1));
}

/** A child process the supervisor keeps running: restarted with backoff when it exits on its own. */
class Supervised {
  private current: ManagedProcess | undefined;
  private startedAt = 0;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(
    readonly name: string,
    private readonly script: string,
    private readonly env: NodeJS.ProcessEnv,
    private readonly changed: () => void,
    /** Undefined: the script runs under tsx; else with plain node and these flags (scripts/worker.cjs, gateway.cjs). */
    private readonly nodeFlags?: readonly string[],
  ) {}

  start(): void {
    this.startedAt = Date.now();
    const [command, args] = this.nodeFlags
      ? [process.execPath, [...this.nodeFlags, path.join(root, this.script)]]
      : [tsx, [path.join(root, this.script)]];
    const child = startProcess(this.name, command, args, { env: this.env, echo: true });
    this.current = child;
    this.changed();
    child.child.once('exit', (code, signal) => {
      if (this.stopping) return;
      this.failures = Date.now() - this.startedAt > STABLE_AFTER_MS ? 1 : this.failures + 1;
      const delay = nextDelay(this.failures);
      console.error(
        `${this.name} exited (${signal ?? `code ${code}`}); restarting in ${delay / 1000} s (restart ${this.failures} in a row).`,
      );
      this.timer = setTimeout(() => this.start(), delay);
    });
  }

  get process(): ManagedProcess | undefined {
    return this.current;
  }

  recorded(): RecordedProcess | undefined {
    const pid = this.current?.child.pid;
    return pid === undefined ? undefined : { name: this.name, pid, group: true, marker: this.script };
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    await this.current?.stop();
  }
}

/** The embedded Temporal dev server, restarted on its SQLite file when it dies. */
class SupervisedTemporal {
  private server: DevServer | undefined;
  private failures = 0;
  private startedAt = 0;
  private stopping = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: DevServerOptions,
    private readonly changed: () => void,
  ) {}

  async start(): Promise<DevServer> {
    this.startedAt = Date.now();
    try {
      this.server = await startDevServer(this.options);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (/already in use/.test(message)) {
        throw new Error(
          `${message}\nIf it is a Temporal server you started yourself, run \`TEMPORAL_ADDRESS=127.0.0.1:${this.options.port} npm start\` to use it; ` +
            `otherwise find the process with \`ss -ltnp 'sport = :${this.options.port}'\` (or \`lsof -i :${this.options.port}\`) and stop it.`,
        );
      }
      throw error;
    }
    this.changed();
    this.server.child.once('exit', (code, signal) => {
      if (this.stopping) return;
      this.failures = Date.now() - this.startedAt > STABLE_AFTER_MS ? 1 : this.failures + 1;
      const delay = nextDelay(this.failures);
      console.error(`Temporal dev server exited (${signal ?? `code ${code}`}); restarting in ${delay / 1000} s.`);
      this.timer = setTimeout(() => {
        this.start().catch((restartError: unknown) => {
          console.error(`Temporal dev server did not restart: ${(restartError as Error).message}`);
        });
      }, delay);
    });
    return this.server;
  }

  recorded(): RecordedProcess | undefined {
    const pid = this.server?.child.pid;
    return pid === undefined ? undefined : { name: 'temporal', pid, group: false, marker: 'start-dev' };
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    await this.server?.stop();
  }
}

async function waitForHealth(url: string, timeoutMs = 90_000): Promise<Record<string, unknown> | undefined> {
  const deadline = Date.now() + timeoutMs;
  let last: Record<string, unknown> | undefined;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(url);
      if (response.ok) {
        last = (await response.json()) as Record<string, unknown>;
        // Up once a worker polls: until then operations would not move.
        if (last.workers === 'polling') return last;
      }
    } catch {
      /* not up yet */
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return last;
}

async function main(): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Gateway and worker log JSON into a pipe; their lines are echoed to this terminal, so make them readable here.
  if (process.stdout.isTTY) env.ADCP_LOG_FORMAT ??= 'pretty';
  if (!env.ADCP_AGENTS_FILE && !existsSync(path.resolve('agents.json'))) {
    env.ADCP_AGENTS_FILE = path.join(root, 'agents.example.json');
    env.DEMO_SELLER_TOKEN ??= DEMO_SELLER_TOKEN;
    console.log('No agents.json here: using agents.example.json (the bundled demo seller).');
  }
  const runtime = loadRuntimeConfig(env);
  // Zero configuration on loopback: with no authentication configured, a development key for this run. The gateway
  // accepts it (and only it); the worker, the demo and anything else started from here find it in ADCP_API_KEY.
  const auth = loadAuthConfig(env);
  let developmentKey: string | undefined;
  if (!auth.apiKeysFile && !auth.jwt) {
    developmentKey = env.ADCP_API_KEY?.trim() || generateApiKey('dev').key;
    env.ADCP_API_KEY = developmentKey;
  }
  const pidFile = StackPidFile.inDataDir(root);
  await pidFile.clearLeftovers((line) => console.log(line));

  let temporal: SupervisedTemporal | undefined;
  const children: Supervised[] = [];
  const recordPids = () =>
    pidFile.write({
      supervisor: process.pid,
      processes: [temporal?.recorded(), ...children.map((child) => child.recorded())].filter(
        (recorded): recorded is RecordedProcess => recorded !== undefined,
      ),
    });

  let address: string;
  let namespace: string;
  let devServer: DevServer | undefined;
  if (env.TEMPORAL_ADDRESS) {
    const settings = temporalSettings(env);
    address = settings.connectionOptions.address;
    namespace = settings.namespace;
    const connection = await Connection.connect(settings.connectionOptions);
    await ensureSearchAttributes(connection, namespace);
    await connection.close();
  } else {
    const dbFilename = path.join(root, '.data', 'temporal.sqlite');
    console.log('Starting the Temporal dev server...');
    temporal = new SupervisedTemporal({ port: 7233, uiPort: 8233, dbFilename }, recordPids);
    devServer = await temporal.start();
    address = devServer.address;
    namespace = devServer.namespace;
    env.TEMPORAL_ADDRESS = address;
    env.TEMPORAL_NAMESPACE = namespace;
    // A history kept from an older version lacks attributes added since (the dev server registers its
    // --search-attribute flags only on a new database): add the missing ones.
    const connection = await Connection.connect({ address });
    await ensureSearchAttributes(connection, namespace);
    await connection.close();
  }

  // glibc's per-thread malloc arenas hold on to freed memory; two arenas cut a parked worker's RSS (bench/README.md).
  // The worker runs compiled (dist/app/, built by scripts/worker.cjs when the sources are newer): no TypeScript loader
  // in its process (bench/README.md, run G). ADCP_WORKER_RUNTIME=tsx runs it from the sources instead.
  children.push(
    new Supervised('worker', 'scripts/worker.cjs', { MALLOC_ARENA_MAX: '2', ...env }, recordPids, WORKER_NODE_FLAGS),
  );
  // The gateway runs compiled too (scripts/gateway.cjs, dist/app/api/main.js, default node flags); both launchers share
  // one build of dist/app/ (a lock: the second waits for the first). ADCP_GATEWAY_RUNTIME=tsx runs it from the sources.
  children.push(new Supervised('gateway', 'scripts/gateway.cjs', env, recordPids, []));
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    console.log('\nStopping gateway, worker and Temporal...');
    await Promise.all(children.map((child) => child.stop()));
    await temporal?.stop();
    pidFile.remove();
    process.exit(code);
  };
  process.on('SIGINT', () => void stopAll(0));
  process.on('SIGTERM', () => void stopAll(0));
  for (const child of children) child.start();

  const gatewayUrl = `http://${runtime.gatewayHost}:${runtime.gatewayPort}`;
  const health = await waitForHealth(`${gatewayUrl}/healthz`);
  const lines = [
    '',
    'adcp-orchestrator is running:',
    `  Temporal   ${address} (namespace ${namespace})${devServer ? `, history in ${path.relative(process.cwd(), devServer.dbFilename ?? '')}` : ''}`,
    devServer ? `  Web UI     http://127.0.0.1:${devServer.uiPort ?? 8233}` : `  Web UI     your Temporal server's UI`,
    `  Gateway    ${gatewayUrl}  (GET /healthz; POST /v1/operations, GET /v1/operations/:id; POST /webhooks/adcp/:agentId/:operationId)`,
    ...(runtime.webhookListener
      ? [`  Webhooks   http://${runtime.webhookListener.host}:${runtime.webhookListener.port}  (POST /webhooks/...)`]
      : []),
    `  Worker     task queue "${runtime.taskQueue}"${health?.workers === 'polling' ? '' : ' (not polling yet: see its log above)'}`,
    ...(developmentKey
      ? [describeDevelopmentKey({ file: '', key: developmentKey, principal: 'developer', tenant: 'dev' }, gatewayUrl)]
      : []),
    '',
    developmentKey
      ? `A process that dies is restarted. Next, in another terminal: \`ADCP_API_KEY=${developmentKey} npm run demo\`. Ctrl-C stops everything.`
      : 'A process that dies is restarted. Next: `npm run demo` in another terminal. Ctrl-C stops everything.',
    '',
  ];
  console.log(lines.join('\n'));
}

main().catch((error) => {
  console.error(`start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
