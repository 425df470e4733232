/**
 * A seller's `get_adcp_capabilities` answer as the orchestrator uses it: which AdCP versions it speaks, which tasks
 * and read methods it offers, its reporting, its idempotency replay window and its account model. Pure: the
 * capabilities activity parses with it, the seller-capabilities workflow keeps the result, and the gateway decides
 * with `supportsTask` whether a task may be started at all (refused before any call is made).
 */
import { isKnownTask } from './tasks';
import { asRecord } from './records';

/** The read methods of contract/activities.ts that a tool list can show (the others need a call to learn). */
const READ_TOOLS = ['tasks/get', 'get_task_status', 'get_task', 'list_tasks', 'tasks/list'] as const;

/** Tasks each AdCP protocol domain implies, where the seller's own tool list is not known (A2A, no tools/list). */
export const TASKS_BY_PROTOCOL: Readonly<Record<string, readonly string[]>> = {
  media_buy: [
    'get_products',
    'list_creative_formats',
    'create_media_buy',
    'update_media_buy',
    'get_media_buys',
    'get_media_buy_delivery',
    'provide_performance_feedback',
    'sync_creatives',
    'list_creatives',
  ],
  creative: ['list_creative_formats', 'build_creative', 'preview_creative', 'sync_creatives', 'list_creatives'],
  signals: ['get_signals', 'activate_signal'],
  governance: [],
  brand: ['acquire_rights', 'update_rights'],
};

export type WireVersion = '3.1' | '3.0' | 'rc.2';

