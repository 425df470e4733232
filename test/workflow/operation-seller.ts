/**
 * Stand-ins for the operation's activities, over one in-memory seller task a test scripts: what each call answers,
 * when the task moves, what reconciliation finds, what a cancel does. Every input is recorded, so a test can say
 * what the workflow asked for. The polling stand-in keeps the cadence the way the real activity does (each unchanged
 * poll is a retry with `nextRetryDelay`), so the time-skipping server skips the waits between polls.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { CancelledFailure, type WorkflowHandle, WorkflowFailedError } from '@temporalio/client';
import type {
  AwaitTaskMoveOnCadenceInput,
  AwaitTaskMoveOutcome,
  CallPlan,
  CancelAtSellerInput,
  CancelAtSellerOutcome,
  FindLostTaskInput,
  FindLostTaskOutcome,
  PlanCallInput,
  ReadTaskInput,
  ReadTaskOutcome,
  SendCallInput,
  SendCallOutcome,
} from '../../contract/activities';
import type { RegisterWithWatcherOutcome } from '../../contract/task-watcher';
import type { BuyerNotification, NotificationOutcome } from '../../contract/notification';
import {
  type OperationInput,
  type OperationState,
  OPERATION_WORKFLOW_TYPE,
  operationStateFromFailure,
  statusQuery,
} from '../../contract/operation';
import type { AdcpError, TaskSnapshot } from '../../protocol';
import { type WorkflowStack, until } from './harness';

export const TIMEOUTS = { callMs: 5_000, readMs: 5_000 };

/** An AdCP error as the real activities throw it: the error in details[0]. */
export function adcpFailure(error: AdcpError, nonRetryable = true): ApplicationFailure {
  return ApplicationFailure.create({ type: error.code, message: error.message, nonRetryable, details: [error] });
}

/** A promise the test opens; an activity waiting on it heartbeats, so a cancel reaches it. */
export class Gate {
  private opened = false;
  private release!: () => void;
  readonly promise = new Promise<void>((resolve) => (this.release = resolve));
  /** Whether an activity is waiting on it now. */
  waiting = false;
  open(): void {
    this.opened = true;
    this.release();
  }
  async pass(): Promise<void> {
    const context = Context.current();
    this.waiting = true;
    try {
      while (!this.opened) {
        context.heartbeat();
        await Promise.race([this.promise, context.sleep(100)]);
      }
    } finally {
      this.waiting = false;
    }
  }
}

type Answer = (input: SendCallInput, step: string) => SendCallOutcome | Promise<SendCallOutcome>;

export class StandInSeller {
  plans: PlanCallInput[] = [];
  calls: { step: string; input: SendCallInput }[] = [];
  reads: ReadTaskInput[] = [];
  /** One entry per poll made (attempts that only waited for the first poll are not polls). */
  polls: AwaitTaskMoveOnCadenceInput[] = [];
  lookups: FindLostTaskInput[] = [];
  cancels: CancelAtSellerInput[] = [];
  notifications: BuyerNotification[] = [];
  /** What the seller holds: what reads see. */
  task: TaskSnapshot | undefined;
  /** Applied to the task at the given poll (counted over all polls). */
  moves: { atPoll: number; to: TaskSnapshot }[] = [];
  /** What each call answers; by default the task becomes submitted. */
  answer: Answer = () => this.hold({ status: 'submitted', taskId: 't1' });
  lookup: (input: FindLostTaskInput) => FindLostTaskOutcome = () => ({
    supported: true,
    note: 'no task from that key',
  });

  /** The seller now holds `snapshot` as its task; the call answers it. */
  hold(snapshot: TaskSnapshot, webhookRegistered = false): SendCallOutcome {
    this.task = snapshot;
    return { snapshot, webhookRegistered };
  }

  read(): ReadTaskOutcome {
    if (!this.task)
      return { readMethod: 'none', unreadable: { code: 'NOT_FOUND', message: 'no task', recovery: 'transient' } };
    return { snapshot: this.task, readMethod: 'tasks/get' };
  }

