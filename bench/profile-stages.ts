/**
 * Where a profiled gateway's CPU goes, by stage of a webhook: `npx tsx bench/profile-stages.ts <gateway .cpuprofile>`
 * (from `BENCH_CPU_PROFILE=<dir> npm run bench -- --only=throughput`; the gateway's profile is the one whose frames
 * include api/webhooks.js). Each sample from the first webhook to the last is charged to the stage of the frame
 * nearest the top of its stack that is not Node's own (so Node's socket write under the route's answer is the
 * route's, and Node's HTTP parser under nothing of ours is "node core"). `--cpu-ms=<n>` scales the shares to a
 * measured CPU per webhook (the unprofiled run's "B2 gateway CPU per webhook"), since the profiler slows every stage.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const STAGES: [string, RegExp][] = [
  ['RFC 9421 verification (headers, digest, Ed25519)', /webhook-verification\/|@adcp\/sdk\/dist\/lib\/signing/],
  [
    'Temporal signal (client, payload converter, protobuf, core bridge)',
    /@temporalio|protobufjs|long\/|temporal-connection|tenant-payload-converter|payload-codec|contract\//,
  ],
  ['parse (strict JSON, webhook payload)', /api\/body\.js|protocol\//],
  ['body read (raw-body, body-parser)', /raw-body|body-parser|iconv-lite|\/bytes\/|content-type|type-is|media-typer/],
  ['request log (pino-http, pino)', /pino|sonic-boom|request-logging|quick-format|atomic-sleep|safe-stable/],
  ['metrics (prom-client)', /gateway-metrics|prom-client|tdigest|bintrees/],
  ['security headers, Host, path checks (helmet, hardening)', /helmet|hardening\.js|express-rate-limit/],
  ['webhook route and its answer (api/webhooks.js)', /api\/webhooks\.js|api\/problems/],
  [
    'express and its router (three nested apps)',
    /express|router|path-to-regexp|finalhandler|parseurl|encodeurl|on-finished|proxy-addr|forwarded|setprototypeof|statuses|http-errors/,
  ],
];

function stageOf(stack: ProfileNode[]): string {
  const leaf = stack[0]!.callFrame.functionName;
  if (leaf === '(garbage collector)') return 'garbage collection';
  if (leaf === '(program)') return 'V8 and native code outside JavaScript';
  for (const node of stack) {
    const url = node.callFrame.url;
    if (!url || url.startsWith('node:')) continue;
    for (const [stage, pattern] of STAGES) if (pattern.test(url)) return stage;
    return `other: ${url.replace(/^.*node_modules\//, '').replace(/^.*dist\/app\//, '')}`;
  }
  return 'node core (HTTP parser, sockets, streams, timers)';
}

function main(): void {
  const file = process.argv.slice(2).find((arg) => !arg.startsWith('--'));
  if (!file) throw new Error('usage: npx tsx bench/profile-stages.ts <gateway .cpuprofile> [--cpu-ms=<n>]');
  const cpuMs = Number(process.argv.find((arg) => arg.startsWith('--cpu-ms='))?.slice('--cpu-ms='.length) ?? NaN);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const stackOf = (id: number): ProfileNode[] => {
    const stack: ProfileNode[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(nodes.get(at)!);
    return stack;
  };
  const inWebhook = (index: number) =>
    stackOf(profile.samples[index]!).some((node) => node.callFrame.url.includes('api/webhooks.js'));
  let first = profile.samples.findIndex((_, index) => inWebhook(index));
  let last = profile.samples.length - 1;
  while (last > first && !inWebhook(last)) last -= 1;
  if (first < 0) first = 0;
  const byStage = new Map<string, number>();
  let busyMs = 0;
  for (let index = first; index <= last; index++) {
    const stack = stackOf(profile.samples[index]!);
    if (stack[0]!.callFrame.functionName === '(idle)') continue;
    const ms = (profile.timeDeltas[index + 1] ?? 0) / 1000;
    busyMs += ms;
    const stage = stageOf(stack);
    byStage.set(stage, (byStage.get(stage) ?? 0) + ms);
  }
  console.log(`busy ${busyMs.toFixed(0)} ms from the first webhook to the last`);
  for (const [stage, ms] of [...byStage].sort((a, b) => b[1] - a[1])) {
    if (ms / busyMs < 0.005) continue;
    const scaled = Number.isFinite(cpuMs) ? `${((cpuMs * 1000 * ms) / busyMs).toFixed(0).padStart(5)} us  ` : '';
    console.log(`${((100 * ms) / busyMs).toFixed(1).padStart(5)}%  ${scaled}${stage}`);
  }
}

main();
