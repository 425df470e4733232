/**
 * The typed client as backend teams get it: `npm pack` the client workspace (packages/client), check the tarball
 * carries the client, its types and the CLI and nothing of the worker, the activities or the API; install it alone
 * into an empty folder (offline, from the npm cache) and measure it: at most 40 MB, without @adcp/sdk or
 * @temporalio/worker; then install it into a scratch TypeScript backend, type-check a small backend against the
 * package's declarations, and run it: it starts a create_media_buy at the demo seller through the harness's Temporal
 * server and a worker from this repository, follows it to completion and prints the result.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import {
  CLIENT_PACKAGE,
  type CommandResult,
  type PackedTarball,
  clientPackageRoot,
  packProject,
  runCommand,
  writeScratchProject,
} from '../harness/packed-project';
import { type TestStack, demoSellerConfig, registry, startTestStack, testAddress } from '../harness/temporal';

jest.setTimeout(300_000);

let dir: string;
let packed: PackedTarball;
let stack: TestStack;
/** The two scratch projects' installs, started side by side once the tarball exists (each test awaits its own). */
let installs: { alone: Promise<CommandResult>; backend: Promise<CommandResult> };
const timings: Record<string, number | string> = {};

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'adcp-packed-client-'));
  // The worker bundles workflows while npm packs: both take seconds on a busy machine. The stack is kept even when
  // packing fails, so afterAll stops its worker.
  const starting = startTestStack({
    sellers: registry([demoSellerConfig()]),
    activities: { env: { DEMO_SELLER_TOKEN } },
  }).then((started) => (stack = started));
  const [packing] = await Promise.allSettled([packProject(dir), starting]);
  await starting;
  if (packing.status === 'rejected') throw packing.reason;
  packed = packing.value;
  timings.packMs = packed.packMs;
  installs = { alone: install(path.join(dir, 'empty')), backend: install(path.join(dir, 'backend'), BACKEND_PACKAGES) };
  // Awaited by their tests; a failure is reported there, not as an unhandled rejection here.
  for (const started of Object.values(installs)) started.catch(() => undefined);
});

const BACKEND_PACKAGES = ['@temporalio/client', 'typescript', '@types/node'];

/** A scratch project in `folder` that depends on the tarball (and `extra`), installed offline from the npm cache. */
function install(folder: string, extra: string[] = []): Promise<CommandResult> {
  mkdirSync(folder, { recursive: true });
  writeScratchProject(folder, packed.file, extra);
  // Install scripts run (no --ignore-scripts): the package's postinstall must not break a backend's install.
  return runCommand('npm', ['ci', '--offline', '--no-audit', '--no-fund'], { cwd: folder });
}

afterAll(async () => {
  await stack?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  // Wall time of the slow steps, for the README and CI budgets (not asserted).
  console.log(`packed-client timings: ${JSON.stringify(timings)}`);
});

