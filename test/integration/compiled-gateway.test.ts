/**
 * `npm run gateway` runs the compiled gateway (scripts/gateway.cjs -> dist/app/api/main.js) with plain node: no
 * TypeScript loader in the process. Against the real Temporal dev server it answers /healthz, and what it reads at run
 * time relative to its own location (the development key file under the project's .data/) is found from dist/app/.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { generateApiKey } from '../../api/auth';
import { freePort } from '../../scripts/lib/dev-server';
import { type ManagedProcess, startProcess } from '../../scripts/lib/processes';
import { demoSellerConfig, testAddress } from '../harness/temporal';
import { writeAgentsFile } from '../harness/worker-process';

const root = path.resolve(__dirname, '..', '..');
const launcher = path.join(root, 'scripts', 'gateway.cjs');
const running: ManagedProcess[] = [];
const written: string[] = [];

afterAll(async () => {
  await Promise.all(running.map((process) => process.stop('SIGKILL')));
  for (const file of written) rmSync(file, { force: true });
});

test('npm run gateway runs dist/app/api/main.js with plain node, answers /healthz and finds .data/', async () => {
  const port = await freePort();
  const { key } = generateApiKey('compiled');
  const keyFile = path.join(root, '.data', `dev-api-keys-${port}.json`);
  const misplaced = path.join(root, 'dist', 'app', '.data', `dev-api-keys-${port}.json`);
  written.push(keyFile, misplaced);
  const gateway = startProcess('gateway', process.execPath, [launcher], {
    env: {
      TEMPORAL_ADDRESS: testAddress(),
      TEMPORAL_NAMESPACE: 'default',
      ADCP_TASK_QUEUE: `compiled-gateway-${randomUUID()}`,
      ADCP_AGENTS_FILE: writeAgentsFile([demoSellerConfig()]),
      ADCP_GATEWAY_HOST: '127.0.0.1',
      ADCP_GATEWAY_PORT: String(port),
      // No authentication configured: on loopback the gateway accepts this development key, through a key file it
      // writes under the project's .data/ (api/mount.ts).
      ADCP_API_KEYS_FILE: undefined,
      ADCP_JWT_JWKS_URL: undefined,
      ADCP_JWT_JWKS_FILE: undefined,
      ADCP_API_KEY: key,
      // Refuse the tsx fallback: this test is about the compiled gateway.
      ADCP_GATEWAY_RUNTIME: 'compiled',
    },
  });
  running.push(gateway);
  const url = `http://127.0.0.1:${port}`;
  // Builds dist/app first when the sources are newer (tsc, 10 s or more on a loaded machine).
  const deadline = Date.now() + 150_000;
  let health: Response | undefined;
  while (health?.status !== 200) {
    if (gateway.child.exitCode !== null) throw new Error(`gateway exited at start:\n${gateway.output()}`);
    if (Date.now() > deadline) throw new Error(`gateway not healthy in 150 s:\n${gateway.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    health = await fetch(`${url}/healthz`).catch(() => undefined);
  }
  expect((await health.json()) as Record<string, unknown>).toMatchObject({ temporal: 'reachable' });
  expect(gateway.output()).not.toMatch(/under tsx/);

  // The process is the launcher under plain node, with no TypeScript loader and no child running the sources.
  const commandLine = readFileSync(`/proc/${gateway.child.pid}/cmdline`, 'utf8').split('\0');
  expect(commandLine).toContain(launcher);
  expect(commandLine.join(' ')).not.toMatch(/tsx/);
  const children = readFileSync(`/proc/${gateway.child.pid}/task/${gateway.child.pid}/children`, 'utf8').trim();
  const childCommands = children
    ? children.split(/\s+/).map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '))
    : [];
  expect(childCommands.filter((command) => /tsx|api\/main/.test(command))).toEqual([]);

  // The development key file is the project's .data/, not dist/app/.data/, and the gateway authenticates with it.
  expect(existsSync(keyFile)).toBe(true);
  expect(existsSync(misplaced)).toBe(false);
  const unauthenticated = await fetch(`${url}/v1/operations/adcp-nothing-here`);
  expect(unauthenticated.status).toBe(401);
  const authenticated = await fetch(`${url}/v1/operations/adcp-nothing-here`, {
    headers: { authorization: `Bearer ${key}` },
  });
  expect(authenticated.status).toBe(404);

  await gateway.stop();
  expect(gateway.child.exitCode).toBe(0);
});