export interface SellerCapabilities {
  /** Release-precision versions (`3.0`, `3.1`) or majors (`3`) as the seller declared them. */
  adcpVersions: string[];
  /** The newest version both sides speak (what calls should be shaped for). */
  wireVersion: WireVersion;
  supportedProtocols: string[];
  specialisms: string[];
  /** The tasks the seller offers: its tool list where known, else what its protocols imply. */
  tasks: string[];
  /** Where `tasks` came from: the seller's tools/list, or its declared protocols. */
  tasksSource: 'tools' | 'protocols';
  /** How its tasks can be read (from the tool list; `mcp-tasks` when it advertises MCP Tasks). */
  readMethods: string[];
  reporting: {
    /** Reporting webhooks (`reporting_webhook` on create_media_buy): every 3.x media-buy seller, unless it says otherwise. */
    webhooks: boolean;
    deliveryMethods: string[];
    frequencies: string[];
    metrics: string[];
  };
  idempotency: { supported: boolean; replayTtlSeconds?: number };
  account: {
    requireOperatorAuth?: boolean;
    supportedBilling: string[];
    requiredForProducts?: boolean;
    sandbox?: boolean;
  };
  supportsProposals?: boolean;
  supportedPricingModels: string[];
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

function bool(value: unknown): boolean | undefined {
  return typeof value === 'boolean' ? value : undefined;
}

/**
 * Parses the answer (the task's result object) with the seller's tool list when the transport gave one. Tolerant:
 * a field the seller left out is absent or empty, never an error; `configuredVersion` is the agents file's
 * `adcp_version` (rc.2 sellers predate the `adcp` block).
 */
export function parseCapabilities(
  raw: unknown,
  options: { tools?: string[]; mcpTasks?: boolean; configuredVersion?: '3' | 'rc.2' } = {},
): SellerCapabilities {
  const answer = asRecord(raw) ?? {};
  const adcp = asRecord(answer.adcp) ?? {};
  const mediaBuy = asRecord(answer.media_buy) ?? {};
  const account = asRecord(answer.account) ?? {};
  const idempotency = asRecord(adcp.idempotency) ?? {};
  const supportedVersions = strings(adcp.supported_versions);
  const majors = Array.isArray(adcp.major_versions)
    ? adcp.major_versions.filter((item): item is number => typeof item === 'number').map(String)
    : [];
  const adcpVersions = supportedVersions.length > 0 ? supportedVersions : majors;
  const wireVersion: WireVersion =
    options.configuredVersion === 'rc.2'
      ? 'rc.2'
      : adcpVersions.some((version) => version.startsWith('3.1'))
        ? '3.1'
        : '3.0';
  const supportedProtocols = strings(answer.supported_protocols);
  const tools = options.tools;
  let tasks: string[];
  let tasksSource: SellerCapabilities['tasksSource'];
  if (tools && tools.length > 0) {
    tasks = tools.filter((tool) => isKnownTask(tool) || !tool.includes('/'));
    tasksSource = 'tools';
  } else {
    tasks = ['get_adcp_capabilities', ...supportedProtocols.flatMap((protocol) => TASKS_BY_PROTOCOL[protocol] ?? [])];
    tasksSource = 'protocols';
  }
  const readMethods = tools ? READ_TOOLS.filter((tool) => tools.includes(tool)).map(String) : [];
  if (options.mcpTasks) readMethods.push('mcp-tasks');
  if (tasks.includes('get_media_buys')) readMethods.push('get_media_buys');
  const reportingCapabilities = asRecord(mediaBuy.reporting) ?? asRecord(mediaBuy.reporting_capabilities) ?? {};
  const deliveryMethods = strings(mediaBuy.reporting_delivery_methods);
  const replayTtl = idempotency.replay_ttl_seconds;
  return {
    adcpVersions,
    wireVersion,
    supportedProtocols,
    specialisms: strings(answer.specialisms),
    tasks: [...new Set(tasks)].sort(),
    tasksSource,
    readMethods: [...new Set(readMethods)],
    reporting: {
      webhooks:
        bool(reportingCapabilities.supports_webhooks) ??
        (deliveryMethods.length > 0 ? deliveryMethods.includes('webhook') : supportedProtocols.includes('media_buy')),
      deliveryMethods,
      frequencies: strings(reportingCapabilities.available_reporting_frequencies),
      metrics: strings(reportingCapabilities.available_metrics),
    },
    idempotency: {
      supported: bool(idempotency.supported) ?? false,
      ...(typeof replayTtl === 'number' ? { replayTtlSeconds: replayTtl } : {}),
    },
    account: {
      ...(bool(account.require_operator_auth) !== undefined
        ? { requireOperatorAuth: bool(account.require_operator_auth) }
        : {}),
      supportedBilling: strings(account.supported_billing),
      ...(bool(account.required_for_products) !== undefined
        ? { requiredForProducts: bool(account.required_for_products) }
        : {}),
      ...(bool(account.sandbox) !== undefined ? { sandbox: bool(account.sandbox) } : {}),
    },
    ...(bool(mediaBuy.supports_proposals) !== undefined
      ? { supportsProposals: bool(mediaBuy.supports_proposals) }
      : {}),
    supportedPricingModels: strings(mediaBuy.supported_pricing_models),
  };
}

export type TaskSupport = { supported: true } | { supported: false; reason: string };

/**
 * Whether a task may be sent to the seller. Unknown capabilities (never fetched, or the fetch failed) allow
 * everything: refusing needs a positive answer that the seller lacks the task.
 */
export function supportsTask(capabilities: SellerCapabilities | undefined, task: string): TaskSupport {
  if (!capabilities) return { supported: true };
  if (task === 'get_adcp_capabilities') return { supported: true };
  if (capabilities.tasks.includes(task)) return { supported: true };
  return {
    supported: false,
    reason:
      capabilities.tasksSource === 'tools'
        ? `The seller's tool list does not offer ${task} (it offers ${capabilities.tasks.join(', ') || 'nothing'}).`
        : `The seller declares the protocols ${capabilities.supportedProtocols.join(', ') || '(none)'}, none of which has ${task}.`,
  };
}

const WIRE_VERSIONS: readonly WireVersion[] = ['3.1', '3.0', 'rc.2'];

/**
 * Stored capabilities read back from the capabilities workflow's memo, checked for the fields calls rely on (the
 * wire version and the read methods); anything else is undefined, and the call goes on as if nothing were stored.
 */
export function storedCapabilitiesOf(value: unknown): SellerCapabilities | undefined {
  const record = asRecord(value);
  if (!record) return undefined;
  if (!WIRE_VERSIONS.includes(record.wireVersion as WireVersion)) return undefined;
  const stringList = (item: unknown) => Array.isArray(item) && item.every((entry) => typeof entry === 'string');
  if (!stringList(record.readMethods) || !stringList(record.tasks)) return undefined;
  if (record.tasksSource !== 'tools' && record.tasksSource !== 'protocols') return undefined;
  return record as unknown as SellerCapabilities;
}

/**
 * The version @adcp/sdk shapes a call's envelope for (its `adcpVersion` option): `3.1` for a 3.1 seller, which then
 * gets `adcp_version: "3.1"` beside `adcp_major_version: 3`; undefined (the SDK's 3.0 default, the integer only)
 * for 3.0 sellers, rc.2 sellers (configured, shaped by the call plan) and unknown capabilities.
 */
export function sdkAdcpVersionFor(capabilities: SellerCapabilities | undefined): string | undefined {
  return capabilities?.wireVersion === '3.1' ? '3.1' : undefined;
}

/**
 * The read methods the stored capabilities say the seller offers, in the order to try them: the 3.1 name
 * (`get_task_status`) before the 3.0 one for a 3.1 seller, else the 3.0 name first. Undefined when the stored
 * answer cannot tell (its tool list was not known): then the reads probe, as without capabilities.
 */
export function storedReadMethods(capabilities: SellerCapabilities | undefined): string[] | undefined {
  if (!capabilities || capabilities.tasksSource !== 'tools') return undefined;
  const preferred =
    capabilities.wireVersion === '3.1'
      ? ['get_task_status', 'tasks/get', 'get_task', 'list_tasks', 'tasks/list', 'mcp-tasks', 'get_media_buys']
      : ['tasks/get', 'get_task_status', 'get_task', 'list_tasks', 'tasks/list', 'mcp-tasks', 'get_media_buys'];
  return preferred.filter((method) => capabilities.readMethods.includes(method));
}
