/**
 * Seller answers checked against the AdCP schemas of the version the seller declares (issue 24, item 11), in warn
 * mode: drift becomes short warnings naming where the answer left the schema, in the shape the answer is closest to.
 * Also checks that the worker's runtime copy of the 3.1.19 schemas is complete.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { createSchemaChecker, defaultSchemaRoots, schemaVersionFor } from '../../activities/schema-check';
import { TASK_CATALOG } from '../../protocol';

const checker = createSchemaChecker();
const now = '2026-12-01T10:00:00.000Z';
const answer30 = {
  media_buy_id: 'mb_1',
  status: 'pending_creatives',
  confirmed_at: now,
  packages: [{ package_id: 'pkg_1', product_id: 'p1', budget: 500, pricing_option_id: 'cpm' }],
};

test('the version checked is the one the seller declares', () => {
  expect(schemaVersionFor('3.1')).toBe('3.1.19');
  expect(schemaVersionFor('3.0')).toBe('3.0.6');
  expect(schemaVersionFor(undefined)).toBe('3.0.6');
  expect(schemaVersionFor('rc.2')).toBeUndefined();
});

test('a valid 3.0 create answer has no warnings', () => {
  expect(checker.checkAnswer('3.0.6', 'create_media_buy', answer30)).toEqual([]);
});

test('3.0: a package budget sent as a string is named, in the success shape only', () => {
  const warnings = checker.checkAnswer('3.0.6', 'create_media_buy', {
    ...answer30,
    packages: [{ package_id: 'pkg_drift', budget: '500' }],
  });
  expect(warnings).toEqual(['/packages/0/budget: must be number (AdCP 3.0.6 create-media-buy-response)']);
});

test('3.1: the same answer lacks the revision 3.1 requires, and its status is not a task status', () => {
  const warnings = checker.checkAnswer('3.1.19', 'create_media_buy', answer30);
  expect(warnings).toContain('/revision: missing (required) (AdCP 3.1.19 create-media-buy-response)');
  expect(warnings.join('\n')).toMatch(/\/status: must be one of submitted, working/);
  expect(warnings.join('\n')).not.toMatch(/task_id|errors/); // not the other shapes' complaints
});

test('a submitted answer is checked as submitted, a working one as working', () => {
  expect(checker.checkAnswer('3.1.19', 'create_media_buy', { status: 'submitted', task_id: 't1' })).toEqual([]);
  expect(checker.checkAnswer('3.1.19', 'create_media_buy', { status: 'submitted' })).toEqual([
    '/task_id: missing (required) (AdCP 3.1.19 create-media-buy-async-response-submitted)',
  ]);
  expect(checker.checkAnswer('3.0.6', 'create_media_buy', { status: 'working', percentage: 'half' })).toEqual([
    '/percentage: must be number (AdCP 3.0.6 create-media-buy-async-response-working)',
  ]);
});

test("a task read's final result is checked as the completed answer", () => {
  expect(checker.checkResult('3.0.6', 'create_media_buy', answer30)).toEqual([]);
  const warnings = checker.checkResult('3.1.19', 'create_media_buy', {
    media_buy_id: 'mb_1',
    confirmed_at: now,
    revision: 1,
    packages: [{ package_id: 'pkg_1' }],
  });
  expect(warnings).toEqual([]);
});

test('a tool without a schema, and rows of a listing', () => {
  expect(checker.checkAnswer('3.0.6', 'made_up_tool', { anything: true })).toEqual([]);
  expect(checker.knows('3.0.6', 'get_media_buys')).toBe(true);
  const warnings = checker.checkAnswer('3.0.6', 'get_media_buys', {
    media_buys: [{ media_buy_id: 'mb_1', status: 'active', packages: [] }],
  });
  expect(warnings.join('\n')).toContain('/media_buys/0/');
});

test('at most ten warnings, each short', () => {
  const warnings = checker.checkAnswer('3.0.6', 'get_media_buys', {
    media_buys: Array.from({ length: 30 }, (_, index) => ({ media_buy_id: index })),
  });
  expect(warnings.length).toBeLessThanOrEqual(10);
  for (const warning of warnings) expect(warning.length).toBeLessThanOrEqual(200);
});

test('versions whose schemas are not installed are not checked', () => {
  const none = createSchemaChecker({});
  expect(none.checkAnswer('3.1.19', 'create_media_buy', {})).toEqual([]);
});

describe('the runtime copy of the 3.1.19 schemas', () => {
  const root = defaultSchemaRoots()['3.1.19']!;
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const full = path.join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (name.endsWith('.json')) files.push(full);
    }
  };

  test('is found outside test/, and every $ref in it resolves inside it', () => {
    expect(root).toBeDefined();
    expect(path.relative(process.cwd(), root)).toBe(path.join('protocol', 'schemas', 'adcp-3.1.19'));
    walk(root);
    const missing = new Set<string>();
    for (const file of files) {
      for (const match of readFileSync(file, 'utf8').matchAll(/"\$ref":\s*"([^"#]*)/g)) {
        if (!match[1]) continue;
        const target = match[1].startsWith('/schemas/3.1.19/')
          ? path.join(root, match[1].slice('/schemas/3.1.19/'.length))
          : path.join(path.dirname(file), match[1]);
        if (!existsSync(target)) missing.add(path.relative(root, target));
      }
    }
    expect([...missing]).toEqual([]);
  });

  test("holds the response schemas of every catalogued task the version's manifest lists", () => {
    const manifest = JSON.parse(readFileSync(path.join(root, 'manifest.json'), 'utf8')) as {
      tools: Record<string, { response_schema?: string; async_response_schemas?: string[] }>;
    };
    const absent: string[] = [];
    for (const task of Object.keys(TASK_CATALOG)) {
      const spec = manifest.tools[task];
      expect(spec).toBeDefined();
      for (const file of [spec.response_schema, ...(spec.async_response_schemas ?? [])])
        if (file && !existsSync(path.join(root, file))) absent.push(file);
    }
    expect(absent).toEqual([]);
  });
});
