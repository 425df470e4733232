import { JsonRpcTransport } from '@a2a-js/sdk/client';
import { ProtocolClient } from '@adcp/sdk/advanced';
import type { AgentConfig } from '../config/agents';
import {
  type TaskSnapshot,
  ProtocolViolation,
  snapshotFromA2A,
  snapshotFromMcpToolResult,
  snapshotFromTasksGet,
} from '../protocol';
import { withAbortSignal } from './abortable-fetch';

/** One protocol call to one seller; the only place that speaks MCP or A2A. Each method makes exactly one call. */
export interface SellerClient {
  callTask(request: TaskCallRequest): Promise<SellerAnswer>;
  getTask(request: TaskLookupRequest): Promise<TaskSnapshot>;
  /** Tell the seller to cancel, where the protocol has a way to (A2A tasks/cancel). */
  cancelTask(request: TaskLookupRequest): Promise<{ notified: boolean; note: string }>;
  /** One page of the seller's AdCP `tasks/list` (reconciliation). */
  listTasks(request: TaskListRequest): Promise<TaskListPage>;
}

export interface TaskListRequest extends CallContext {
  filters: Record<string, unknown>;
  cursor?: string;
  maxResults?: number;
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
  nextCursor?: string;
  /** false when the seller has no tasks/list (the call was refused as an unknown tool). */
  supported: boolean;
}

export interface CallContext {
  agent: AgentConfig;
  token?: string;
  signal: AbortSignal;
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
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

function sdkAgent(agent: AgentConfig, token: string | undefined) {
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

async function a2aSkillGet(agent: AgentConfig, token: string | undefined, taskId: string): Promise<TaskSnapshot> {
  const raw = await ProtocolClient.callTool(sdkAgent(agent, token), 'tasks/get', { task_id: taskId, include_result: true });
  return snapshotFromA2A(raw);
}

/** The JSON-RPC endpoint of an A2A agent, read from its agent card (cached per URL). */
const a2aEndpoints = new Map<string, string>();
async function a2aEndpoint(agent: AgentConfig, signal: AbortSignal): Promise<string> {
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

function a2aTransport(endpoint: string, token: string | undefined): JsonRpcTransport {
  const authFetch: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if (token) {
      headers.set('authorization', `Bearer ${token}`);
      headers.set('x-adcp-auth', token);
    }
    return fetch(input, { ...init, headers });
  };
  return new JsonRpcTransport({ endpoint, fetchImpl: authFetch });
}

function mcpCallError(raw: unknown): boolean {
  const result = asRecord(raw);
  if (!result) return false;
  if (result.isError === true) return true;
  const body = asRecord(result.structuredContent);
  return !!body && body.status === undefined && (asRecord(body.adcp_error) !== undefined || typeof body.error_code === 'string');
}

/** An MCP/A2A answer saying the tool does not exist (an optional task such as tasks/list). */
export function isUnknownToolError(error: unknown): boolean {
  const text = error instanceof Error ? `${error.message} ${String((error as { cause?: unknown }).cause ?? '')}` : String(error);
  return /unknown tool|tool .* not found|-32601|method not found|UNSUPPORTED_FEATURE/i.test(text);
}

/** A tasks/list answer, read defensively: reconciliation must not act on rows it cannot read. */
export function parseTaskList(raw: unknown): TaskListPage {
  const result = asRecord(raw);
  const body = asRecord(result?.structuredContent) ?? result;
  if (result?.isError === true || !body || !Array.isArray(body.tasks)) {
    const text = JSON.stringify(raw ?? null);
    if (/unknown tool|not found|METHOD_NOT_FOUND|UNSUPPORTED_FEATURE|-32601/i.test(text)) return { tasks: [], supported: false };
    throw new ProtocolViolation(`tasks/list answer has no tasks array: ${text.slice(0, 300)}`);
  }
  const tasks: SellerTaskSummary[] = [];
  for (const entry of body.tasks) {
    const row = asRecord(entry);
    if (!row || typeof row.task_id !== 'string' || typeof row.status !== 'string') continue;
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
  const nextCursor = pagination?.has_more === true && typeof pagination.cursor === 'string' ? pagination.cursor : undefined;
  return { tasks, supported: true, ...(nextCursor ? { nextCursor } : {}) };
}

/** The real client: @adcp/sdk's protocol client for task calls, A2A's native task methods for get/cancel. */
export function createSdkSellerClient(): SellerClient {
  return {
    async callTask({ agent, token, signal, task, args, contextId, taskId, pushNotificationConfig }) {
      const raw = await withAbortSignal(signal, () =>
        ProtocolClient.callTool(sdkAgent(agent, token), task, args, {
          ...(agent.protocol === 'a2a' && (contextId || taskId) ? { session: { contextId, taskId } } : {}),
          ...(agent.protocol === 'a2a' && typeof pushNotificationConfig?.url === 'string'
            ? { webhookUrl: pushNotificationConfig.url }
            : {}),
        }),
      );
      if (agent.protocol === 'mcp') return { snapshot: snapshotFromMcpToolResult(raw), callError: mcpCallError(raw) };
      const snapshot = snapshotFromA2A(raw);
      return { snapshot, callError: snapshot.status === 'failed' && !snapshot.taskId };
    },

    async getTask({ agent, token, signal, taskId }) {
      if (agent.protocol === 'mcp') {
        const raw = await withAbortSignal(signal, () =>
          ProtocolClient.callTool(sdkAgent(agent, token), 'tasks/get', { task_id: taskId, include_result: true }),
        );
        const result = asRecord(raw);
        if (result?.isError === true) return snapshotFromMcpToolResult(raw);
        const body = asRecord(result?.structuredContent);
        if (!body) return snapshotFromMcpToolResult(raw);
        return snapshotFromTasksGet(body);
      }
      return withAbortSignal(signal, async () => {
        // Spec A2A sellers answer the AdCP task through A2A's own tasks/get. @adcp/sdk's adapter only knows transport
        // tasks there, and answers the AdCP task through the `tasks/get` skill: use that once native fails, and
        // remember which one this seller needs.
        if (a2aSkillPolling.has(agent.url)) return a2aSkillGet(agent, token, taskId);
        try {
          const transport = a2aTransport(await a2aEndpoint(agent, signal), token);
          return snapshotFromA2A(await transport.getTask({ id: taskId }, { signal }));
        } catch (nativeError) {
          if (signal.aborted) throw nativeError;
          const snapshot = await a2aSkillGet(agent, token, taskId).catch(() => undefined);
          if (!snapshot || snapshot.status === 'failed' && !snapshot.taskId) throw nativeError;
          a2aSkillPolling.add(agent.url);
          return snapshot;
        }
      });
    },

    async listTasks({ agent, token, signal, filters, cursor, maxResults }) {
      const args = { filters, pagination: { max_results: maxResults ?? 100, ...(cursor ? { cursor } : {}) } };
      const raw = await withAbortSignal(signal, () => ProtocolClient.callTool(sdkAgent(agent, token), 'tasks/list', args));
      return parseTaskList(raw);
    },

    async cancelTask({ agent, token, signal, taskId }) {
      if (agent.protocol === 'mcp') {
        return { notified: false, note: 'MCP AdCP sellers have no task cancel call; the seller was not told' };
      }
      return withAbortSignal(signal, async () => {
        const transport = a2aTransport(await a2aEndpoint(agent, signal), token);
        const task = snapshotFromA2A(await transport.cancelTask({ id: taskId }, { signal }));
        return { notified: true, note: `A2A tasks/cancel answered ${task.status}` };
      });
    },
  };
}
