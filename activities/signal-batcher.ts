/**
 * Signals to one workflow, gathered: every caller adds its item and waits; the items that arrived while the last
 * signal was in flight (or within `delayMs` of the first) go out together as one signal. A watcher that many parked
 * operations join at once then takes one signal per batch, not one per operation: Temporal serializes signals to one
 * workflow, and each would be an event in its history and a workflow task of its own.
 *
 * One signal per target in flight at a time: a slow target gathers bigger batches instead of more concurrent calls.
 * A failed send fails every item of its batch (each caller decides what that means).
 */
export interface SignalBatcherOptions {
  /** How long the first item of a batch waits for others (ms). */
  delayMs: number;
  /** Items per signal at most (a signal's payload stays far below Temporal's limit). */
  maxBatch: number;
}

interface Waiter<T> {
  item: T;
  resolve: () => void;
  reject: (error: unknown) => void;
}

interface Target<T> {
  queued: Waiter<T>[];
  timer: ReturnType<typeof setTimeout> | undefined;
  sending: boolean;
}

export class SignalBatcher<T> {
  private readonly targets = new Map<string, Target<T>>();

  constructor(
    private readonly send: (target: string, items: T[]) => Promise<void>,
    private readonly options: SignalBatcherOptions,
  ) {}

  /** Resolves when a signal carrying `item` reached `target`; rejects with that signal's failure. */
  add(target: string, item: T): Promise<void> {
    let entry = this.targets.get(target);
    if (!entry) {
      entry = { queued: [], timer: undefined, sending: false };
      this.targets.set(target, entry);
    }
    const queued = entry.queued;
    const done = new Promise<void>((resolve, reject) => queued.push({ item, resolve, reject }));
    this.schedule(target, entry);
    return done;
  }

  private schedule(target: string, entry: Target<T>): void {
    if (entry.sending || entry.timer || entry.queued.length === 0) return;
    if (entry.queued.length >= this.options.maxBatch) {
      void this.flush(target, entry);
      return;
    }
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      void this.flush(target, entry);
    }, this.options.delayMs);
  }

  private async flush(target: string, entry: Target<T>): Promise<void> {
    if (entry.sending) return;
    if (entry.timer) {
      clearTimeout(entry.timer);
      entry.timer = undefined;
    }
    const batch = entry.queued.splice(0, this.options.maxBatch);
    if (batch.length === 0) return;
    entry.sending = true;
    try {
      await this.send(
        target,
        batch.map((waiter) => waiter.item),
      );
      for (const waiter of batch) waiter.resolve();
    } catch (error) {
      for (const waiter of batch) waiter.reject(error);
    } finally {
      entry.sending = false;
      // What gathered meanwhile goes at once: it has waited for the send already.
      if (entry.queued.length > 0) void this.flush(target, entry);
      else this.targets.delete(target);
    }
  }
}
