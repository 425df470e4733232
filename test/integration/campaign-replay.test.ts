/**
 * Determinism of the discovery and campaign workflows: today's code replays the committed histories of real
 * campaigns (test/fixtures/campaign-sellers/histories/, recorded with RECORD_CAMPAIGN_HISTORIES=1, which
 * `npm run record-histories` sets: by campaign.test.ts, a discovery with a slow and a failing seller, a selection,
 * the approval, three buys of which one rejected, and a cancel fanned out to every buy; by campaign-creatives.test.ts,
 * a library synced to the buys, polls, an Update and continue-as-new; by campaign-moves-api.test.ts, budget moves
 * proposed, approved and applied, policy changes and a plan that lapsed; by campaign-moves-restarts.test.ts, a move
 * in auto mode through a worker SIGKILL between its decrease and its increase, then a cancel). A change that running campaigns would replay
 * differently fails here; ship it behind `patched()` instead.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { workflowBundle } from '../harness/temporal';

const dir = path.resolve(__dirname, '..', 'fixtures', 'campaign-sellers', 'histories');
const files = readdirSync(dir).filter((file) => file.endsWith('.json'));

test('there are committed campaign and discovery histories to replay', () => {
  expect(files).toEqual(
    expect.arrayContaining([
      'campaign-approved-rejected-canceled.json',
      'discovery-partial.json',
      'campaign-moves-proposed-approved-expired.json',
      'campaign-move-through-worker-kill.json',
    ]),
  );
});

test.each(files)('replays %s', async (file) => {
  const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  await expect(
    Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, file),
  ).resolves.toBeUndefined();
});