test('the tarball carries the client, its declarations and the message and state types, and no worker, activity or API code', () => {
  const files = packed.files;
  for (const expected of [
    'dist/client/index.js',
    'dist/client/index.d.ts',
    'dist/client/types.js',
    'dist/client/types.d.ts',
    'dist/client/tenant-payload-converter.js',
    'dist/client/orchestrator-client.d.ts',
    'dist/client/media-buy-client.d.ts',
    'dist/contract/operation.d.ts',
    'dist/contract/media-buy.d.ts',
    'dist/protocol/requests.d.ts',
    'bin.js',
    'dist/client/cli.js',
  ]) {
    expect(files).toContain(expected);
  }
  const leaked = files.filter(
    (file) =>
      /^(workers|activities|api|workflows|protocol|config|client|scripts|test|bench)\//.test(file) ||
      // The CLI ships (the package's bin), with the one API module it renders operations with.
      (/^dist\/(workers|api|scripts|test|bench)\//.test(file) && !/^dist\/api\/operation-view\./.test(file)) ||
      // No activity code ships (the contract's declarations describe state fields, in dist/contract/).
      /^dist\/activities\//.test(file) ||
      // Workflows stay in the worker: what the client shares with them is in dist/contract/.
      /^dist\/workflows\//.test(file) ||
      /workflow-bundle/.test(file),
  );
  expect(leaked).toEqual([]);

  const manifest = JSON.parse(readFileSync(path.join(clientPackageRoot, 'package.json'), 'utf8')) as {
    exports: Record<string, unknown>;
    dependencies: Record<string, string>;
  };
  expect(Object.keys(manifest.exports).sort()).toEqual(['.', './package.json', './types']);
  // Only what starting, following, answering and cancelling need: no seller SDK, no worker.
  expect(Object.keys(manifest.dependencies)).not.toContain('@adcp/sdk');
  expect(Object.keys(manifest.dependencies)).not.toContain('@temporalio/worker');
  // The repository's own package depends on the workspace.
  const root = JSON.parse(readFileSync(path.join(__dirname, '../../package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    workspaces: string[];
  };
  expect(root.workspaces).toContain('packages/client');
  expect(root.dependencies[CLIENT_PACKAGE]).toBe(
    JSON.parse(readFileSync(path.join(clientPackageRoot, 'package.json'), 'utf8')).version,
  );
});

/** Disk use of a folder in bytes, as `du -sk` counts it (blocks, not file sizes). */
async function diskUse(folder: string): Promise<number> {
  const { stdout } = await runCommand('du', ['-sk', folder], { cwd: folder });
  return Number(stdout.split(/\s/)[0]) * 1024;
}

test('installed alone into an empty folder, the client takes at most 40 MB, without @adcp/sdk or the worker', async () => {
  const empty = path.join(dir, 'empty');
  timings.installAloneMs = (await installs.alone).ms;
  const installed = readdirSync(path.join(empty, 'node_modules'), { withFileTypes: true }).flatMap((entry) =>
    entry.name.startsWith('@')
      ? readdirSync(path.join(empty, 'node_modules', entry.name)).map((name) => `${entry.name}/${name}`)
      : [entry.name],
  );
  for (const heavy of ['@adcp/sdk', '@temporalio/worker', '@temporalio/core-bridge', 'express', 'pino'])
    expect(installed).not.toContain(heavy);
  expect(installed).toContain(CLIENT_PACKAGE);
  const { stdout } = await runCommand('du', ['-sh', empty], { cwd: empty });
  timings.installedSize = stdout.trim().split(/\s/)[0]!;
  expect(await diskUse(empty)).toBeLessThanOrEqual(40 * 1024 * 1024);
  // It loads: the client and its data converter, without anything the tarball does not carry.
  const loaded = await runCommand(
    'node',
    [
      '-e',
      `const c = require('${CLIENT_PACKAGE}'); console.log(typeof c.OrchestratorClient, typeof c.dataConverter().payloadConverterPath)`,
    ],
    { cwd: empty },
  );
  expect(loaded.stdout.trim()).toBe('function string');
});

test('a scratch backend installs the tarball, type-checks against it and follows an operation to completion', async () => {
  const app = path.join(dir, 'backend');
  timings.installMs = (await installs.backend).ms;
  mkdirSync(path.join(app, 'src'), { recursive: true });

  writeFileSync(
    path.join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'node16',
        moduleResolution: 'node16',
        strict: true,
        outDir: 'out',
        types: ['node'],
        // As in this repository: @temporalio/common's declarations do not resolve \`ms\` under node16 resolution.
        skipLibCheck: true,
      },
      include: ['src'],
    }),
  );
  writeFileSync(path.join(app, 'src', 'backend.ts'), BACKEND_SOURCE);
  // A misuse of the package's types must fail the same compiler: the declarations are really checked. One compile
  // checks both files and emits the backend (tsc emits despite errors): it must fail on the misuse alone.
  writeFileSync(path.join(app, 'src', 'misuse.ts'), MISUSE_SOURCE);
  const started = Date.now();
  const misuse = await runCommand('node_modules/.bin/tsc', ['-p', '.'], { cwd: app }).then(
    () => '',
    (error: Error) => error.message,
  );
  timings.typecheckMs = Date.now() - started;
  expect(misuse).toMatch(/misuse\.ts.*error TS2322/);
  expect(misuse).not.toMatch(/backend\.ts/);
  expect([...new Set(misuse.match(/\S+\.ts\(\d+,\d+\): error TS\d+/g))]).toEqual([
    expect.stringMatching(/^src\/misuse\.ts/),
  ]);
  expect(existsSync(path.join(app, 'out', 'backend.js'))).toBe(true);
  rmSync(path.join(app, 'src', 'misuse.ts'));
  // skipLibCheck hides a declaration that imports a file the tarball lacks: check every relative import resolves.
  expect(missingRelativeImports(path.join(app, 'node_modules', CLIENT_PACKAGE))).toEqual([]);

  const operationKey = `packed-${randomUUID()}`;
  // Projects still on the classic resolution (no \`exports\`) find both entry points too (typesVersions): checked
  // while the backend runs (it mostly waits on the operation).
  const classicResolution = runCommand(
    'node_modules/.bin/tsc',
    ['-p', '.', '--noEmit', '--module', 'commonjs', '--moduleResolution', 'node10'],
    { cwd: app },
  );
  const run = await runCommand('node', ['out/backend.js'], {
    cwd: app,
    env: {
      TEMPORAL_ADDRESS: testAddress(),
      ADCP_TASK_QUEUE: stack.taskQueue,
      OPERATION_KEY: operationKey,
      PARAMS: JSON.stringify(createMediaBuyParams()),
    },
    timeoutMs: 120_000,
  }).finally(() => classicResolution.catch(() => undefined));
  await classicResolution;
  timings.runMs = run.ms;
  const lines = run.stdout.trim().split('\n');
  const result = JSON.parse(lines[lines.length - 1]) as {
    operationId: string;
    status: string;
    mediaBuyId?: string;
    seen: string[];
  };
  expect(result.status).toBe('completed');
  expect(result.mediaBuyId).toEqual(expect.any(String));
  expect(result.seen[result.seen.length - 1]).toBe('completed');
  // The repository's own client reads the same operation the packaged one started.
  const state = await stack.orchestrator.result(result.operationId);
  expect(state.status).toBe('completed');
  expect(state.result?.media_buy_id).toBe(result.mediaBuyId);

  // The package's bin runs from the install (compiled, no tsx): help, and the same operation read back as JSON.
  const bin = path.join(app, 'node_modules', '.bin', 'adcp-orchestrator');
  const help = await runCommand(bin, ['--help'], { cwd: app });
  expect(help.stdout).toMatch(/Usage: adcp-orchestrator/);
  expect(help.stdout).toMatch(/\bwatch\b/);
  const status = await runCommand(bin, ['--json', 'status', result.operationId], {
    cwd: app,
    env: { TEMPORAL_ADDRESS: testAddress(), ADCP_TASK_QUEUE: stack.taskQueue },
    timeoutMs: 60_000,
  });
  expect(JSON.parse(status.stdout)).toMatchObject({
    operation_id: result.operationId,
    status: 'completed',
    result: { media_buy_id: result.mediaBuyId },
  });
});

