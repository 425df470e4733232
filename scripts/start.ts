/**
 * `npm start`: the whole stack on one machine, supervised. With no TEMPORAL_ADDRESS it runs the embedded Temporal dev
 * server (SQLite under .data/, so a restart keeps every operation; Web UI on 8233), the worker and the gateway, prints
 * where each is, restarts any of them that dies (with backoff), and stops all of them on Ctrl-C. With TEMPORAL_ADDRESS
 * set it runs only the worker and the gateway against that server (namespace, TLS and API key from the usual Temporal
 * variables). The pids go to .data/npm-start.json, so a start after a SIGKILLed one stops its leftovers first.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describeDevelopmentKey, generateApiKey, loadAuthConfig } from '../api/auth';
import { loadRuntimeConfig } from '../config/runtime';
import { temporalSettings } from '../config/temporal-connection';
import { WORKER_NODE_FLAGS } from '../config/worker-tuning';
import { DEMO_SELLER_TOKEN } from './lib/demo-seller';
import { type DevServer, type DevServerOptions, ensureSearchAttributes, startDevServer } from './lib/dev-server';
import { type ManagedProcess, startProcess } from './lib/processes';
import { type RecordedProcess, StackPidFile } from './lib/stack-pids';
import { type RunningProcess, Supervised } from './lib/supervisor';
import { connectGrpc } from '../config/grpc-connection';

const root = path.resolve(__dirname, '..');

/** A child process as the supervisor watches it (scripts/lib/supervisor.ts). */
function running(managed: ManagedProcess): RunningProcess & { pid?: number } {
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (managed.child.exitCode !== null || managed.child.signalCode !== null)
      resolve({ code: managed.child.exitCode, signal: managed.child.signalCode });
    else managed.child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return { exited, stop: () => managed.stop(), ...(managed.child.pid !== undefined ? { pid: managed.child.pid } : {}) };
}

function runningServer(server: DevServer): RunningProcess & { pid?: number; server: DevServer } {
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    server.child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    exited,
    stop: () => server.stop(),
    server,
    ...(server.child.pid !== undefined ? { pid: server.child.pid } : {}),
  };
}

/**
 * The dev server's options for `npm start`: SQLite under .data/, the Web UI on 8233, and, when payloads are encrypted
 * (ADCP_PAYLOAD_KEYS), the gateway's codec server as the UI's codec endpoint, so the UI shows them decoded.
 */
