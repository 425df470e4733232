/**
 * Reconciliation's I/O (adcp-protocol.md §1.7): which operations and media buys are open for a seller (Temporal
 * visibility, through the AdCP search attributes), which tasks the seller still has open (its `tasks/list`), and the
 * signals that make operations adopt a lost task or poll the seller now, and media buys read get_media_buys now.
 * The decisions are the reconciliation workflow's.
 */
import { Context } from '@temporalio/activity';
import {
  type Client,
  ScheduleNotFoundError,
  type WorkflowExecutionInfo,
  WorkflowNotFoundError,
} from '@temporalio/client';
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
import {
  OPERATION_WORKFLOW_TYPE,
  type OperationReconcileAnswer,
  adoptTaskSignal,
  pollNowSignal,
  reconcileOperationUpdate,
} from '../contract/operation';
import type { MatchedBy } from '../protocol/resource-match';
import { type MediaBuyClaim, claimsFromRows, compareListing } from '../protocol/buy-claims';
import type { OrphanBuy, OrphanChunk, OrphanChunkRequest } from '../contract/reconciliation';
import { MEDIA_BUY_WORKFLOW_TYPE, refreshMediaBuySignal } from '../contract/media-buy';
import { type SellerClient, type SellerTaskSummary, createSdkSellerClient, isUnknownToolError } from './seller-client';
import { deadlineSignal } from './linked-signal';
import { MAX_RECONCILE_AMONG } from '../contract/validators';
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
  /** The seller's cursor to the rest of its listing, when the pages read stopped before its end. */
  nextCursor?: string;
  note?: string;
}

export type { MediaBuyClaim, OrphanBuy };

