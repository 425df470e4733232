/**
 * The CLI of an operator who lacks the payload keys (#25 item 8), as a child process against a worker and client that
 * encrypt (ADCP_PAYLOAD_KEYS): `list` still lists the encrypted operations, each row saying its state is unreadable
 * (the README's promise; it used to crash on a running operation), and `status` exits 2, a configuration error as the
 * exit-code table says, naming ADCP_PAYLOAD_KEYS. With the keys, both read the state.
 */
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { encryptedDataConverter } from '../../client/encryption-codec';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack, testAddress } from '../harness/temporal';

const ROOT = path.resolve(__dirname, '..', '..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const KEYS = { ADCP_PAYLOAD_KEYS: `k1:${randomBytes(32).toString('base64')}` };

let seller: ScriptedSeller;
let stack: TestStack;
let scratch: string;
let operationId: string;

beforeAll(async () => {
  seller = await startScriptedSeller();
  const agent = { id: 'fixture', url: seller.url, protocol: 'mcp' as const, token_env: 'FIXTURE_TOKEN' };
  stack = await startTestStack({
    sellers: registry([agent]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
    dataConverter: encryptedDataConverter(KEYS),
  });
  scratch = mkdtempSync(path.join(tmpdir(), 'adcp-cli-keys-'));
  writeFileSync(path.join(scratch, 'agents.json'), JSON.stringify({ agents: [agent] }));
  // Submitted, and it stays so: a running operation, as most are when an operator looks.
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
  ({ operationId } = await stack.orchestrator.start({
    sellerId: 'fixture',
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
  }));
  await eventually(async () =>
    (await stack.orchestrator.status(operationId)).state?.status === 'submitted' ? true : undefined,
  );
});

afterAll(async () => {
  if (operationId)
    await stack?.client.workflow
      .getHandle(operationId)
      .terminate('test over')
      .catch(() => undefined);
  await stack?.close();
  await seller?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const { ADCP_PAYLOAD_KEYS: _keys, ...inherited } = process.env;
    const child = spawn(TSX, ['cli/main.ts', ...args], {
      cwd: ROOT,
      env: {
        ...inherited,
        TEMPORAL_ADDRESS: testAddress(),
        ADCP_TASK_QUEUE: stack.taskQueue,
        ADCP_AGENTS_FILE: path.join(scratch, 'agents.json'),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test('list without the keys prints the encrypted operations as state_unreadable rows, human and --json', async () => {
  const json = await cli(['list', '--json', '--limit', '50']);
  expect({ code: json.code, stderr: json.stderr }).toEqual({ code: 0, stderr: '' });
  const row = (JSON.parse(json.stdout) as { operations: Record<string, unknown>[] }).operations.find(
    (candidate) => candidate.operation_id === operationId,
  );
  expect(row).toMatchObject({ operation_id: operationId, status: 'submitted', state_unreadable: true });

  const human = await cli(['list', '--limit', '50']);
  expect(human.code).toBe(0);
  expect(human.stdout).toContain(operationId);

  const withKeys = await cli(['list', '--json', '--limit', '50'], KEYS);
  const readable = (JSON.parse(withKeys.stdout) as { operations: Record<string, unknown>[] }).operations.find(
    (candidate) => candidate.operation_id === operationId,
  );
  expect(readable).toMatchObject({ status: 'submitted' });
  expect(readable?.state_unreadable).toBeUndefined();
});

test('status without the keys exits 2 naming ADCP_PAYLOAD_KEYS; with them it shows the operation (exit 0)', async () => {
  const keyless = await cli(['status', operationId]);
  expect(keyless.code).toBe(2);
  expect(keyless.stderr).toContain('ADCP_PAYLOAD_KEYS');
  const json = await cli(['status', operationId, '--json']);
  expect(json.code).toBe(2);
  expect(JSON.parse(json.stdout)).toMatchObject({
    error: { exit_code: 2, message: expect.stringContaining('ADCP_PAYLOAD_KEYS') },
  });

  const withKeys = await cli(['status', operationId, '--json'], KEYS);
  expect(withKeys.code).toBe(0);
  expect(JSON.parse(withKeys.stdout)).toMatchObject({ operation_id: operationId, status: 'submitted' });
});
