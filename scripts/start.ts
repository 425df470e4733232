/**
 * `npm start`: the whole stack on one machine. With no TEMPORAL_ADDRESS it runs the embedded Temporal dev server
 * (SQLite under .data/, so a restart keeps every operation; Web UI on 8233), the worker and the gateway, prints
 * where each is, and stops all of them on Ctrl-C. With TEMPORAL_ADDRESS set it runs only the worker and the
 * gateway against that server (namespace, TLS and API key from the usual Temporal variables).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { type DevServer, ensureSearchAttributes, startDevServer } from '../config/dev-server';
import { loadRuntimeConfig } from '../config/runtime';
import { temporalSettings } from '../config/temporal-connection';
import { DEMO_SELLER_TOKEN } from './lib/demo-seller';
import { type ManagedProcess, startProcess } from './lib/processes';

const root = path.resolve(__dirname, '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');

async function waitForHealth(url: string, watch: ManagedProcess[], timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const process of watch) {
      if (process.child.exitCode !== null) throw new Error(`${process.name} exited:\n${process.output()}`);
    }
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {
      /* not up yet */
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs / 1000} s.`);
}

async function main(): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (!env.ADCP_AGENTS_FILE && !existsSync(path.resolve('agents.json'))) {
    env.ADCP_AGENTS_FILE = path.join(root, 'agents.example.json');
    env.DEMO_SELLER_TOKEN ??= DEMO_SELLER_TOKEN;
    console.log('No agents.json here: using agents.example.json (the bundled demo seller).');
  }
  const runtime = loadRuntimeConfig(env);
  let devServer: DevServer | undefined;
  let address: string;
  let namespace: string;
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
    devServer = await startDevServer({ port: 7233, uiPort: 8233, dbFilename });
    address = devServer.address;
    namespace = devServer.namespace;
    env.TEMPORAL_ADDRESS = address;
    env.TEMPORAL_NAMESPACE = namespace;
  }

  const worker = startProcess('worker', tsx, [path.join(root, 'workers/main.ts')], { env, echo: true });
  const gateway = startProcess('gateway', tsx, [path.join(root, 'api/main.ts')], { env, echo: true });
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    console.log('\nStopping gateway, worker and Temporal...');
    await Promise.all([gateway.stop(), worker.stop()]);
    await devServer?.stop();
    process.exit(code);
  };
  process.on('SIGINT', () => void stopAll(0));
  process.on('SIGTERM', () => void stopAll(0));
  for (const child of [worker, gateway]) {
    child.child.once('exit', (exitCode) => {
      if (!stopping) {
        console.error(`${child.name} exited (${exitCode}); stopping the rest.`);
        void stopAll(1);
      }
    });
  }

  const gatewayUrl = `http://${runtime.gatewayHost}:${runtime.gatewayPort}`;
  await waitForHealth(`${gatewayUrl}/healthz`, [worker, gateway]);
  const lines = [
    '',
    'adcp-orchestrator is running:',
    `  Temporal   ${address} (namespace ${namespace})${devServer ? `, history in ${path.relative(process.cwd(), devServer.dbFilename ?? '')}` : ''}`,
    devServer ? `  Web UI     http://127.0.0.1:${devServer.uiPort ?? 8233}` : `  Web UI     your Temporal server's UI`,
    `  Gateway    ${gatewayUrl}  (GET /healthz, /v1/operations, POST /webhooks/adcp/:operationId)`,
    `  Worker     task queue "${runtime.taskQueue}"`,
    '',
    'Next: `npm run demo` in another terminal. Ctrl-C stops everything.',
    '',
  ];
  console.log(lines.join('\n'));
}

main().catch((error) => {
  console.error(`start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
