/**
 * `npm run demo:campaign` beside a running stack: with a Temporal server answering (npm start's, here the test's own
 * dev server named by TEMPORAL_ADDRESS), the demo runs its campaign there, so it shows in that server's Web UI,
 * instead of on a headless server of its own that nobody can see. It still brings its own sellers, gateway routes and
 * worker (on a task queue of its own), and stops them at the end. Its campaign proposes a budget move away from the
 * under-delivering seller; the demo approves it through the decision route, and the move is applied: the decrease
 * confirmed by a read, the increase applied, and the sellers' own budgets add up to the campaign's.
 *
 * What the demo waits on is its campaign's observation window (30 s of flight before pacing is judged): the test asks
 * for 15 s (DEMO_CAMPAIGN_OBSERVATION_SECONDS), after which the campaign proposes as soon as the delivering sellers
 * pace at or above 0.95. Its worker runs the run's prebuilt workflow bundle (ADCP_WORKFLOW_BUNDLE) instead of
 * bundling its own. It stays under tsx: under the SWC require hook (test/harness/swc-register.cjs), api/app.ts's
 * `./openapi` resolves to api/openapi.json (node's own extensions come before the hook's .ts).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { testAddress } from '../harness/temporal';
import { sharedWorkerBundle } from '../harness/worker-process';
import { connectGrpc } from '../../config/grpc-connection';

jest.setTimeout(300_000);
const ROOT = path.resolve(__dirname, '..', '..');

test('with a Temporal server running, the campaign runs there, proposes a move away from the under-delivering seller, and the approved move is applied at the sellers', async () => {
  // The run's prebuilt bundle (none outside a Jest run with the global setup: the demo then bundles its own).
  const bundle = await sharedWorkerBundle();
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['scripts/demo-campaign.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: testAddress(),
        DEMO_CAMPAIGN_OBSERVATION_SECONDS: '15',
        ...(bundle ? { ADCP_WORKFLOW_BUNDLE: bundle } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  expect(run.stdout).toContain(`using the Temporal server at ${testAddress()}`);
  expect(run.stdout).not.toContain('starting a Temporal dev server');
  const campaignId = /campaign (\S+) \(search attribute/.exec(run.stdout)?.[1];
  expect(campaignId).toBeDefined();
  // One plan proposed with moves from the under-delivering seller, approved by the route a person uses.
  const plan = /plan (\d+) proposed, waiting until/.exec(run.stdout)?.[1];
  expect(plan).toBeDefined();
  const proposed = [...run.stdout.matchAll(/proposed move (\S+): ([\d.]+) from (\S+) to (\S+), because/g)];
  expect(proposed.length).toBeGreaterThan(0);
  for (const move of proposed) expect(move[3]).toBe('east');
  expect(run.stdout).toContain(`budget-moves/decision approved plan ${plan}`);
  // Every proposed move applied: the decrease at east applied and confirmed by a read before the increase.
  for (const [, id, amount, , to] of proposed) {
    expect(run.stdout).toContain(`move ${id} applied: ${amount} from east to ${to} (decided by trader@buyer)`);
    const steps = new RegExp(
      `move ${id.replace('.', '\\.')} applied[^\\n]*\\n\\s+\\S+\\s+decrease at east: [\\d.]+ → [\\d.]+ applied\\n\\s+\\S+\\s+confirm at east: [\\d.]+ → [\\d.]+ confirmed\\n\\s+\\S+\\s+increase at ${to}: ([\\d.]+) → ([\\d.]+) applied`,
    ).exec(run.stdout);
    expect(steps).not.toBeNull();
    expect(Number(steps![2]) - Number(steps![1])).toBeCloseTo(Number(amount), 2);
  }
  // The sellers' own budgets: each as the campaign says, summing to the campaign budget; east's lower, the others'
  // higher than the even split.
  const held = Object.fromEntries(
    [...run.stdout.matchAll(/at (\w+): budget ([\d.]+) \(the campaign says ([\d.]+)\)/g)].map((match) => [
      match[1],
      { seller: Number(match[2]), campaign: Number(match[3]) },
    ]),
  );
  expect(Object.keys(held).sort()).toEqual(['east', 'north', 'south']);
  for (const entry of Object.values(held)) expect(entry.seller).toBeCloseTo(entry.campaign, 2);
  const sum = Object.values(held).reduce((total, entry) => total + entry.seller, 0);
  expect(sum).toBeCloseTo(9_000, 2);
  expect(held.east.seller).toBeLessThan(3_000);
  for (const [, , , , to] of proposed) expect(held[to].seller).toBeGreaterThan(3_000);
  expect(run.stdout).toMatch(/demo:campaign: [1-9]\d* moves applied; the sellers hold 9000 of the campaign's 9000/);

  const connection = await connectGrpc({ address: testAddress() });
  try {
    const handle = new Client({ connection }).workflow.getHandle(campaignId!);
    expect((await handle.describe()).type).toBe('adcpCampaign');
  } finally {
    await connection.close();
  }
});
