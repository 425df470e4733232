/**
 * Remembers what a pure function of a string answered for the most recent inputs (lru-cache's memo). Used for the
 * target-URI derivations, which parse the URL (WHATWG URL, regular expressions) every time for a string that repeats:
 * every webhook of an operation is posted to that operation's one URL. Throws are not remembered (they are recomputed
 * and thrown again), and a function that is not pure must never be given to it.
 */
import { LRUCache } from 'lru-cache';

export class StringMemo<T extends NonNullable<unknown>> {
  private readonly answers: LRUCache<string, T>;

  constructor(compute: (input: string) => T, maxEntries = 1024) {
    this.answers = new LRUCache<string, T>({ max: maxEntries, memoMethod: (input) => compute(input) });
  }

  get size(): number {
    return this.answers.size;
  }

  get(input: string): T {
    return this.answers.memo(input);
  }
}
