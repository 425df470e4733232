import v8 from 'node:v8';
import vm from 'node:vm';
import { anySignal, deadlineSignal } from '../../activities/linked-signal';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

async function collected(ref: WeakRef<object>): Promise<boolean> {
  for (let round = 0; round < 5; round++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    if (ref.deref() === undefined) return true;
  }
  return false;
}

describe('anySignal', () => {
  it('aborts with the reason of the first source that aborts, and only once', () => {
    const first = new AbortController();
    const second = new AbortController();
    const signal = anySignal([first.signal, second.signal]);
    const reasons: unknown[] = [];
    signal.addEventListener('abort', () => reasons.push(signal.reason));
    second.abort('second');
    first.abort('first');
    expect(reasons).toEqual(['second']);
  });

  it('is aborted at once when a source already is', () => {
    const done = new AbortController();
    done.abort('early');
    const signal = anySignal([new AbortController().signal, done.signal]);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('early');
  });

  it('lets go of a listener and what it holds once the signal is out of reach (AbortSignal.any keeps it on Node 20)', async () => {
    const source = new AbortController();
    let ref: WeakRef<object>;
    (() => {
      const held = { payload: new Array(1000).fill('x') };
      ref = new WeakRef(held);
      const signal = anySignal([new AbortController().signal, AbortSignal.timeout(1)]);
      signal.addEventListener('abort', () => held.payload.length);
    })();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await collected(ref!)).toBe(true);
    source.abort();
  });
});

describe('deadlineSignal', () => {
  it('aborts with a TimeoutError at the deadline, like AbortSignal.timeout', async () => {
    const deadline = deadlineSignal(new AbortController().signal, 5);
    await new Promise((resolve) => deadline.signal.addEventListener('abort', resolve));
    expect((deadline.signal.reason as DOMException).name).toBe('TimeoutError');
    deadline.dispose();
  });

  it('aborts with the source reason when the source aborts first', () => {
    const source = new AbortController();
    const deadline = deadlineSignal(source.signal, 60_000);
    source.abort('canceled by Temporal');
    expect(deadline.signal.reason).toBe('canceled by Temporal');
    deadline.dispose();
  });

  it('never fires after dispose, and leaves no listener on the source', async () => {
    const source = new AbortController();
    const deadline = deadlineSignal(source.signal, 5);
    deadline.dispose();
    await new Promise((resolve) => setTimeout(resolve, 30));
    source.abort('late');
    expect(deadline.signal.aborted).toBe(false);
  });
});
