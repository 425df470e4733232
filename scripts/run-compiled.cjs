'use strict';
/**
 * How `npm run worker` and `npm run gateway` (and the two processes `npm start` supervises) run: as compiled
 * JavaScript with plain node, no TypeScript loader in the process (tsx's loader costs RSS, start-up time and CPU: it
 * source-maps every Error stack; bench/README.md, run G). scripts/worker.cjs and scripts/gateway.cjs each call
 * runCompiled() with their entry point and their runtime variable:
 *
 *   - the compiled entry is current (no .ts source under the compiled folders is newer): it runs, in this process;
 *   - otherwise dist/app/ is built first (`tsc -p tsconfig.worker.json`, what `npm run build:worker` does; about 10 s;
 *     one build serves both entry points), then it runs. Two launchers that find it stale at once (npm start starts
 *     both) build once: the second waits for the first's lock, then finds it current;
 *   - if it cannot be built (TypeScript is a dev dependency: a production install without it) the process runs from
 *     the sources under tsx, after saying so; <VARIABLE>=tsx chooses that on purpose, =compiled refuses it.
 *
 * Plain CommonJS on purpose: it must run before anything is compiled, without tsx.
 */
const { spawn, spawnSync } = require('node:child_process');
const {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  statSync,
  unlinkSync,
  writeSync,
} = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
/**
 * The folders tsconfig.worker.json compiles from (what the worker and the gateway import; test/unit/run-compiled.test.ts
 * checks the list). packages/client holds no TypeScript of its own: its build reads these folders too.
 */
const SOURCES = [
  'workers',
  'workflows',
  'activities',
  'contract',
  'protocol',
  'config',
  'observability',
  'client',
  'api',
];
const MODES = ['auto', 'compiled', 'tsx'];
/** How long a launcher waits for another one's build before building itself. */
const LOCK_WAIT_MS = 5 * 60_000;

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

/** Why the compiled entry cannot be run as it is, or undefined when it is current. */
function staleReason(root, compiled, sources) {
  if (!existsSync(compiled)) return 'it has not been built';
  const builtAt = statSync(compiled).mtimeMs;
  const newest = Math.max(0, ...sources.map((dir) => newestSource(path.join(root, dir))));
  return newest > builtAt ? 'sources changed since it was built' : undefined;
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/**
 * Takes the build lock (a file holding the builder's pid), or waits while a live process holds it. Returns a release
 * function when taken, or undefined after waiting (the caller checks again whether a build is still needed).
 */
function lockOrWait(lockFile, say) {
  mkdirSync(path.dirname(lockFile), { recursive: true });
  const deadline = Date.now() + LOCK_WAIT_MS;
  let waited = false;
  for (;;) {
    try {
      const fd = openSync(lockFile, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          unlinkSync(lockFile);
        } catch {
          /* already gone */
        }
      };
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
    let holder = NaN;
    try {
      holder = Number.parseInt(readFileSync(lockFile, 'utf8'), 10);
    } catch {
      continue; // released between the two calls
    }
    // A lock left by a launcher that died mid-build (or one just created, pid not written yet: wait a moment).
    if (Number.isInteger(holder) && !alive(holder)) {
      try {
        unlinkSync(lockFile);
      } catch {
        /* another waiter removed it */
      }
      continue;
    }
    if (Date.now() > deadline) {
      say(`the build lock ${lockFile} is still held by process ${holder}; building anyway.`);
      return () => undefined;
    }
    if (!waited) say(`another process (pid ${holder}) is building dist/app/; waiting for it...`);
    waited = true;
    sleep(250);
    if (!existsSync(lockFile)) return undefined;
  }
}

function build(options, compiled, say) {
  const tsc = options.tsc ?? path.join(options.root, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!existsSync(tsc)) return 'TypeScript is not installed (a dev dependency)';
  const startedAt = Date.now();
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(options.root, options.tsconfig)], {
    cwd: options.root,
    stdio: 'inherit',
  });
  if (result.status === 0) return undefined;
  // Type errors (printed above) do not stop tsc from emitting: run what it emitted, as tsx runs unchecked sources.
  if (result.status === 2 && existsSync(compiled) && statSync(compiled).mtimeMs >= startedAt - 1_000) {
    say('the sources have type errors (above); running the JavaScript tsc emitted anyway, as tsx would.');
    return undefined;
  }
  return `tsc -p ${options.tsconfig} exited with ${result.status ?? result.signal}`;
}

function runUnderTsx(options, why, say) {
  say(`running from the TypeScript sources under tsx (${why}); the compiled ${options.name} uses less memory and CPU.`);
  // The same node flags as this process (heap settings from package.json or npm start), plus the TypeScript loader.
  const child = spawn(
    process.execPath,
    [...process.execArgv, '--import', 'tsx', path.join(options.root, options.source)],
    { cwd: options.root, stdio: 'inherit' },
  );
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

/**
 * Runs `options.compiled` (relative to the project root) in this process, building it first when stale, or
 * `options.source` under tsx. `options.variable` names the environment variable that chooses (auto|compiled|tsx).
 * root, sources, tsconfig, tsc and lockFile default to this project's; tests point them at a scratch project.
 */
function runCompiled(given) {
  const options = {
    root: ROOT,
    sources: SOURCES,
    tsconfig: 'tsconfig.worker.json',
    outDir: 'dist/app',
    buildScript: 'npm run build:worker',
    ...given,
  };
  const say = (line) => console.error(`${options.name}: ${line}`);
  const compiled = path.join(options.root, options.compiled);
  const lockFile = options.lockFile ?? path.join(options.root, 'dist', '.app-build.lock');
  const mode = process.env[options.variable] ?? 'auto';
  if (!MODES.includes(mode)) {
    say(`${options.variable} must be auto, compiled or tsx (got "${mode}").`);
    process.exit(2);
  }
  if (mode === 'tsx') return runUnderTsx(options, `${options.variable}=tsx`, say);
  let stale = staleReason(options.root, compiled, options.sources);
  while (stale) {
    const release = lockOrWait(lockFile, say);
    if (!release) {
      // Another launcher built while this one waited: run what it built, or build again if that failed.
      stale = staleReason(options.root, compiled, options.sources);
      continue;
    }
    let failed;
    try {
      // Checked again under the lock: a build may have finished between the first look and taking the lock.
      stale = staleReason(options.root, compiled, options.sources);
      if (!stale) break;
      say(`building the compiled ${options.name} into ${options.outDir}/ (${stale})...`);
      failed = build(options, compiled, say);
    } finally {
      release();
    }
    if (failed) {
      if (mode === 'compiled') {
        say(`cannot build the compiled ${options.name}: ${failed}. Run \`${options.buildScript}\`.`);
        process.exit(1);
      }
      return runUnderTsx(options, `the compiled ${options.name} could not be built: ${failed}`, say);
    }
    break;
  }
  require(compiled);
}

module.exports = { runCompiled, staleReason, SOURCES };
