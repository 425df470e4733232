/**
 * Determinism of the media-buy workflow: today's code replays the committed histories of real buys
 * (test/fixtures/media-buy-seller/histories/, recorded by media-buy-api.test.ts with RECORD_MEDIA_BUY_HISTORIES=1,
 * which `npm run record-histories` sets: create, creatives, a signed report, the storyboard's changes and refusals,
 * the final report and the settle). A change that running buys would replay differently fails here; ship it behind
 * `patched()` instead. The `*-before-*` histories were recorded on the code before a patch and keep its old path
 * replayed: `refreshes-past-limit-before-continue-as-new-first.json`, a buy read again and again past its history
 * limit (60 events) under a refresh during every read (the media-buy stand-ins of test/workflow), never continuing;
 * `no-report-before-expect-first-report.json`, a daily buy no report reached for four days, never pulled (today's
 * code pulls each late day: its run records the patch `media-buy-expect-first-report`);
 * `windowless-pull-before-range-fill.json`, a daily buy whose seller answers its windowed pulls without windows, each
 * day pulled three times and given up while the buy waited for its creatives (today's code pulls each day as a date
 * range, `media-buy-range-fill`, and does not expect reports from a pending buy, `media-buy-quiet-while-pending`).
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { DeterminismViolationError } from '@temporalio/workflow';
import { Worker } from '@temporalio/worker';
import { workflowBundle } from '../harness/temporal';

const dir = path.resolve(__dirname, '..', 'fixtures', 'media-buy-seller', 'histories');
const files = readdirSync(dir).filter((file) => file.endsWith('.json'));

test('there is a committed media-buy history to replay', () => {
  expect(files.length).toBeGreaterThanOrEqual(1);
});

test.each(files)('replays %s', async (file) => {
  const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  await expect(
    Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, file),
  ).resolves.toBeUndefined();
});

// The test above can fail: the same history with one command the code does not issue (its first read scheduled as
// another activity) is refused as nondeterministic.
test('a history the code would replay differently is refused', async () => {
  const history = JSON.parse(readFileSync(path.join(dir, files[0]!), 'utf8')) as {
    events: { activityTaskScheduledEventAttributes?: { activityType: { name: string } } }[];
  };
  const scheduled = history.events.find((event) => event.activityTaskScheduledEventAttributes);
  expect(scheduled).toBeDefined();
  const type = scheduled!.activityTaskScheduledEventAttributes!.activityType;
  type.name = type.name === 'pullDelivery' ? 'readMediaBuy' : 'pullDelivery';
  await expect(
    Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, `${files[0]} (altered)`),
  ).rejects.toThrow(DeterminismViolationError);
});
