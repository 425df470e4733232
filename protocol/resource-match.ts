/**
 * Which media buy in a seller's `get_media_buys` listing is the one an operation's create made, when the create's
 * answer never said (it was lost, or the task route carries no result). A buy is matched by what the operation sent,
 * strongest evidence first, and the first kind of evidence that singles out one buy wins and names itself in
 * `matchedBy`:
 *
 * 1. `idempotency_key`: the seller echoes the create's key (top level or under `ext`);
 * 2. `context`: the seller echoes the create's `context` (3.1 requires it on read surfaces); the orchestrator adds
 *    `context.adcp_orchestrator.operation_id` to every create it plans, so the echo names the operation;
 * 3. `po_number`: the buyer's purchase order number, when the create carried one;
 * 4. `packages_budget_flight`, the last resort: the same products with the same budgets, and where the row carries
 *    them the same total budget and flight, created after the operation started; only when exactly one buy fits.
 *
 * Two buys that fit the same evidence adopt nothing: they are returned as `candidates` for a person to decide. A buy
 * another operation already knows (`exclude`) is never adopted. Pure: the resource activities and tests import it.
 */
import { asRecord } from './records';

export type MatchedBy = 'media_buy_id' | 'idempotency_key' | 'context' | 'po_number' | 'packages_budget_flight';

/** The key under `context` the orchestrator adds to every create it plans. */
export const ORCHESTRATOR_CONTEXT_KEY = 'adcp_orchestrator';

/** A buy row's `created_at` may trail the operation's start by the two clocks' skew. */
const CLOCK_SKEW_MS = 5 * 60_000;

export interface SentPackage {
  productId?: string;
  budget?: number;
}

/** What a create sent that a listed buy can be recognised by. */
export interface SentCreate {
  operationId: string;
  idempotencyKey?: string;
  context?: Record<string, unknown>;
  poNumber?: string;
  packages: SentPackage[];
  totalBudget?: number;
  startTime?: string;
  endTime?: string;
  /** When the operation started (ISO 8601): a buy created well before it is not this create's. */
  startedAt?: string;
}

export type ResourceMatch =
  | { found: true; row: Record<string, unknown>; mediaBuyId: string; matchedBy: MatchedBy }
  | { found: false; candidates: string[]; note: string };

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function amount(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  const record = asRecord(value);
  if (record && typeof record.amount === 'number' && Number.isFinite(record.amount)) return record.amount;
  return undefined;
}

