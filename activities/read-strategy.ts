/**
 * How to read a seller's task, learned per seller. Sellers differ: AdCP 3.0 has the `tasks/get` tool,
 * 3.1 renamed it `get_task_status`, some sellers name it `get_task` or only offer a list, some serve MCP's own Tasks,
 * and for a create_media_buy whose buy is known the resource itself (`get_media_buys`) tells whether the create
 * completed. A seller without `tasks/get` must not fail every polled operation ("Unknown tool: tasks/get").
 *
 * Order: MCP Tasks first for a task the call itself said is an MCP task (certain, whatever the seller's description
 * says: a failed tools/list is cached as no description for 10 minutes), then the method that worked last time, then
 * the AdCP names, the list, MCP Tasks, the resource read; a method the seller does not offer is skipped. What it
 * offers comes from its stored capabilities (the seller-capabilities workflow's answer, read through a per-process
 * cache: activities/stored-capabilities.ts), so no call is spent on learning it, and a 3.1 seller is read by `get_task_status` before `tasks/get`; without stored capabilities, from
 * its tools/list (cached per seller per process). When every method the stored capabilities name fails as missing
 * (they are stale), the read probes as without them. A missing method is never a failed task: when nothing works
 * the outcome is `unreadable`, and the operation keeps its deadline, webhooks and reconciliation. Free of Temporal
 * so it is tested with a fake SellerClient.
 */
import {
  type AdcpError,
  type RequestShaping,
  type ShapingRecord,
  type TaskRecordAdapterName,
  describeError,
  refusedField,
  refusesAField,
  taskRecordAdapterForTools,
} from '../protocol';
import { type SellerCapabilities, storedReadMethods } from '../protocol/capabilities';
import type { StoredCapabilitiesLookup } from './stored-capabilities';
import type { ReadMethod, ReadTaskOutcome } from '../contract/activities';
import { type CallContext, type SellerClient, type SellerDescription, isUnknownToolError } from './seller-client';

export const MCP_READ_ORDER: readonly Exclude<ReadMethod, 'none'>[] = [
  'tasks/get',
  'get_task_status',
  'get_task',
  'list_tasks',
  'mcp-tasks',
  'get_media_buys',
];
export const A2A_READ_ORDER: readonly Exclude<ReadMethod, 'none'>[] = ['a2a-native', 'a2a-skill', 'get_media_buys'];

/** Codes meaning "the seller cannot see this task now" (account scoping, expiry, another tenant): not a failure. */
const NOT_FOUND_CODES = new Set([
  'REFERENCE_NOT_FOUND',
  'TASK_NOT_FOUND',
  'MEDIA_BUY_NOT_FOUND',
  'RESOURCE_NOT_FOUND',
  'NOT_FOUND',
]);
/** Codes meaning "this read method does not exist here". */
const MISSING_METHOD_CODES = new Set([
  'UNSUPPORTED_FEATURE',
  'TRANSPORT_RPC_METHOD_NOT_FOUND',
  'METHOD_NOT_FOUND',
  'TOOL_NOT_FOUND',
]);

/** The seller refused the read for now (rate limit, overload, IDEMPOTENCY_IN_FLIGHT): retry as it asked. */
export class SellerRefusedReadForNow extends Error {
  override readonly name = 'SellerRefusedReadForNow';
  constructor(readonly error: AdcpError) {
    super(describeError(error));
  }
}

export interface ReadRequest {
  task: string;
  taskId: string;
  contextId?: string;
  account?: unknown;
  mediaBuyId?: string;
  readMethod?: ReadMethod;
  /** `taskId` is an MCP task's, as the call that created it said: MCP `tasks/get` reads it, whatever is described. */
  mcpTask?: boolean;
  /** How the seller's task records speak, as an earlier read learned it. */
  taskRecordAdapter?: TaskRecordAdapterName;
  /** Fields this seller's reads leave out, by tool. */
  requestShaping?: RequestShaping;
}

