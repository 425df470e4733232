import { idempotencyKeyFor } from '../activities/idempotency';
import type { ScriptedSeller, TaskView } from '../test/fixtures/scripted-seller';

/**
 * Finds the seller task an operation's first call created, by the idempotency key the activity derives from the
 * operation ID: the bench learns it from the seller, without querying the workflow (which would add load).
 * One shared poll of the seller's task list serves every waiter.
 */
export class SellerTasks {
  private readonly waiting = new Map<
    string,
    { resolve: (task: TaskView) => void; reject: (error: Error) => void; deadline: number; operationId: string }
  >();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly seller: ScriptedSeller,
    private readonly intervalMs = 20,
  ) {}

  forOperation(operationId: string, timeoutMs = 60_000): Promise<TaskView> {
    return new Promise((resolve, reject) => {
      this.waiting.set(idempotencyKeyFor(operationId, 'call'), {
        resolve,
        reject,
        deadline: Date.now() + timeoutMs,
        operationId,
      });
      this.timer ??= setInterval(() => this.tick(), this.intervalMs);
    });
  }

  private tick(): void {
    for (const task of this.seller.tasks()) {
      const waiter = task.idempotencyKey ? this.waiting.get(task.idempotencyKey) : undefined;
      if (!waiter) continue;
      this.waiting.delete(task.idempotencyKey!);
      waiter.resolve(task);
    }
    const now = Date.now();
    for (const [key, waiter] of this.waiting) {
      if (now <= waiter.deadline) continue;
      this.waiting.delete(key);
      waiter.reject(new Error(`The seller never received the call of operation ${waiter.operationId}.`));
    }
    if (this.waiting.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
