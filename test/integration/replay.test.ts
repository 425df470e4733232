/**
 * Determinism: today's workflow code replays the committed histories of real operations, a reconciliation and a
 * seller's capabilities (test/histories/, recorded by `npm run record-histories` against the scripted seller). A
 * change that would make them replay differently fails here.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { workflowBundle } from '../harness/temporal';

const dir = path.resolve(__dirname, '..', 'histories');
const files = readdirSync(dir).filter((file) => file.endsWith('.json'));

test('there are committed histories of operations, a reconciliation, a task watcher and a seller capabilities workflow', () => {
  expect(files.filter((file) => file.startsWith('operation-')).length).toBeGreaterThanOrEqual(7);
  expect(files).toEqual(
    expect.arrayContaining([
      'reconciliation-poll-now.json',
      'seller-capabilities-refreshed.json',
      // The resource paths: a lost answer found in the listing, the reconcile update adopting, the orphan pass.
      'operation-buy-found-by-listing.json',
      'operation-reconcile-update-adopts.json',
      'reconciliation-orphan-reported.json',
      // A parked operation told of its task's move by the seller's task watcher, and the watcher's own history.
      'operation-watched-completed.json',
      'task-watcher-told-a-move.json',
    ]),
  );
});

test.each(files)('replays %s', async (file) => {
  const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  await expect(
    Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, file),
  ).resolves.toBeUndefined();
});
