/**
 * `npm run worker` runs the compiled worker (scripts/worker.cjs -> dist/app/workers/main.js) with plain node: no
 * TypeScript loader in the process. Against the real Temporal dev server and the demo seller, it completes an
 * operation; a bad ADCP_WORKER_RUNTIME is refused with a clear message.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@temporalio/client';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { dataConverter } from '../../client/payload-codec';
import { DEMO_SELLER_TOKEN, demoOrders } from '../../scripts/lib/demo-seller';
import { type ManagedProcess, startProcess } from '../../scripts/lib/processes';
import { createMediaBuyParams, uniqueBudget } from '../harness/demo-requests';
import { demoSellerConfig, testAddress } from '../harness/temporal';
import { writeAgentsFile } from '../harness/worker-process';
import { connectGrpc } from '../../config/grpc-connection';

const root = path.resolve(__dirname, '..', '..');
const launcher = path.join(root, 'scripts', 'worker.cjs');
const running: ManagedProcess[] = [];

afterAll(async () => {
  await Promise.all(running.map((process) => process.stop('SIGKILL')));
  await closeMCPConnections();
});

test('npm run worker runs dist/app/workers/main.js with plain node and completes an operation', async () => {
  const taskQueue = `compiled-${randomUUID()}`;
  const worker = startProcess('worker', process.execPath, [launcher], {
    env: {
      TEMPORAL_ADDRESS: testAddress(),
      TEMPORAL_NAMESPACE: 'default',
      ADCP_TASK_QUEUE: taskQueue,
      ADCP_AGENTS_FILE: writeAgentsFile([demoSellerConfig()]),
      ADCP_RECONCILE_EVERY: 'off',
      DEMO_SELLER_TOKEN,
      // Refuse the tsx fallback: this test is about the compiled worker.
      ADCP_WORKER_RUNTIME: 'compiled',
    },
  });
  running.push(worker);
  // Builds dist/app first when the sources are newer (tsc: 10 s alone, over 100 s beside three busy Jest workers on
  // 2 cores), then bundles the workflows.
  const deadline = Date.now() + 240_000;
  while (!worker.output().includes('worker: task queue')) {
    if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.output()}`);
    if (Date.now() > deadline) throw new Error(`worker not ready in 240 s:\n${worker.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  expect(existsSync(path.join(root, 'dist', 'app', 'workers', 'main.js'))).toBe(true);
  expect(worker.output()).not.toMatch(/under tsx/);
  // The process is the launcher under plain node, with no TypeScript loader.
  const commandLine = readFileSync(`/proc/${worker.child.pid}/cmdline`, 'utf8').split('\0');
  expect(commandLine).toContain(launcher);
  expect(commandLine.join(' ')).not.toMatch(/tsx/);
  // The tsx fallback would run the worker as a child of the launcher: there is none.
  const children = readFileSync(`/proc/${worker.child.pid}/task/${worker.child.pid}/children`, 'utf8').trim();
  const childCommands = children
    ? children.split(/\s+/).map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '))
    : [];
  expect(childCommands.filter((command) => /tsx|workers\/main/.test(command))).toEqual([]);

  const connection = await connectGrpc({ address: testAddress() });
  try {
    const client = new Client({ connection, dataConverter: dataConverter() });
    const orchestrator = new OrchestratorClient({ client, taskQueue });
    const budget = uniqueBudget();
    const { operationId } = await orchestrator.start({
      sellerId: 'demo',
      task: 'create_media_buy',
      params: createMediaBuyParams(budget),
      idempotencyKey: randomUUID(),
    });
    const state = await orchestrator.result(operationId);
    expect(state.status).toBe('completed');
    expect(typeof state.result?.media_buy_id).toBe('string');
    expect(await demoOrders(process.env.DEMO_UPSTREAM_URL!, budget)).toHaveLength(1);
  } finally {
    await connection.close();
    await worker.stop();
  }
}, 360_000);

test('an unknown ADCP_WORKER_RUNTIME is refused, naming the variable and its values', () => {
  const result = spawnSync(process.execPath, [launcher], {
    env: { ...process.env, ADCP_WORKER_RUNTIME: 'ts-node' },
    encoding: 'utf8',
  });
  expect(result.status).toBe(2);
  expect(result.stderr).toMatch(/ADCP_WORKER_RUNTIME must be auto, compiled or tsx \(got "ts-node"\)/);
});
