/**
 * Memory readings from inside a worker process without changing its code. The probe below is preloaded with
 * `--require` into the real worker entry point (workers/main.ts). Node runs `--require` preloads in every thread
 * too, which matters here: the Temporal SDK runs workflow sandboxes in a worker thread with its own V8 heap,
 * which the main thread's `process.memoryUsage().heapUsed` does not include.
 *
 * On an IPC request the probe runs a full GC in each thread (the process runs with `--expose-gc`) and answers
 * with the process RSS and each thread's V8 heap statistics. The threads answer over a BroadcastChannel, so the
 * probe never touches the SDK's own thread messages.
 *
 * It is plain CommonJS written out at run time: worker threads do not get tsx's loader, so a .ts preload could
 * not load there.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';

export const MEMORY_REQUEST = 'adcp-bench-memory';

export interface HeapReading {
  threadId: number;
  /** `workflows`: the SDK's workflow thread; `other`: any other thread (tsx's module loader, for one). */
  kind: 'main' | 'workflows' | 'other';
  /** V8 `used_heap_size` after a full GC of that thread's isolate. */
  usedHeapBytes: number;
  totalHeapBytes: number;
  externalBytes: number;
}

export interface MemoryReading {
  pid: number;
  /** Resident set of the whole process: main thread, workflow threads, the SDK's Rust core, code. */
  rssBytes: number;
  /** The main thread: activities, the SDK's worker loop, connections. */
  main: HeapReading;
  /** The other threads: the SDK's workflow thread (sandboxes and their state) and tsx's loader thread. */
  threads: HeapReading[];
}

const PROBE_SOURCE = `'use strict';
// adcp-orchestrator bench memory probe (written by bench/memory-probe.ts; see there).
const { isMainThread, threadId } = require('node:worker_threads');
const v8 = require('node:v8');
const REQUEST = ${JSON.stringify(MEMORY_REQUEST)};
const THREAD_WAIT_MS = 2000; // a workflow thread busy with many workflows answers late
const channel = new BroadcastChannel(REQUEST);
function reading() {
  if (typeof globalThis.gc === 'function') globalThis.gc();
  const stats = v8.getHeapStatistics();
  const kind = isMainThread ? 'main' : Object.keys(require.cache).some((file) => file.includes('workflow-worker-thread')) ? 'workflows' : 'other';
  return { threadId, kind, usedHeapBytes: stats.used_heap_size, totalHeapBytes: stats.total_heap_size, externalBytes: stats.external_memory };
}
if (!isMainThread) {
  channel.onmessage = (event) => {
    const message = event.data;
    if (message && message.kind === 'request') channel.postMessage({ kind: 'reply', id: message.id, heap: reading() });
  };
  channel.unref();
} else if (typeof process.send === 'function') {
  const replies = new Map();
  channel.onmessage = (event) => {
    const message = event.data;
    if (message && message.kind === 'reply' && replies.has(message.id)) replies.get(message.id).push(message.heap);
  };
  channel.unref();
  process.on('message', (message) => {
    if (!message || message.type !== REQUEST) return;
    const threads = [];
    replies.set(message.id, threads);
    const main = reading();
    channel.postMessage({ kind: 'request', id: message.id });
    setTimeout(() => {
      replies.delete(message.id);
      process.send({ type: REQUEST, id: message.id, reading: { pid: process.pid, rssBytes: process.memoryUsage().rss, main, threads } });
    }, THREAD_WAIT_MS);
  });
  // The bench went away without stopping this worker: do not outlive it.
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  // Answering requests must not keep a worker alive that is shutting down.
  process.channel.unref();
}
`;

/** Writes the probe into `dir` and returns its path, for `--require`. */
export function writeMemoryProbe(dir: string): string {
  const file = path.join(dir, 'memory-probe.cjs');
  writeFileSync(file, PROBE_SOURCE);
  return file;
}

let nextRequestId = 0;

/** Asks a process started with the probe (and an IPC channel) for a reading. */
export function readMemory(child: ChildProcess, timeoutMs = 30_000): Promise<MemoryReading> {
  const id = ++nextRequestId;
  return new Promise((resolve, reject) => {
    const onMessage = (message: unknown) => {
      const reply = message as { type?: string; id?: number; reading?: MemoryReading };
      if (reply?.type !== MEMORY_REQUEST || reply.id !== id || !reply.reading) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(reply.reading);
    };
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      reject(
        new Error(
          `Worker ${child.pid} did not answer a memory request within ${timeoutMs} ms (was it started with the probe?).`,
        ),
      );
    }, timeoutMs);
    child.on('message', onMessage);
    child.send({ type: MEMORY_REQUEST, id });
  });
}

/** V8 heap in use in the SDK's workflow thread(s), where the workflow sandboxes and their state live. */
export function workflowThreadHeap(reading: MemoryReading): number {
  const threads = reading.threads.filter((thread) => thread.kind === 'workflows');
  if (threads.length === 0) return Number.NaN; // it did not answer in time (busy): the reading has no figure for it
  return threads.reduce((sum, thread) => sum + thread.usedHeapBytes, 0);
}
