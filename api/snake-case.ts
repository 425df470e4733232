/**
 * Workflow state as HTTP readers see it: every key the orchestrator names in snake_case, as the rest of the API
 * (`packageId` → `package_id`, `statusAfter` → `status_after`). Maps keyed by an ID or a metric name keep their
 * keys (only their values are renamed), and what a seller or a person wrote (health, impairments, error details,
 * decision values, required values) passes through untouched.
 */

/** Maps keyed by a period start: the keys stay, the values are renamed. */
const KEYED_BY_ID: ReadonlySet<string> = new Set(['periods', 'missingPeriods']);

/**
 * Passed through as they are: what a seller, an agent or a person wrote (health, impairments, error details,
 * decision values, required values), and maps of IDs to numbers or IDs (metric totals by package, budgets by package,
 * packages by creative) whose keys are not ours to rename.
 */
const PASSED_THROUGH: ReadonlySet<string> = new Set([
  'health',
  'impairments',
  'details',
  'values',
  'requiredValue',
  'byPackage',
  'totals',
  'before',
  'after',
  'ours',
  'budgets',
  'assignments',
]);

/** Names that differ from the plain conversion, to match the operations API (a seller's id is `agent_id` on the wire). */
const RENAMED: Readonly<Record<string, string>> = { retryAfterSeconds: 'retry_after', sellerId: 'agent_id' };

export function snakeName(key: string): string {
  return RENAMED[key] ?? key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

export function snakeCased(value: unknown, keepKeys = false): unknown {
  if (Array.isArray(value)) return value.map((item) => snakeCased(item));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    if (item === undefined) continue;
    const name = keepKeys ? key : snakeName(key);
    if (!keepKeys && PASSED_THROUGH.has(key)) out[name] = item;
    else if (!keepKeys && KEYED_BY_ID.has(key)) out[name] = snakeCased(item, true);
    else out[name] = snakeCased(item);
  }
  return out;
}
