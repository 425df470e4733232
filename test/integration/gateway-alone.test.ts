/**
 * `npm run gateway` on its own, in a folder without agents.json and without ADCP_AGENTS_FILE (#25 item 8): it falls
 * back to the bundled agents.example.json as `npm start` does, says so, and serves; it used to stop at once ("The
 * seller list agents.json does not exist").
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../../scripts/lib/dev-server';
import { eventually, testAddress } from '../harness/temporal';

const ROOT = path.resolve(__dirname, '..', '..');
let gateway: ChildProcess | undefined;
let dir: string;

afterAll(async () => {
  if (gateway && gateway.exitCode === null) {
    const exited = new Promise((resolve) => gateway!.once('exit', resolve));
    gateway.kill('SIGTERM');
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('without agents.json it serves the bundled agents.example.json, and says so', async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'adcp-gateway-alone-'));
  const port = await freePort();
  const { ADCP_AGENTS_FILE: _file, ADCP_API_KEYS_FILE: _keys, ADCP_API_KEY: _key, ...inherited } = process.env;
  let output = '';
  gateway = spawn(path.join(ROOT, 'node_modules', '.bin', 'tsx'), [path.join(ROOT, 'api', 'main.ts')], {
    cwd: dir,
    env: {
      ...inherited,
      TEMPORAL_ADDRESS: testAddress(),
      ADCP_GATEWAY_PORT: String(port),
      ADCP_LOG_FORMAT: 'json',
      ADCP_RECONCILE_EVERY: 'off',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  gateway.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  gateway.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const health = await eventually(async () => {
    if (gateway!.exitCode !== null) throw new Error(`the gateway exited: ${output}`);
    const response = await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined);
    return response?.status === 200 ? ((await response.json()) as Record<string, unknown>) : undefined;
  }, 90_000).catch((error: Error) => {
    throw new Error(`${error.message}\n${output}`);
  });
  expect(health.temporal).toBe('reachable');
  expect(output).toContain('agents.example.json');
  const sellers = await fetch(`http://127.0.0.1:${port}/v1/sellers`);
  // The development key guards /v1; that it answers 401, not a crash, is enough here.
  expect(sellers.status).toBe(401);
});
