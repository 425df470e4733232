import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { SellerConfig } from '../../config/sellers';
import { tracingConfigured } from '../../observability/workflow-modules';
import { type ManagedProcess, startProcess } from '../../scripts/lib/processes';
import { TEST_RETRY_ENVIRONMENT } from './retry-backoff';
import { sharedBuild } from './shared-build';

const root = path.resolve(__dirname, '..', '..');
const TSX = path.join(root, 'node_modules', '.bin', 'tsx');
const SWC_REGISTER = path.join(root, 'test', 'harness', 'swc-register.cjs');

/**
 * A worker process bundles its workflows at start, in a child process (workers/workflow-bundle.ts): seconds of CPU
 * per start, and the integration files start dozens. In a Jest run they share one bundle instead, written once with
 * the script `npm run build:workflows` runs and passed as ADCP_WORKFLOW_BUNDLE (the operator's prebuilt bundle).
 * Outside a Jest run the worker bundles at start as usual. (demo-campaign.test.ts hands it to the demo's worker too.)
 */
export function sharedWorkerBundle(): Promise<string> | undefined {
  return sharedBuild('worker-workflow-bundle.js', async (partial) => {
    await promisify(execFile)(TSX, [path.join(root, 'workers', 'workflow-bundle.ts'), partial], {
      cwd: root,
      maxBuffer: 16 * 1024 * 1024,
    });
  });
}

/** Writes a seller list to a temp file, as an operator would, and returns its path. */
export function writeAgentsFile(agents: SellerConfig[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'adcp-agents-'));
  const file = path.join(dir, 'agents.json');
  writeFileSync(file, JSON.stringify({ agents }, null, 2));
  return file;
}

/**
 * The real worker entry point (workers/main.ts, what `npm run worker` runs) as its own OS process, so a test can
 * SIGKILL it. The sources are loaded by node itself through the caching SWC require hook the CLI tests use
 * (test/harness/swc-register.cjs): no tsx loader process beside the worker, about 1.5 s less per start on 2 cores.
 * `loader: 'tsx'` runs it as `ADCP_WORKER_RUNTIME=tsx npm run worker` does (worker-start.test.ts keeps that path
 * proven; compiled-worker.test.ts the compiled one).
 */
export async function startWorkerProcess(options: {
  address: string;
  taskQueue: string;
  agentsFile: string;
  env?: NodeJS.ProcessEnv;
  loader?: 'swc' | 'tsx';
}): Promise<ManagedProcess> {
  const environment = { ...process.env, ...options.env };
  // A worker asked to trace bundles the OpenTelemetry interceptors too: it builds its own.
  const bundle =
    environment.ADCP_WORKFLOW_BUNDLE || tracingConfigured(environment) ? undefined : await sharedWorkerBundle();
  const entry = path.join(root, 'workers', 'main.ts');
  const [command, args] =
    options.loader === 'tsx' ? [TSX, [entry]] : [process.execPath, ['--require', SWC_REGISTER, entry]];
  const worker = startProcess('worker', command, args, {
    env: {
      TEMPORAL_ADDRESS: options.address,
      TEMPORAL_NAMESPACE: 'default',
      ADCP_TASK_QUEUE: options.taskQueue,
      ADCP_AGENTS_FILE: options.agentsFile,
      ...TEST_RETRY_ENVIRONMENT,
      ...(bundle ? { ADCP_WORKFLOW_BUNDLE: bundle } : {}),
      ...options.env,
    },
  });
  const deadline = Date.now() + 90_000;
  while (!worker.output().includes('worker: task queue')) {
    if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.output()}`);
    if (Date.now() > deadline) throw new Error(`worker not ready in 90 s:\n${worker.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // "RUNNING" follows the ready line once the pollers are up.
  // The worker logs through pino (JSON) since observability/logger.ts; Temporal's default logger printed the first form.
  while (!/state: 'RUNNING'|"state":"RUNNING"/.test(worker.output()) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return worker;
}
