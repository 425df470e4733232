/**
 * scripts/run-compiled.cjs, what `npm run worker` and `npm run gateway` (scripts/worker.cjs, scripts/gateway.cjs) run
 * through: the compiled entry when it is current, a build first when a source is newer or nothing was built, tsx when
 * TypeScript is missing (unless <VARIABLE>=compiled), tsx on request, one build when two launchers start at once.
 * Each case runs a real launcher, real tsc and real tsx as child processes on a scratch project.
 */
import { type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../../config/project-root';

const root = path.resolve(__dirname, '..', '..');
const runner = path.join(root, 'scripts', 'run-compiled.cjs');
const scratchDirs: string[] = [];

afterAll(() => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

/** A project with one source, src/main.ts, that prints which file ran; compiled to dist/main.js by its tsconfig. */
function scratchProject(options: { typescript: boolean }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'adcp-run-compiled-'));
  scratchDirs.push(dir);
  mkdirSync(path.join(dir, 'src'));
  mkdirSync(path.join(dir, 'node_modules'));
  writeFileSync(path.join(dir, 'src', 'main.ts'), mainSource('source'));
  writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        outDir: 'dist',
        rootDir: 'src',
        module: 'commonjs',
        target: 'es2022',
        // Only what the one-line source needs: a tsc run on a loaded machine then takes a second or two, not ten.
        lib: ['es2022'],
        types: [],
        skipLibCheck: true,
      },
      files: ['src/main.ts'],
    }),
  );
  writeFileSync(
    path.join(dir, 'launcher.cjs'),
    `require(${JSON.stringify(runner)}).runCompiled({
  name: 'scratch',
  variable: 'SCRATCH_RUNTIME',
  root: __dirname,
  sources: ['src'],
  tsconfig: 'tsconfig.json',
  outDir: 'dist',
  buildScript: 'npm run build:scratch',
  compiled: 'dist/main.js',
  source: 'src/main.ts',
});
`,
  );
  symlinkSync(path.join(root, 'node_modules', 'tsx'), path.join(dir, 'node_modules', 'tsx'));
  if (options.typescript)
    symlinkSync(path.join(root, 'node_modules', 'typescript'), path.join(dir, 'node_modules', 'typescript'));
  return dir;
}

function mainSource(marker: string): string {
  return `declare const __filename: string;\ndeclare const console: { log(line: string): void };\nconsole.log('ran ${marker} from ' + __filename);\n`;
}

/** A compiled entry written by hand, dated after the sources, so that it is current. */
function prebuilt(dir: string, marker: string): void {
  mkdirSync(path.join(dir, 'dist'), { recursive: true });
  const file = path.join(dir, 'dist', 'main.js');
  writeFileSync(file, `console.log('ran ${marker} from ' + __filename);\n`);
  const later = new Date(Date.now() + 60_000);
  utimesSync(file, later, later);
}

function launch(dir: string, runtime?: string): SpawnSyncReturns<string> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.SCRATCH_RUNTIME;
  if (runtime !== undefined) env.SCRATCH_RUNTIME = runtime;
  return spawnSync(process.execPath, [path.join(dir, 'launcher.cjs')], { cwd: dir, env, encoding: 'utf8' });
}

