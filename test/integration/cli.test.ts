/**
 * The CLI as an operator runs it: a child process running cli/main.ts, talking to the real test dev server, with
 * the worker of this test's stack polling the task queue and the scripted seller behind it. Human output and --json,
 * and the exit codes: 0 ok, 1 the operation failed/rejected/canceled or refused, 2 usage, 3 not found, 4 Temporal
 * unavailable. The first run goes through tsx, as `npm run cli` does; the rest load the same sources through a
 * caching SWC require hook (test/harness/swc-register.cjs), which starts in about half the time. Runs that do not
 * depend on each other run side by side.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEFAULT_RETRY_BACKOFF } from '../../activities/transport-errors';
import { pendingActivityView } from '../../client/pending-activity';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { freePort } from '../../scripts/lib/dev-server';
import { type TestStack, eventually, registry, startTestStack, testAddress } from '../harness/temporal';

const ROOT = path.resolve(__dirname, '..', '..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const SWC_REGISTER = path.join(ROOT, 'test', 'harness', 'swc-register.cjs');

let seller: ScriptedSeller;
let stack: TestStack;
let scratch: string;
const sellerId = `cli-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  seller = await startScriptedSeller();
  stack = await startTestStack({
    sellers: registry([{ id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: {
      env: { FIXTURE_TOKEN: seller.authToken },
      // The worker's own backoff (1 s, doubling), not the harness's 50 ms: the in-flight view below must see the
      // call waiting between two attempts.
      retryBackoff: DEFAULT_RETRY_BACKOFF,
    },
  });
  scratch = mkdtempSync(path.join(tmpdir(), 'adcp-cli-test-'));
  writeFileSync(
    path.join(scratch, 'agents.json'),
    JSON.stringify({ agents: [{ id: sellerId, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }] }),
  );
  writeFileSync(path.join(scratch, 'buy.json'), JSON.stringify(createMediaBuyParams()));
});

afterAll(async () => {
  await stack?.close();
  await seller?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI to its end, with the environment an operator of this stack would have. */
