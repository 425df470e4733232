/**
 * The AdCP task catalog as the orchestrator needs it (adcp-protocol.md §8.1, §1.6, §11):
 * which tasks mutate (and so must carry an idempotency_key in 3.x), which can go async,
 * which accept push_notification_config, and how long an operation may wait by default.
 */
export interface TaskSpec {
  readonly name: string;
  readonly domain: 'media-buy' | 'creative' | 'signals' | 'accounts' | 'protocol' | 'governance' | 'brand';
  /** 3.x requires `idempotency_key` on every mutating request (§11). */
  readonly mutating: boolean;
  /** Can answer submitted/working/input-required instead of completing at once. */
  readonly async: boolean;
  /** Request accepts `push_notification_config` (declared or documented). */
  readonly pushNotifications: boolean;
  /** Default operation budget: after this long without a terminal status the operation times out. */
  readonly defaultBudgetMs: number;
  /** How a failed call is retried by default (transient errors only; an operation may override it). */
  readonly retry: TaskRetryPolicy;
}

export interface TaskRetryPolicy {
  readonly maximumAttempts: number;
  readonly initialIntervalMs: number;
  readonly maximumIntervalMs: number;
}

/** §4.4: about 3 tries, 1 s growing to 60 s (the ±25% jitter is applied by the activity's next-retry delay). */
export const DEFAULT_RETRY: TaskRetryPolicy = {
  maximumAttempts: 3,
  initialIntervalMs: 1_000,
  maximumIntervalMs: 60_000,
};
/** Quick reads answer a waiting caller: the same tries, but never a minute apart. */
export const QUICK_READ_RETRY: TaskRetryPolicy = {
  maximumAttempts: 3,
  initialIntervalMs: 1_000,
  maximumIntervalMs: 10_000,
};

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

function spec(
  name: string,
  domain: TaskSpec['domain'],
  mutating: boolean,
  async: boolean,
  pushNotifications: boolean,
  defaultBudgetMs: number,
): TaskSpec {
  const quickRead = !mutating && !async;
  return {
    name,
    domain,
    mutating,
    async,
    pushNotifications,
    defaultBudgetMs,
    retry: quickRead ? QUICK_READ_RETRY : DEFAULT_RETRY,
  };
}

/** Budgets from the reference's OPERATION_TIMEOUTS: create 24 h, update 12 h, creative review 48 h. */
export const TASK_CATALOG: Readonly<Record<string, TaskSpec>> = Object.fromEntries(
  [
    spec('get_adcp_capabilities', 'protocol', false, false, false, 5 * MINUTE),
    spec('get_products', 'media-buy', false, true, false, HOUR),
    spec('list_creative_formats', 'media-buy', false, false, false, 5 * MINUTE),
    spec('create_media_buy', 'media-buy', true, true, true, 24 * HOUR),
    spec('update_media_buy', 'media-buy', true, true, true, 12 * HOUR),
    spec('get_media_buys', 'media-buy', false, false, false, 5 * MINUTE),
    spec('get_media_buy_delivery', 'media-buy', false, true, false, HOUR),
    spec('provide_performance_feedback', 'media-buy', true, false, false, 5 * MINUTE),
    spec('sync_catalogs', 'media-buy', true, true, true, 24 * HOUR),
    spec('sync_event_sources', 'media-buy', true, false, false, 5 * MINUTE),
    spec('log_event', 'media-buy', true, false, false, 5 * MINUTE),
    spec('sync_audiences', 'media-buy', true, true, true, 24 * HOUR),
    spec('sync_creatives', 'creative', true, true, true, 48 * HOUR),
    spec('list_creatives', 'creative', false, false, false, 5 * MINUTE),
    spec('build_creative', 'creative', true, true, false, 24 * HOUR),
    spec('preview_creative', 'creative', false, false, false, 5 * MINUTE),
    // Creative reads (adcp-protocol.md §8.1: sync).
    spec('get_creative_delivery', 'creative', false, false, false, 5 * MINUTE),
    spec('get_creative_features', 'creative', false, false, false, 5 * MINUTE),
    spec('get_signals', 'signals', false, true, false, HOUR),
    spec('activate_signal', 'signals', true, true, true, 24 * HOUR),
    spec('sync_accounts', 'accounts', true, true, true, 48 * HOUR),
    spec('list_accounts', 'accounts', false, false, false, 5 * MINUTE),
    spec('get_account_financials', 'accounts', false, false, false, 5 * MINUTE),
    spec('report_usage', 'accounts', true, false, false, 5 * MINUTE),
    spec('acquire_rights', 'brand', true, true, true, 48 * HOUR),
    spec('update_rights', 'brand', true, true, true, 48 * HOUR),
    // Campaign governance (experimental in 3.x): a check may go to human review (async), so it waits like a create.
    spec('sync_plans', 'governance', true, false, false, 5 * MINUTE),
    spec('check_governance', 'governance', false, true, false, 24 * HOUR),
    spec('report_plan_outcome', 'governance', true, false, false, 5 * MINUTE),
  ].map((task) => [task.name, task]),
);

/** Task names are tool names: lower snake case, as the catalog spells them. */
export const TASK_NAME_PATTERN = /^[a-z][a-z0-9_]{1,63}$/;

/**
 * The spec for a task. A task the catalog does not know is treated as mutating and async, the safe
 * assumptions: an unneeded idempotency_key is ignored by sellers, a missing one can duplicate a buy.
 */
export function taskSpec(name: string): TaskSpec {
  return TASK_CATALOG[name] ?? unknownTaskSpec(name);
}

/** How a task the catalog does not list runs (see taskSpec). */
function unknownTaskSpec(name: string): TaskSpec {
  return spec(name, 'media-buy', true, true, false, 24 * HOUR);
}

export function isKnownTask(name: string): boolean {
  return name in TASK_CATALOG;
}
