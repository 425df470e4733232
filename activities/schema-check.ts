/**
 * Seller answers checked against the official AdCP JSON Schemas of the version the seller declares, in warn mode:
 * drift is reported as short warnings (a JSON pointer and what is wrong there), never as a failure. A seller that
 * declares 3.1 is checked against 3.1.19 (the copy in protocol/schemas/, read at run time), any other 3.x seller
 * against 3.0.6 as @adcp/sdk ships it; rc.2 sellers predate these schemas and are not checked.
 *
 * Validators are compiled lazily, once per (version, schema file) and process: the first answer of a tool pays the
 * compilation (a few hundred ms of CPU for the largest), every later one microseconds (`npm run bench`,
 * bench/schema-check.ts). The hot path uses a validator that stops at the first error; the one that collects every
 * error is compiled only for an answer that is invalid. A response schema that is a `oneOf` of shapes (success, error,
 * submitted) reports the errors of the shape the answer is closest to, not every branch's.
 */
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { normaliseStatus } from '../protocol';
import { asRecord } from '../protocol/records';

export type SchemaVersion = '3.0.6' | '3.1.19';

/** At most this many warnings per answer, each at most WARNING_LENGTH characters. */
export const MAX_WARNINGS = 10;
const WARNING_LENGTH = 200;

/** The schema version a seller is checked against, from the wire version it declares; undefined: not checked. */
export function schemaVersionFor(wireVersion: string | undefined): SchemaVersion | undefined {
  if (wireVersion === 'rc.2') return undefined;
  if (wireVersion === '3.1') return '3.1.19';
  return '3.0.6';
}

interface ManifestTool {
  response_schema?: string;
  async_response_schemas?: string[];
}

interface VersionSet {
  root: string;
  /** `$id`s are absolute (`/schemas/3.1.19/core/error.json`): this prefix maps them to files under `root`. */
  idPrefix: string;
  tools: Record<string, ManifestTool>;
  ajv: { fast: Ajv; full: Ajv };
  added: { fast: Set<string>; full: Set<string> };
  compiled: Map<string, { fast: ValidateFunction; full?: ValidateFunction; schema: Record<string, unknown> }>;
}

/** The folder that holds `relative`, looked for from this file upward (sources, dist/app/ and a packed install). */
function findUp(relative: string): string | undefined {
  let dir = __dirname;
  for (let depth = 0; depth < 5; depth++) {
    const candidate = path.join(dir, relative);
    if (existsSync(path.join(candidate, 'manifest.json'))) return candidate;
    dir = path.dirname(dir);
  }
  return undefined;
}

/** Where each version's schemas are read from. */
export function defaultSchemaRoots(): Partial<Record<SchemaVersion, string>> {
  const roots: Partial<Record<SchemaVersion, string>> = {};
  try {
    roots['3.0.6'] = path.join(path.dirname(require.resolve('@adcp/sdk/package.json')), 'dist/lib/schemas-data/3.0');
  } catch {
    // no @adcp/sdk: 3.0 answers go unchecked
  }
  const copy = findUp(path.join('protocol', 'schemas', 'adcp-3.1.19'));
  if (copy) roots['3.1.19'] = copy;
  return roots;
}

function newAjv(allErrors: boolean): Ajv {
  // strict off: the official schemas use keywords (x-entity, enumMetadata ...) Ajv does not know.
  const ajv = new Ajv({ strict: false, allErrors, validateSchema: false });
  addFormats(ajv);
  return ajv;
}

export interface SchemaChecker {
  /**
   * Warnings for one answer as the seller sent it (the MCP structuredContent or A2A data: envelope and payload), in
   * the shape its status names (a submitted, working or input-required answer has its own schema). Empty when it
   * fits, when the tool has no schema in this version, or when the version's schemas are not installed.
   */
  checkAnswer(version: SchemaVersion, tool: string, body: unknown): string[];
  /**
   * Warnings for a task's final result (a task read's or a webhook's `result`): checked as the tool's completed
   * answer.
   */
  checkResult(version: SchemaVersion, tool: string, result: unknown): string[];
  /** Whether `tool` has a response schema in `version` (the bench and tests use it). */
  knows(version: SchemaVersion, tool: string): boolean;
}