function cli(
  args: string[],
  env: Record<string, string> = {},
  loader: 'swc' | 'tsx' = 'swc',
  onStdout?: (stdout: string) => void,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const [command, loaderArgs] = loader === 'tsx' ? [TSX, []] : [process.execPath, ['--require', SWC_REGISTER]];
    const child = spawn(command, [...loaderArgs, 'cli/main.ts', ...args], {
      cwd: ROOT,
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: testAddress(),
        TEMPORAL_NAMESPACE: 'default',
        ADCP_TASK_QUEUE: stack.taskQueue,
        ADCP_AGENTS_FILE: path.join(scratch, 'agents.json'),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      onStdout?.(stdout);
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const jsonLines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);

async function startInProcess(
  steps: Parameters<ScriptedSeller['script']>[1],
  retry?: { maximumAttempts: number; initialIntervalMs: number; maximumIntervalMs: number },
) {
  seller.script('create_media_buy', steps);
  const { operationId } = await stack.orchestrator.start({
    sellerId: sellerId,
    task: 'create_media_buy',
    params: createMediaBuyParams(),
    idempotencyKey: randomUUID(),
    ...(retry ? { retry } : {}),
  });
  return operationId;
}

test('--help works on the program and every command, and documents the exit codes; usage errors exit 2', async () => {
  const help = await cli(['--help'], {}, 'tsx');
  expect(help.code).toBe(0);
  for (const command of ['start', 'status', 'watch', 'list', 'answer', 'cancel', 'reconcile', 'sellers'])
    expect(help.stdout).toContain(command);
  expect(help.stdout).toContain('Exit codes:');
  const [watchHelp, unknown, missing, badJson, badFilter] = await Promise.all([
    cli(['watch', '--help']),
    cli(['list', '--bogus']),
    cli(['start', '--seller', sellerId]),
    cli(['start', '--seller', sellerId, '--task', 'create_media_buy', '--params', '{not json']),
    cli(['list', '--status', 'done']),
  ]);
  expect(watchHelp.code).toBe(0);
  expect(watchHelp.stdout).toContain('--interval');
  expect(watchHelp.stdout).toContain('4  Temporal unavailable');

  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain("unknown option '--bogus'");
  expect(missing.code).toBe(2);
  expect(missing.stderr).toContain('--task');
  expect(badJson.code).toBe(2);
  expect(badJson.stderr).toContain('--params is not valid JSON');
  expect(badFilter.code).toBe(2);
  expect(badFilter.stderr).toContain('status');
}, 120_000);

test('sellers lists the agents file the worker uses, human and --json, without reading tokens', async () => {
  const [human, json] = await Promise.all([
    cli(['sellers']),
    cli(['sellers', '--json'], { FIXTURE_TOKEN: 'secret-value' }),
  ]);
  expect(human.code).toBe(0);
  expect(human.stdout).toContain(sellerId);
  expect(human.stdout).toContain('$FIXTURE_TOKEN');
  expect(json.code).toBe(0);
  const parsed = JSON.parse(json.stdout) as { sellers: Record<string, unknown>[] };
  expect(parsed.sellers).toEqual([
    expect.objectContaining({ id: sellerId, protocol: 'mcp', token_env: 'FIXTURE_TOKEN', token_set: true }),
  ]);
  expect(json.stdout).not.toContain('secret-value');
});

test('start, then watch follows the status changes live to completed (exit 0); the same key finds the same operation', async () => {
  seller.script('create_media_buy', [
    { status: 'submitted', message: 'Queued for review' },
    { status: 'completed', afterPolls: 3 },
  ]);
  const key = `cli-${randomUUID()}`;
  const started = await cli([
    'start',
    '--seller',
    sellerId,
    '--task',
    'create_media_buy',
    '--params',
    `@${path.join(scratch, 'buy.json')}`,
    '--key',
    key,
  ]);
  expect(started.stderr).toBe('');
  expect(started.code).toBe(0);
  const operationId = `adcp-create_media_buy-${key}`;
  expect(started.stdout).toContain(`Started ${operationId}`);

  const watched = await cli(['watch', operationId, '--interval', '1']);
  expect(watched.code).toBe(0);
  expect(watched.stdout).toContain(`Watching ${operationId}`);
  expect(watched.stdout).toMatch(/submitted → completed \(poll\)/);
  expect(watched.stdout).toMatch(/Status\s+completed/);

  const again = await cli([
    'start',
    '--seller',
    sellerId,
    '--task',
    'create_media_buy',
    '--params',
    `@${path.join(scratch, 'buy.json')}`,
    '--key',
    key,
    '--json',
  ]);
  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout)).toEqual({
    event: 'started',
    operation_id: operationId,
    created: false,
    status: 'completed',
  });

  const status = await cli(['status', operationId, '--json']);
  expect(status.code).toBe(0);
  expect(JSON.parse(status.stdout)).toMatchObject({
    operation_id: operationId,
    status: 'completed',
    running: false,
    agent_id: sellerId,
    pending_activities: [],
  });
}, 120_000);

test('status and watch of a rejected operation exit 1, human and --json', async () => {
  const operationId = await startInProcess([
    { status: 'rejected', message: 'Policy review rejected the creative theme' },
  ]);
  await stack.orchestrator.result(operationId);
  const [human, json, watched] = await Promise.all([
    cli(['status', operationId]),
    cli(['status', operationId, '--json']),
    cli(['--json', 'watch', operationId]),
  ]);
  expect(human.code).toBe(1);
  expect(human.stdout).toMatch(/Status\s+rejected/);
  expect(human.stdout).toContain('Policy review rejected the creative theme');
  expect(json.code).toBe(1);
  expect(JSON.parse(json.stdout)).toMatchObject({
    status: 'rejected',
    message: 'Policy review rejected the creative theme',
  });
  expect(watched.code).toBe(1);
  const events = jsonLines(watched.stdout);
  expect(events.map((event) => event.event)).toEqual(['snapshot', 'end']);
  expect(events[1]).toMatchObject({ exit_code: 1, operation: { status: 'rejected' } });
}, 60_000);