export function devServerOptionsFor(env: NodeJS.ProcessEnv, gatewayUrl: string): DevServerOptions {
  return {
    port: 7233,
    uiPort: 8233,
    dbFilename: path.join(root, '.data', 'temporal.sqlite'),
    ...(env.ADCP_PAYLOAD_KEYS?.trim() ? { uiCodecEndpoint: `${gatewayUrl}/codec` } : {}),
  };
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

/** What `npm start` prints once everything answers. */
export function bannerLines(stack: {
  address: string;
  namespace: string;
  devServer?: Pick<DevServer, 'dbFilename' | 'uiPort'>;
  gatewayUrl: string;
  runtime: Pick<ReturnType<typeof loadRuntimeConfig>, 'webhookListener' | 'taskQueue'>;
  polling: boolean;
  developmentKey?: string;
  apiKeysFile?: string;
  jwt?: boolean;
  /** ADCP_PAYLOAD_KEYS is set: the Web UI decodes through the gateway's codec server. */
  encrypted?: boolean;
}): string[] {
  const { devServer, gatewayUrl, runtime, developmentKey } = stack;
  const credentials = developmentKey
    ? [describeDevelopmentKey({ file: '', key: developmentKey, principal: 'developer', tenant: 'dev' }, gatewayUrl)]
    : [
        `  API keys   ${[stack.apiKeysFile ? `from ${stack.apiKeysFile} (ADCP_API_KEYS_FILE)` : '', stack.jwt ? 'JWTs (ADCP_JWT_*)' : ''].filter(Boolean).join(' and ')}`,
      ];
  return [
    '',
    'adcp-orchestrator is running:',
    `  Temporal   ${stack.address} (namespace ${stack.namespace})${devServer ? `, history in ${path.relative(process.cwd(), devServer.dbFilename ?? '')}` : ''}`,
    devServer
      ? `  Web UI     http://127.0.0.1:${devServer.uiPort ?? 8233}${stack.encrypted ? ` (payloads decoded by the codec server at ${gatewayUrl}/codec)` : ''}`
      : `  Web UI     your Temporal server's UI`,
    `  Gateway    ${gatewayUrl}  (GET /healthz; POST /v1/operations, GET /v1/operations/:id; POST /webhooks/adcp/:agentId/:operationId; GET /openapi.json)`,
    ...(runtime.webhookListener
      ? [`  Webhooks   http://${runtime.webhookListener.host}:${runtime.webhookListener.port}  (POST /webhooks/...)`]
      : []),
    `  Worker     task queue "${runtime.taskQueue}"${stack.polling ? '' : ' (not polling yet: see its log above)'}`,
    ...credentials,
    '',
    developmentKey
      ? `A process that dies is restarted. Next, in another terminal: \`ADCP_API_KEY=${developmentKey} npm run demo\`. Ctrl-C stops everything.`
      : 'A process that dies is restarted. Next: `ADCP_API_KEY=<one of your keys> npm run demo` in another terminal. Ctrl-C stops everything.',
    '',
  ];
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

  let temporal: Supervised | undefined;
  const children: { supervised: Supervised; script: string }[] = [];
  const pidOf = (supervised: Supervised | undefined) => (supervised?.process as { pid?: number } | undefined)?.pid;
  const recordPids = () =>
    pidFile.write({
      supervisor: process.pid,
      processes: [
        ...(pidOf(temporal) !== undefined
          ? [{ name: 'temporal', pid: pidOf(temporal)!, group: false, marker: 'start-dev' }]
          : []),
        ...children.flatMap(({ supervised, script }) => {
          const pid = pidOf(supervised);
          return pid === undefined ? [] : [{ name: supervised.name, pid, group: true, marker: script }];
        }),
      ] satisfies RecordedProcess[],
    });
  const gatewayUrl = `http://${runtime.gatewayHost}:${runtime.gatewayPort}`;

  let address: string;
  let namespace: string;
  let devServer: DevServer | undefined;
  if (env.TEMPORAL_ADDRESS) {
    const settings = temporalSettings(env);
    address = settings.connectionOptions.address;
    namespace = settings.namespace;
    const connection = await connectGrpc(settings.connectionOptions);
    await ensureSearchAttributes(connection, namespace);
    await connection.close();
  } else {
    const options = devServerOptionsFor(env, gatewayUrl);
    console.log('Starting the Temporal dev server...');
    temporal = new Supervised({
      name: 'Temporal dev server',
      changed: recordPids,
      start: async () => {
        try {
          return runningServer(await startDevServer(options));
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          if (!/already in use/.test(message)) throw error;
          throw new Error(
            `${message}\nIf it is a Temporal server you started yourself, run \`TEMPORAL_ADDRESS=127.0.0.1:${options.port} npm start\` to use it; ` +
              `otherwise find the process with \`ss -ltnp 'sport = :${options.port}'\` (or \`lsof -i :${options.port}\`) and stop it.`,
          );
        }
      },
    });
    devServer = ((await temporal.start()) as ReturnType<typeof runningServer>).server;
    address = devServer.address;
    namespace = devServer.namespace;
    env.TEMPORAL_ADDRESS = address;
    env.TEMPORAL_NAMESPACE = namespace;
    // A history kept from an older version lacks attributes added since (the dev server registers its
    // --search-attribute flags only on a new database): add the missing ones.
    const connection = await connectGrpc({ address });
    await ensureSearchAttributes(connection, namespace);
    await connection.close();
  }

  // glibc's per-thread malloc arenas hold on to freed memory; two arenas cut a parked worker's RSS (bench/README.md).
  // The worker runs compiled (dist/app/, built by scripts/worker.cjs when the sources are newer): no TypeScript loader
  // in its process (bench/README.md, run G). ADCP_WORKER_RUNTIME=tsx runs it from the sources instead.
  const supervise = (name: string, script: string, childEnv: NodeJS.ProcessEnv, nodeFlags: readonly string[]) =>
    children.push({
      script,
      supervised: new Supervised({
        name,
        changed: recordPids,
        start: async () =>
          running(
            startProcess(name, process.execPath, [...nodeFlags, path.join(root, script)], {
              env: childEnv,
              echo: true,
            }),
          ),
      }),
    });
  supervise('worker', 'scripts/worker.cjs', { MALLOC_ARENA_MAX: '2', ...env }, WORKER_NODE_FLAGS);
  // The gateway runs compiled too (scripts/gateway.cjs, dist/app/api/main.js, default node flags); both launchers share
  // one build of dist/app/ (a lock: the second waits for the first). ADCP_GATEWAY_RUNTIME=tsx runs it from the sources.
  supervise('gateway', 'scripts/gateway.cjs', env, []);
  let stopping = false;
  const stopEverything = async (code: number) => {
    if (stopping) return;
    stopping = true;
    console.log('\nStopping gateway, worker and Temporal...');
    // Every process is stopping before any is stopped: Ctrl-C reaches the dev server too (same process group).
    temporal?.beginStop();
    for (const { supervised } of children) supervised.beginStop();
    await Promise.all(children.map(({ supervised }) => supervised.stop()));
    await temporal?.stop();
    pidFile.remove();
    process.exit(code);
  };
  process.on('SIGINT', () => void stopEverything(0));
  process.on('SIGTERM', () => void stopEverything(0));
  await Promise.all(children.map(({ supervised }) => supervised.start()));

  const health = await waitForHealth(`${gatewayUrl}/healthz`);
  const lines = bannerLines({
    address,
    namespace,
    ...(devServer ? { devServer } : {}),
    gatewayUrl,
    runtime,
    polling: health?.workers === 'polling',
    ...(developmentKey ? { developmentKey } : {}),
    ...(auth.apiKeysFile ? { apiKeysFile: auth.apiKeysFile } : {}),
    jwt: Boolean(auth.jwt),
    encrypted: Boolean(env.ADCP_PAYLOAD_KEYS?.trim()),
  });
  console.log(lines.join('\n'));
}

if (require.main === module) {
  main().catch((error) => {
    console.error(`start: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  });
}
