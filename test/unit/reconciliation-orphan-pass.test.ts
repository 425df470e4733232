/**
 * The orphan pass's pure parts (docs/convergence.md): who knows each buy a seller lists (claimsFromRows,
 * compareListing), and what a run's chunks add up to (OrphanPass): the report the operator reads and the counters
 * adcp_reconciliation_orphan_buys and adcp_reconciliation_buys_claimed_twice.
 */
import type { OrphanChunk } from '../../contract/reconciliation';
import { claimsFromRows, compareListing } from '../../protocol/buy-claims';
import { DEFAULT_ORPHAN_CHUNKS, MAX_RESUME_CURSOR_LENGTH, OrphanPass } from '../../workflows/reconciliation/machine';

const bounds = { maxReported: 50, maxChunks: 40 };

function chunkOf(
  listed: { mediaBuyId: string }[],
  rows: Parameters<typeof claimsFromRows>[0],
  nextCursor?: string,
): OrphanChunk {
  const compared = compareListing(listed, claimsFromRows(rows));
  return {
    supported: true,
    listed: listed.length,
    known: compared.known,
    adopted: [],
    orphans: compared.orphans.slice(0, bounds.maxReported),
    orphanCount: compared.orphans.length,
    claimedTwice: compared.claimedTwice.slice(0, bounds.maxReported),
    claimedTwiceCount: compared.claimedTwice.length,
    unanswered: [],
    ...(nextCursor ? { nextCursor } : {}),
  };
}

test('a buy two operations both claim is reported with both owners and counted in buys_claimed_twice', () => {
  const listed = [{ mediaBuyId: 'mb_1' }, { mediaBuyId: 'mb_2' }, { mediaBuyId: 'mb_3' }];
  const rows = [
    { mediaBuyId: 'mb_1', workflowId: 'adcp-create_media_buy-a' },
    { mediaBuyId: 'mb_1', workflowId: 'adcp-create_media_buy-b' },
    { mediaBuyId: 'mb_2', workflowId: 'adcp-create_media_buy-c' },
  ];
  const pass = new OrphanPass(bounds);
  const next = pass.next();
  expect(next).toEqual({ chunk: 0, maxReported: 50 });
  pass.addChunk(chunkOf(listed, rows));
  expect(pass.next()).toBeUndefined();
  const report = pass.report();
  expect(report).toMatchObject({ listed: true, count: 3, known: 2, orphanCount: 1, truncated: false });
  expect(report.claimedTwice).toEqual([
    { mediaBuyId: 'mb_1', owners: ['adcp-create_media_buy-a', 'adcp-create_media_buy-b'] },
  ]);
  expect(report.claimedTwiceCount).toBe(1);
  expect(report.orphans.map((orphan) => orphan.mediaBuyId)).toEqual(['mb_3']);
  expect(pass.counters()).toEqual({ orphanBuys: 1, buysClaimedTwice: 1 });
});

test('runs of one workflow, and a create run as its media buy child, are one owner: not claimed twice', () => {
  const rows = [
    // Two runs of one operation (continue-as-new, or reopened to adopt its buy).
    { mediaBuyId: 'mb_1', workflowId: 'adcp-create_media_buy-a' },
    { mediaBuyId: 'mb_1', workflowId: 'adcp-create_media_buy-a' },
    // The media buy's workflow and the create it ran as its child.
    { mediaBuyId: 'mb_2', workflowId: 'media-buy:x' },
    { mediaBuyId: 'mb_2', workflowId: 'adcp-create_media_buy-x', parentWorkflowId: 'media-buy:x' },
  ];
  const compared = compareListing([{ mediaBuyId: 'mb_1' }, { mediaBuyId: 'mb_2' }], claimsFromRows(rows));
  expect(compared).toEqual({ known: 2, orphans: [], claimedTwice: [] });
  // The child seen first: still one owner.
  const reversed = claimsFromRows([...rows].reverse());
  expect(reversed.get('mb_2')).toEqual(['media-buy:x']);
});

test('a buy listed on two pages is one buy', () => {
  const compared = compareListing([{ mediaBuyId: 'mb_1' }, { mediaBuyId: 'mb_1' }], new Map());
  expect(compared.orphans).toEqual([{ mediaBuyId: 'mb_1' }]);
});

