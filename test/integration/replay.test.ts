/**
 * Determinism: today's workflow code replays the committed histories of real operations (test/histories/, recorded
 * by `npm run record-histories` against the scripted seller). A change that running operations would replay
 * differently fails here; ship it behind `patched()` or as a new workflow type instead.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { workflowBundle } from '../harness/temporal';

const dir = path.resolve(__dirname, '..', 'histories');
const files = readdirSync(dir).filter((file) => file.endsWith('.json'));

test('there are committed histories of every workflow generation to replay (v1: before the convergence rewrite; v3, v4: input revisions 3 and 4)', () => {
  expect(files.filter((file) => file.startsWith('v1-')).length).toBeGreaterThanOrEqual(4);
  expect(files.filter((file) => file.startsWith('v2-')).length).toBeGreaterThanOrEqual(4);
  expect(files.filter((file) => file.startsWith('v3-')).length).toBeGreaterThanOrEqual(6);
  expect(files.filter((file) => file.startsWith('v4-')).length).toBeGreaterThanOrEqual(7);
});

test.each(files)('replays %s', async (file) => {
  const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  await expect(
    Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, file),
  ).resolves.toBeUndefined();
});
