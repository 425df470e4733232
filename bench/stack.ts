/**
 * Everything the benchmarks run against, started on loopback and free ports and torn down afterwards:
 *   - the project's Temporal dev server binary (config/dev-server.ts) on a temporary SQLite file;
 *   - the scripted fixture seller (test/fixtures/scripted-seller.ts, @adcp/sdk's server, real RFC 9421 webhooks);
 *   - the gateway as `npm run gateway` and `npm start` ship it (compiled, dist/app/api/main.js, plain node) in its own
 *     process;
 *   - two workers, the product's worker as `npm run worker` ships it (compiled, dist/app/workers/main.js, plain node,
 *     WORKER_NODE_FLAGS) in their own processes: one with ADCP_PUBLIC_BASE_URL set (operations register webhooks), one
 *     without (polling only). Each is preloaded with the memory probe.
 * Bench-built workers (bench/worker.ts: the bare baseline, kill, memory variants) run compiled too, with the same flags,
 * so that every worker the bench compares runs under the same runtime (one tsc run at start builds them all).
 * The bench process itself holds only clients, the seller and the load generators.
 */
import { type ChildProcess, execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { closeMCPConnections } from '@adcp/sdk';
import { Client } from '@temporalio/client';
import { DefaultLogger, bundleWorkflowCode } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { OrchestratorClient } from '../client/orchestrator-client';
import { type SellerConfig, parseAgentsFile } from '../config/sellers';
import { type DevServer, freePort, startDevServer } from '../scripts/lib/dev-server';
import { type ScriptedSeller, startScriptedSeller } from '../test/fixtures/scripted-seller';
import { type WebhookSigningKey, mintWebhookSigningKey } from '../test/fixtures/webhook-signing';
import { type MemoryReading, readMemory, writeMemoryProbe } from './memory-probe';
import { type NodeProcess, ROOT, childEnv, startNodeScript, waitUntil } from './processes';
import { dataConverter } from '../client/payload-codec';
import { WORKER_NODE_FLAGS } from '../config/worker-tuning';
import { WORKFLOWS_PATH } from '../workers/worker';
import { workflowPreloadModules } from '../workers/bundle-options';
import { BARE_WORKFLOWS_PATH } from './bare/paths';
import { connectGrpc } from '../config/grpc-connection';

/** A worker's name as part of its task queue, which also names its Worker Deployment (no ':' or spaces there). */
function queueSafe(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]+/g, '-');
}

export const SELLER_ID = 'bench-seller';
const TOKEN_ENV = 'BENCH_SELLER_TOKEN';

export interface BenchWorker {
  name: string;
  taskQueue: string;
  /** Whether its operations register `push_notification_config` (ADCP_PUBLIC_BASE_URL set). */
  webhooks: boolean;
  process: NodeProcess;
  orchestrator: OrchestratorClient;
  memory(): Promise<MemoryReading>;
}

/** A worker the bench builds itself (bench/worker.ts): the bare baseline, or the product's code with other options. */
export interface ExtraWorkerSpec {
  name: string;
  kind: 'orchestrator' | 'bare';
  /** Default: a fresh queue. Pass an existing one to restart a worker on its queue. */
  taskQueue?: string;
  webhooks?: boolean;
  /** Merged into Worker.create's options (maxCachedWorkflows, workflowThreadPoolSize, reuseV8Context, ...). */
  workerOptions?: Record<string, unknown>;
  /** Load the bundle the bench built once (default), or bundle at start as workers/main.ts does. */
  prebuiltBundle?: boolean;
  /** Extra environment (ADCP_CALL_TIMEOUT_MS, ...). */
  env?: Record<string, string>;
  /** Extra node flags (--max-semi-space-size, ...). */
  execArgv?: string[];
  /**
   * Default 'compiled': dist/app/bench/worker.js with plain node and WORKER_NODE_FLAGS, the runtime of the product's
   * workers. 'tsx': bench/worker.ts under tsx, V8's default heap (what bench-built workers ran until session 6).
   */
  runtime?: 'compiled' | 'tsx';
}

