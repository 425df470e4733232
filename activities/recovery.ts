/**
 * When an operation lost track of its call or ends before the seller did: `findLostTask` looks the call up at the
 * seller by its idempotency key (§1.7), and `cancelAtSeller` tells the seller what it can be told of a cancel.
 */
import type {
  CancelAtSellerInput,
  CancelAtSellerOutcome,
  FindLostTaskInput,
  FindLostTaskOutcome,
} from '../contract/activities';
import { type TaskSnapshot, describeError } from '../protocol';
import { sellerTransientFailure } from './failures';
import { buyerRefFor, idempotencyKeyFor } from './idempotency';
import type { SellerDescriptionCache } from './read-strategy';
import {
  type CallContext,
  type SellerClient,
  type SellerTaskSummary,
  type TaskListPage,
  isUnknownToolError,
} from './seller-client';
import type { TaskReadDependencies } from './task-reader';

/** `timeouts`: the worker's own, for an input that carries none (reconciliation has no call plan). */
export interface RecoveryActivityDependencies extends TaskReadDependencies {
  seller: SellerClient;
  /** The sellers' tool lists: which list tool to use, whether update_media_buy exists. */
  descriptions: SellerDescriptionCache;
}

/** The list tools sellers use for their tasks: AdCP's, then the name some sellers use. */
const LIST_TOOLS = ['tasks/list', 'list_tasks'] as const;

