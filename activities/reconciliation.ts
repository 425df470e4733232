/**
 * Reconciliation's I/O (adcp-protocol.md §1.7): which operations and media buys are open for a seller (Temporal
 * visibility, through the AdCP search attributes), which tasks the seller still has open (its `tasks/list`), and the
 * signals that make operations adopt a lost task or poll the seller now, and media buys read get_media_buys now.
 * The decisions are the reconciliation workflow's.
 */
import { Context } from '@temporalio/activity';
import { type Client, type WorkflowExecutionInfo, WorkflowNotFoundError } from '@temporalio/client';
import { type SellerRegistry, ConfigError } from '../config/sellers';
import {
  SA_SELLER,
  SA_MEDIA_BUY_ID,
  SA_MEDIA_BUY_STATUS,
  SA_STATUS,
  SA_TASK,
  SA_TASK_ID,
  SA_TENANT,
} from '../config/search-attributes';
import { OPERATION_WORKFLOW_TYPE, adoptTaskSignal, pollNowSignal } from '../contract/operation';
import { MEDIA_BUY_WORKFLOW_TYPE, refreshMediaBuySignal } from '../contract/media-buy';
import { type SellerClient, type SellerTaskSummary, createSdkSellerClient, isUnknownToolError } from './seller-client';
import { deadlineSignal } from './linked-signal';
import { ORCHESTRATOR_CONTEXT_KEY, describeError, learnTaskRecordAdapter, mapTaskWord } from '../protocol';
import { asRecord } from '../protocol/records';
import { listBuys } from './resource';
import type { StoredCapabilitiesLookup } from './stored-capabilities';

export interface ReconciliationDependencies {
  sellers: SellerRegistry;
  client: Client;
  seller?: SellerClient;
  env?: NodeJS.ProcessEnv;
  callTimeoutMs?: number;
  /** The sellers' stored capabilities: which list tool a seller has. */
  storedCapabilities?: StoredCapabilitiesLookup;
}

export interface OpenOperation {
  operationId: string;
  task?: string;
  taskId?: string;
  status?: string;
  /** The operation's tenant (AdcpTenant): a lookup of its lost task uses the tenant's own seller credential. */
  tenant?: string;
}

export interface SellerTaskList {
  supported: boolean;
  tasks: SellerTaskSummary[];
  /** More pages existed than were read. */
  truncated: boolean;
  /**
   * For one tenant's run: the list was read with the seller's own credential, shared by every tenant (no per-tenant
   * credentials in agents.json), so it holds other tenants' tasks too.
   */
  shared?: boolean;
}

/** A media buy's workflow that is still following its buy at the seller. */
export interface OpenMediaBuy {
  workflowId: string;
  mediaBuyId?: string;
  status?: string;
}

/** One buy the seller lists, as reconciliation compares it with what the orchestrator knows. */
export interface SellerBuy {
  mediaBuyId: string;
  status?: string;
  /** The operation the buy's echoed context names (the orchestrator puts its operation ID in every create). */
  operationId?: string;
  createdAt?: string;
}

export interface SellerBuyList {
  /** false when the seller has no get_media_buys, or refused the listing. */
  supported: boolean;
  buys: SellerBuy[];
  /** More pages existed than were read. */
  truncated: boolean;
  note?: string;
}

export type OperationSignal =
  | { operationId: string; kind: 'pollNow'; requestedBy: string }
  | { operationId: string; kind: 'adoptTask'; taskId: string; requestedBy: string }
  /** To a media buy's workflow (operationId is its workflow ID): read get_media_buys now. */
  | { operationId: string; kind: 'refreshMediaBuy'; requestedBy: string };

const MAX_OPEN_OPERATIONS = 10_000;
const MAX_TASK_PAGES = 50;
/** What reconciliation asks the seller for: tasks that are not finished. */
export const OPEN_SELLER_STATUSES = ['submitted', 'working', 'input-required', 'auth-required'];

/** Which tenant's workflows a run reaches (ReconciliationInput): every tenant's when `tenant` is absent. */
export interface ReconciliationScope {
  sellerId: string;
  tenant?: string;
  alsoUntenanted?: boolean;
}

