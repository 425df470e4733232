/**
 * The schema check's CPU per checked answer (activities/schema-check.ts): seller answers checked against the AdCP
 * schemas of the version the seller declares, in this process, with compiled validators. Measured per 1,000 checks of
 * a create_media_buy answer and of a get_media_buys page of 10 buys, for 3.0.6 and 3.1.19, valid (the hot path: the
 * validator that stops at the first error) and drifting (the validator that collects every error, and the shape the
 * answer is closest to). Baseline: JSON.parse of the same answer's text, which every answer already costs. The first
 * check of each schema also compiles it: reported separately, once per worker process.
 */
import { createSchemaChecker, type SchemaVersion } from '../activities/schema-check';
import type { BenchmarkResult, Measurement } from './report';

export interface SchemaCheckOptions {
  /** Checks per measured case (default 10,000). */
  iterations?: number;
}

const NOW = '2026-12-01T10:00:00.000Z';

function createAnswer(version: SchemaVersion): Record<string, unknown> {
  const answer: Record<string, unknown> = {
    media_buy_id: 'mb_bench',
    confirmed_at: NOW,
    packages: [
      { package_id: 'pkg_1', product_id: 'display_a', pricing_option_id: 'cpm', budget: 5_000 },
      { package_id: 'pkg_2', product_id: 'video_b', pricing_option_id: 'cpm', budget: 7_500 },
    ],
  };
  return version === '3.1.19'
    ? { ...answer, status: 'completed', media_buy_status: 'pending_creatives', revision: 1 }
    : { ...answer, status: 'pending_creatives' };
}

function listingPage(version: SchemaVersion): Record<string, unknown> {
  const buys = Array.from({ length: 10 }, (_, index) => ({
    media_buy_id: `mb_${index}`,
    status: 'active',
    currency: 'USD',
    total_budget: 12_500,
    start_time: NOW,
    end_time: '2027-01-01T00:00:00.000Z',
    created_at: NOW,
    updated_at: NOW,
    ...(version === '3.1.19' ? { confirmed_at: NOW, revision: 2 } : {}),
    packages: [{ package_id: `pkg_${index}`, product_id: 'display_a', budget: 12_500 }],
  }));
  return version === '3.1.19' ? { status: 'completed', media_buys: buys } : { media_buys: buys };
}

function cpuMs(work: () => void): number {
  const before = process.cpuUsage();
  work();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1_000;
}

export async function schemaCheckCpu(options: SchemaCheckOptions = {}): Promise<BenchmarkResult> {
  const iterations = options.iterations ?? 10_000;
  const checker = createSchemaChecker();
  const measurements: Measurement[] = [];
  const notes: string[] = [];
  const details: Record<string, unknown> = { iterations };
  const cases: { name: string; tool: string; version: SchemaVersion; body: Record<string, unknown>; valid: boolean }[] =
    [];
  for (const version of ['3.0.6', '3.1.19'] as const) {
    const answer = createAnswer(version);
    cases.push(
      { name: `${version} create answer`, tool: 'create_media_buy', version, body: answer, valid: true },
      {
        name: `${version} get_media_buys page (10 buys)`,
        tool: 'get_media_buys',
        version,
        body: listingPage(version),
        valid: true,
      },
      {
        name: `${version} create answer, drifting`,
        tool: 'create_media_buy',
        version,
        body: { ...answer, packages: [{ package_id: 'pkg_drift', budget: '500' }] },
        valid: false,
      },
    );
  }
  for (const entry of cases) {
    const compileMs = cpuMs(() => checker.checkAnswer(entry.version, entry.tool, entry.body));
    const warnings = checker.checkAnswer(entry.version, entry.tool, entry.body);
    if ((warnings.length === 0) !== entry.valid)
      throw new Error(
        `${entry.name}: expected ${entry.valid ? 'no warnings' : 'warnings'}, got ${JSON.stringify(warnings)}`,
      );
    const text = JSON.stringify(entry.body);
    // Warm both loops, then measure.
    for (let index = 0; index < 200; index++) {
      checker.checkAnswer(entry.version, entry.tool, entry.body);
      JSON.parse(text);
    }
    const checkMs = cpuMs(() => {
      for (let index = 0; index < iterations; index++) checker.checkAnswer(entry.version, entry.tool, entry.body);
    });
    const parseMs = cpuMs(() => {
      for (let index = 0; index < iterations; index++) JSON.parse(text);
    });
    const perThousand = (checkMs / iterations) * 1_000;
    const parsePerThousand = (parseMs / iterations) * 1_000;
    measurements.push({
      metric: `CPU per 1,000 checks: ${entry.name}`,
      unit: 'ms',
      measured: perThousand,
      baseline: parsePerThousand,
      ratio: parsePerThousand === 0 ? Number.NaN : perThousand / parsePerThousand,
    });
    notes.push(
      `${entry.name}: ${((checkMs / iterations) * 1_000).toFixed(1)} us of CPU per check ` +
        `(JSON.parse of the same ${text.length} bytes: ${((parseMs / iterations) * 1_000).toFixed(1)} us); ` +
        `first check ${compileMs.toFixed(0)} ms${entry.valid ? ' (compiles the schema)' : ''}` +
        `${entry.valid ? '' : `; ${warnings.length} warning(s): ${warnings[0]}`}`,
    );
    details[entry.name] = { checkMs, parseMs, compileMs, bytes: text.length, warnings };
  }
  return {
    id: 'schema-check',
    title: 'Schema check (warn mode)',
    measured: 'checking one seller answer against its version’s AdCP schema, compiled validators, in-process',
    baseline: 'JSON.parse of the same answer',
    measurements,
    notes,
    details,
  };
}