export function createSchemaChecker(
  roots: Partial<Record<SchemaVersion, string>> = defaultSchemaRoots(),
): SchemaChecker {
  const sets = new Map<SchemaVersion, VersionSet | null>();

  function setFor(version: SchemaVersion): VersionSet | undefined {
    const known = sets.get(version);
    if (known !== undefined) return known ?? undefined;
    const root = roots[version];
    let set: VersionSet | null = null;
    if (root) {
      try {
        const manifest = JSON.parse(readFileSync(path.join(root, 'manifest.json'), 'utf8')) as {
          tools?: Record<string, ManifestTool>;
        };
        set = {
          root,
          idPrefix: `/schemas/${version}/`,
          tools: manifest.tools ?? {},
          ajv: { fast: newAjv(false), full: newAjv(true) },
          added: { fast: new Set(), full: new Set() },
          compiled: new Map(),
        };
      } catch {
        set = null; // not installed: unchecked
      }
    }
    sets.set(version, set);
    return set ?? undefined;
  }

  const fileCache = new Map<string, Record<string, unknown>>();
  function readSchema(set: VersionSet, relative: string): Record<string, unknown> {
    const file = path.join(set.root, relative);
    let schema = fileCache.get(file);
    if (!schema) {
      schema = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      fileCache.set(file, schema);
    }
    return schema;
  }

  /** Adds `relative` and every schema it references to one Ajv instance, so it compiles with no loader. */
  function addClosure(set: VersionSet, which: 'fast' | 'full', relative: string): void {
    const pending = [relative];
    while (pending.length > 0) {
      const next = pending.pop()!;
      if (set.added[which].has(next)) continue;
      set.added[which].add(next);
      const schema = readSchema(set, next);
      for (const match of JSON.stringify(schema).matchAll(/"\$ref":"([^"#]*)(#[^"]*)?"/g)) {
        const target = match[1];
        if (!target) continue;
        pending.push(
          target.startsWith(set.idPrefix)
            ? target.slice(set.idPrefix.length)
            : path.posix.normalize(path.posix.join(path.posix.dirname(next), target)),
        );
      }
      set.ajv[which].addSchema(schema);
    }
  }

  function validatorFor(set: VersionSet, relative: string) {
    let entry = set.compiled.get(relative);
    if (!entry) {
      addClosure(set, 'fast', relative);
      const schema = readSchema(set, relative);
      const fast = set.ajv.fast.getSchema(String(schema.$id));
      if (!fast) throw new Error(`schema ${relative} did not compile`);
      entry = { fast, schema };
      set.compiled.set(relative, entry);
    }
    return entry;
  }

  function fullValidator(set: VersionSet, relative: string, id: string): ValidateFunction | undefined {
    addClosure(set, 'full', relative);
    return set.ajv.full.getSchema(id);
  }

  function schemaFileFor(set: VersionSet, tool: string, body: unknown): string | undefined {
    const spec = set.tools[tool];
    if (!spec?.response_schema) return undefined;
    const status = normaliseStatus(asRecord(body)?.status);
    if (status === 'submitted' || status === 'working' || status === 'input-required') {
      const variant = spec.async_response_schemas?.find((file) => file.endsWith(`-async-response-${status}.json`));
      if (variant) return variant;
    }
    return spec.response_schema;
  }

  function check(version: SchemaVersion, tool: string, body: unknown): string[] {
    const set = setFor(version);
    if (!set) return [];
    const file = schemaFileFor(set, tool, body);
    if (!file) return [];
    let entry;
    try {
      entry = validatorFor(set, file);
    } catch {
      return []; // a schema we cannot compile is our problem, not the seller's drift
    }
    if (entry.fast(body)) return [];
    entry.full ??= fullValidator(set, file, String(entry.schema.$id));
    const full = entry.full;
    if (!full) return [];
    full(body);
    const errors = closestShapeErrors(set, file, entry.schema, full.errors ?? [], body);
    const label = `AdCP ${version} ${file
      .split('/')
      .pop()
      ?.replace(/\.json$/, '')}`;
    return describeErrors(errors).map((warning) => `${warning} (${label})`.slice(0, WARNING_LENGTH));
  }

  /**
   * For a schema whose root is a `oneOf` of shapes, the errors of the shape the answer is closest to (fewest errors),
   * plus the errors outside the `oneOf` (the envelope): what a person fixing the seller needs, without every branch.
   */
  function closestShapeErrors(
    set: VersionSet,
    file: string,
    schema: Record<string, unknown>,
    errors: ErrorObject[],
    body: unknown,
  ): ErrorObject[] {
    const branches = Array.isArray(schema.oneOf) ? schema.oneOf.length : 0;
    if (branches === 0) return errors;
    const id = String(schema.$id);
    let best: ErrorObject[] | undefined;
    const seen = new Set<string>();
    for (let index = 0; index < branches; index++) {
      const branch = set.ajv.full.getSchema(`${id}#/oneOf/${index}`);
      if (!branch) return errors;
      const branchErrors = branch(body) ? [] : [...(branch.errors ?? [])];
      for (const error of branchErrors) seen.add(errorKey(error));
      if (!best || branchErrors.length < best.length) best = branchErrors;
    }
    // Nothing failed in any one shape: the answer fits more than one of them.
    if (best && best.length === 0 && errors.every((error) => error.keyword === 'oneOf'))
      return [{ ...errors[0], message: `fits more than one of the ${branches} shapes ${file} allows` }];
    const outside = errors.filter(
      (error) => error.keyword !== 'oneOf' && !error.schemaPath.startsWith('#/oneOf/') && !seen.has(errorKey(error)),
    );
    return [...outside, ...(best ?? [])];
  }

  return {
    checkAnswer: check,
    checkResult(version, tool, result) {
      const record = asRecord(result);
      if (!record) return [];
      // A final result is the completed answer without its envelope; 3.1 envelopes require the task status.
      const task = normaliseStatus(record.status);
      const body =
        version === '3.1.19' && task === undefined && !('status' in record)
          ? { status: 'completed', ...record }
          : record;
      return check(version, tool, body);
    },
    knows(version, tool) {
      const set = setFor(version);
      return !!set?.tools[tool]?.response_schema;
    },
  };
}

function errorKey(error: ErrorObject): string {
  return `${error.instancePath}|${error.keyword}|${error.message ?? ''}|${JSON.stringify(error.params)}`;
}

/** Warnings in a person's terms: the JSON pointer of what is wrong, and what is wrong with it. */
export function describeErrors(errors: readonly ErrorObject[]): string[] {
  // An umbrella error (oneOf/anyOf/if) says less than the errors under it: shown only when it is all there is.
  const specific = errors.filter((error) => !['oneOf', 'anyOf', 'if', 'not'].includes(error.keyword));
  const shown = specific.length > 0 ? specific : errors;
  const warnings: string[] = [];
  for (const error of shown) {
    const warning = describeError(error);
    if (!warnings.includes(warning)) warnings.push(warning);
    if (warnings.length >= MAX_WARNINGS) break;
  }
  return warnings;
}

function describeError(error: ErrorObject): string {
  const at = error.instancePath || '';
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${at}/${String(params.missingProperty)}: missing (required)`;
    case 'additionalProperties':
      return `${at}/${String(params.additionalProperty)}: not allowed here`;
    case 'enum': {
      const allowed = Array.isArray(params.allowedValues) ? params.allowedValues.map(String) : [];
      return `${at || '/'}: must be one of ${allowed.slice(0, 8).join(', ')}${allowed.length > 8 ? ', ...' : ''}`;
    }
    case 'const':
      return `${at || '/'}: must be ${JSON.stringify(params.allowedValue)}`;
    default:
      return `${at || '/'}: ${error.message ?? error.keyword}`;
  }
}

/** Checks one seller answer (or final result) against the schemas of the version that seller declares. */
export type AnswerCheck = (
  sellerId: string,
  tool: string,
  body: unknown,
  kind?: 'answer' | 'result',
) => Promise<string[]>;

export interface AnswerCheckDependencies {
  checker: SchemaChecker;
  /** The seller's declared version comes from its stored capabilities; without them, 3.0.6. */
  wireVersionOf: (sellerId: string) => Promise<string | undefined>;
}

/** The check the activities use: never fails a call (a lookup or schema problem checks nothing). */
export function createAnswerCheck(deps: AnswerCheckDependencies): AnswerCheck {
  return async (sellerId, tool, body, kind = 'answer') => {
    if (body === undefined) return [];
    try {
      const version = schemaVersionFor(await deps.wireVersionOf(sellerId));
      if (!version) return [];
      return kind === 'result'
        ? deps.checker.checkResult(version, tool, body)
        : deps.checker.checkAnswer(version, tool, body);
    } catch {
      return [];
    }
  };
}

let shared: SchemaChecker | undefined;
/** One checker per process: its compiled validators are reused by every activity factory (and test stack). */
export function sharedSchemaChecker(): SchemaChecker {
  shared ??= createSchemaChecker();
  return shared;
}
