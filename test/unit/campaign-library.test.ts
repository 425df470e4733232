/**
 * The campaign's pure rules for its creative library and its view of the buys (workflows/campaign/rules.ts): library
 * validation and merging, format coverage, creative-to-package assignments, the linear spend plan, pacing, the sum
 * across sellers, and the digest of a buy's state.
 */
import { type CampaignCreative, type SelectionLine, digestOf } from '../../contract/campaign';
import {
  assignmentsFor,
  coverageFor,
  mergeLibrary,
  pacingOf,
  plannedSpend,
  productKey,
  sumDelivery,
  validateCreatives,
} from '../../workflows/campaign/rules';
import type { MediaBuyState } from '../../contract/media-buy';

const creative = (id: string, format: string): CampaignCreative => ({
  creative_id: id,
  format_id: { agent_url: 'https://creative.adcontextprotocol.org', id: format },
});

const formats = new Map<string, string[]>([
  [productKey('a', 'display'), ['display_300x250']],
  [productKey('a', 'video'), ['video_30s', 'video_15s']],
  [productKey('a', 'anything'), []],
]);
const formatsOf = (key: string) => formats.get(key);
const line = (productId: string, extra: Partial<SelectionLine> = {}): SelectionLine => ({
  sellerId: 'a',
  productId,
  budget: 100,
  ...extra,
});

test('a library change needs who, distinct creative ids and a format id; add needs at least one creative', () => {
  expect(validateCreatives({ creatives: [creative('c1', 'f')], requestedBy: 'p' })).toEqual({ ok: true });
  expect(validateCreatives({ creatives: [], requestedBy: 'p', mode: 'replace' })).toEqual({ ok: true });
  expect(validateCreatives({ creatives: [], requestedBy: 'p' })).toMatchObject({ code: 'INVALID_REQUEST' });
  expect(validateCreatives({ creatives: [creative('c1', 'f')], requestedBy: ' ' })).toMatchObject({
    code: 'INVALID_REQUEST',
  });
  expect(validateCreatives({ creatives: [creative('c1', 'f'), creative('c1', 'g')], requestedBy: 'p' })).toMatchObject({
    code: 'INVALID_REQUEST',
    message: expect.stringContaining('repeats'),
  });
  expect(
    validateCreatives({ creatives: [{ creative_id: 'c1' } as unknown as CampaignCreative], requestedBy: 'p' }),
  ).toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringContaining('format_id') });
  expect(
    validateCreatives({ creatives: [creative('c1', 'f')], requestedBy: 'p', mode: 'merge' as never }),
  ).toMatchObject({ code: 'INVALID_REQUEST' });
});

test('add replaces creatives by id and appends the rest; replace takes the request as the library', () => {
  const current = [creative('c1', 'f'), creative('c2', 'f')];
  const merged = mergeLibrary(current, { creatives: [creative('c2', 'g'), creative('c3', 'f')], requestedBy: 'p' });
  expect(merged.map((entry) => `${entry.creative_id}:${entry.format_id.id}`)).toEqual(['c1:f', 'c2:g', 'c3:f']);
  expect(mergeLibrary(current, { creatives: [creative('c9', 'f')], requestedBy: 'p', mode: 'replace' })).toEqual([
    creative('c9', 'f'),
  ]);
});

test("coverage: the products' formats (or the line's own), which the library covers and which are missing", () => {
  const library = [creative('c1', 'display_300x250'), creative('c2', 'video_15s')];
  expect(coverageFor([line('display'), line('video')], formatsOf, library)).toEqual({
    required: ['display_300x250', 'video_15s', 'video_30s'],
    covered: ['display_300x250', 'video_15s'],
    missing: ['video_30s'],
  });
  expect(coverageFor([line('display', { formatIds: [{ id: 'audio_30s' }] })], formatsOf, library)).toEqual({
    required: ['audio_30s'],
    covered: [],
    missing: ['audio_30s'],
  });
  expect(coverageFor([line('display')], formatsOf, [])).toMatchObject({ missing: ['display_300x250'] });
});

test('a creative goes to the packages whose product takes its format; a product without formats takes all', () => {
  const packages = [
    { packageId: 'p1', productId: 'display' },
    { packageId: 'p2', productId: 'video' },
    { packageId: 'p3', productId: 'anything' },
  ];
  const lines = [line('display'), line('video'), line('anything')];
  expect(
    assignmentsFor(packages, lines, formatsOf, [creative('c1', 'display_300x250'), creative('c2', 'video_30s')]),
  ).toEqual({ c1: ['p1', 'p3'], c2: ['p2', 'p3'] });
  expect(assignmentsFor(packages.slice(0, 1), lines, formatsOf, [creative('c2', 'video_30s')])).toEqual({});
});

test('the plan is linear over the flight; pacing is spend over plan; the total paces over the summed plans', () => {
  const start = Date.parse('2026-03-01T00:00:00Z');
  const end = start + 10 * 86_400_000;
  expect(plannedSpend(1000, start, end, start - 1)).toBe(0);
  expect(plannedSpend(1000, start, end, start + 2.5 * 86_400_000)).toBe(250);
  expect(plannedSpend(1000, start, end, end + 1)).toBe(1000);
  expect(pacingOf(200, 250)).toBe(0.8);
  expect(pacingOf(10, 0)).toBeNull();
  const at = '2026-03-03T12:00:00Z';
  expect(
    sumDelivery(
      [
        { impressions: 1000, spend: 200, plannedSpend: 250, pacing: 0.8, at },
        { impressions: 500, spend: 50.005, clicks: 3, plannedSpend: 250, pacing: 0.2, at },
      ],
      at,
    ),
  ).toEqual({ impressions: 1500, spend: 250.01, clicks: 3, plannedSpend: 500, pacing: 0.5, at });
});

test("a buy's digest keeps what the campaign needs: status, flight, packages, totals, each creative's review", () => {
  const state = {
    status: 'active',
    mediaBuyId: 'mb_1',
    done: false,
    startTime: '2026-03-01T00:00:00Z',
    endTime: '2026-03-11T00:00:00Z',
    packages: { p1: { packageId: 'p1', productId: 'display', budget: 100, creativeIds: ['c1'] } },
    reporting: { totals: { impressions: 10, spend: 1.2 } },
    creatives: {
      c1: { creativeId: 'c1', action: 'created', status: 'approved', packageIds: ['p1'], syncedAt: 'x' },
      c2: {
        creativeId: 'c2',
        action: 'failed',
        errors: [{ code: 'INVALID_CREATIVE', message: 'bad size' }],
        packageIds: [],
        syncedAt: 'x',
      },
    },
  } as unknown as MediaBuyState;
  expect(digestOf('a', 'wf', state)).toEqual({
    sellerId: 'a',
    workflowId: 'wf',
    found: true,
    status: 'active',
    mediaBuyId: 'mb_1',
    done: false,
    startTime: '2026-03-01T00:00:00Z',
    endTime: '2026-03-11T00:00:00Z',
    packages: [{ packageId: 'p1', productId: 'display', budget: 100 }],
    totals: { impressions: 10, spend: 1.2 },
    creatives: {
      c1: { status: 'approved', action: 'created' },
      c2: { action: 'failed', error: 'INVALID_CREATIVE: bad size' },
    },
  });
});
