/**
 * `npm run bench:heap`: what a worker's main-thread heap holds per parked operation. Runs a worker in this process
 * (a prebuilt bundle, the product's activities) against a Temporal dev server and the scripted seller keeping every
 * create_media_buy `submitted`, writes a heap snapshot when idle and another after N operations have been parked
 * and polling for a while (both after a full GC), and prints what grew, by V8 node type and constructor.
 *
 *   npm run bench:heap                       400 operations, 40 s of polling
 *   N=1000 WAIT_MS=60000 npm run bench:heap
 *
 * Snapshots are written to tmp/heap/ (open them in Chrome DevTools for retainer paths).
 * Found with it: Node 20 keeping every AbortSignal.any() with a listener (activities/linked-signal.ts).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, bundleWorkflowCode } from '@temporalio/worker';
import { OrchestratorClient } from '../client/orchestrator-client';
import { dataConverter } from '../client/payload-codec';
import { parseAgentsFile } from '../config/sellers';
import { freePort, startDevServer } from '../scripts/lib/dev-server';
import { startScriptedSeller } from '../test/fixtures/scripted-seller';
import { createMediaBuyParams } from '../test/harness/demo-requests';
import { workflowPreloadModules } from '../workers/bundle-options';
import { WORKFLOWS_PATH, createOperationWorker } from '../workers/worker';
import { ROOT } from './processes';
import { connectGrpc } from '../config/grpc-connection';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

/** Self size and count per "type:constructor" of a snapshot file. */
function aggregate(file: string): Map<string, { bytes: number; count: number }> {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as HeapSnapshot;
  const fields = snapshot.snapshot.meta.node_fields;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((field) => fields.indexOf(field));
  const types = snapshot.snapshot.meta.node_types[0];
  const totals = new Map<string, { bytes: number; count: number }>();
  for (let index = 0; index < snapshot.nodes.length; index += fields.length) {
    const type = types[snapshot.nodes[index + typeAt]];
    const name = /string/.test(type) ? '(strings)' : snapshot.strings[snapshot.nodes[index + nameAt]].slice(0, 60);
    const key = `${type}:${name}`;
    const entry = totals.get(key) ?? { bytes: 0, count: 0 };
    entry.bytes += snapshot.nodes[index + sizeAt];
    entry.count += 1;
    totals.set(key, entry);
  }
  return totals;
}

async function settle(): Promise<void> {
  for (let round = 0; round < 3; round++) {
    gc();
    await sleep(200);
  }
}

async function main(): Promise<void> {
  const operations = Number(process.env.N ?? 400);
  const waitMs = Number(process.env.WAIT_MS ?? 40_000);
  const directory = path.join(ROOT, 'tmp', 'heap');
  mkdirSync(directory, { recursive: true });
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const server = await startDevServer({ port: await freePort(), headless: true });
  const seller = await startScriptedSeller({ webhookMode: 'rfc9421', a2a: false, name: 'heap-seller' });
  seller.setDefaultScript('create_media_buy', [
    { status: 'submitted' },
    { status: 'completed', afterPolls: 1_000_000 },
  ]);
  const sellerRegistry = parseAgentsFile(
    JSON.stringify({ agents: [{ id: 'heap', url: seller.url, protocol: 'mcp', token_env: 'HEAP_SELLER_TOKEN' }] }),
    'bench/heap-snapshot.ts',
  );
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    preloadModules: workflowPreloadModules(),
    logger: new DefaultLogger('WARN'),
  });
  const connection = await NativeConnection.connect({ address: server.address });
  const clientConnection = await connectGrpc({ address: server.address });
  const client = new Client({
    connection: clientConnection,
    namespace: server.namespace,
    dataConverter: dataConverter(),
  });
  const taskQueue = `heap-${randomUUID().slice(0, 8)}`;
  const worker = await createOperationWorker({
    connection,
    namespace: server.namespace,
    taskQueue,
    client,
    activities: {
      sellers: sellerRegistry,
      env: { HEAP_SELLER_TOKEN: seller.authToken },
      callTimeoutMs: 60_000,
      circuitBreaker: { failureThreshold: 5, coolOffMs: 60_000 },
    },
    workflowBundle: { code },
    maxCachedWorkflows: 100,
  });
  const running = worker.run();
  try {
    await sleep(3_000);
    await settle();
    const idleHeap = process.memoryUsage().heapUsed;
    const idleFile = v8.writeHeapSnapshot(path.join(directory, 'idle.heapsnapshot'));
    const orchestrator = new OrchestratorClient({ client, taskQueue, knownSeller: (id) => id === 'heap' });
    for (let index = 0; index < operations; index++) {
      await orchestrator.start({
        sellerId: 'heap',
        task: 'create_media_buy',
        params: createMediaBuyParams(),
        idempotencyKey: randomUUID(),
      });
      if (index % 25 === 24) await sleep(1_000);
    }
    await sleep(waitMs);
    await settle();
    const parkedHeap = process.memoryUsage().heapUsed;
    const parkedFile = v8.writeHeapSnapshot(path.join(directory, 'parked.heapsnapshot'));
    const before = aggregate(idleFile);
    const rows = [...aggregate(parkedFile)].map(([key, after]) => {
      const idle = before.get(key) ?? { bytes: 0, count: 0 };
      return { key, bytes: after.bytes - idle.bytes, count: after.count - idle.count };
    });
    rows.sort((a, b) => b.bytes - a.bytes);
    console.log(
      `main heap after GC: idle ${mib(idleHeap)}, ${operations} parked ${mib(parkedHeap)} ` +
        `(+${((parkedHeap - idleHeap) / operations / 1024).toFixed(1)} KiB per operation)`,
    );
    console.log('largest growth by V8 node type:constructor (self size, objects):');
    for (const row of rows.slice(0, 25))
      console.log(`${(row.bytes / 1024).toFixed(0).padStart(9)} KiB ${String(row.count).padStart(8)}  ${row.key}`);
  } finally {
    worker.shutdown();
    await running.catch(() => undefined);
    await clientConnection.close();
    await seller.close();
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(`bench:heap: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