export function createRecoveryActivities(deps: RecoveryActivityDependencies) {
  const { seller, descriptions, guarded, readWithRetryAfter, ensureStorable } = deps;

  /** One page of the seller's task list, by whichever list tool it has; `supported: false` when it has none. */
  async function listByKey(
    context: CallContext,
    task: string,
    reference: string,
    account: unknown,
  ): Promise<TaskListPage> {
    const description = await descriptions.get(seller, context);
    const tools = description ? LIST_TOOLS.filter((tool) => description.tools.includes(tool)) : [...LIST_TOOLS];
    for (const tool of tools) {
      try {
        const page = await seller.listTasks({
          ...context,
          tool,
          filters: { task_types: [task], context_contains: reference },
          maxResults: 10,
          ...(account !== undefined ? { account } : {}),
        });
        if (page.supported) return page;
      } catch (error) {
        if (context.signal.aborted || !isUnknownToolError(error)) throw error;
      }
    }
    return { tasks: [], supported: false };
  }

  /** A media buy the operation created, canceled with update_media_buy where the seller has it. */
  async function cancelMediaBuy(
    context: CallContext,
    input: CancelAtSellerInput,
    mediaBuyId: string,
  ): Promise<CancelAtSellerOutcome> {
    const { agent } = context;
    const description = agent.protocol === 'mcp' ? await descriptions.get(seller, context) : undefined;
    if (description && !description.tools.includes('update_media_buy')) {
      return {
        notified: false,
        resource: { mediaBuyId, state: 'live' },
        note: `media buy ${mediaBuyId} is live at ${agent.id}: the seller has no update_media_buy, so it cannot be canceled from here; cancel it with the seller`,
      };
    }
    // Its own key: a retried cancel replays, and it never collides with the create's key.
    const args: Record<string, unknown> = {
      media_buy_id: mediaBuyId,
      canceled: true,
      cancellation_reason: 'The buyer canceled the operation.',
      idempotency_key: idempotencyKeyFor(input.operationId, 'cancel'),
    };
    if (input.account !== undefined) args.account = input.account;
    let answer;
    try {
      answer = await seller.callTask({ ...context, task: 'update_media_buy', args });
    } catch (error) {
      if (context.signal.aborted || !isUnknownToolError(error)) throw error;
      return {
        notified: false,
        resource: { mediaBuyId, state: 'live' },
        note: `media buy ${mediaBuyId} is live at ${agent.id}: the seller has no update_media_buy; cancel it with the seller`,
      };
    }
    const firstError = answer.snapshot.errors?.[0];
    if (answer.callError && firstError?.recovery === 'transient')
      throw sellerTransientFailure(firstError, deps.random, deps.backoff);
    if (answer.callError || answer.snapshot.status === 'failed' || answer.snapshot.status === 'rejected') {
      const why = firstError ? describeError(firstError) : (answer.snapshot.message ?? answer.snapshot.status);
      return {
        notified: true,
        resource: { mediaBuyId, state: 'live' },
        note: `the seller refused to cancel media buy ${mediaBuyId}, which is still live: ${why}`,
      };
    }
    const result = answer.snapshot.result ?? {};
    const lifecycle = String(result.media_buy_status ?? result.status ?? '');
    // A synchronous answer `status: "canceled"` is the buy's status (media-buy and task statuses share the word).
    const buyCanceled =
      (answer.snapshot.status === 'canceled' && !answer.snapshot.taskId) ||
      (answer.snapshot.status === 'completed' && (lifecycle === 'canceled' || lifecycle === ''));
    if (buyCanceled) {
      return {
        notified: true,
        resource: { mediaBuyId, state: 'canceled' },
        note: `media buy ${mediaBuyId} canceled at ${agent.id}`,
      };
    }
    return {
      notified: true,
      resource: { mediaBuyId, state: 'unknown' },
      note: `asked ${agent.id} to cancel media buy ${mediaBuyId}; it answered ${answer.snapshot.status}${lifecycle ? ` (${lifecycle})` : ''}`,
    };
  }

  return {
    /**
     * Reconciliation of one call (§1.7): the seller's task list filtered by type and by the call's idempotency key
     * (`context_contains` searches the request's references), scoped to the account. Found: that task, read. Read-only.
     */
    async findLostTask(input: FindLostTaskInput): Promise<FindLostTaskOutcome> {
      const key = idempotencyKeyFor(input.operationId, input.step);
      const bound = input.timeouts ?? deps.timeouts;
      return guarded(
        input.sellerId,
        bound.readMs,
        async (context) => {
          const { agent } = context;
          // rc.2 sellers know the buy by its buyer_ref (3.x removed it: there the idempotency key is the reference).
          const rc2Create = agent.adcp_version === 'rc.2' && input.task === 'create_media_buy';
          const reference = rc2Create ? buyerRefFor(input.operationId) : key;
          const page = await listByKey(context, input.task, reference, input.account);
          const { match, untrusted } = taskCarryingKey(page, input.task, reference);
          if (untrusted && !rc2Create)
            return {
              supported: true,
              note: `${agent.id} lists ${untrusted} ${input.task} tasks without saying it filtered them by key ${reference} (its list ignores AdCP's filters): none adopted`,
            };
          if (match) {
            const outcome = await readWithRetryAfter(context, {
              task: input.task,
              taskId: match.taskId,
              ...(match.contextId ? { contextId: match.contextId } : {}),
              account: input.account,
            });
            const row = page.rows?.find((entry) => entry.task_id === match.taskId);
            const snapshot: TaskSnapshot = outcome.snapshot ?? {
              status: (row?.status as TaskSnapshot['status']) ?? 'unknown',
              taskId: match.taskId,
            };
            return ensureStorable(
              {
                supported: true,
                snapshot: { ...snapshot, taskId: snapshot.taskId ?? match.taskId },
                note: `found ${match.taskId} (${match.status}) by ${rc2Create ? 'its buyer_ref' : 'its idempotency key'}`,
              },
              `The lost ${input.task} task at ${input.sellerId}`,
            );
          }
          if (rc2Create) {
            // A create answered synchronously leaves no task: look for the buy itself (get_media_buys by buyer_ref).
            const answer = await seller.callTask({
              ...context,
              task: 'get_media_buys',
              args: { buyer_refs: [reference], ...(input.account !== undefined ? { account: input.account } : {}) },
            });
            const buys = answer.snapshot.result?.media_buys;
            // Filter again: a seller that ignores the filter must not make us adopt someone else's buy.
            const buy = Array.isArray(buys)
              ? buys.find(
                  (entry): entry is Record<string, unknown> =>
                    !!entry && typeof entry === 'object' && (entry as Record<string, unknown>).buyer_ref === reference,
                )
              : undefined;
            if (buy)
              return {
                supported: true,
                snapshot: { status: 'completed', result: buy },
                note: `found media buy ${String(buy.media_buy_id)} by its buyer_ref`,
              };
            return { supported: true, note: `no task and no media buy at ${agent.id} carries buyer_ref ${reference}` };
          }
          if (!page.supported) return { supported: false, note: `${agent.id} has no tasks/list or list_tasks` };
          return { supported: true, note: `no ${input.task} task at ${agent.id} carries key ${key}` };
        },
        input.tenant,
      );
    },

    /** Tells the seller what it can be told when an operation is canceled, and says plainly what is still live. */
    async cancelAtSeller(input: CancelAtSellerInput): Promise<CancelAtSellerOutcome> {
      const bound = input.timeouts ?? deps.timeouts;
      // Bounded like a read: the workflow runs it in its read group, after the operation was already canceled.
      return guarded(
        input.sellerId,
        bound.readMs,
        async (context) => {
          if (input.mediaBuyId) return cancelMediaBuy(context, input, input.mediaBuyId);
          if (!input.taskId)
            return { notified: false, note: 'no seller task and no media buy to cancel; the seller was not told' };
          return seller.cancelTask({
            ...context,
            taskId: input.taskId,
            ...(input.contextId ? { contextId: input.contextId } : {}),
          });
        },
        input.tenant,
      );
    },
  };
}

export type RecoveryActivities = ReturnType<typeof createRecoveryActivities>;

/**
 * The task a lost call made, in a listing asked for by the call's key (`context_contains`): only where the seller
 * says it applied that filter (`filters_applied`) or the row itself carries the key. A list that ignores AdCP's
 * filters (a seller's own list_tasks) lists every task, and its first create would be adopted by every lost call:
 * its tasks are counted as `untrusted`, never adopted.
 */
export function taskCarryingKey(
  page: TaskListPage,
  task: string,
  reference: string,
): { match?: SellerTaskSummary; untrusted: number } {
  const filtered = page.filtersApplied?.includes('context_contains') === true;
  const candidates = page.tasks.filter((entry) => !entry.taskType || entry.taskType === task);
  const carrying = candidates.filter(
    (entry) =>
      filtered || JSON.stringify(page.rows?.find((row) => row.task_id === entry.taskId) ?? {}).includes(reference),
  );
  const match = carrying.sort((a, b) => (a.createdAt ?? '').localeCompare(b.createdAt ?? ''))[0];
  return { ...(match ? { match } : {}), untrusted: match ? 0 : candidates.length };
}