test('not found exits 3, Temporal unavailable exits 4', async () => {
  const closedPort = await freePort();
  const [missing, missingJson, noSeller, down] = await Promise.all([
    cli(['status', `adcp-get_products-missing-${randomUUID()}`]),
    cli(['status', 'not-an-operation-id', '--json']),
    cli(['reconcile', 'no-such-seller']),
    cli(['status', 'adcp-get_products-x'], { TEMPORAL_ADDRESS: `127.0.0.1:${closedPort}` }),
  ]);
  expect(missing.code).toBe(3);
  expect(missing.stderr).toContain('No operation adcp-get_products-missing-');
  expect(missingJson.code).toBe(3);
  expect(JSON.parse(missingJson.stdout)).toMatchObject({ error: { exit_code: 3 } });
  expect(noSeller.code).toBe(3);
  expect(noSeller.stderr).toContain('No seller "no-such-seller"');

  expect(down.code).toBe(4);
  expect(down.stderr).toContain(`Temporal at 127.0.0.1:${closedPort} is unavailable`);
}, 60_000);

test('list filters and pages, human and --json', async () => {
  const operationId = await startInProcess([{ status: 'completed' }]);
  await stack.orchestrator.result(operationId);
  const rows = await eventually(
    async () => {
      const run = await cli(['list', '--seller', sellerId, '--status', 'completed', '--json']);
      expect(run.code).toBe(0);
      const page = JSON.parse(run.stdout) as {
        operations: { operation_id: string; status: string }[];
        next_cursor: string | null;
      };
      return page.operations.some((row) => row.operation_id === operationId) ? page.operations : undefined;
    },
    30_000,
    500,
  );
  expect(rows.every((row) => row.status === 'completed')).toBe(true);

  const human = await cli(['list', '--seller', sellerId, '--limit', '1']);
  expect(human.code).toBe(0);
  const [header, first] = human.stdout.split('\n');
  expect(header).toMatch(/^OPERATION\s+TASK\s+SELLER\s+STATUS/);
  expect(first).toContain(sellerId);
  const cursor = /--cursor (\S+)/.exec(human.stdout)?.[1];
  expect(cursor).toBeDefined();
  const next = await cli(['list', '--seller', sellerId, '--limit', '1', '--cursor', cursor!, '--json']);
  expect(next.code).toBe(0);
  const second = JSON.parse(next.stdout) as { operations: { operation_id: string }[] };
  expect(second.operations[0]?.operation_id).not.toBe(first.split(/\s+/)[0]);
  const otherFilters = await cli(['list', '--seller', sellerId, '--status', 'failed', '--cursor', cursor!]);
  expect(otherFilters.code).toBe(2);
  expect(otherFilters.stderr).toContain('other filters');
}, 120_000);

test('answer resumes an input-required operation; answering an ended one exits 1', async () => {
  const operationId = await startInProcess([
    { status: 'input-required', reason: 'APPROVAL_REQUIRED', message: 'Approve the budget?' },
    { status: 'completed' },
  ]);
  await eventually(async () =>
    (await stack.orchestrator.status(operationId)).state?.status === 'input-required' ? true : undefined,
  );
  const waiting = await cli(['status', operationId]);
  expect(waiting.code).toBe(0);
  expect(waiting.stdout).toMatch(/Question\s+APPROVAL_REQUIRED: Approve the budget\?/);
  const listed = await eventually(
    async () => {
      const run = await cli(['list', '--seller', sellerId, '--waiting', '--json']);
      const page = JSON.parse(run.stdout) as { operations: { operation_id: string; input_reason: string | null }[] };
      return page.operations.find((row) => row.operation_id === operationId);
    },
    30_000,
    500,
  );
  expect(listed.input_reason).toBe('APPROVAL_REQUIRED');

  const answered = await cli([
    'answer',
    operationId,
    '--input',
    '{"approved": true}',
    '--key',
    'approval-1',
    '--by',
    'ops@buyer',
  ]);
  expect(answered.stderr).toBe('');
  expect(answered.code).toBe(0);
  expect(answered.stdout).toContain('Answer accepted');
  expect((await stack.orchestrator.result(operationId)).status).toBe('completed');
  const late = await cli(['answer', operationId, '--input', '{"approved": true}', '--key', 'approval-2', '--json']);
  expect(late.code).toBe(1);
  expect(JSON.parse(late.stdout)).toMatchObject({
    error: { exit_code: 1, message: expect.stringContaining('has ended') },
  });
}, 120_000);

