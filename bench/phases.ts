import { mapConcurrent } from './async';
import { type CpuTimes, addCpu, cpuSince, cpuTimes } from './cpu';
import type { BenchStack } from './stack';
import { median } from './stats';

/** One timed batch of one mode: how many items, how long, and the CPU every process of the stack spent. */
export interface Phase<Mode extends string> {
  mode: Mode;
  count: number;
  elapsedMs: number;
  perSecond: number;
  /** Median time of one item, from its start to its end. */
  medianMs: number;
  cpu: CpuTimes;
  /** Wall-clock bounds (epoch ms), to tell which history events the phase caused. */
  startedAt: number;
  endedAt: number;
}

/** Runs `task` over `items`, `concurrency` at a time, and times the batch. */
export async function timedPhase<Mode extends string, T>(
  stack: BenchStack,
  mode: Mode,
  items: readonly T[],
  concurrency: number,
  task: (item: T) => Promise<void>,
): Promise<Phase<Mode>> {
  const durations: number[] = [];
  const cpuBefore = cpuTimes(stack);
  const startedAt = Date.now();
  const began = performance.now();
  await mapConcurrent(items, concurrency, async (item) => {
    const start = performance.now();
    await task(item);
    durations.push(performance.now() - start);
  });
  const elapsedMs = performance.now() - began;
  return {
    mode,
    count: items.length,
    elapsedMs,
    perSecond: (items.length * 1000) / elapsedMs,
    medianMs: median(durations),
    cpu: cpuSince(stack, cpuBefore),
    startedAt,
    endedAt: Date.now(),
  };
}

/** All phases of one mode together: total rate, median of the phases' medians, summed CPU. */
export function totalOf<Mode extends string>(
  phases: readonly Phase<Mode>[],
  mode: Mode,
): Omit<Phase<Mode>, 'mode' | 'startedAt' | 'endedAt'> {
  const list = phases.filter((phase) => phase.mode === mode);
  const count = list.reduce((sum, phase) => sum + phase.count, 0);
  const elapsedMs = list.reduce((sum, phase) => sum + phase.elapsedMs, 0);
  return {
    count,
    elapsedMs,
    perSecond: (count * 1000) / elapsedMs,
    medianMs: median(list.map((phase) => phase.medianMs)),
    cpu: list.reduce<CpuTimes>((sum, phase) => addCpu(sum, phase.cpu), {}),
  };
}
