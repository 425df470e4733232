/**
 * "completed" means the operation finished, not that everything succeeded (adcp-protocol.md §2.5, §13.9).
 * This reads a completed result for what a caller must still look at, so it can be marked, not lost.
 */
import { asRecord } from './records';

export type CompletionOutcome = 'success' | 'partial' | 'pending';

export interface CompletionAssessment {
  outcome: CompletionOutcome;
  /** One line per thing a caller should see: warnings, failed items, not-yet-live deployments. */
  notes: string[];
}

function describeError(value: unknown): string {
  const error = asRecord(value);
  if (!error) return String(value);
  const code = typeof error.code === 'string' ? error.code : 'WARNING';
  const message = typeof error.message === 'string' ? error.message : '';
  return message ? `${code}: ${message}` : code;
}

/** The request a result answers, where the outcome depends on it (sync_creatives answers per creative sent). */
export interface CompletedRequest {
  task: string;
  params?: Record<string, unknown>;
}

/**
 * sync_creatives answers one row per creative sent, keyed by the creative_id from the request (3.x
 * sync-creatives-response). A creative the answer has no row for has no known result: a row under another id (some
 * sellers answer with their own library id) cannot be matched to what the buyer sent, so it does not count as one.
 */
function unansweredCreatives(result: Record<string, unknown>, request: CompletedRequest | undefined): string[] {
  if (request?.task !== 'sync_creatives' || !Array.isArray(request.params?.creatives)) return [];
  // dry_run and validation-only answers still carry a row per creative, so the check applies to them too.
  const answered = new Set<string>();
  const rows = Array.isArray(result.creatives) ? result.creatives : [];
  for (const entry of rows) {
    const id = asRecord(entry)?.creative_id;
    if (typeof id === 'string') answered.add(id);
  }
  const requested = new Set(
    request.params.creatives
      .map((entry) => asRecord(entry)?.creative_id)
      .filter((id): id is string => typeof id === 'string'),
  );
  const missing = [...requested].filter((id) => !answered.has(id));
  if (missing.length === 0) return [];
  const others = [...answered].filter((id) => !requested.has(id));
  const instead = others.length > 0 ? `; it answered for ${others.join(', ')}, which the request did not name` : '';
  return [`no result for creative ${missing.join(', ')} (the seller's answer has no row for it${instead})`];
}

function brandDomain(row: Record<string, unknown>): string | undefined {
  const brand = asRecord(row.brand);
  return typeof brand?.domain === 'string' ? brand.domain : undefined;
}

function idOf(row: Record<string, unknown>, field: string): string {
  const id = row[field];
  return typeof id === 'string' && id !== '' ? id : '?';
}

/** The per-item rows of the sync tasks: where they are, how a row is named, which statuses are refused or pending. */
const PER_ITEM_ROWS: readonly {
  field: string;
  noun: string;
  name: (row: Record<string, unknown>) => string;
  refused: readonly string[];
  pending: readonly string[];
}[] = [
  { field: 'creatives', noun: 'creative', name: (row) => idOf(row, 'creative_id'), refused: [], pending: [] },
  {
    field: 'accounts',
    noun: 'account',
    // An account the seller could not set up has no account_id yet: the brand and operator sent name it.
    name: (row) => {
      const id = typeof row.account_id === 'string' ? row.account_id : undefined;
      const brand = brandDomain(row);
      const operator = typeof row.operator === 'string' ? row.operator : undefined;
      const who = [brand && `brand ${brand}`, operator && operator !== brand ? `operator ${operator}` : undefined]
        .filter(Boolean)
        .join(', ');
      return id ? `${id}${who ? ` (${who})` : ''}` : who || '?';
    },
    refused: ['rejected', 'suspended', 'closed', 'payment_required'],
    pending: ['pending_approval'],
  },
  { field: 'audiences', noun: 'audience', name: (row) => idOf(row, 'audience_id'), refused: [], pending: [] },
  { field: 'catalogs', noun: 'catalog', name: (row) => idOf(row, 'catalog_id'), refused: [], pending: [] },
  {
    field: 'event_sources',
    noun: 'event source',
    name: (row) => idOf(row, 'event_source_id'),
    refused: [],
    pending: [],
  },
];

export function assessCompletion(
  result: Record<string, unknown> | undefined,
  request?: CompletedRequest,
): CompletionAssessment {
  if (!result) return { outcome: 'success', notes: [] };
  const partial: string[] = [];
  const pending: string[] = [];

  if (Array.isArray(result.errors)) {
    for (const warning of result.errors) partial.push(`warning ${describeError(warning)}`);
  }
  // sync_* tasks: success is per item (one row per item sent).
  for (const rows of PER_ITEM_ROWS) {
    if (!Array.isArray(result[rows.field])) continue;
    for (const entry of result[rows.field] as unknown[]) {
      const row = asRecord(entry);
      if (!row) continue;
      const name = `${rows.noun} ${rows.name(row)}`;
      if (row.action === 'failed') partial.push(`${name} failed`);
      if (Array.isArray(row.errors) && row.errors.length > 0)
        partial.push(`${name}: ${row.errors.map(describeError).join('; ')}`);
      const status = typeof row.status === 'string' ? row.status : undefined;
      if (status && rows.refused.includes(status) && row.action !== 'failed') partial.push(`${name} is ${status}`);
      if (status && rows.pending.includes(status)) {
        const setup = asRecord(row.setup);
        const why = typeof setup?.message === 'string' ? `: ${setup.message}` : '';
        pending.push(`${name} is ${status}${why}`);
      }
      const assignmentErrors = asRecord(row.assignment_errors);
      if (assignmentErrors && Object.keys(assignmentErrors).length > 0) {
        partial.push(`${name} has assignment errors for ${Object.keys(assignmentErrors).join(', ')}`);
      }
    }
  }
  partial.push(...unansweredCreatives(result, request));
  // activate_signal: "completed" can come long before "live".
  if (Array.isArray(result.deployments)) {
    for (const entry of result.deployments) {
      const deployment = asRecord(entry);
      if (deployment && deployment.is_live === false) {
        const where = String(deployment.platform ?? deployment.agent_url ?? 'destination');
        const eta = deployment.estimated_activation_duration_minutes;
        pending.push(`deployment to ${where} is not live yet${typeof eta === 'number' ? ` (about ${eta} min)` : ''}`);
      }
    }
  }
  // update_media_buy: implementation_date null means the change awaits approval.
  if ('implementation_date' in result && result.implementation_date === null) {
    pending.push('the change is accepted but not implemented yet (implementation_date is null: pending approval)');
  }
  // get_products: incomplete[] names parts the seller could not finish in time.
  if (Array.isArray(result.incomplete)) {
    for (const entry of result.incomplete) {
      const item = asRecord(entry);
      if (item) partial.push(`incomplete ${String(item.scope ?? '?')}: ${String(item.description ?? '')}`.trim());
    }
  }
  const notes = [...partial, ...pending];
  if (partial.length > 0) return { outcome: 'partial', notes };
  if (pending.length > 0) return { outcome: 'pending', notes };
  return { outcome: 'success', notes };
}
