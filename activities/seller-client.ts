import { JsonRpcTransport } from '@a2a-js/sdk/client';
import { ProtocolClient } from '@adcp/sdk/advanced';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { SellerConfig } from '../config/sellers';
import {
  type TaskRecordAdapterName,
  type TaskSnapshot,
  ProtocolViolation,
  TASK_RECORD_ADAPTERS,
  learnTaskRecordAdapter,
  mapTaskWord,
  readTaskRecord,
  snapshotFromMediaBuy,
  snapshotFromA2A,
  snapshotFromMcpToolResult,
  taskObjectsOf,
} from '../protocol';
import { withAbortSignal } from './abortable-fetch';
import type { ReadMethod } from '../contract/activities';
import { withMcpConnection } from './mcp-connection';
import { asRecord } from '../protocol/records';
import { anySignal } from './linked-signal';

/** One protocol call to one seller; the only place that speaks MCP or A2A. Each method makes exactly one call. */
export interface SellerClient {
  callTask(request: TaskCallRequest): Promise<SellerAnswer>;
  getTask(request: TaskLookupRequest): Promise<TaskSnapshot>;
  /** Tell the seller to cancel, where the protocol has a way to (A2A tasks/cancel). */
  cancelTask(request: TaskLookupRequest): Promise<{ notified: boolean; note: string }>;
  /** One page of the seller's AdCP `tasks/list` (reconciliation), or of the list tool named `tool`. */
  listTasks(request: TaskListRequest): Promise<TaskListPage>;
  /** What the seller offers for reading tasks (MCP tools/list and capabilities); undefined where it cannot tell. */
  describe(request: CallContext): Promise<SellerDescription | undefined>;
  /** One read of a task by one method; `callError` when the read call itself was refused. */
  readTask(request: TaskReadRequest): Promise<SellerAnswer>;
}

export interface SellerDescription {
  tools: string[];
  /** The MCP server advertises MCP Tasks (capabilities.tasks). */
  mcpTasks: boolean;
}

/**
 * The same client with the methods in `overrides` replaced: every other method (and any added later) is the wrapped
 * client's own, bound to it.
 */
