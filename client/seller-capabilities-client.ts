/**
 * The typed client for seller capabilities: makes sure each configured seller has its capabilities workflow
 * (one per seller, started on first use or by the worker at start), reads what it keeps (from the query, or the
 * memo it publishes when no worker answers), asks it to refresh, and answers whether a task may be sent to a
 * seller at all. A seller never asked yet, or one whose answer is unknown, is allowed everything: refusing needs
 * a positive answer that the seller lacks the task.
 */
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { LRUCache } from 'lru-cache';
import type { SellerConfig, SellerRegistry } from '../config/sellers';
import { type TaskSupport, supportsTask } from '../protocol/capabilities';
import { isKnownTask } from '../protocol/tasks';
import type { adcpSellerCapabilities } from '../workflows/seller-capabilities/workflow';
import {
  SELLER_CAPABILITIES_MEMO,
  SELLER_CAPABILITIES_WORKFLOW_TYPE,
  type SellerCapabilitiesInput,
  type SellerCapabilitiesState,
  capabilitiesChangedSignal,
  sellerCapabilitiesQuery,
  sellerCapabilitiesWorkflowId,
} from '../contract/seller-capabilities';

export interface SellerCapabilitiesClientOptions {
  client: Client;
  taskQueue: string;
  sellers: SellerRegistry;
  refreshEveryMs?: number;
  retryEveryMs?: number;
  /** How long a read waits for a worker before answering from the memo (default 3 s). */
  queryTimeoutMs?: number;
  /** How long `supports` reuses what it read (default 30 s): the check sits in front of every operation start. */
  supportCacheMs?: number;
}

export class SellerUnknownError extends Error {
  constructor(readonly sellerId: string) {
    super(`No seller "${sellerId}" is configured.`);
    this.name = 'SellerUnknownError';
  }
}

export interface SellerView {
  agent: SellerConfig;
  /** Whether the state came from the running workflow (true) or from its last published memo (false). */
  live: boolean;
  state?: SellerCapabilitiesState;
}

export class SellerCapabilitiesClient {
  private readonly ensured = new Set<string>();
  /** What `supports` read, per seller, for supportCacheMs. */
  private readonly supportCache: LRUCache<string, SellerCapabilitiesState>;
  constructor(private readonly options: SellerCapabilitiesClientOptions) {
    this.supportCache = new LRUCache({ max: 10_000, ttl: options.supportCacheMs ?? 30_000 });
  }

  /** The seller's capabilities workflow on this client's task queue. */
  workflowId(sellerId: string): string {
    return sellerCapabilitiesWorkflowId(this.options.taskQueue, sellerId);
  }

  get registry(): SellerRegistry {
    return this.options.sellers;
  }

  private agent(sellerId: string): SellerConfig {
    if (!this.options.sellers.has(sellerId)) throw new SellerUnknownError(sellerId);
    return this.options.sellers.get(sellerId);
  }

  /** Starts the seller's capabilities workflow unless it runs already (idempotent). */
  async ensure(sellerId: string): Promise<void> {
    this.agent(sellerId);
    if (this.ensured.has(sellerId)) return;
    const input: SellerCapabilitiesInput = {
      sellerId,
      ...(this.options.refreshEveryMs !== undefined ? { refreshEveryMs: this.options.refreshEveryMs } : {}),
      ...(this.options.retryEveryMs !== undefined ? { retryEveryMs: this.options.retryEveryMs } : {}),
    };
    await this.options.client.workflow.start<typeof adcpSellerCapabilities>(SELLER_CAPABILITIES_WORKFLOW_TYPE, {
      workflowId: this.workflowId(sellerId),
      taskQueue: this.options.taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      staticSummary: `capabilities of seller ${sellerId}`,
    });
    this.ensured.add(sellerId);
  }

  async ensureAll(): Promise<string[]> {
    const ids = this.options.sellers.sellers.map((agent) => agent.id);
    await Promise.all(ids.map((id) => this.ensure(id)));
    return ids;
  }