/** The tool a read method calls, for request shaping (the list read calls the seller's list tool). */
function toolOf(method: Exclude<ReadMethod, 'none'>, listTool: string | undefined): string {
  if (method === 'list_tasks') return listTool ?? 'list_tasks';
  if (method === 'a2a-skill' || method === 'a2a-native' || method === 'mcp-tasks') return 'tasks/get';
  return method;
}

/** Tool lists per seller URL, kept for a while: one tools/list per seller per 10 minutes, not one per read. */
export class SellerDescriptionCache {
  private readonly entries = new Map<string, { at: number; description: SellerDescription | undefined }>();
  constructor(
    private readonly ttlMs = 10 * 60_000,
    private readonly now: () => number = Date.now,
    /** The sellers' stored capabilities; without it (or for a seller with none) reads probe. */
    private readonly capabilities?: StoredCapabilitiesLookup,
  ) {}

  async get(seller: SellerClient, context: CallContext): Promise<SellerDescription | undefined> {
    const key = context.agent.url;
    const cached = this.entries.get(key);
    if (cached && this.now() - cached.at < this.ttlMs) return cached.description;
    let description: SellerDescription | undefined;
    try {
      description = await seller.describe(context);
    } catch (error) {
      if (context.signal.aborted) throw error;
      description = undefined; // a seller that will not list its tools is read by trying
    }
    this.entries.set(key, { at: this.now(), description });
    return description;
  }

  /**
   * What the seller's stored capabilities say it offers for reads, as a description (its tasks and read tools)
   * with the read methods in the order to try them; undefined when nothing usable is stored.
   */
  async stored(
    sellerId: string,
  ): Promise<
    { description: SellerDescription; order: Exclude<ReadMethod, 'none'>[]; wireVersion: string } | undefined
  > {
    if (!this.capabilities) return undefined;
    let capabilities: SellerCapabilities | undefined;
    try {
      capabilities = await this.capabilities.get(sellerId);
    } catch {
      return undefined;
    }
    const methods = storedReadMethods(capabilities);
    if (!capabilities || !methods || methods.length === 0) return undefined;
    const order = [
      ...new Set(
        methods.map((method) => (method === 'tasks/list' ? 'list_tasks' : method) as Exclude<ReadMethod, 'none'>),
      ),
    ];
    const readTools = capabilities.readMethods.filter((method) => method !== 'mcp-tasks');
    return {
      description: {
        tools: [...new Set([...capabilities.tasks, ...readTools])],
        mcpTasks: capabilities.readMethods.includes('mcp-tasks'),
      },
      order,
      wireVersion: capabilities.wireVersion,
    };
  }
}

function listToolOf(description: SellerDescription | undefined): string | undefined {
  if (!description) return 'list_tasks';
  if (description.tools.includes('list_tasks')) return 'list_tasks';
  if (description.tools.includes('tasks/list')) return 'tasks/list';
  return undefined;
}

/** Whether `method` can be tried at this seller for this task, given what it lists (undefined: it did not say). */
export function methodAvailable(
  method: ReadMethod,
  request: ReadRequest,
  description: SellerDescription | undefined,
): boolean {
  switch (method) {
    case 'tasks/get':
    case 'get_task_status':
    case 'get_task':
      return !description || description.tools.includes(method);
    case 'list_tasks':
      return listToolOf(description) !== undefined;
    case 'mcp-tasks':
      return request.mcpTask === true || description?.mcpTasks === true;
    case 'get_media_buys':
      // A buy that exists says its create completed; it says nothing about an update or a cancel.
      return (
        !!request.mediaBuyId &&
        request.task === 'create_media_buy' &&
        (!description || description.tools.includes('get_media_buys'))
      );
    case 'a2a-native':
    case 'a2a-skill':
      return true;
    case 'none':
      return false;
  }
}

