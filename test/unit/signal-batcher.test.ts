/** Signals gathered per target: one in flight per target, what arrives meanwhile goes next, failures per batch. */
import { SignalBatcher } from '../../activities/signal-batcher';

function deferred() {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => (release = resolve));
  return { promise, release };
}

describe('SignalBatcher', () => {
  it('sends what arrived within the delay as one signal per target', async () => {
    const sent: Array<[string, number[]]> = [];
    const batcher = new SignalBatcher<number>(
      async (target, items) => {
        sent.push([target, items]);
      },
      { delayMs: 5, maxBatch: 100 },
    );
    await Promise.all([batcher.add('a', 1), batcher.add('a', 2), batcher.add('b', 3), batcher.add('a', 4)]);
    expect(sent).toEqual([
      ['a', [1, 2, 4]],
      ['b', [3]],
    ]);
  });

  it('keeps one signal in flight per target; what arrives meanwhile goes in the next, at most maxBatch each', async () => {
    const sent: number[][] = [];
    const gate = deferred();
    const batcher = new SignalBatcher<number>(
      async (_target, items) => {
        sent.push(items);
        if (sent.length === 1) await gate.promise;
      },
      { delayMs: 1, maxBatch: 2 },
    );
    const first = batcher.add('a', 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const later = [2, 3, 4].map((item) => batcher.add('a', item));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sent).toEqual([[1]]);
    gate.release();
    await Promise.all([first, ...later]);
    expect(sent).toEqual([[1], [2, 3], [4]]);
  });

  it("fails every item of a failed signal, and only that signal's", async () => {
    let calls = 0;
    const batcher = new SignalBatcher<string>(
      async () => {
        calls += 1;
        if (calls === 1) throw new Error('unavailable');
      },
      { delayMs: 1, maxBatch: 10 },
    );
    const failed = await Promise.allSettled([batcher.add('a', 'x'), batcher.add('a', 'y')]);
    expect(failed.map((result) => result.status)).toEqual(['rejected', 'rejected']);
    await expect(batcher.add('a', 'z')).resolves.toBeUndefined();
  });
});
