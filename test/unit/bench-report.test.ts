/** The bench's own output: --help starts nothing, and the report puts each goal beside its value. */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { renderTable } from '../../bench/report';

const root = path.resolve(__dirname, '..', '..');

test('npm run bench -- --help prints usage, every benchmark and the options, and starts nothing', () => {
  const began = Date.now();
  const output = execFileSync(process.execPath, ['--import', 'tsx', path.join(root, 'bench', 'run.ts'), '--help'], {
    cwd: root,
    encoding: 'utf8',
  });
  expect(output).toMatch(/^Usage: npm run bench/);
  for (const name of ['latency', 'throughput', 'overhead', 'memory', 'long-wait', 'kill']) {
    expect(output).toMatch(new RegExp(`^  ${name} +\\S`, 'm'));
  }
  expect(output).toContain('--only=NAMES');
  expect(output).not.toContain('starting Temporal');
  expect(Date.now() - began).toBeLessThan(30_000);
});

test('an unknown option is refused with a pointer to --help', () => {
  expect(() =>
    execFileSync(process.execPath, ['--import', 'tsx', path.join(root, 'bench', 'run.ts'), '--fast'], {
      cwd: root,
      encoding: 'utf8',
      stdio: 'pipe',
    }),
  ).toThrow(/Unknown option --fast; see `npm run bench -- --help`/);
});

test('the table prints each goal beside its value, and says whether this run met it', () => {
  const table = renderTable([
    {
      id: 'b1',
      title: '3. Orchestration overhead (B1)',
      measured: 'operations',
      baseline: 'bare workflows',
      measurements: [
        { metric: 'B1 rate', unit: 'ops/s', measured: 18, baseline: 20, ratio: 0.9, goal: '>= 1.0x', met: false },
        {
          metric: 'B3 events',
          unit: 'events',
          measured: 12,
          baseline: 11,
          ratio: 12 / 11,
          goal: '<= 12 events',
          met: true,
        },
        { metric: 'no goal', unit: 'ms', measured: 5, baseline: 4, ratio: 1.25 },
      ],
      notes: [],
      details: {},
    },
  ]);
  const lines = table.split('\n');
  expect(lines[0]).toMatch(/Benchmark +Metric +Measured +Baseline +Ratio +Goal/);
  expect(lines.find((line) => line.includes('B1 rate'))).toMatch(
    /18\.0 ops\/s +20\.0 ops\/s +0\.90x +>= 1\.0x MISSED$/,
  );
  expect(lines.find((line) => line.includes('B3 events'))).toMatch(/12 events +11 events +1\.09x +<= 12 events met$/);
  expect(lines.find((line) => line.includes('no goal'))).toMatch(/1\.25x$/);
});