function timeOf(value: unknown): number | undefined {
  const raw = text(value);
  if (!raw) return undefined;
  const ms = Date.parse(raw);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * The context a create sends: the caller's context with the orchestrator's operation marker merged in, so a seller's
 * echo names the operation whatever the caller put there.
 */
export function contextWithOperation(context: unknown, operationId: string): Record<string, unknown> {
  const caller = asRecord(context) ?? {};
  const ours = asRecord(caller[ORCHESTRATOR_CONTEXT_KEY]) ?? {};
  return { ...caller, [ORCHESTRATOR_CONTEXT_KEY]: { ...ours, operation_id: operationId } };
}

/** What a planned create_media_buy's arguments let a listing recognise. */
export function sentCreateFrom(args: Record<string, unknown>, operationId: string, startedAt?: string): SentCreate {
  const packages = Array.isArray(args.packages)
    ? args.packages.map((entry) => {
        const pkg = asRecord(entry) ?? {};
        const productId = text(pkg.product_id);
        const budget = amount(pkg.budget);
        return { ...(productId ? { productId } : {}), ...(budget !== undefined ? { budget } : {}) };
      })
    : [];
  const context = asRecord(args.context);
  const idempotencyKey = text(args.idempotency_key);
  const poNumber = text(args.po_number);
  const totalBudget = amount(args.total_budget);
  const startTime = text(args.start_time);
  const endTime = text(args.end_time);
  return {
    operationId,
    packages,
    ...(idempotencyKey ? { idempotencyKey } : {}),
    ...(context ? { context } : {}),
    ...(poNumber ? { poNumber } : {}),
    ...(totalBudget !== undefined ? { totalBudget } : {}),
    ...(startTime ? { startTime } : {}),
    ...(endTime ? { endTime } : {}),
    ...(startedAt ? { startedAt } : {}),
  };
}

function echoedKey(row: Record<string, unknown>): string | undefined {
  return text(row.idempotency_key) ?? text(asRecord(row.ext)?.idempotency_key);
}

/** RFC 8785-style canonical JSON (sorted keys): two echoes of the same context compare equal. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

/** The row's context names this operation (our marker), or is the very context sent when it carries no marker. */
function contextMatches(row: Record<string, unknown>, sent: SentCreate): boolean {
  const echoed = asRecord(row.context);
  if (!echoed) return false;
  const marker = asRecord(echoed[ORCHESTRATOR_CONTEXT_KEY]);
  if (marker) return marker.operation_id === sent.operationId;
  // A context without our marker identifies the operation only if the one sent had none either and it is the same.
  return (
    !!sent.context && !asRecord(sent.context[ORCHESTRATOR_CONTEXT_KEY]) && canonical(echoed) === canonical(sent.context)
  );
}

function packageKey(pkg: SentPackage): string {
  return `${pkg.productId ?? '?'}|${pkg.budget ?? '?'}`;
}

/**
 * The last resort: same products with the same budgets (as multisets), and no field the row carries contradicting the
 * total budget, the flight or the operation's start. A create that sent no packages is never matched this way.
 */
function shapeMatches(row: Record<string, unknown>, sent: SentCreate): boolean {
  if (sent.packages.length === 0 || sent.packages.some((pkg) => !pkg.productId || pkg.budget === undefined))
    return false;
  const rowPackages = Array.isArray(row.packages)
    ? row.packages.map((entry) => {
        const pkg = asRecord(entry) ?? {};
        const productId = text(pkg.product_id);
        const budget = amount(pkg.budget);
        return { ...(productId ? { productId } : {}), ...(budget !== undefined ? { budget } : {}) };
      })
    : [];
  const wanted = sent.packages.map(packageKey).sort();
  const listed = rowPackages.map(packageKey).sort();
  if (wanted.length !== listed.length || wanted.some((key, index) => key !== listed[index])) return false;
  const total = amount(row.total_budget);
  if (total !== undefined && sent.totalBudget !== undefined && total !== sent.totalBudget) return false;
  for (const [field, value] of [
    ['start_time', sent.startTime],
    ['end_time', sent.endTime],
  ] as const) {
    const listedAt = timeOf(row[field]);
    const sentAt = timeOf(value);
    if (listedAt !== undefined && sentAt !== undefined && listedAt !== sentAt) return false;
  }
  const createdAt = timeOf(row.created_at);
  const startedAt = timeOf(sent.startedAt);
  if (createdAt !== undefined && startedAt !== undefined && createdAt < startedAt - CLOCK_SKEW_MS) return false;
  return true;
}

const STAGES: readonly { by: Exclude<MatchedBy, 'media_buy_id'>; applies: (sent: SentCreate) => boolean }[] = [
  { by: 'idempotency_key', applies: (sent) => sent.idempotencyKey !== undefined },
  { by: 'context', applies: () => true },
  { by: 'po_number', applies: (sent) => sent.poNumber !== undefined },
  { by: 'packages_budget_flight', applies: () => true },
];

function rowMatches(by: Exclude<MatchedBy, 'media_buy_id'>, row: Record<string, unknown>, sent: SentCreate): boolean {
  switch (by) {
    case 'idempotency_key':
      return echoedKey(row) === sent.idempotencyKey;
    case 'context':
      return contextMatches(row, sent);
    case 'po_number':
      return text(row.po_number) === sent.poNumber;
    case 'packages_budget_flight':
      return shapeMatches(row, sent);
  }
}

/**
 * The buy in `rows` this create made, by the strongest evidence that singles one out. Rows without a media_buy_id and
 * buys in `exclude` (known to other operations) are never candidates.
 */
export function matchListedBuy(
  rows: readonly unknown[],
  sent: SentCreate,
  exclude: ReadonlySet<string> = new Set(),
): ResourceMatch {
  const buys = rows
    .map((row) => asRecord(row))
    .filter((row): row is Record<string, unknown> => {
      const id = text(row?.media_buy_id);
      return id !== undefined && !exclude.has(id);
    });
  for (const stage of STAGES) {
    if (!stage.applies(sent)) continue;
    const hits = buys.filter((row) => rowMatches(stage.by, row, sent));
    if (hits.length === 1) {
      return { found: true, row: hits[0], mediaBuyId: String(hits[0].media_buy_id), matchedBy: stage.by };
    }
    if (hits.length > 1) {
      const candidates = hits.map((row) => String(row.media_buy_id));
      return {
        found: false,
        candidates,
        note: `${hits.length} media buys match by ${stage.by} (${candidates.join(', ')}): none adopted; decide which is this operation's`,
      };
    }
  }
  return {
    found: false,
    candidates: [],
    note: `none of the ${buys.length} listed media buys matches this create by idempotency key, context, po_number or packages, budget and flight`,
  };
}

/** The row for `mediaBuyId` in a `get_media_buys` answer, if it has one. */
export function listedBuy(rows: readonly unknown[], mediaBuyId: string): Record<string, unknown> | undefined {
  return rows.map((row) => asRecord(row)).find((row) => row?.media_buy_id === mediaBuyId);
}