describe('scripts/run-compiled.cjs', () => {
  it('builds what was never built, then runs the compiled entry in its own process', () => {
    const dir = scratchProject({ typescript: true });
    const result = launch(dir);
    expect(result.stderr).toContain('scratch: building the compiled scratch into dist/ (it has not been built)');
    expect(result.stdout.trim()).toBe(`ran source from ${path.join(dir, 'dist', 'main.js')}`);
    expect(result.status).toBe(0);
  });

  it('runs a current compiled entry as it is, without building', () => {
    const dir = scratchProject({ typescript: true });
    prebuilt(dir, 'prebuilt');
    const result = launch(dir);
    expect(result.stderr).not.toContain('building');
    expect(result.stdout.trim()).toBe(`ran prebuilt from ${path.join(dir, 'dist', 'main.js')}`);
  });

  it('rebuilds when a source is newer than the compiled entry', () => {
    const dir = scratchProject({ typescript: true });
    prebuilt(dir, 'prebuilt');
    const source = path.join(dir, 'src', 'main.ts');
    writeFileSync(source, mainSource('changed'));
    const muchLater = new Date(Date.now() + 120_000);
    utimesSync(source, muchLater, muchLater);
    const result = launch(dir);
    expect(result.stderr).toContain('(sources changed since it was built)');
    expect(result.stdout.trim()).toBe(`ran changed from ${path.join(dir, 'dist', 'main.js')}`);
  });

  it('falls back to the sources under tsx, saying why, when TypeScript is not installed', () => {
    const dir = scratchProject({ typescript: false });
    const result = launch(dir);
    expect(result.stderr).toContain(
      'scratch: running from the TypeScript sources under tsx (the compiled scratch could not be built: TypeScript is not installed (a dev dependency))',
    );
    expect(result.stdout.trim()).toBe(`ran source from ${path.join(dir, 'src', 'main.ts')}`);
    expect(result.status).toBe(0);
  });

  it('refuses the fallback when the variable says compiled, naming the build command', () => {
    const dir = scratchProject({ typescript: false });
    const result = launch(dir, 'compiled');
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('scratch: cannot build the compiled scratch: TypeScript is not installed');
    expect(result.stderr).toContain('Run `npm run build:scratch`.');
    expect(result.stdout).toBe('');
  });

  it('runs the sources under tsx when the variable says tsx, even with a current compiled entry', () => {
    const dir = scratchProject({ typescript: true });
    prebuilt(dir, 'prebuilt');
    const result = launch(dir, 'tsx');
    expect(result.stderr).toContain('under tsx (SCRATCH_RUNTIME=tsx)');
    expect(result.stdout.trim()).toBe(`ran source from ${path.join(dir, 'src', 'main.ts')}`);
  });

  it('builds once when two launchers find the entry stale at the same time', async () => {
    const dir = scratchProject({ typescript: true });
    const run = () =>
      new Promise<{ stdout: string; stderr: string; code: number | null }>((resolve) => {
        const child = spawn(process.execPath, [path.join(dir, 'launcher.cjs')], { cwd: dir });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
        child.on('exit', (code) => resolve({ stdout, stderr, code }));
      });
    const results = await Promise.all([run(), run()]);
    const builds = results.filter((result) => result.stderr.includes('building the compiled scratch')).length;
    expect(builds).toBe(1);
    for (const result of results) {
      expect(result.code).toBe(0);
      expect(result.stdout.trim()).toBe(`ran source from ${path.join(dir, 'dist', 'main.js')}`);
    }
  });

  it('takes over a build lock left by a process that died', () => {
    const dir = scratchProject({ typescript: true });
    const dead = spawnSync(process.execPath, ['-e', '']).pid;
    mkdirSync(path.join(dir, 'dist'));
    writeFileSync(path.join(dir, 'dist', '.app-build.lock'), String(dead));
    const result = launch(dir);
    expect(result.stderr).toContain('building the compiled scratch');
    expect(result.stdout.trim()).toBe(`ran source from ${path.join(dir, 'dist', 'main.js')}`);
  });
});

describe('the gateway and worker launchers', () => {
  it('npm run gateway runs scripts/gateway.cjs with plain node, as npm run worker runs scripts/worker.cjs', () => {
    const scripts = (
      JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
    ).scripts;
    expect(scripts.gateway).toBe('node scripts/gateway.cjs');
    expect(scripts.worker).toMatch(/\bnode .*scripts\/worker\.cjs$/);
  });

  it.each([
    ['gateway', 'ADCP_GATEWAY_RUNTIME'],
    ['worker', 'ADCP_WORKER_RUNTIME'],
  ])('scripts/%s.cjs refuses an unknown %s, naming the variable and its values', (name, variable) => {
    const result = spawnSync(process.execPath, [path.join(root, 'scripts', `${name}.cjs`)], {
      env: { ...process.env, [variable]: 'ts-node' },
      encoding: 'utf8',
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(`${name}: ${variable} must be auto, compiled or tsx (got "ts-node").`);
  });

  it('finds the project root (and so .data/) from a compiled module folder as from a source folder', () => {
    expect(projectRoot(path.join(root, 'api'))).toBe(root);
    expect(projectRoot(path.join(root, 'dist', 'app', 'api'))).toBe(root);
    expect(projectRoot()).toBe(root);
  });
});

describe("the project's stale-build check", () => {
  it('watches every folder tsconfig.worker.json compiles from', () => {
    // A folder missing from SOURCES means an edit there leaves the worker or the gateway running stale JavaScript.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { SOURCES } = require(runner) as { SOURCES: string[] };
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ts = require('typescript') as typeof import('typescript');
    const config = ts.getParsedCommandLineOfConfigFile(path.join(root, 'tsconfig.worker.json'), undefined, {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    })!;
    const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
    const folders = new Set(
      program
        .getSourceFiles()
        .map((file) => path.relative(root, file.fileName))
        .filter((file) => !file.startsWith('..') && !file.split(path.sep).includes('node_modules'))
        .map((file) => file.split(path.sep)[0]!),
    );
    expect([...folders].filter((folder) => !SOURCES.includes(folder)).sort()).toEqual([]);
  });
});