/** Relative imports and requires in the installed package's .js and .d.ts files that name no file in it. */
function missingRelativeImports(packageDirectory: string): string[] {
  const missing: string[] = [];
  const visit = (directory: string): void => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const file = path.join(directory, entry.name);
      if (entry.isDirectory()) visit(file);
      else if (/\.(js|d\.ts)$/.test(entry.name)) {
        const source = readFileSync(file, 'utf8');
        for (const match of source.matchAll(/(?:from |require\(|import\()['"](\.{1,2}\/[^'"]+)['"]/g)) {
          const target = path.resolve(path.dirname(file), match[1]);
          const candidates = file.endsWith('.d.ts')
            ? [`${target}.d.ts`, path.join(target, 'index.d.ts')]
            : [`${target}.js`, path.join(target, 'index.js')];
          if (!candidates.some((candidate) => existsSync(candidate)))
            missing.push(`${path.relative(packageDirectory, file)} → ${match[1]}`);
        }
      }
    }
  };
  visit(path.join(packageDirectory, 'dist'));
  return missing;
}

/** The backend a team would write: its own Temporal Client, the packaged OrchestratorClient, typed state. */
const BACKEND_SOURCE = `
import { Client, Connection } from '@temporalio/client';
import { OrchestratorClient, dataConverter, type OperationView } from '@adcp-orchestrator/client';
import type { OperationState, OperationStatus } from '@adcp-orchestrator/client/types';

async function main(): Promise<void> {
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  try {
    const client = new Client({ connection, dataConverter: dataConverter() });
    const orchestrator = new OrchestratorClient({ client, taskQueue: process.env.ADCP_TASK_QUEUE! });
    const { operationId } = await orchestrator.start({
      sellerId: 'demo',
      task: 'create_media_buy',
      params: JSON.parse(process.env.PARAMS!) as Record<string, unknown>,
      idempotencyKey: process.env.OPERATION_KEY!,
    });
    console.log('started ' + operationId);
    const seen: OperationStatus[] = [];
    for (;;) {
      const view: OperationView = await orchestrator.status(operationId);
      const status = view.state?.status;
      if (status && seen[seen.length - 1] !== status) {
        seen.push(status);
        console.log('status ' + status);
      }
      if (!view.running) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const state: OperationState = await orchestrator.result(operationId);
    const mediaBuyId = typeof state.result?.media_buy_id === 'string' ? state.result.media_buy_id : undefined;
    console.log(JSON.stringify({ operationId, status: state.status, mediaBuyId, seen }));
  } finally {
    await connection.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
`;

const MISUSE_SOURCE = `
import type { OperationStatus } from '@adcp-orchestrator/client/types';
export const status: OperationStatus = 'finished';
`;