test('claims past the reported cap are counted, not named; chunks add up and the cursor leads on', () => {
  const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ mediaBuyId: `mb_${from + i}` }));
  const twice = (buys: { mediaBuyId: string }[]) =>
    buys.flatMap(({ mediaBuyId }) => [
      { mediaBuyId, workflowId: `op-${mediaBuyId}-1` },
      { mediaBuyId, workflowId: `op-${mediaBuyId}-2` },
    ]);
  const first = ids(0, 40);
  const second = ids(40, 40);
  const pass = new OrphanPass(bounds);
  expect(pass.next()).toEqual({ chunk: 0, maxReported: 50 });
  pass.addChunk(chunkOf(first, twice(first), 'page-2'));
  // The second chunk starts where the first stopped, and names only what the report still has room for.
  expect(pass.next()).toEqual({ chunk: 1, cursor: 'page-2', maxReported: 10 });
  pass.addChunk(chunkOf(second, twice(second)));
  expect(pass.next()).toBeUndefined();
  const report = pass.report();
  expect(report).toMatchObject({ count: 80, known: 80, chunks: 2, truncated: false, claimedTwiceCount: 80 });
  expect(report.claimedTwice).toHaveLength(50);
  expect(pass.counters().buysClaimedTwice).toBe(80);
});

test('a run stops at its chunk bound and says the listing was not read to its end', () => {
  const pass = new OrphanPass({ maxReported: 50, maxChunks: 2 });
  for (let chunk = 0; chunk < 2; chunk += 1) {
    expect(pass.next()?.chunk).toBe(chunk);
    pass.addChunk(chunkOf([{ mediaBuyId: `mb_${chunk}` }], [], `after-${chunk}`));
  }
  expect(pass.next()).toBeUndefined();
  const report = pass.report();
  expect(report).toMatchObject({ listed: true, count: 2, orphanCount: 2, truncated: true });
  expect(report.note).toContain('bound per run');
});

test('a listing refused from the start is no listing; one that fails midway keeps what was read', () => {
  const refused = new OrphanPass(bounds);
  refused.addChunk({ ...chunkOf([], []), supported: false, note: 'no get_media_buys' });
  expect(refused.report()).toMatchObject({ listed: false, note: 'no get_media_buys', count: 0 });

  const midway = new OrphanPass(bounds);
  midway.addChunk(chunkOf([{ mediaBuyId: 'mb_1' }], [], 'page-2'));
  midway.failed('503 from the seller');
  expect(midway.next()).toBeUndefined();
  expect(midway.report()).toMatchObject({ listed: true, count: 1, orphanCount: 1, truncated: true });
  expect(midway.report().note).toContain('503 from the seller');
});

test("a run stopped at its bound leaves its cursor; the Schedule's next run reads on from there to the listing's end", () => {
  const first = new OrphanPass({ maxReported: 50, maxChunks: 2 });
  for (let chunk = 0; chunk < 2; chunk += 1) {
    first.next();
    first.addChunk(chunkOf([{ mediaBuyId: `mb_${chunk}` }], [], `after-${chunk}`));
  }
  expect(first.next()).toBeUndefined();
  expect(first.report()).toMatchObject({ truncated: true, resumeCursor: 'after-1' });
  expect(first.report().resumed).toBeUndefined();

  const second = new OrphanPass({ maxReported: 50, maxChunks: 2 }, first.report().resumeCursor);
  expect(second.next()).toEqual({ chunk: 0, cursor: 'after-1', maxReported: 50 });
  second.addChunk(chunkOf([{ mediaBuyId: 'mb_2' }], []));
  expect(second.next()).toBeUndefined();
  const report = second.report();
  expect(report).toMatchObject({ listed: true, resumed: true, truncated: false, count: 1, orphanCount: 1 });
  // It read to the end: the run after it starts from the first page again.
  expect(report.resumeCursor).toBeUndefined();
});

