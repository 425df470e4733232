/**
 * Request shaping per seller: a field a seller's error names as unsupported is left out of that tool's requests to
 * that seller from then on. Some sellers refuse a read that carries an optional field they do not take (`account` on
 * `get_media_buys`: `UNSUPPORTED_FEATURE`, "Omit account"); sending it again can never succeed, and dropping an
 * optional field changes nothing the orchestrator relies on. Only optional fields of reads and listings are ever
 * dropped, never an id, an idempotency key or anything a mutation carries: a mutation sent without a field the buyer
 * asked for would be a different request. Pure: the shaping activity, the workflows and tests import it.
 */
import type { AdcpError } from './errors';

/**
 * The optional request fields that may be dropped, per tool: the reads and listings the orchestrator makes on its own
 * account. A field that changes what a read returns (`status_filter`, `include_result`) is not among them.
 */
export const DROPPABLE_FIELDS: Readonly<Record<string, readonly string[]>> = {
  get_media_buys: ['account', 'include_snapshot', 'include_history', 'context', 'ext'],
  get_media_buy_delivery: ['account', 'context', 'ext'],
  'tasks/get': ['account', 'context', 'ext'],
  get_task_status: ['account', 'context', 'ext'],
  get_task: ['account'],
  'tasks/list': ['account', 'context', 'ext'],
  list_tasks: ['account', 'context', 'ext'],
};

/** Codes a seller uses to refuse a field it does not take. */
const REFUSAL_CODES = new Set(['UNSUPPORTED_FEATURE', 'INVALID_REQUEST', 'VALIDATION_ERROR', 'INVALID_PARAMS']);

/** One field dropped for one tool at one seller, and why (the seller's own words). */
export interface ShapingRecord {
  tool: string;
  omitted: string;
  because: string;
  at: string;
}

/** What a seller's requests leave out, by tool. */
export type RequestShaping = Readonly<Record<string, readonly string[]>>;

function fieldNamedIn(error: AdcpError, present: readonly string[]): string | undefined {
  const named = error.field?.split(/[.[]/)[0];
  if (named && present.includes(named)) return named;
  const text = `${error.message} ${error.suggestion ?? ''}`;
  // "Omit account", "account is not supported", "unsupported field: account", "does not accept account".
  for (const field of present) {
    const word = field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const patterns = [
      new RegExp(`\\b(omit|remove|drop|without)\\s+(the\\s+)?[\`'"]?${word}\\b`, 'i'),
      new RegExp(
        `\\b${word}[\`'"]?\\s+(is\\s+|are\\s+)?(not\\s+supported|unsupported|not\\s+accepted|not\\s+allowed)`,
        'i',
      ),
      new RegExp(
        `\\b(unsupported|unknown|unexpected|not\\s+supported)\\s+(field|parameter|property)s?:?\\s+[\`'"]?${word}\\b`,
        'i',
      ),
      new RegExp(`\\bdoes\\s+not\\s+(accept|support)\\s+[\`'"]?${word}\\b`, 'i'),
    ];
    if (patterns.some((pattern) => pattern.test(text))) return field;
  }
  return undefined;
}

/**
 * The field an error refuses, when it is one this tool's request carried and may go without: a refusal code whose
 * `field` (or message: "Omit account") names a droppable field present in `args`. Undefined for anything else, so a
 * refusal that names an id, or no field, is never shaped away.
 */
export function refusedField(
  error: AdcpError,
  tool: string,
  args: Record<string, unknown>,
): { field: string; because: string } | undefined {
  if (!REFUSAL_CODES.has(error.code.toUpperCase())) return undefined;
  const droppable = DROPPABLE_FIELDS[tool] ?? [];
  const present = droppable.filter((field) => args[field] !== undefined);
  if (present.length === 0) return undefined;
  const field = fieldNamedIn(error, present);
  if (!field) return undefined;
  return { field, because: `${error.code}: ${error.message}`.slice(0, 200) };
}

/** The arguments without the fields this seller's shaping leaves out of `tool`. */
export function shapeRequest(
  tool: string,
  args: Record<string, unknown>,
  shaping: RequestShaping | undefined,
): Record<string, unknown> {
  const omit = shaping?.[tool];
  if (!omit || omit.length === 0) return args;
  const droppable = DROPPABLE_FIELDS[tool] ?? [];
  const shaped = { ...args };
  for (const field of omit) if (droppable.includes(field)) delete shaped[field];
  return shaped;
}

/** The shaping with the records added (each field once per tool). */
export function withShaping(shaping: RequestShaping | undefined, records: readonly ShapingRecord[]): RequestShaping {
  const next: Record<string, string[]> = {};
  for (const [tool, fields] of Object.entries(shaping ?? {})) next[tool] = [...fields];
  for (const record of records) {
    const fields = (next[record.tool] ??= []);
    if (!fields.includes(record.omitted)) fields.push(record.omitted);
  }
  return next;
}

/** Whether an error says the tool itself is missing (not a field of it): a field refusal is never "no such tool". */
export function refusesAField(error: AdcpError): boolean {
  return typeof error.field === 'string' && error.field !== '' && REFUSAL_CODES.has(error.code.toUpperCase());
}
