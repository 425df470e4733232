/**
 * CPU time per process of the stack, to show where a benchmark's time goes. Children are read from
 * /proc/<pid>/stat (Linux; elsewhere they read as NaN); the bench process (seller, clients, load generators)
 * from process.cpuUsage().
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { BenchStack } from './stack';

export type CpuTimes = Record<string, number>;

let ticksPerSecond: number | undefined;
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** User + system CPU milliseconds a process has used so far. */
function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at field 3; utime and stime are 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks();
  } catch {
    return Number.NaN;
  }
}

export function cpuTimes(stack: BenchStack): CpuTimes {
  const own = process.cpuUsage();
  return {
    temporal: processCpuMs(stack.temporal.child.pid),
    gateway: processCpuMs(stack.gateway.child.pid),
    'worker (webhooks)': processCpuMs(stack.webhookWorker.process.child.pid),
    'worker (polling)': processCpuMs(stack.pollingWorker.process.child.pid),
    'bench (seller, clients)': (own.user + own.system) / 1000,
    ...Object.fromEntries(
      [...stack.extraWorkers].map((worker) => [`worker (${worker.name})`, processCpuMs(worker.process.child.pid)]),
    ),
  };
}

export function cpuSince(stack: BenchStack, before: CpuTimes): CpuTimes {
  const now = cpuTimes(stack);
  // A process that started or ended in between counts from zero or is left out.
  return Object.fromEntries(
    Object.entries(now)
      .filter(([name]) => name in before || Number.isFinite(now[name]))
      .map(([name, ms]) => [name, ms - (before[name] ?? 0)]),
  );
}

export function addCpu(total: CpuTimes, more: CpuTimes): CpuTimes {
  const sum: CpuTimes = { ...total };
  for (const [name, ms] of Object.entries(more)) sum[name] = (sum[name] ?? 0) + ms;
  return sum;
}

/** "worker (polling) 12.1, temporal 5.0, ..." in ms per unit, largest first, leaving out processes under 0.05 ms. */
export function describeCpuPer(cpu: CpuTimes, units: number): string {
  const parts = Object.entries(cpu)
    .map(([name, ms]) => [name, ms / units] as const)
    .filter(([, ms]) => Number.isFinite(ms) && ms >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${ms.toFixed(1)}`);
  const total = Object.values(cpu).reduce((sum, ms) => sum + (Number.isFinite(ms) ? ms : 0), 0) / units;
  return `${total.toFixed(1)} ms CPU (${parts.join(', ')})`;
}