test('a cursor the seller no longer takes (refused, or the chunk failed): the run reads from the start instead', () => {
  const refused = new OrphanPass(bounds, 'expired');
  expect(refused.next()).toMatchObject({ chunk: 0, cursor: 'expired' });
  refused.addChunk({ ...chunkOf([], []), supported: false, note: 'INVALID_REQUEST: unknown cursor' });
  expect(refused.next()).toEqual({ chunk: 1, maxReported: 50 });
  refused.addChunk(chunkOf([{ mediaBuyId: 'mb_1' }], []));
  expect(refused.report()).toMatchObject({ listed: true, count: 1, truncated: false });
  expect(refused.report().resumed).toBeUndefined();
  expect(refused.report().note).toContain('read from the start');

  const failed = new OrphanPass(bounds, 'expired');
  failed.next();
  failed.failed('500 from the seller');
  expect(failed.next()).toEqual({ chunk: 1, maxReported: 50 });

  // Without a resume cursor a refusal is what it always was: no listing.
  const plain = new OrphanPass(bounds);
  plain.addChunk({ ...chunkOf([], []), supported: false, note: 'no get_media_buys' });
  expect(plain.next()).toBeUndefined();
});

test('a run that fails midway leaves the cursor of the chunk that failed; an outsized cursor is not carried', () => {
  const midway = new OrphanPass(bounds);
  midway.next();
  midway.addChunk(chunkOf([{ mediaBuyId: 'mb_1' }], [], 'page-2'));
  midway.next();
  midway.failed('503 from the seller');
  expect(midway.report()).toMatchObject({ truncated: true, resumeCursor: 'page-2' });

  const outsized = new OrphanPass({ maxReported: 50, maxChunks: 1 });
  outsized.next();
  outsized.addChunk(chunkOf([{ mediaBuyId: 'mb_1' }], [], 'x'.repeat(MAX_RESUME_CURSOR_LENGTH + 1)));
  expect(outsized.next()).toBeUndefined();
  expect(outsized.report()).toMatchObject({ truncated: true });
  expect(outsized.report().resumeCursor).toBeUndefined();
});

test("a run's pass: the Schedule's runs resume and hand over, an operator's or a tenant's never; the bound is clamped", () => {
  const scheduled = { sellerId: 's', requestedBy: 'schedule', scheduleId: 'reconciliation:q:s' };
  expect(OrphanPass.forRun({ ...scheduled, resumeCursor: 'page-9' }, 50).next()).toMatchObject({ cursor: 'page-9' });
  expect(OrphanPass.forRun({ sellerId: 's', requestedBy: 'ops', resumeCursor: 'page-9' }, 50).next()).toEqual({
    chunk: 0,
    maxReported: 50,
  });
  expect(
    OrphanPass.forRun({ ...scheduled, tenant: 'acme', resumeCursor: 'page-9' }, 50).next()?.cursor,
  ).toBeUndefined();

  // A one-chunk bound stops after one chunk; a bound out of range is the default.
  const one = OrphanPass.forRun({ ...scheduled, orphanChunksPerRun: 1 }, 50);
  one.next();
  one.addChunk(chunkOf([{ mediaBuyId: 'mb_1' }], [], 'page-2'));
  expect(one.next()).toBeUndefined();
  expect(one.handOver(scheduled)).toEqual({ scheduleId: 'reconciliation:q:s', resumeCursor: 'page-2' });
  const wild = OrphanPass.forRun({ ...scheduled, orphanChunksPerRun: 10_000 }, 50);
  for (let chunk = 0; chunk < DEFAULT_ORPHAN_CHUNKS; chunk += 1) {
    expect(wild.next()).toBeDefined();
    wild.addChunk(chunkOf([], [], `page-${chunk + 1}`));
  }
  expect(wild.next()).toBeUndefined();

  // Read to the end after resuming: the next run starts from the first page (null); nothing to say when unchanged.
  const resumed = OrphanPass.forRun({ ...scheduled, resumeCursor: 'page-9' }, 50);
  resumed.next();
  resumed.addChunk(chunkOf([{ mediaBuyId: 'mb_9' }], []));
  expect(resumed.handOver({ ...scheduled, resumeCursor: 'page-9' })).toEqual({
    scheduleId: 'reconciliation:q:s',
    resumeCursor: null,
  });
  const whole = OrphanPass.forRun(scheduled, 50);
  whole.next();
  whole.addChunk(chunkOf([{ mediaBuyId: 'mb_1' }], []));
  expect(whole.handOver(scheduled)).toBeUndefined();
  expect(whole.handOver({ sellerId: 's', requestedBy: 'ops' })).toBeUndefined();
});