/** The orphans offered to the operations that could not know their buy. */
interface OrphanOffers {
  /** Operations asked (their reconcile update, limited to the orphans). */
  tried: number;
  adopted: { operationId: string; mediaBuyId: string; matchedBy?: MatchedBy }[];
  /** Orphans still known to no workflow after the offers (a re-check: some were learned meanwhile). */
  remaining: OrphanBuy[];
  /** Operations that did not answer within the pass's bound (busy with a call): asked again next pass. */
  unanswered: string[];
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

/** `promise`'s value, or 'timeout' after `ms` (the promise goes on; its late answer is dropped). */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  promise.catch(() => undefined);
  try {
    return await Promise.race([
      promise,
      new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
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

  /**
   * The buys the seller lists (every status, `maxPages` pages from `cursor`), with the operation each one's echoed
   * context names: what reconciliation compares with the buys the orchestrator knows, to find orphans.
   */
  async function listSellerBuys(input: {
    sellerId: string;
    cursor?: string;
    maxPages?: number;
  }): Promise<SellerBuyList> {
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
        { maxPages: input.maxPages ?? MAX_TASK_PAGES, ...(input.cursor ? { startCursor: input.cursor } : {}) },
        () => new Date().toISOString(),
      );
      if (listed.unreadable) return { supported: false, buys: [], note: describeError(listed.unreadable) };
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
      return { supported: true, buys, ...(listed.nextCursor ? { nextCursor: listed.nextCursor } : {}) };
    } catch (error) {
      if (isUnknownToolError(error)) return { supported: false, buys: [] };
      throw error;
    } finally {
      deadline.dispose();
    }
  }

  /**
   * Who knows each of these buys at this seller (AdcpMediaBuyId, open or closed workflows), in batches of 50, every
   * page of each search; runs of one workflow count once, a child operation with its media buy (claimsFromRows).
   */
  async function claimsOf(sellerId: string, mediaBuyIds: string[]): Promise<Map<string, string[]>> {
    const rows: { mediaBuyId: string; workflowId: string; parentWorkflowId?: string }[] = [];
    for (let index = 0; index < mediaBuyIds.length; index += 50) {
      const batch = mediaBuyIds.slice(index, index + 50);
      const query = `${SA_SELLER.name} = ${quoted(sellerId)} AND ${SA_MEDIA_BUY_ID.name} IN (${batch.map(quoted).join(', ')})`;
      for await (const execution of deps.client.workflow.list({ query })) {
        const mediaBuyId = execution.typedSearchAttributes.get(SA_MEDIA_BUY_ID);
        if (!mediaBuyId) continue;
        const parent = execution.parentExecution?.workflowId;
        rows.push({ mediaBuyId, workflowId: execution.workflowId, ...(parent ? { parentWorkflowId: parent } : {}) });
      }
      Context.current().heartbeat(index);
    }
    return claimsFromRows(rows);
  }

  /** The orphans whose echoed context names an operation, with that operation's status (why it did not adopt). */
  async function withNamedStatus(orphans: OrphanBuy[]): Promise<OrphanBuy[]> {
    return Promise.all(
      orphans.map(async (orphan) => {
        if (!orphan.operationId) return orphan;
        const description = await deps.client.workflow
          .getHandle(orphan.operationId)
          .describe()
          .catch(() => undefined);
        return { ...orphan, operationStatus: description?.status.name ?? 'NOT_FOUND' };
      }),
    );
  }

  /**
   * Offers orphans to the open creates at this seller that know no buy (those an orphan's echoed context names
   * first, at most `maxOperations`): each is asked through its own reconcile update, limited to the orphans, so it
   * matches by its own rules (idempotency key, context, po_number, then packages + budget + flight) and records
   * `matched_by`. One operation at a time, so two never adopt the same buy; each bounded by `updateTimeoutMs`.
   */
  async function offerOrphans(input: {
    scope: ReconciliationScope;
    orphans: OrphanBuy[];
    chunk: number;
    requestedBy: string;
    maxOperations: number;
    updateTimeoutMs: number;
  }): Promise<OrphanOffers> {
    const context = Context.current();
    const { sellerId } = input.scope;
    // Learned since the listing (a call in flight answered): not orphans.
    let claims = await claimsOf(
      sellerId,
      input.orphans.map((orphan) => orphan.mediaBuyId),
    );
    let remaining = input.orphans.filter((orphan) => !claims.has(orphan.mediaBuyId));
    const adopted: OrphanOffers['adopted'] = [];
    const unanswered: string[] = [];
    let tried = 0;
    if (remaining.length === 0) return { tried, adopted, remaining, unanswered };
    const query = `WorkflowType = ${quoted(OPERATION_WORKFLOW_TYPE)} AND ExecutionStatus = 'Running' AND ${SA_TASK.name} = 'create_media_buy' AND ${SA_MEDIA_BUY_ID.name} IS NULL AND ${scopeClause(input.scope)}`;
    const looking: string[] = [];
    for await (const execution of deps.client.workflow.list({ query })) {
      looking.push(execution.workflowId);
      if (looking.length >= MAX_OPEN_OPERATIONS) break;
    }
    const named = new Set(remaining.flatMap((orphan) => (orphan.operationId ? [orphan.operationId] : [])));
    const order = [...looking.filter((id) => named.has(id)), ...looking.filter((id) => !named.has(id))].slice(
      0,
      input.maxOperations,
    );
    const runBy = context.info.workflowExecution?.workflowId ?? 'manual';
    for (const operationId of order) {
      if (remaining.length === 0) break;
      tried += 1;
      context.heartbeat(tried);
      // A chunk holds at most MAX_RECONCILE_AMONG buys (the workflow's pages per chunk); the cap guards the rest.
      const among = remaining.map((orphan) => orphan.mediaBuyId).slice(0, MAX_RECONCILE_AMONG);
      const answer = await within(
        deps.client.workflow.getHandle(operationId).executeUpdate(reconcileOperationUpdate, {
          args: [{ requestedBy: input.requestedBy, among }],
          // Each chunk asks afresh: the same update ID would be answered with the first chunk's answer.
          updateId: `orphans:${runBy}:${input.chunk}:${operationId}`,
        }),
        input.updateTimeoutMs,
      ).catch((): OperationReconcileAnswer | 'error' => 'error');
      if (answer === 'timeout') unanswered.push(operationId);
      if (typeof answer !== 'object' || !answer.found || !answer.media_buy_id) continue;
      const mediaBuyId = answer.media_buy_id;
      if (!among.includes(mediaBuyId)) continue;
      adopted.push({ operationId, mediaBuyId, ...(answer.matched_by ? { matchedBy: answer.matched_by } : {}) });
      remaining = remaining.filter((orphan) => orphan.mediaBuyId !== mediaBuyId);
    }
    // What is still unknown now, after the adoptions were indexed (visibility trails the upserts a little).
    if (remaining.length > 0) {
      claims = await claimsOf(
        sellerId,
        remaining.map((orphan) => orphan.mediaBuyId),
      );
      remaining = remaining.filter((orphan) => !claims.has(orphan.mediaBuyId));
    }
    return { tried, adopted, remaining, unanswered };
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

    listSellerBuys,

    /**
     * One chunk of the orphan pass: `maxPages` pages of the seller's listing from `cursor`, compared with the
     * workflows that know each buy (AdcpMediaBuyId, open or closed); a buy no workflow knows is an orphan, offered to
     * the creates that could not know theirs; one two workflows know is claimed twice. Only counts and capped lists
     * cross into the workflow's history; `nextCursor` leads the next chunk on.
     */
    async orphanPassChunk(input: OrphanChunkRequest): Promise<OrphanChunk> {
      const scope: ReconciliationScope = {
        sellerId: input.sellerId,
        ...(input.tenant !== undefined ? { tenant: input.tenant, alsoUntenanted: input.alsoUntenanted ?? false } : {}),
      };
      const listed = await listSellerBuys({
        sellerId: input.sellerId,
        maxPages: input.maxPages,
        ...(input.cursor ? { cursor: input.cursor } : {}),
      });
      if (!listed.supported)
        return {
          supported: false,
          note: listed.note ?? `${input.sellerId} does not list its media buys`,
          listed: 0,
          known: 0,
          adopted: [],
          orphans: [],
          orphanCount: 0,
          claimedTwice: [],
          claimedTwiceCount: 0,
          unanswered: [],
        };
      const claims = await claimsOf(input.sellerId, [...new Set(listed.buys.map((buy) => buy.mediaBuyId))]);
      const compared = compareListing(listed.buys, claims);
      let orphans: OrphanBuy[] = compared.orphans;
      const orphanCount = orphans.length;
      // One tenant's run lists with the credential every tenant shares: a buy no workflow knows may be another
      // tenant's, so only those its echo names as the run's own operations are named (and offered); all are counted.
      let note: string | undefined;
      if (input.tenant !== undefined && !deps.sellers.multiTenant) {
        const own = new Set(
          (await listRunning(OPERATION_WORKFLOW_TYPE, scope, ({ workflowId }) => workflowId)).filter((id) =>
            orphans.some((orphan) => orphan.operationId === id),
          ),
        );
        orphans = orphans.filter((orphan) => orphan.operationId !== undefined && own.has(orphan.operationId));
        if (orphans.length < orphanCount)
          note = `${orphanCount - orphans.length} buys no workflow knows are counted, not named: the seller's listing is shared by every tenant; the installation's reconciliation names them`;
      }
      const offers =
        orphans.length > 0
          ? await offerOrphans({ ...input, scope, orphans })
          : { tried: 0, adopted: [], remaining: [], unanswered: [] };
      const adoptedIds = new Set(offers.adopted.map((entry) => entry.mediaBuyId));
      // Orphans offered and learned meanwhile (by the offer or by a call that answered) are known now.
      const learned = orphans.filter((orphan) => !offers.remaining.includes(orphan)).length;
      return {
        supported: true,
        ...(note ? { note } : {}),
        listed: listed.buys.length,
        known: compared.known + learned,
        adopted: offers.adopted.filter((entry) => adoptedIds.has(entry.mediaBuyId)),
        orphans: await withNamedStatus(offers.remaining.slice(0, input.maxReported)),
        orphanCount: orphanCount - learned,
        claimedTwice: compared.claimedTwice.slice(0, input.maxReported),
        claimedTwiceCount: compared.claimedTwice.length,
        unanswered: offers.unanswered,
        ...(listed.nextCursor ? { nextCursor: listed.nextCursor } : {}),
      };
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

    /**
     * Hands the orphan pass's cursor to the next run of the seller's Schedule: the Schedule's action input carries
     * `resumeCursor` (none: the next run reads from the first page). A Schedule deleted meanwhile is no error.
     */
    async handOverOrphanCursor(input: { scheduleId: string; resumeCursor?: string }): Promise<{ handedOver: boolean }> {
      try {
        await deps.client.schedule.getHandle(input.scheduleId).update((previous) => {
          const action = previous.action;
          if (action.type !== 'startWorkflow') return previous;
          const [first, ...rest] = (action.args ?? []) as Record<string, unknown>[];
          const { resumeCursor: _before, ...kept } = first ?? {};
          const args = [{ ...kept, ...(input.resumeCursor ? { resumeCursor: input.resumeCursor } : {}) }, ...rest];
          return { ...previous, action: { ...action, args } };
        });
        return { handedOver: true };
      } catch (error) {
        if (error instanceof ScheduleNotFoundError) return { handedOver: false };
        throw error;
      }
    },
  };
}

export type ReconciliationActivities = ReturnType<typeof createReconciliationActivities>;