function isNotFound(error: AdcpError | undefined): boolean {
  if (!error) return false;
  return NOT_FOUND_CODES.has(error.code.toUpperCase()) || /\b(task|reference)\b.*\bnot found\b/i.test(error.message);
}

function isMissingMethod(error: AdcpError | undefined): boolean {
  if (!error) return false;
  // A refusal that names a field of the read is about the request, not about the method existing.
  if (refusesAField(error)) return false;
  return MISSING_METHOD_CODES.has(error.code.toUpperCase()) || isUnknownToolError(`${error.code} ${error.message}`);
}

/**
 * One read of a task by the first method that works. Throws only what a retry may fix (transport failures, the
 * seller refusing for now); a read method that is missing, or a task the seller cannot see, is an `unreadable`.
 */
export async function readTaskWithStrategy(
  seller: SellerClient,
  context: CallContext,
  request: ReadRequest,
  descriptions: SellerDescriptionCache,
): Promise<ReadTaskOutcome> {
  const order = context.agent.protocol === 'mcp' ? MCP_READ_ORDER : A2A_READ_ORDER;
  let description: SellerDescription | undefined;
  let described = false;
  /** The description came from stored capabilities (not a tools/list): their methods failing means probe. */
  let fromStore = false;
  const tried: string[] = [];
  let notFound: { method: ReadMethod; error: AdcpError } | undefined;
  let refused: { method: ReadMethod; error: AdcpError } | undefined;

  const start =
    request.readMethod && request.readMethod !== 'none' && order.includes(request.readMethod)
      ? request.readMethod
      : undefined;
  /** An MCP task the call named as one: MCP tasks/get is certain, so it goes first, before any description. */
  const mcpTask = request.mcpTask === true && order.includes('mcp-tasks');
  const first = [...new Set([...(mcpTask ? (['mcp-tasks'] as const) : []), ...(start ? [start] : [])])];
  let candidates: Exclude<ReadMethod, 'none'>[] = [...first, ...order.filter((method) => !first.includes(method))];
  /** Tried as they are, without asking what the seller offers first (what worked last time, a certain MCP task). */
  const known = (method: Exclude<ReadMethod, 'none'>): boolean =>
    (method === start && method !== 'list_tasks') || (mcpTask && method === 'mcp-tasks');

  /** What the seller offers, stored or listed: learned once, before the first method that needs it. */
  async function describeSeller(): Promise<void> {
    described = true;
    if (context.agent.protocol !== 'mcp') return;
    const stored = await descriptions.stored(context.agent.id);
    if (stored) {
      description = stored.description;
      fromStore = true;
      // The stored order (3.1 names first for a 3.1 seller) for what is still to try; the rest after it.
      const rest = candidates.filter((method) => !stored.order.includes(method));
      candidates = [...stored.order.filter((method) => candidates.includes(method)), ...rest];
      return;
    }
    description = await descriptions.get(seller, context);
  }

  const shaping: ShapingRecord[] = [];
  /** The adapter a method's answer is read with: what the operation learned, else what the seller's tools imply. */
  const adapterFor = (): TaskRecordAdapterName | undefined =>
    request.taskRecordAdapter ?? (description ? taskRecordAdapterForTools(description.tools) : undefined);
  /** What a read's outcome adds: the adapter it used or learned (when not AdCP's), the fields it left out. */
  const extras = (adapter: TaskRecordAdapterName | undefined) => ({
    ...(adapter && adapter !== 'adcp' ? { taskRecordAdapter: adapter } : {}),
    ...(shaping.length > 0 ? { shaping: [...shaping] } : {}),
  });

  async function tryMethods(): Promise<ReadTaskOutcome | undefined> {
    for (let index = 0; index < candidates.length; index++) {
      const method = candidates[index];
      if (tried.includes(method)) continue;
      // What worked last time is tried before asking what the seller offers: the usual poll costs one call.
      if (!known(method) && !described) {
        const before = candidates;
        await describeSeller();
        if (candidates !== before) {
          index = -1; // the order changed: walk it again from the top (tried methods are skipped)
          continue;
        }
      }
      const worked = method === start && method !== 'get_media_buys' && method !== 'list_tasks';
      if (!worked && !methodAvailable(method, request, description)) continue;
      tried.push(method);
      const tool = toolOf(method, listToolOf(description));
      const omitted = [
        ...(request.requestShaping?.[tool] ?? []),
        ...shaping.filter((r) => r.tool === tool).map((r) => r.omitted),
      ];
      let answer;
      let account = omitted.includes('account') ? undefined : request.account;
      for (;;) {
        try {
          answer = await seller.readTask({
            ...context,
            method,
            task: request.task,
            taskId: request.taskId,
            ...(request.contextId ? { contextId: request.contextId } : {}),
            ...(account !== undefined ? { account } : {}),
            ...(request.mediaBuyId ? { mediaBuyId: request.mediaBuyId } : {}),
            ...(method === 'list_tasks' ? { listTool: listToolOf(description) } : {}),
            ...(adapterFor() ? { taskRecordAdapter: adapterFor() } : {}),
          });
        } catch (error) {
          if (context.signal.aborted || !isUnknownToolError(error)) throw error;
          answer = undefined; // the seller has no such method (JSON-RPC -32601 and the like)
          break;
        }
        // The seller refused the read for its account (a field it does not take): read again without it, once.
        const refusal = answer.callError ? answer.snapshot.errors?.[0] : undefined;
        const refused = refusal && account !== undefined ? refusedField(refusal, tool, { account }) : undefined;
        if (!refused) break;
        shaping.push({ tool, omitted: refused.field, because: refused.because, at: new Date().toISOString() });
        account = undefined;
      }
      if (!answer) continue;
      if (!answer.callError) {
        if (method === 'get_media_buys' && request.mediaBuyId && answer.snapshot.result) {
          // The buy itself: what it is, never a task observation (its shape is not the create's answer).
          return {
            snapshot: answer.snapshot,
            readMethod: method,
            resource: { mediaBuyId: request.mediaBuyId, row: answer.snapshot.result },
            ...extras(undefined),
          };
        }
        return { snapshot: answer.snapshot, readMethod: method, ...extras(answer.taskRecordAdapter ?? adapterFor()) };
      }
      const error = answer.snapshot.errors?.[0] ?? {
        code: 'READ_REFUSED',
        message: answer.snapshot.message ?? 'The seller refused the read.',
        recovery: 'terminal' as const,
      };
      if (isMissingMethod(error)) continue;
      if (isNotFound(error)) {
        notFound ??= { method, error };
        continue;
      }
      if (error.recovery === 'transient') throw new SellerRefusedReadForNow(error);
      refused ??= { method, error }; // access, validation of our read: another method may still work
    }
    return undefined;
  }

  const read = await tryMethods();
  if (read) return read;
  if (fromStore && !notFound && !refused) {
    // Every method the stored capabilities name is missing at the seller: they are stale. Probe as without them.
    description = await descriptions.get(seller, context);
    fromStore = false;
    const probed = await tryMethods();
    if (probed) return probed;
  }
  if (notFound) return { readMethod: notFound.method, unreadable: notFound.error, ...extras(undefined) };
  if (refused) return { readMethod: refused.method, unreadable: refused.error, ...extras(undefined) };
  return {
    ...extras(undefined),
    readMethod: 'none',
    unreadable: {
      code: 'TASK_UNREADABLE',
      message: `${context.agent.id} offers no way to read task ${request.taskId} (tried: ${tried.join(', ') || 'nothing it lists'}); the operation relies on webhooks, its deadline and reconciliation.`,
      recovery: 'terminal',
      details: { tried },
    },
  };
}