export function withSellerOverrides(seller: SellerClient, overrides: Partial<SellerClient>): SellerClient {
  return new Proxy(seller, {
    get(target, property) {
      if (typeof property === 'string' && Object.hasOwn(overrides, property))
        return overrides[property as keyof SellerClient];
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

export interface TaskReadRequest extends CallContext {
  method: Exclude<ReadMethod, 'none'>;
  task: string;
  taskId: string;
  contextId?: string;
  account?: unknown;
  mediaBuyId?: string;
  /** For `list_tasks`: the tool name the seller uses (`list_tasks`, `tasks/list`). */
  listTool?: string;
  /** How this seller's task records speak (its words, where the result lives); AdCP's when absent. */
  taskRecordAdapter?: TaskRecordAdapterName;
}

export interface TaskListRequest extends CallContext {
  filters: Record<string, unknown>;
  /** The list tool to call; `tasks/list` (AdCP) when absent. */
  tool?: string;
  account?: unknown;
  cursor?: string;
  maxResults?: number;
  /** `{ field, direction }` (AdCP's sort); the seller's default order when absent. */
  sort?: Record<string, unknown>;
}

export interface SellerTaskSummary {
  taskId: string;
  taskType?: string;
  status: string;
  contextId?: string;
  createdAt?: string;
  updatedAt?: string;
}

export interface TaskListPage {
  tasks: SellerTaskSummary[];
  /** The rows as the seller sent them (a list read keeps a row's result, when it has one). */
  rows?: Record<string, unknown>[];
  nextCursor?: string;
  /** false when the seller has no tasks/list (the call was refused as an unknown tool). */
  supported: boolean;
  /** The filters the seller says it applied (`query_summary.filters_applied`), when it says. */
  filtersApplied?: string[];
}

export interface CallContext {
  agent: SellerConfig;
  token?: string;
  /** This call's own signal (activity cancellation, hard timeout). Never shared with another call. */
  signal: AbortSignal;
  /** Bound of each MCP request in the call; the signal bounds the whole call. Default 60 s. */
  timeoutMs?: number;
  /** The AdCP version @adcp/sdk shapes the envelope for (`3.1`, from stored capabilities: stored-capabilities.ts). */
  adcpVersion?: string;
}

export interface TaskCallRequest extends CallContext {
  task: string;
  args: Record<string, unknown>;
  contextId?: string;
  taskId?: string;
  /** A2A puts push config in the JSON-RPC configuration, not in the skill parameters. */
  pushNotificationConfig?: Record<string, unknown>;
}

export interface TaskLookupRequest extends CallContext {
  taskId: string;
  contextId?: string;
}

/**
 * A seller's answer to a task call. `callError` marks answers where the call itself was refused (MCP isError,
 * an error envelope without a task) rather than a task that reached `failed`: only those may be retried.
 */
export interface SellerAnswer {
  snapshot: TaskSnapshot;
  callError: boolean;
  /** The AdCP object as the seller sent it (MCP structuredContent), for the schema check; absent for A2A. */
  body?: Record<string, unknown>;
  /** A task read: the task-record adapter it was read with (learned from the body: protocol/task-records.ts). */
  taskRecordAdapter?: TaskRecordAdapterName;
  /**
   * A call: the answer's task id is the id of an MCP task (MCP Tasks) that this call created and stopped waiting on
   * before its result (its stream was cut at the answer window, or the MCP SDK timed out on it): MCP `tasks/get`
   * reads it for certain, whatever the seller's description says.
   */
  mcpTaskId?: string;
}

function sdkAgent(agent: SellerConfig, token: string | undefined) {
  return {
    id: agent.id,
    name: agent.name ?? agent.id,
    agent_uri: agent.url,
    protocol: agent.protocol,
    ...(token ? { auth_token: token } : {}),
  };
}

/** A2A sellers (by URL) whose AdCP tasks are read through the `tasks/get` skill, not A2A's native tasks/get. */
const a2aSkillPolling = new Set<string>();

type SdkAgent = Parameters<typeof ProtocolClient.callTool>[0];
type SdkCallOptions = NonNullable<Parameters<typeof ProtocolClient.callTool>[3]>;

/**
 * One AdCP tool call through @adcp/sdk (version envelope, MCP Tasks handling), on a connection of this call alone:
 * MCP goes through the SDK's in-process path with a connection leased to this call (activities/mcp-connection.ts), so the
 * SDK's shared connection cache is never used. A2A keeps the SDK's transport, with the call's signal on its fetches.
 */
async function sdkCallTool(
  context: CallContext,
  tool: string,
  args: Record<string, unknown>,
  options: SdkCallOptions = {},
  a2aPushNotificationConfig?: Record<string, unknown>,
  onMcpTaskUnfinished?: (taskId: string) => void,
): Promise<unknown> {
  const { agent, token, signal } = context;
  if (context.adcpVersion) options = { ...options, adcpVersion: context.adcpVersion };
  if (agent.protocol === 'mcp') {
    return withMcpConnection(
      {
        url: agent.url,
        token,
        signal,
        requestTimeoutMs: context.timeoutMs ?? 60_000,
        ...(onMcpTaskUnfinished ? { onMcpTaskUnfinished } : {}),
      },
      (client) =>
        ProtocolClient.callTool(
          { ...sdkAgent(agent, token), _inProcessMcpClient: client } as SdkAgent,
          tool,
          args,
          options,
        ),
    );
  }
  return withAbortSignal(
    signal,
    () => ProtocolClient.callTool(sdkAgent(agent, token) as SdkAgent, tool, args, options),
    a2aPushNotificationConfig ? { a2aPushNotificationConfig } : {},
  );
}

/**
 * A2A's `configuration.pushNotificationConfig` as AdCP means it: the URL, and an `authentication` block only when the
 * seller's scheme is legacy HMAC or Bearer (with its credential). Without the block the seller signs with RFC 9421.
 */
export function a2aPushNotificationConfig(config: Record<string, unknown>): Record<string, unknown> {
  const authentication = asRecord(config.authentication);
  return {
    url: config.url,
    ...(typeof config.token === 'string' ? { token: config.token } : {}),
    ...(authentication && typeof authentication.credentials === 'string' ? { authentication } : {}),
  };
}

/** Runs `work` on a per-call MCP connection (tools/list, MCP Tasks). */
function onMcpConnection<T>(context: CallContext, work: (client: Client) => Promise<T>): Promise<T> {
  return withMcpConnection(
    {
      url: context.agent.url,
      token: context.token,
      signal: context.signal,
      requestTimeoutMs: context.timeoutMs ?? 60_000,
    },
    work,
  );
}

async function a2aSkillGet(context: CallContext, taskId: string): Promise<TaskSnapshot> {
  const raw = await sdkCallTool(context, 'tasks/get', { task_id: taskId, include_result: true });
  return snapshotFromA2A(raw);
}

/** The JSON-RPC endpoint of an A2A agent, read from its agent card (cached per URL). */
const a2aEndpoints = new Map<string, string>();
async function a2aEndpoint(agent: SellerConfig, signal: AbortSignal): Promise<string> {
  const cached = a2aEndpoints.get(agent.url);
  if (cached) return cached;
  const base = agent.url.replace(/\/+$/, '');
  for (const path of ['/.well-known/agent-card.json', '/.well-known/agent.json']) {
    const response = await fetch(`${base}${path}`, { signal });
    if (!response.ok) continue;
    const card = asRecord(await response.json());
    if (card && typeof card.url === 'string') {
      a2aEndpoints.set(agent.url, card.url);
      return card.url;
    }
  }
  throw new ProtocolViolation(`No A2A agent card with a url at ${base}/.well-known/agent-card.json.`);
}

function a2aTransport(endpoint: string, token: string | undefined, signal: AbortSignal): JsonRpcTransport {
  const authFetch: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if (token) {
      headers.set('authorization', `Bearer ${token}`);
      headers.set('x-adcp-auth', token);
    }
    return fetch(input, { ...init, headers, signal: init?.signal ? anySignal([init.signal, signal]) : signal });
  };
  return new JsonRpcTransport({ endpoint, fetchImpl: authFetch });
}

function mcpCallError(raw: unknown): boolean {
  const result = asRecord(raw);
  if (!result) return false;
  if (result.isError === true) return true;
  const body = asRecord(result.structuredContent);
  return (
    !!body &&
    body.status === undefined &&
    (asRecord(body.adcp_error) !== undefined || typeof body.error_code === 'string')
  );
}

/** An MCP/A2A answer saying the tool does not exist (an optional task such as tasks/list). */
export function isUnknownToolError(error: unknown): boolean {
  const text =
    error instanceof Error ? `${error.message} ${String((error as { cause?: unknown }).cause ?? '')}` : String(error);
  return /unknown tool|tool .* not found|-32601|method not found|UNSUPPORTED_FEATURE/i.test(text);
}

/** A tasks/list answer, read defensively: reconciliation must not act on rows it cannot read. */
export function parseTaskList(raw: unknown): TaskListPage {
  const result = asRecord(raw);
  const body = asRecord(result?.structuredContent) ?? result;
  if (result?.isError === true || !body || !Array.isArray(body.tasks)) {
    const text = JSON.stringify(raw ?? null);
    if (/unknown tool|not found|METHOD_NOT_FOUND|UNSUPPORTED_FEATURE|-32601/i.test(text))
      return { tasks: [], supported: false };
    throw new ProtocolViolation(`tasks/list answer has no tasks array: ${text.slice(0, 300)}`);
  }
  const tasks: SellerTaskSummary[] = [];
  const rows: Record<string, unknown>[] = [];
  for (const entry of body.tasks) {
    const row = asRecord(entry);
    if (!row || typeof row.task_id !== 'string' || typeof row.status !== 'string') continue;
    rows.push(row);
    tasks.push({
      taskId: row.task_id,
      status: row.status,
      ...(typeof row.task_type === 'string' ? { taskType: row.task_type } : {}),
      ...(typeof row.context_id === 'string' ? { contextId: row.context_id } : {}),
      ...(typeof row.created_at === 'string' ? { createdAt: row.created_at } : {}),
      ...(typeof row.updated_at === 'string' ? { updatedAt: row.updated_at } : {}),
    });
  }
  const pagination = asRecord(body.pagination);
  const nextCursor =
    pagination?.has_more === true && typeof pagination.cursor === 'string' ? pagination.cursor : undefined;
  const applied = asRecord(body.query_summary)?.filters_applied;
  const filtersApplied = Array.isArray(applied)
    ? applied.filter((name): name is string => typeof name === 'string')
    : undefined;
  return {
    tasks,
    rows,
    supported: true,
    ...(nextCursor ? { nextCursor } : {}),
    ...(filtersApplied ? { filtersApplied } : {}),
  };
}

/** A tool answer over either protocol, with `callError` when the call itself was refused. */
export function toolAnswer(protocol: 'mcp' | 'a2a', raw: unknown): SellerAnswer {
  if (protocol === 'mcp') {
    const callError = mcpCallError(raw);
    const body = callError ? undefined : mcpBody(raw);
    return { snapshot: snapshotFromMcpToolResult(raw), callError, ...(body ? { body } : {}) };
  }
  const snapshot = snapshotFromA2A(raw);
  return { snapshot, callError: snapshot.status === 'failed' && !snapshot.taskId };
}

function mcpBody(raw: unknown): Record<string, unknown> | undefined {
  const result = asRecord(raw);
  const structured = asRecord(result?.structuredContent);
  if (structured) return structured;
  if (!Array.isArray(result?.content)) return undefined;
  for (const block of result.content) {
    const text = asRecord(block)?.text;
    if (typeof text !== 'string') continue;
    try {
      const parsed = asRecord(JSON.parse(text));
      if (parsed) return parsed;
    } catch {
      // not JSON: try the next block
    }
  }
  return undefined;
}

/**
 * An MCP answer to `tasks/get` or its 3.1 twin `get_task_status` (same shape), or to a seller's `get_task` (its own
 * record: read with the seller's task-record adapter, learned further from the body).
 */
export function readAnswerFromMcp(raw: unknown, adapter?: TaskRecordAdapterName): SellerAnswer {
  if (mcpCallError(raw)) return { snapshot: snapshotFromMcpToolResult(raw), callError: true };
  const body = mcpBody(raw);
  if (!body) return { snapshot: snapshotFromMcpToolResult(raw), callError: false };
  // Some sellers wrap the task: {task: {...}}.
  const task = asRecord(body.task) && body.status === undefined ? asRecord(body.task)! : body;
  const reading = readTaskRecord(task, adapter);
  return {
    snapshot: reading.snapshot,
    callError: false,
    ...(reading.adapter !== 'adcp' ? { taskRecordAdapter: reading.adapter } : {}),
  };
}

function notFoundAnswer(code: string, message: string): SellerAnswer {
  return {
    snapshot: { status: 'failed', message, errors: [{ code, message, recovery: 'correctable' }] },
    callError: true,
  };
}

/**
 * One row of a task list, as a snapshot (list rows carry status, and a result only where the seller adds it), in the
 * seller's task-record words.
 */
export function snapshotFromTaskRow(row: Record<string, unknown>, adapter?: TaskRecordAdapterName): TaskSnapshot {
  const status = mapTaskWord(row.status, learnTaskRecordAdapter(row, adapter)) ?? 'unknown';
  const snapshot: TaskSnapshot = { status };
  if (typeof row.status === 'string' && row.status !== status) snapshot.rawStatus = row.status;
  if (typeof row.task_id === 'string') snapshot.taskId = row.task_id;
  if (typeof row.context_id === 'string') snapshot.contextId = row.context_id;
  if (typeof row.message === 'string') snapshot.message = row.message;
  if (typeof row.updated_at === 'string') snapshot.updatedAt = row.updated_at;
  const result = asRecord(row.result) ?? asRecord(row.response_data);
  if (result) snapshot.result = result;
  const objects = taskObjectsOf(row, TASK_RECORD_ADAPTERS['seller-records']);
  if (objects.length > 0) snapshot.objects = objects;
  return snapshot;
}

const MCP_TASK_STATUS: Readonly<Record<string, TaskSnapshot['status']>> = {
  working: 'working',
  input_required: 'input-required',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'canceled',
};

/** The real client: @adcp/sdk's protocol client for task calls, A2A's native task methods for get/cancel. */
export function createSdkSellerClient(): SellerClient {
  async function a2aNativeGet(context: CallContext, taskId: string): Promise<TaskSnapshot> {
    const transport = a2aTransport(await a2aEndpoint(context.agent, context.signal), context.token, context.signal);
    return snapshotFromA2A(await transport.getTask({ id: taskId }, { signal: context.signal }));
  }

  const client: SellerClient = {
    async callTask(request) {
      const { agent, task, args, contextId, taskId, pushNotificationConfig } = request;
      const a2aPush =
        agent.protocol === 'a2a' && typeof pushNotificationConfig?.url === 'string'
          ? a2aPushNotificationConfig(pushNotificationConfig)
          : undefined;
      // MCP tasks this call created and stopped waiting on (a seller serving MCP Tasks): @adcp/sdk answers `working`
      // with such a task's id, which only MCP tasks/get reads (the seller's AdCP task reads may not know it).
      const mcpTasksUnfinished = new Set<string>();
      const raw = await sdkCallTool(
        request,
        task,
        args,
        {
          ...(agent.protocol === 'a2a' && (contextId || taskId) ? { session: { contextId, taskId } } : {}),
          // The SDK then builds a configuration block, which the call's own config replaces on the wire.
          ...(a2aPush ? { webhookUrl: a2aPush.url as string } : {}),
        },
        a2aPush,
        (unfinished) => mcpTasksUnfinished.add(unfinished),
      );
      const answer = toolAnswer(agent.protocol, raw);
      const answeredTaskId = answer.snapshot.taskId;
      return answeredTaskId !== undefined && mcpTasksUnfinished.has(answeredTaskId)
        ? { ...answer, mcpTaskId: answeredTaskId }
        : answer;
    },

    async getTask(request) {
      const { agent, signal, taskId } = request;
      if (agent.protocol === 'mcp') {
        const answer = await client.readTask({ ...request, method: 'tasks/get', task: 'unknown' });
        return answer.snapshot;
      }
      // Spec A2A sellers answer the AdCP task through A2A's own tasks/get. @adcp/sdk's adapter only knows transport
      // tasks there, and answers the AdCP task through the `tasks/get` skill: use that once native fails, and
      // remember which one this seller needs.
      if (a2aSkillPolling.has(agent.url)) return a2aSkillGet(request, taskId);
      try {
        return await a2aNativeGet(request, taskId);
      } catch (nativeError) {
        if (signal.aborted) throw nativeError;
        const snapshot = await a2aSkillGet(request, taskId).catch(() => undefined);
        if (!snapshot || (snapshot.status === 'failed' && !snapshot.taskId)) throw nativeError;
        a2aSkillPolling.add(agent.url);
        return snapshot;
      }
    },

    async listTasks(request) {
      const { filters, cursor, maxResults, tool, account, sort } = request;
      const args = {
        filters,
        ...(sort ? { sort } : {}),
        pagination: { max_results: maxResults ?? 100, ...(cursor ? { cursor } : {}) },
        ...(account !== undefined ? { account } : {}),
      };
      return parseTaskList(await sdkCallTool(request, tool ?? 'tasks/list', args));
    },

    async describe(request) {
      if (request.agent.protocol !== 'mcp') return undefined;
      return onMcpConnection(request, async (mcp) => {
        const tools: string[] = [];
        let cursor: string | undefined;
        for (let page = 0; page < 10; page++) {
          const listed = await mcp.listTools(cursor ? { cursor } : undefined);
          tools.push(...listed.tools.map((tool) => tool.name));
          cursor = listed.nextCursor;
          if (!cursor) break;
        }
        return { tools, mcpTasks: !!mcp.getServerCapabilities()?.tasks };
      });
    },

    async readTask(request) {
      const { agent, method, taskId, account } = request;
      const scoped = account !== undefined ? { account } : {};
      switch (method) {
        case 'tasks/get':
        case 'get_task_status':
        case 'get_task': {
          // A seller's own get_task takes the task id alone (its schema refuses AdCP's include_result).
          const args =
            method === 'get_task' && request.taskRecordAdapter === 'seller-records'
              ? { task_id: taskId, ...scoped }
              : { task_id: taskId, include_result: true, ...scoped };
          const raw = await sdkCallTool(request, method, args);
          return agent.protocol === 'mcp' ? readAnswerFromMcp(raw, request.taskRecordAdapter) : toolAnswer('a2a', raw);
        }
        case 'list_tasks': {
          const page = await client.listTasks({
            ...request,
            tool: request.listTool ?? 'list_tasks',
            filters: { task_ids: [taskId] },
            maxResults: 10,
            account,
          });
          if (!page.supported)
            return notFoundAnswer('UNSUPPORTED_FEATURE', `${agent.id} has no ${request.listTool ?? 'list_tasks'} tool`);
          const row = page.rows?.find((entry) => entry.task_id === taskId);
          if (!row)
            return notFoundAnswer(
              'TASK_NOT_FOUND',
              `${request.listTool ?? 'list_tasks'} at ${agent.id} does not list task ${taskId}`,
            );
          return { snapshot: snapshotFromTaskRow(row, request.taskRecordAdapter), callError: false };
        }
        case 'mcp-tasks':
          return onMcpConnection(request, async (mcp) => {
            let task;
            try {
              task = await mcp.experimental.tasks.getTask(taskId);
            } catch (error) {
              const message = String((error as Error).message);
              // The MCP SDK answers a task its store does not hold (expired, or lost when a seller with an in-memory
              // store restarted) with InvalidParams "Failed to retrieve task: Task not found". Our arguments are not
              // at fault: the seller cannot see the task now, which the read strategy treats as such.
              if (!request.signal.aborted && /task not found/i.test(message))
                return notFoundAnswer('TASK_NOT_FOUND', `MCP tasks/get at ${agent.id}: ${message}`);
              throw error;
            }
            const status = MCP_TASK_STATUS[task.status] ?? 'unknown';
            if (status === 'completed') {
              // Without a result schema the MCP SDK cannot parse the answer (it throws reading `_zod`).
              const result = await mcp.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
              return { snapshot: { ...snapshotFromMcpToolResult(result), taskId }, callError: false };
            }
            return {
              snapshot: { status, taskId, ...(task.statusMessage ? { message: task.statusMessage } : {}) },
              callError: false,
            };
          });
        case 'get_media_buys': {
          if (!request.mediaBuyId)
            return notFoundAnswer(
              'UNSUPPORTED_FEATURE',
              'get_media_buys needs the media_buy_id, which is not known yet',
            );
          const answer = toolAnswer(
            agent.protocol,
            await sdkCallTool(request, 'get_media_buys', { media_buy_ids: [request.mediaBuyId], ...scoped }),
          );
          if (answer.callError) return answer;
          const buys = answer.snapshot.result?.media_buys;
          const buy = Array.isArray(buys)
            ? buys.map(asRecord).find((entry) => entry?.media_buy_id === request.mediaBuyId)
            : undefined;
          if (!buy)
            return notFoundAnswer(
              'MEDIA_BUY_NOT_FOUND',
              `get_media_buys at ${agent.id} does not return media buy ${request.mediaBuyId}`,
            );
          return { snapshot: { ...snapshotFromMediaBuy(buy), taskId }, callError: false };
        }
        case 'a2a-native':
          try {
            return { snapshot: await a2aNativeGet(request, taskId), callError: false };
          } catch (error) {
            if (request.signal.aborted) throw error;
            const message = String((error as Error).message);
            if (/task not found|-32001/i.test(message)) return notFoundAnswer('TASK_NOT_FOUND', message);
            // Any other native failure: the skill is tried next (and a seller that is down fails there too).
            return notFoundAnswer('UNSUPPORTED_FEATURE', `A2A tasks/get failed: ${message}`);
          }
        case 'a2a-skill':
          return toolAnswer(
            'a2a',
            await sdkCallTool(request, 'tasks/get', { task_id: taskId, include_result: true, ...scoped }),
          );
      }
    },

    async cancelTask(request) {
      if (request.agent.protocol === 'mcp') {
        return { notified: false, note: 'MCP AdCP sellers have no task cancel call; the seller was not told' };
      }
      const transport = a2aTransport(await a2aEndpoint(request.agent, request.signal), request.token, request.signal);
      const task = snapshotFromA2A(await transport.cancelTask({ id: request.taskId }, { signal: request.signal }));
      return { notified: true, note: `A2A tasks/cancel answered ${task.status}` };
    },
  };
  return client;
}