/** How the memory benchmark runs a product worker: compiled or under tsx, with extra node flags or environment. */
export interface ProductWorkerOptions {
  runtime?: 'compiled' | 'tsx';
  /** Node flags in place of the shipped ones (WORKER_NODE_FLAGS, which a compiled worker gets by default). */
  nodeFlags?: readonly string[];
  execArgv?: string[];
  env?: Record<string, string>;
}

export interface BenchStack {
  temporal: DevServer;
  client: Client;
  seller: ScriptedSeller;
  /** The seller as the worker and gateway read it from their agents.json. */
  agent: SellerConfig;
  /** Base URL of the gateway process; also its ADCP_PUBLIC_BASE_URL. */
  gatewayUrl: string;
  gateway: NodeProcess;
  webhookWorker: BenchWorker;
  pollingWorker: BenchWorker;
  /** A second key in the seller's JWKS, for webhooks the throughput benchmark signs itself. */
  benchKey: WebhookSigningKey;
  /** Operation IDs still running that close() terminates before stopping the workers. */
  running: Set<string>;
  /** Starts a bench-built worker process and waits for its pollers; close() stops it if the benchmark did not. */
  startWorker(spec: ExtraWorkerSpec): Promise<BenchWorker>;
  /** Bench-built workers alive now, for CPU accounting. */
  extraWorkers: Set<BenchWorker>;
  /** Workflow bundles built once by the bench (paths). */
  bundles: { orchestrator: string; bare: string };
  /**
   * Starts another product worker (polling only) on a fresh queue, as startWorker: as shipped (`npm run worker`:
   * scripts/worker.cjs, the compiled worker with plain node), or `{ runtime: 'tsx' }` workers/main.ts under tsx.
   */
  startProductWorker(name: string, options?: ProductWorkerOptions): Promise<BenchWorker>;
  /** Runs a bench script (bench/idle-stages.ts) as a child with the stack's environment; resolves with its output. */
  runScript(script: string, env: Record<string, string>): Promise<string>;
  /** Rejects if Temporal, the gateway or a worker exits before close(): race benchmarks against it. */
  failure: Promise<never>;
  close(): Promise<void>;
}