test('cancel ends a waiting operation canceled; its status then exits 1', async () => {
  const operationId = await startInProcess([{ status: 'submitted' }, { status: 'completed', afterPolls: 1_000 }]);
  await eventually(async () =>
    (await stack.orchestrator.status(operationId)).state?.status === 'submitted' ? true : undefined,
  );
  const canceled = await cli(['cancel', operationId, '--reason', 'flight moved', '--by', 'ops@buyer', '--json']);
  expect(canceled.code).toBe(0);
  expect(JSON.parse(canceled.stdout)).toEqual({
    operation_id: operationId,
    accepted: true,
    status_when_requested: 'submitted',
  });
  await stack.orchestrator.result(operationId).catch(() => undefined);
  const status = await cli(['status', operationId]);
  expect(status.code).toBe(1);
  expect(status.stdout).toMatch(/Status\s+canceled/);
  expect(status.stdout).toContain('by ops@buyer');
}, 60_000);

test('while the seller fails, the call in flight shows its attempt, last failure and next retry (view and watch --json)', async () => {
  // Two 503s (fewer than the circuit breaker's threshold, so the retries are the retry policy's alone), then a third
  // attempt that the seller holds until the CLI has shown the retried call (at most 45 s): a child process that
  // starts slowly on a busy machine still finds the call in flight.
  let showRetry = () => {};
  const retryShown = new Promise<void>((resolve) => (showRetry = resolve));
  seller.fault('create_media_buy', { kind: 'http-status', status: 503 }, { times: 2 });
  seller.fault('create_media_buy', { kind: 'hang', ms: 45_000, then: 'process', until: retryShown });
  const operationId = await startInProcess([{ status: 'completed' }], {
    maximumAttempts: 10,
    initialIntervalMs: 1_500,
    maximumIntervalMs: 1_500,
  });
  const retriedCall = (event: Record<string, unknown>) =>
    event.event === 'call' &&
    (event.attempt as number) > 1 &&
    String((event.last_failure as { message?: string } | null)?.message).includes('503');
  const watching = cli(['watch', operationId, '--interval', '1', '--json'], {}, 'swc', (stdout) => {
    const complete = stdout.slice(0, stdout.lastIndexOf('\n') + 1);
    if (jsonLines(complete).some(retriedCall)) showRetry();
  });
  const handle = stack.client.workflow.getHandle(operationId);
  const retrying = await eventually(
    async () => {
      const [activity] = pendingActivityView(await handle.describe());
      return activity?.state === 'scheduled' && activity.attempt > 1 && activity.lastFailure ? activity : undefined;
    },
    60_000,
    100,
  );
  expect(retrying.lastFailure?.message).toContain('503');
  expect(retrying.lastFailure?.type).toEqual(expect.any(String));
  expect(retrying.maximumAttempts).toBe(10);
  expect(Date.parse(retrying.nextAttemptAt!)).toBeGreaterThan(Date.parse(retrying.lastAttemptCompletedAt!));

  const watched = await watching;
  expect(watched.code).toBe(0);
  const events = jsonLines(watched.stdout);
  const calls = events.filter((event) => event.event === 'call');
  expect(calls.length).toBeGreaterThan(0);
  expect(calls.some(retriedCall)).toBe(true);
  expect(events.at(-1)).toMatchObject({ event: 'end', exit_code: 0, operation: { status: 'completed' } });
}, 120_000);

test("reconcile runs the seller's reconciliation now and prints its report", async () => {
  const human = await cli(['reconcile', sellerId, '--by', 'ops@buyer']);
  expect(human.stderr).toBe('');
  expect(human.code).toBe(0);
  expect(human.stdout).toContain(`Reconciled ${sellerId}`);
  const json = await cli(['reconcile', sellerId, '--json']);
  expect(json.code).toBe(0);
  expect(JSON.parse(json.stdout)).toMatchObject({ agent_id: sellerId, open_operations: expect.any(Number) });
}, 120_000);
