import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { SellerConfig } from '../../config/sellers';
import { type ManagedProcess, startProcess } from '../../scripts/lib/processes';

const root = path.resolve(__dirname, '..', '..');

/** Writes a seller list to a temp file, as an operator would, and returns its path. */
export function writeAgentsFile(agents: SellerConfig[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'adcp-agents-'));
  const file = path.join(dir, 'agents.json');
  writeFileSync(file, JSON.stringify({ agents }, null, 2));
  return file;
}

/** The real worker entry point (`npm run worker`) as its own OS process, so a test can SIGKILL it. */
export async function startWorkerProcess(options: {
  address: string;
  taskQueue: string;
  agentsFile: string;
  env?: NodeJS.ProcessEnv;
}): Promise<ManagedProcess> {
  const worker = startProcess(
    'worker',
    path.join(root, 'node_modules', '.bin', 'tsx'),
    [path.join(root, 'workers', 'main.ts')],
    {
      env: {
        TEMPORAL_ADDRESS: options.address,
        TEMPORAL_NAMESPACE: 'default',
        ADCP_TASK_QUEUE: options.taskQueue,
        ADCP_AGENTS_FILE: options.agentsFile,
        ...options.env,
      },
    },
  );
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