export async function startBenchStack(log: (line: string) => void): Promise<BenchStack> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'adcp-bench-'));
  const cleanups: Array<() => Promise<void>> = [async () => rmSync(dir, { recursive: true, force: true })];
  const cleanup = async () => {
    for (const step of cleanups.reverse()) await step().catch((error) => log(`cleanup: ${(error as Error).message}`));
  };
  try {
    log('starting Temporal dev server, scripted seller...');
    const [temporalServer, seller] = await Promise.all([
      startDevServer({ port: await freePort(), headless: true, dbFilename: path.join(dir, 'temporal.sqlite') }),
      startScriptedSeller({ webhookMode: 'rfc9421', a2a: false, name: 'bench-seller' }),
    ]);
    // The compiled workers build (a tsc child process) while this process bundles the workflows.
    const compiled = buildCompiledWorkers(log);
    compiled.catch(() => undefined); // awaited below, after the bundles
    // Both bundles once, here: bench-built workers then start in about a second (no webpack in their process).
    const bundles = { orchestrator: path.join(dir, 'workflows-bundle.js'), bare: path.join(dir, 'bare-bundle.js') };
    for (const [kind, workflowsPath] of [
      ['orchestrator', WORKFLOWS_PATH],
      ['bare', BARE_WORKFLOWS_PATH],
    ] as const) {
      const { code } = await bundleWorkflowCode({
        workflowsPath,
        // The product's bundle preloads its pure modules as the worker's does; the bare baseline stays as it is.
        ...(kind === 'orchestrator' ? { preloadModules: workflowPreloadModules() } : {}),
        logger: new DefaultLogger('WARN'),
      });
      writeFileSync(bundles[kind], code);
    }
    await compiled;
    cleanups.push(() => temporalServer.stop());
    cleanups.push(() => seller.close());

    const benchKey = mintWebhookSigningKey('bench-webhook-key');
    // Built as JSON and validated by the same parser the worker and gateway use (which also types it).
    const agentsJson = JSON.stringify(
      {
        agents: [
          {
            id: SELLER_ID,
            name: 'Bench scripted seller',
            url: seller.url,
            protocol: 'mcp',
            token_env: TOKEN_ENV,
            webhooks: { scheme: 'rfc9421', jwks: { keys: [...seller.webhookJwks.keys, benchKey.publicJwk] } },
          },
        ],
      },
      null,
      2,
    );
    const agentsFile = path.join(dir, 'agents.json');
    const [agent] = parseAgentsFile(agentsJson, agentsFile).sellers;
    writeFileSync(agentsFile, agentsJson);

    const connection = await connectGrpc({ address: temporalServer.address });
    cleanups.push(() => connection.close());
    const client = new Client({ connection, namespace: temporalServer.namespace, dataConverter: dataConverter() });

    const gatewayPort = await freePort();
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    const probe = writeMemoryProbe(dir);
    const common = {
      TEMPORAL_ADDRESS: temporalServer.address,
      TEMPORAL_NAMESPACE: temporalServer.namespace,
      ADCP_AGENTS_FILE: agentsFile,
      [TOKEN_ENV]: seller.authToken,
    };
    log('starting gateway and two workers (each bundles the workflow code in a child process)...');
    // BENCH_CPU_PROFILE=<dir>: the gateway and the workers write V8 CPU profiles there when they stop.
    const profileDir = process.env.BENCH_CPU_PROFILE;
    const profiling = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profileDir)}`] : [];
    // As shipped (`npm run gateway`: scripts/gateway.cjs runs dist/app/api/main.js with plain node), started directly:
    // the tsc run above built it with the workers.
    const gateway = startNodeScript('gateway', COMPILED_GATEWAY, {
      tsx: false,
      execArgv: profiling,
      env: childEnv({
        ...common,
        ADCP_GATEWAY_HOST: '127.0.0.1',
        ADCP_GATEWAY_PORT: String(gatewayPort),
        ADCP_PUBLIC_BASE_URL: gatewayUrl,
      }),
    });
    cleanups.push(() => gateway.stop());
    const startProductWorker = (
      name: string,
      webhooks: boolean,
      runtime: 'compiled' | 'tsx' = 'compiled',
      extra: Omit<ProductWorkerOptions, 'runtime'> = {},
    ): BenchWorker => {
      // (also used after start-up by startFreshProductWorker, for the memory benchmark's "as shipped" worker)
      const taskQueue = `bench-${queueSafe(name)}-${randomUUID().slice(0, 8)}`;
      // The compiled worker scripts/worker.cjs runs (`npm run worker`), started directly: the bench has just built it,
      // and scripts/worker.cjs would rebuild it in each worker at once if a source changed during the run.
      const entry = runtime === 'compiled' ? COMPILED_PRODUCT_WORKER : 'workers/main.ts';
      const child = startNodeScript(`worker (${name})`, entry, {
        tsx: runtime === 'tsx',
        env: childEnv({
          ...common,
          ADCP_TASK_QUEUE: taskQueue,
          // Scheduled reconciliation runs would add load at unpredictable moments of a run.
          ADCP_RECONCILE_EVERY: 'off',
          // As npm start and npm run worker run it.
          MALLOC_ARENA_MAX: '2',
          ...(webhooks ? { ADCP_PUBLIC_BASE_URL: gatewayUrl } : {}),
          ...extra.env,
        }),
        execArgv: [
          '--expose-gc',
          '--require',
          probe,
          ...profiling,
          ...(extra.nodeFlags ?? (runtime === 'compiled' ? WORKER_NODE_FLAGS : [])),
          ...(extra.execArgv ?? []),
        ],
      });
      cleanups.push(() => child.stop());
      return {
        name,
        taskQueue,
        webhooks,
        process: child,
        // The worker's own agents file decides: a benchmark may give a fresh worker more sellers than the stack's.
        orchestrator: new OrchestratorClient({ client, taskQueue, knownSeller: () => true }),
        memory: () => readMemory(child.child),
      };
    };
    // As shipped: compiled, plain node, WORKER_NODE_FLAGS (until session 6: workers/main.ts under tsx, default heap).
    const webhookWorker = startProductWorker('webhooks', true, 'compiled');
    const pollingWorker = startProductWorker('polling', false, 'compiled');

    await Promise.all([
      waitUntil(gateway, 'healthy /healthz', async () => {
        const response = await fetch(`${gatewayUrl}/healthz`).catch(() => undefined);
        return response?.status === 200;
      }),
      ...[webhookWorker, pollingWorker].map((worker) =>
        waitUntil(worker.process, `pollers on task queue ${worker.taskQueue}`, () =>
          hasPollers(client, worker.taskQueue),
        ),
      ),
    ]);

    let closing = false;
    const failure = new Promise<never>((_, reject) => {
      const watch = (name: string, child: ChildProcess, output: () => string) =>
        child.once('exit', (code, signal) => {
          if (!closing)
            reject(new Error(`${name} exited during the run (code ${code}, signal ${signal}):\n${output()}`));
        });
      watch('Temporal dev server', temporalServer.child, () => '(see its exit code)');
      for (const child of [gateway, webhookWorker.process, pollingWorker.process])
        watch(child.name, child.child, child.output);
    });
    failure.catch(() => undefined); // observed by whoever races it
    cleanups.push(async () => {
      closing = true;
    });

    const extraWorkers = new Set<BenchWorker>();
    const startWorker = async (spec: ExtraWorkerSpec): Promise<BenchWorker> => {
      const taskQueue = spec.taskQueue ?? `bench-${queueSafe(spec.name)}-${randomUUID().slice(0, 8)}`;
      const compiledRuntime = (spec.runtime ?? 'compiled') === 'compiled';
      const child = startNodeScript(
        `bench worker (${spec.name})`,
        compiledRuntime ? COMPILED_BENCH_WORKER : 'bench/worker.ts',
        {
          tsx: !compiledRuntime,
          env: childEnv({
            ...common,
            // As npm run worker runs the product's worker.
            ...(compiledRuntime ? { MALLOC_ARENA_MAX: '2' } : {}),
            ...spec.env,
            ADCP_TASK_QUEUE: taskQueue,
            ADCP_RECONCILE_EVERY: 'off',
            BENCH_WORKER_KIND: spec.kind,
            BENCH_WORKER_OPTIONS: JSON.stringify(spec.workerOptions ?? {}),
            BENCH_SELLER: JSON.stringify(seller.agent('mcp', SELLER_ID)),
            ...(spec.prebuiltBundle === false ? {} : { BENCH_WORKFLOW_BUNDLE: bundles[spec.kind] }),
            ...(spec.webhooks ? { ADCP_PUBLIC_BASE_URL: gatewayUrl } : {}),
          }),
          execArgv: [
            '--expose-gc',
            '--require',
            probe,
            ...profiling,
            ...(compiledRuntime ? WORKER_NODE_FLAGS : []),
            ...(spec.execArgv ?? []),
          ],
        },
      );
      const worker: BenchWorker = {
        name: spec.name,
        taskQueue,
        webhooks: spec.webhooks ?? false,
        process: child,
        orchestrator: new OrchestratorClient({ client, taskQueue, knownSeller: (id) => id === SELLER_ID }),
        memory: () => readMemory(child.child),
      };
      extraWorkers.add(worker);
      void new Promise((resolve) => child.child.once('exit', resolve)).then(() => extraWorkers.delete(worker));
      await waitUntil(child, `pollers on task queue ${taskQueue}`, async () =>
        child.output().includes('bench worker: running') ? hasPollers(client, taskQueue) : false,
      );
      return worker;
    };
    const startFreshProductWorker = async (name: string, options: ProductWorkerOptions = {}): Promise<BenchWorker> => {
      const worker = startProductWorker(name, false, options.runtime ?? 'compiled', options);
      extraWorkers.add(worker);
      void new Promise((resolve) => worker.process.child.once('exit', resolve)).then(() => extraWorkers.delete(worker));
      await waitUntil(worker.process, `pollers on task queue ${worker.taskQueue}`, () =>
        hasPollers(client, worker.taskQueue),
      );
      return worker;
    };
    const runScript = async (script: string, env: Record<string, string>): Promise<string> => {
      const child = startNodeScript(script, script, {
        env: childEnv({ ...common, ADCP_TASK_QUEUE: `bench-script-${randomUUID().slice(0, 8)}`, ...env }),
        execArgv: ['--expose-gc'],
      });
      const code = await new Promise<number | null>((resolve) => child.child.once('exit', resolve));
      if (code !== 0) throw new Error(`${script} exited with code ${code}:\n${child.output()}`);
      return child.output();
    };
    // Registered before the "terminate running operations" step, so it runs after it (cleanups run in reverse).
    cleanups.push(async () => {
      await Promise.all([...extraWorkers].map((worker) => worker.process.stop(5_000)));
    });

    const running = new Set<string>();
    // Parked operations would hold the workers' shutdown for their grace time: end them first. Briefly: after
    // Ctrl-C the server may already be gone, and the client would retry for a long time.
    cleanups.push(async () => {
      await Promise.all(
        [...running].map((operationId) =>
          client
            .withDeadline(Date.now() + 5_000, () => client.workflow.getHandle(operationId).terminate('bench finished'))
            .catch(() => undefined),
        ),
      );
    });
    cleanups.push(() => closeMCPConnections().catch(() => undefined));
    return {
      temporal: temporalServer,
      client,
      seller,
      agent,
      gatewayUrl,
      gateway,
      webhookWorker,
      pollingWorker,
      benchKey,
      running,
      startWorker,
      extraWorkers,
      startProductWorker: startFreshProductWorker,
      bundles,
      runScript,
      failure,
      close: cleanup,
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

const COMPILED_PRODUCT_WORKER = 'dist/app/workers/main.js';
const COMPILED_GATEWAY = 'dist/app/api/main.js';
const COMPILED_BENCH_WORKER = 'dist/app/bench/worker.js';

/**
 * Compiles the worker as `npm run build:worker` does (tsconfig.worker.json into dist/app/) and bench/worker.ts beside
 * it (dist/app/bench/, with bench/bare/workflow.ts, which bench/bare/paths.ts resolves), in one tsc run, from a
 * tsconfig written under tmp/ that extends tsconfig.worker.json (so its entry points and compiler options stay the
 * product's). Type errors do not stop the bench when tsc still emitted (exit code 2), as scripts/worker.cjs runs such
 * a build: other work in the tree may be mid-edit.
 */
async function buildCompiledWorkers(log: (line: string) => void): Promise<void> {
  const workerConfig = JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.worker.json'), 'utf8')) as { files: string[] };
  const configDir = path.join(ROOT, 'tmp');
  mkdirSync(configDir, { recursive: true });
  const configFile = path.join(configDir, `bench-tsconfig-${randomUUID().slice(0, 8)}.json`);
  const fromConfig = (file: string) => path.relative(configDir, path.join(ROOT, file));
  writeFileSync(
    configFile,
    JSON.stringify({
      extends: fromConfig('tsconfig.worker.json'),
      files: [...workerConfig.files, 'bench/worker.ts', 'bench/bare/workflow.ts'].map(fromConfig),
    }),
  );
  const startedAt = Date.now();
  log('compiling the workers (tsc -p tsconfig.worker.json plus bench/worker.ts, into dist/app/)...');
  try {
    await new Promise<void>((resolve, reject) => {
      execFile(
        process.execPath,
        [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', configFile],
        { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 },
        (error, stdout) => {
          const emitted = [COMPILED_PRODUCT_WORKER, COMPILED_BENCH_WORKER].every((file) => {
            const full = path.join(ROOT, file);
            return existsSync(full) && statSync(full).mtimeMs >= startedAt - 1_000;
          });
          if (!error) return resolve();
          if (error.code === 2 && emitted) {
            log(
              `tsc reported type errors (running what it emitted, as scripts/worker.cjs would):\n${stdout.slice(0, 2_000)}`,
            );
            return resolve();
          }
          reject(
            new Error(`Compiling the workers failed (tsc exit ${String(error.code)}):\n${stdout.slice(0, 4_000)}`),
          );
        },
      );
    });
  } finally {
    rmSync(configFile, { force: true });
  }
}

const { TaskQueueType } = temporal.api.enums.v1;

/** True once a worker polls both the workflow and the activity side of the task queue. */
async function hasPollers(client: Client, taskQueue: string): Promise<boolean> {
  for (const taskQueueType of [TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY]) {
    const answer = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name: taskQueue },
      taskQueueType,
    });
    if ((answer.pollers ?? []).length === 0) return false;
  }
  return true;
}