  /** What the seller's workflow keeps now. */
  async view(sellerId: string): Promise<SellerView> {
    const agent = this.agent(sellerId);
    await this.ensure(sellerId);
    const handle = this.options.client.workflow.getHandle<typeof adcpSellerCapabilities>(this.workflowId(sellerId));
    try {
      const state = await this.options.client.withDeadline(Date.now() + (this.options.queryTimeoutMs ?? 3_000), () =>
        handle.query(sellerCapabilitiesQuery),
      );
      return { agent, live: true, state };
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        this.ensured.delete(sellerId);
        return { agent, live: false };
      }
      const description = await handle.describe().catch(() => undefined);
      const memo = description?.memo?.[SELLER_CAPABILITIES_MEMO] as SellerCapabilitiesState | undefined;
      return { agent, live: false, ...(memo ? { state: memo } : {}) };
    }
  }

  async list(): Promise<SellerView[]> {
    return Promise.all(this.options.sellers.sellers.map((agent) => this.view(agent.id)));
  }

  /** Waits until the seller's workflow has made at least `refreshes` refreshes (tests, start-up). */
  async refreshed(sellerId: string, refreshes = 1, timeoutMs = 30_000): Promise<SellerCapabilitiesState> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const view = await this.view(sellerId);
      if (view.state && view.state.refreshes >= refreshes) return view.state;
      if (Date.now() > deadline)
        throw new Error(`Seller ${sellerId}: capabilities not refreshed within ${timeoutMs} ms.`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** The seller's capabilities may have changed: the workflow asks again now. */
  async capabilitiesChanged(sellerId: string, requestedBy: string, reason?: string): Promise<void> {
    this.agent(sellerId);
    const signal = async () => {
      await this.ensure(sellerId);
      await this.options.client.workflow
        .getHandle(this.workflowId(sellerId))
        .signal(capabilitiesChangedSignal, { requestedBy, ...(reason ? { reason } : {}) });
    };
    try {
      await signal();
    } catch (error) {
      // The run closed under us (it continues as new every 50 refreshes, or was ended): start or find the current
      // run again and signal that one, as view() does.
      if (!(error instanceof WorkflowNotFoundError)) throw error;
      this.ensured.delete(sellerId);
      await signal();
    }
  }

  /**
   * Whether `task` may be sent to the seller, by what its capabilities say. Before the seller has ever answered
   * get_adcp_capabilities (it has been unreachable), an AdCP task is allowed (the operation waits for the seller
   * durably) and a task outside AdCP's catalog is `unknown`: only the seller's own tool list could allow it.
   */
  async supports(sellerId: string, task: string): Promise<SellerTaskSupport> {
    const cached = this.supportCache.get(sellerId);
    if (cached) return supportsTask(cached.capabilities, task);
    const view = await this.view(sellerId);
    // Only an answer is kept: a seller not asked yet is looked at again on the next start.
    if (view.state?.capabilities) this.supportCache.set(sellerId, view.state);
    if (!view.state?.capabilities && !isKnownTask(task))
      return {
        supported: false,
        unknown: true,
        reason: `${task} is not an AdCP task, and seller "${sellerId}" has not told its capabilities yet (${view.state?.lastError?.message ?? 'not reached so far'}), so whether it offers ${task} cannot be known.`,
        ...(view.state?.nextRefreshAt ? { retryAt: view.state.nextRefreshAt } : {}),
      };
    return supportsTask(view.state?.capabilities, task);
  }
}

/** What the capabilities say of a task: TaskSupport, or not known yet (the seller never answered). */
export type SellerTaskSupport =
  | TaskSupport
  | {
      supported: false;
      unknown: true;
      reason: string;
      /** When the capabilities are asked for next. */ retryAt?: string;
    };

/** Why the operations route refuses a task: 422 (the seller does not offer it) or 503 (that cannot be known yet). */
export interface TaskRefusal {
  status: 422 | 503;
  message: string;
  retryAfterSeconds?: number;
}

/** For the gateway's operations route: why a task is refused, or undefined when it may start. */
export function taskSupportCheck(
  sellers: SellerCapabilitiesClient,
  now: () => number = Date.now,
): (sellerId: string, task: string) => Promise<TaskRefusal | undefined> {
  return async (sellerId, task) => {
    if (!sellers.registry.has(sellerId)) return undefined; // the operations route answers unknown sellers itself
    const support: SellerTaskSupport = await sellers
      .supports(sellerId, task)
      .catch(() => ({ supported: true as const }));
    if (support.supported) return undefined;
    if ('unknown' in support) {
      const at = support.retryAt ? Date.parse(support.retryAt) : Number.NaN;
      const retryAfterSeconds = Number.isNaN(at) ? 30 : Math.min(3600, Math.max(1, Math.ceil((at - now()) / 1000)));
      return { status: 503, message: `${support.reason} Retry in ${retryAfterSeconds} s.`, retryAfterSeconds };
    }
    return { status: 422, message: `Seller "${sellerId}" does not offer ${task}: ${support.reason}` };
  };
}
