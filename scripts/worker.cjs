'use strict';
/**
 * `npm run worker` (and the worker `npm start` supervises): runs the worker as compiled JavaScript, with plain node and
 * no TypeScript loader in the process (tsx's loader costs about 35 MiB of RSS; bench/README.md, run G).
 *
 *   - dist/app/workers/main.js is current (no .ts source under the compiled folders is newer): it runs, in this process;
 *   - otherwise it is built first (`tsc -p tsconfig.worker.json`, what `npm run build:worker` does; about 10 s), then run;
 *   - if it cannot be built (TypeScript is a dev dependency: a production install without it) the worker runs from the
 *     sources under tsx, after saying so; ADCP_WORKER_RUNTIME=tsx chooses that on purpose, =compiled refuses it.
 *
 * Plain CommonJS on purpose: it must run before anything is compiled, without tsx.
 */
const { spawn, spawnSync } = require('node:child_process');
const { existsSync, readdirSync, statSync } = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const COMPILED = path.join(ROOT, 'dist', 'app', 'workers', 'main.js');
/** The folders tsconfig.worker.json compiles from (what the worker imports). */
const SOURCES = ['workers', 'workflows', 'activities', 'protocol', 'config', 'observability', 'client', 'api'];

function newestSource(dir) {
  let newest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(file));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
      newest = Math.max(newest, statSync(file).mtimeMs);
  }
  return newest;
}

/** Why the compiled worker cannot be run as it is, or undefined when it is current. */
function staleReason() {
  if (!existsSync(COMPILED)) return 'it has not been built';
  const builtAt = statSync(COMPILED).mtimeMs;
  const newest = Math.max(...SOURCES.map((dir) => newestSource(path.join(ROOT, dir))));
  return newest > builtAt ? 'sources changed since it was built' : undefined;
}

function build() {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!existsSync(tsc)) return 'TypeScript is not installed (a dev dependency)';
  const startedAt = Date.now();
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.worker.json')], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  if (result.status === 0) return undefined;
  // Type errors (printed above) do not stop tsc from emitting: run what it emitted, as tsx runs unchecked sources.
  if (result.status === 2 && existsSync(COMPILED) && statSync(COMPILED).mtimeMs >= startedAt - 1_000) {
    console.error(
      'worker: the sources have type errors (above); running the JavaScript tsc emitted anyway, as tsx would.',
    );
    return undefined;
  }
  return `tsc -p tsconfig.worker.json exited with ${result.status ?? result.signal}`;
}

function runUnderTsx(why) {
  console.error(`worker: running from the TypeScript sources under tsx (${why}); about 35 MiB more RSS than compiled.`);
  // The same node flags as this process (heap settings from package.json or npm start), plus the TypeScript loader.
  const child = spawn(
    process.execPath,
    [...process.execArgv, '--import', 'tsx', path.join(ROOT, 'workers', 'main.ts')],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

function main() {
  const mode = process.env.ADCP_WORKER_RUNTIME ?? 'auto';
  if (!['auto', 'compiled', 'tsx'].includes(mode)) {
    console.error(`worker: ADCP_WORKER_RUNTIME must be auto, compiled or tsx (got "${mode}").`);
    process.exit(2);
  }
  if (mode === 'tsx') return runUnderTsx('ADCP_WORKER_RUNTIME=tsx');
  const stale = staleReason();
  if (stale) {
    console.error(`worker: building the compiled worker into dist/app/ (${stale})...`);
    const failed = build();
    if (failed) {
      if (mode === 'compiled') {
        console.error(`worker: cannot build the compiled worker: ${failed}. Run \`npm run build:worker\`.`);
        process.exit(1);
      }
      return runUnderTsx(`the compiled worker could not be built: ${failed}`);
    }
  }
  require(COMPILED);
}

main();
