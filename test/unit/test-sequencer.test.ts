/**
 * The order a clean clone's `npm test` starts files in (test/harness/sequencer.cjs): failures first, then the files
 * of test/harness/durations.json slowest first, then the rest by size; and the durations file names only test files
 * that exist (a stale entry would order nothing, and a renamed slow file would start among the last).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Sequencer = require('../harness/sequencer.cjs') as {
  new (options: unknown): { sort(tests: FakeTest[]): FakeTest[] };
  KNOWN_SECONDS: Record<string, number>;
};

const ROOT = path.resolve(__dirname, '..', '..');

interface FakeTest {
  path: string;
  duration?: number | null;
  context: { config: { cache: boolean; id: string }; hasteFS: { getSize(file: string): number } };
}

const sizes = new Map<string, number>();
const context = { config: { cache: false, id: 'unit' }, hasteFS: { getSize: (file: string) => sizes.get(file) ?? 0 } };
const fake = (relative: string, size = 100): FakeTest => {
  const absolute = path.join(ROOT, relative);
  sizes.set(absolute, size);
  return { path: absolute, context };
};
const order = (tests: FakeTest[]) =>
  new Sequencer({}).sort(tests).map((test) => path.relative(ROOT, test.path).split(path.sep).join('/'));

test('known files first, slowest first, then unknown ones by size', () => {
  const known = Object.entries(Sequencer.KNOWN_SECONDS).sort((a, b) => b[1] - a[1]);
  expect(known.length).toBeGreaterThan(10);
  const [slowest, , middle] = known;
  const fastest = known[known.length - 1];
  const sorted = order([
    fake('test/unit/not-listed-small.test.ts', 10),
    fake(fastest[0], 1),
    fake('test/unit/not-listed-large.test.ts', 10_000),
    fake(middle[0], 1),
    fake(slowest[0], 1),
  ]);
  expect(sorted).toEqual([
    slowest[0],
    middle[0],
    fastest[0],
    'test/unit/not-listed-large.test.ts',
    'test/unit/not-listed-small.test.ts',
  ]);
});

test('the durations name existing test files, with seconds', () => {
  for (const [file, seconds] of Object.entries(Sequencer.KNOWN_SECONDS)) {
    expect([file, existsSync(path.join(ROOT, file))]).toEqual([file, true]);
    expect(file).toMatch(/^test\/(unit|workflow|integration)\/.+\.test\.ts$/);
    expect(seconds).toBeGreaterThan(0);
  }
});
