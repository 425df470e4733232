/**
 * Remembers what a pure function of a string answered for the most recent inputs. Used for the target-URI
 * derivations, which parse the URL (WHATWG URL, regular expressions) every time for a string that repeats: every
 * webhook of an operation is posted to that operation's one URL. Throws are not remembered (they are recomputed and
 * thrown again), and a function that is not pure must never be given to it.
 */
export class StringMemo<T> {
  private readonly answers = new Map<string, T>();

  constructor(
    private readonly compute: (input: string) => T,
    private readonly maxEntries: number = 1024,
  ) {}

  get size(): number {
    return this.answers.size;
  }

  get(input: string): T {
    let answer = this.answers.get(input);
    if (answer === undefined && !this.answers.has(input)) {
      answer = this.compute(input);
      // Oldest first out: cheap, and an operation's webhooks come close together.
      if (this.answers.size >= this.maxEntries) this.answers.delete(this.answers.keys().next().value!);
      this.answers.set(input, answer);
    }
    return answer as T;
  }
}