/** Visibility queries quote values; seller ids are validated by the config schema, but escape anyway. */
function quoted(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** A listed task that is still open, in the seller's own words where its list speaks them. */
function isOpen(task: SellerTaskSummary, row: Record<string, unknown> | undefined): boolean {
  const status = mapTaskWord(task.status, row ? learnTaskRecordAdapter(row) : 'adcp') ?? 'unknown';
  // A word no vocabulary knows is not known to be finished: kept, so an operation can still adopt its task.
  return status === 'unknown' || OPEN_SELLER_STATUSES.includes(status);
}

/** The visibility clause of a scope: the seller, and the tenant when the run is one tenant's. */
function scopeClause(scope: ReconciliationScope): string {
  const seller = `${SA_SELLER.name} = ${quoted(scope.sellerId)}`;
  if (scope.tenant === undefined) return seller;
  const tenant = `${SA_TENANT.name} = ${quoted(scope.tenant)}`;
  return `${seller} AND ${scope.alsoUntenanted ? `(${tenant} OR ${SA_TENANT.name} IS NULL)` : tenant}`;
}

export function createReconciliationActivities(deps: ReconciliationDependencies) {
  const seller = deps.seller ?? createSdkSellerClient();
  const env = deps.env ?? process.env;
  const callTimeoutMs = deps.callTimeoutMs ?? 60_000;

  /**
   * The seller's task-list tools, in the order to try them: the one its stored read methods name (3.1 sellers have
   * `list_tasks`, not `tasks/list`), else AdCP's then the other name.
   */
  async function listToolsOf(sellerId: string): Promise<string[]> {
    const both = ['tasks/list', 'list_tasks'];
    let stored: string[] = [];
    try {
      stored = (await deps.storedCapabilities?.get(sellerId))?.readMethods ?? [];
    } catch {
      stored = [];
    }
    const named = both.filter((tool) => stored.includes(tool));
    return [...named, ...both.filter((tool) => !named.includes(tool))];
  }

  /** The running workflows of `workflowType` in the scope (visibility: AdcpAgent, AdcpTenant), at most MAX_OPEN_OPERATIONS. */
  async function listRunning<T>(
    workflowType: string,
    scope: ReconciliationScope,
    row: (execution: WorkflowExecutionInfo) => T,
  ): Promise<T[]> {
    const query = `WorkflowType = ${quoted(workflowType)} AND ExecutionStatus = 'Running' AND ${scopeClause(scope)}`;
    const open: T[] = [];
    for await (const execution of deps.client.workflow.list({ query })) {
      open.push(row(execution));
      if (open.length % 500 === 0) Context.current().heartbeat(open.length);
      if (open.length >= MAX_OPEN_OPERATIONS) break;
    }
    return open;
  }

  return {
    async listOpenOperations(input: ReconciliationScope): Promise<OpenOperation[]> {
      return listRunning(OPERATION_WORKFLOW_TYPE, input, ({ workflowId, typedSearchAttributes: attributes }) => ({
        operationId: workflowId,
        ...(attributes.get(SA_TASK) ? { task: attributes.get(SA_TASK) } : {}),
        ...(attributes.get(SA_TASK_ID) ? { taskId: attributes.get(SA_TASK_ID) } : {}),
        ...(attributes.get(SA_STATUS) ? { status: attributes.get(SA_STATUS) } : {}),
        ...(attributes.get(SA_TENANT) ? { tenant: attributes.get(SA_TENANT) } : {}),
      }));
    },

    /** The running media-buy workflows at this seller (visibility: AdcpAgent and the workflow type). */
    async listOpenMediaBuys(input: ReconciliationScope): Promise<OpenMediaBuy[]> {
      return listRunning(MEDIA_BUY_WORKFLOW_TYPE, input, ({ workflowId, typedSearchAttributes: attributes }) => ({
        workflowId,
        ...(attributes.get(SA_MEDIA_BUY_ID) ? { mediaBuyId: attributes.get(SA_MEDIA_BUY_ID) } : {}),
        ...(attributes.get(SA_MEDIA_BUY_STATUS) ? { status: attributes.get(SA_MEDIA_BUY_STATUS) } : {}),
      }));
    },

    /** Every page of the seller's open tasks (bounded), or `supported: false` when it has no tasks/list. */
    async listSellerTasks(input: ReconciliationScope): Promise<SellerTaskList> {
      let agent;
      let token: string | undefined;
      // One tenant's run reads the seller's tasks with that tenant's own credential, where it has one.
      const shared = input.tenant !== undefined && !deps.sellers.multiTenant ? { shared: true } : {};
      try {
        agent = deps.sellers.get(input.sellerId);
        token = deps.sellers.token(input.sellerId, env, input.tenant);
      } catch (error) {
        throw new ConfigError((error as Error).message);
      }
      const context = Context.current();
      for (const tool of await listToolsOf(input.sellerId)) {
        const tasks: SellerTaskSummary[] = [];
        let cursor: string | undefined;
        let supported = true;
        for (let page = 0; page < MAX_TASK_PAGES; page += 1) {
          const deadline = deadlineSignal(context.cancellationSignal, callTimeoutMs);
          let answer;
          try {
            answer = await seller.listTasks({
              agent,
              token,
              signal: deadline.signal,
              tool,
              filters: { statuses: OPEN_SELLER_STATUSES },
              maxResults: 100,
              ...(cursor ? { cursor } : {}),
            });
          } catch (error) {
            if (!isUnknownToolError(error)) throw error;
            answer = undefined;
          } finally {
            deadline.dispose();
          }
          if (!answer?.supported) {
            supported = false;
            break;
          }
          // A seller whose list ignores AdCP's filters (its own list_tasks) lists finished tasks too: keep the open.
          tasks.push(...answer.tasks.filter((task, index) => isOpen(task, answer.rows?.[index])));
          context.heartbeat(page);
          cursor = answer.nextCursor;
          if (!cursor) return { supported: true, tasks, truncated: false, ...shared };
        }
        if (supported) return { supported: true, tasks, truncated: true, ...shared };
      }
      return { supported: false, tasks: [], truncated: false };
    },

    /**
     * Every buy the seller lists (every status), with the operation its echoed context names: what reconciliation
     * compares with the buys the orchestrator knows, to find buys no operation knows (orphans).
     */
    async listSellerBuys(input: { sellerId: string }): Promise<SellerBuyList> {
      let agent;
      let token: string | undefined;
      try {
        agent = deps.sellers.get(input.sellerId);
        token = deps.sellers.token(input.sellerId, env);
      } catch (error) {
        throw new ConfigError((error as Error).message);
      }
      const context = Context.current();
      const deadline = deadlineSignal(context.cancellationSignal, callTimeoutMs);
      try {
        const listed = await listBuys(
          seller,
          { agent, token, signal: deadline.signal },
          { maxPages: MAX_TASK_PAGES },
          () => new Date().toISOString(),
        );
        if (listed.unreadable)
          return { supported: false, buys: [], truncated: false, note: describeError(listed.unreadable) };
        const buys = listed.rows.flatMap((row): SellerBuy[] => {
          if (typeof row.media_buy_id !== 'string') return [];
          const marker = asRecord(asRecord(row.context)?.[ORCHESTRATOR_CONTEXT_KEY]);
          return [
            {
              mediaBuyId: row.media_buy_id,
              ...(typeof row.status === 'string' ? { status: row.status } : {}),
              ...(typeof marker?.operation_id === 'string' ? { operationId: marker.operation_id } : {}),
              ...(typeof row.created_at === 'string' ? { createdAt: row.created_at } : {}),
            },
          ];
        });
        return { supported: true, buys, truncated: !listed.complete };
      } catch (error) {
        if (isUnknownToolError(error)) return { supported: false, buys: [], truncated: false };
        throw error;
      } finally {
        deadline.dispose();
      }
    },

    /**
     * Which of these buys a workflow knows (an operation that made it, or the media buy's own workflow, by the
     * AdcpMediaBuyId search attribute), open or closed.
     */
    async knownMediaBuys(input: { mediaBuyIds: string[] }): Promise<string[]> {
      const known = new Set<string>();
      for (let index = 0; index < input.mediaBuyIds.length; index += 50) {
        const batch = input.mediaBuyIds.slice(index, index + 50);
        const query = `${SA_MEDIA_BUY_ID.name} IN (${batch.map(quoted).join(', ')})`;
        for await (const execution of deps.client.workflow.list({ query })) {
          const id = execution.typedSearchAttributes.get(SA_MEDIA_BUY_ID);
          if (id) known.add(id);
        }
        Context.current().heartbeat(index);
      }
      return [...known];
    },

    /** Sends each signal; an operation that ended meanwhile is skipped, not an error. */
    async signalOperations(input: { signals: OperationSignal[] }): Promise<{ sent: number; skipped: string[] }> {
      let sent = 0;
      const skipped: string[] = [];
      for (const [index, request] of input.signals.entries()) {
        const handle = deps.client.workflow.getHandle(request.operationId);
        try {
          if (request.kind === 'adoptTask')
            await handle.signal(adoptTaskSignal, { taskId: request.taskId, requestedBy: request.requestedBy });
          else if (request.kind === 'refreshMediaBuy')
            await handle.signal(refreshMediaBuySignal, { requestedBy: request.requestedBy });
          else await handle.signal(pollNowSignal, { requestedBy: request.requestedBy });
          sent += 1;
        } catch (error) {
          if (!(error instanceof WorkflowNotFoundError)) throw error;
          skipped.push(request.operationId);
        }
        if (index % 100 === 99) Context.current().heartbeat(index);
      }
      return { sent, skipped };
    },
  };
}

export type ReconciliationActivities = ReturnType<typeof createReconciliationActivities>;