  /** One poll of the polling activity's attempt; throws the benign failure that asks for the next one. */
  poll(input: AwaitTaskMoveOnCadenceInput, attempt: number): AwaitTaskMoveOutcome {
    const { cadence } = input;
    const waitsFirst = cadence.firstPollAfterMs > 0;
    if (waitsFirst && attempt === 1)
      throw ApplicationFailure.create({
        type: 'TaskPollDue',
        message: 'first poll later',
        category: 'BENIGN',
        details: [{ polls: 0 }],
        nextRetryDelay: cadence.firstPollAfterMs,
      });
    const polls = waitsFirst ? attempt - 1 : attempt;
    this.polls.push(input);
    const move = this.moves.find((candidate) => candidate.atPoll === this.polls.length);
    if (move) this.task = move.to;
    const outcome = this.read();
    const snapshot = outcome.snapshot;
    const unchanged =
      !snapshot ||
      (snapshot.status === input.since.status &&
        JSON.stringify(snapshot.progress ?? null) === JSON.stringify(input.since.progress ?? null));
    if (unchanged)
      throw ApplicationFailure.create({
        type: 'TaskUnchanged',
        message: 'not moved',
        category: 'BENIGN',
        details: [{ polls }],
        nextRetryDelay: Math.min(cadence.initialIntervalMs * 2 ** Math.max(polls - 1, 0), cadence.maxIntervalMs),
      });
    return { ...outcome, polls };
  }
}

/** The activities a worker registers, each handing its input to the seller the test runs now. */
export function standInActivities(seller: () => StandInSeller) {
  return {
    async planCall(input: PlanCallInput): Promise<CallPlan> {
      seller().plans.push(input);
      return {
        operationId: input.operationId,
        sellerId: input.sellerId,
        task: input.task,
        step: input.step,
        protocol: 'mcp',
        args: { ...input.params, idempotency_key: `${input.operationId}:${input.step}` },
        timeouts: TIMEOUTS,
      };
    },
    async sendCall(input: SendCallInput): Promise<SendCallOutcome> {
      const step = input.plan?.step ?? input.planInput?.step ?? '?';
      seller().calls.push({ step, input });
      const outcome = await seller().answer(input, step);
      return input.planInput ? { ...outcome, timeouts: TIMEOUTS } : outcome;
    },
    async readTask(input: ReadTaskInput): Promise<ReadTaskOutcome> {
      seller().reads.push(input);
      return seller().read();
    },
    async awaitTaskMoveOnCadence(input: AwaitTaskMoveOnCadenceInput): Promise<AwaitTaskMoveOutcome> {
      return seller().poll(input, Context.current().info.attempt);
    },
    async findLostTask(input: FindLostTaskInput): Promise<FindLostTaskOutcome> {
      seller().lookups.push(input);
      return seller().lookup(input);
    },
    async cancelAtSeller(input: CancelAtSellerInput): Promise<CancelAtSellerOutcome> {
      seller().cancels.push(input);
      return {
        notified: true,
        note: 'canceled at the seller',
        ...(input.mediaBuyId ? { resource: { mediaBuyId: input.mediaBuyId, state: 'canceled' as const } } : {}),
      };
    },
    async deliverNotification(notification: BuyerNotification): Promise<NotificationOutcome> {
      seller().notifications.push(notification);
      return { delivered: true, status: 200, note: 'delivered' };
    },
    // This seller cannot list its tasks: its operations poll on their own.
    async registerWithTaskWatcher(): Promise<RegisterWithWatcherOutcome> {
      return { watching: false, reason: 'the stand-in seller offers no list_tasks' };
    },
    async unregisterFromTaskWatcher(): Promise<void> {},
  };
}

let operations = 0;

/** Starts an operation on the stack's worker (a create_media_buy by default). */
export async function startOperation(
  stack: WorkflowStack,
  input: Partial<OperationInput> = {},
): Promise<WorkflowHandle> {
  operations += 1;
  return stack.client.workflow.start(OPERATION_WORKFLOW_TYPE, {
    workflowId: `adcp-op-${operations}-${Date.now()}`,
    taskQueue: stack.taskQueue,
    args: [
      {
        sellerId: 'seller',
        task: 'create_media_buy',
        params: { account: { account_id: 'acc_1' }, packages: [{ product_id: 'p1', budget: 1_000 }] },
        ...input,
      } satisfies OperationInput,
    ],
  });
}

/**
 * The operation's final state, whether the workflow returned it or failed with it. Temporal records no details with
 * a cancellation, so a workflow that ended Canceled is asked (the worker answers a query of a closed workflow).
 */
export async function settled(handle: WorkflowHandle): Promise<OperationState> {
  try {
    return (await handle.result()) as OperationState;
  } catch (error) {
    const state = operationStateFromFailure(error);
    if (state) return state;
    if (error instanceof WorkflowFailedError && error.cause instanceof CancelledFailure)
      return handle.query(statusQuery);
    throw error;
  }
}

/** Waits (without skipping time) until the operation's state passes `check`. */
export function stateWhen(handle: WorkflowHandle, check: (state: OperationState) => boolean): Promise<OperationState> {
  return until(async () => {
    const state = await handle.query(statusQuery);
    return check(state) ? state : undefined;
  });
}
