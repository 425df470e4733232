/**
 * `npm run demo:campaign` beside a running stack (#25 item 8): with a Temporal server answering (npm start's, here
 * the test's own dev server named by TEMPORAL_ADDRESS), the demo runs its campaign there, so it shows in that
 * server's Web UI, instead of on a headless server of its own that nobody can see. It still brings its own sellers
 * and worker (on a task queue of its own), and stops them at the end.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { testAddress } from '../harness/temporal';

jest.setTimeout(300_000);
const ROOT = path.resolve(__dirname, '..', '..');

test('with a Temporal server running, the campaign runs there and its workflows are visible on it', async () => {
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['scripts/demo-campaign.ts'], {
      cwd: ROOT,
      env: { ...process.env, TEMPORAL_ADDRESS: testAddress() },
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
  const connection = await Connection.connect({ address: testAddress() });
  try {
    const description = await new Client({ connection }).workflow.getHandle(campaignId!).describe();
    expect(description.type).toBe('adcpCampaign');
  } finally {
    await connection.close();
  }
});
