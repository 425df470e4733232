/**
 * Preloaded workflow modules (workers/bundle-options.ts): what the bundle shares, and that sharing the modules shares
 * no state. The bundle is the one tests and the worker build (test/harness/temporal.ts, workers/workflow-bundle.ts);
 * the workflows run in one worker, in one reusable V8 context, against the scripted seller on loopback.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { type OperationState, statusQuery } from '../../contract/operation';
import { PRELOADED_WORKFLOW_SOURCES, workflowPreloadModules } from '../../workers/bundle-options';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type TestStack, eventually, registry, startTestStack, workflowBundle } from '../harness/temporal';

const ROOT = path.resolve(__dirname, '../..');

/** The modules of a webpack bundle (development output, as Temporal's bundler writes it) and what each requires. */
function modulesOf(code: string): Map<string, string[]> {
  const headers = [...code.matchAll(/^\/\*\*\*\/ "([^"]+)"$/gm)];
  // The module map ends where webpack's runtime starts (a line of asterisks), before the entry point's code.
  const last = headers[headers.length - 1];
  const end = last ? code.indexOf('\n/****************', last.index) : -1;
  const modules = new Map<string, string[]>();
  headers.forEach((header, index) => {
    const body = code.slice(header.index, headers[index + 1]?.index ?? end);
    const requires = [...body.matchAll(/__webpack_require__\((?:\/\*[^*]*(?:\*(?!\/)[^*]*)*\*\/\s*)*"([^"]+)"\)/g)].map(
      (match) => match[1],
    );
    modules.set(header[1], [...new Set(requires)]);
  });
  return modules;
}

/** Every module the given ones load when evaluated (webpack requires them at their top level). */
function closure(modules: Map<string, string[]>, roots: string[]): Set<string> {
  const seen = new Set<string>();
  const pending = [...roots];
  while (pending.length > 0) {
    const next = pending.pop()!;
    if (seen.has(next) || !modules.has(next)) continue;
    seen.add(next);
    pending.push(...modules.get(next)!);
  }
  return seen;
}

/** `./workflows/operation.ts` for the module id webpack gives a source file of this repository. */
const moduleId = (file: string) => `./${path.relative(ROOT, file).split(path.sep).join('/')}`;

let seller: ScriptedSeller;
let stack: TestStack;

beforeAll(async () => {
  seller = await startScriptedSeller({ a2a: false });
  stack = await startTestStack({
    sellers: registry([{ id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
});
afterAll(async () => {
  await stack?.close();
  await seller?.close();
});

test('the bundle shares every module of this repository, each reviewed, and nothing else of ours', async () => {
  const { code } = await workflowBundle();
  const modules = modulesOf(code);
  expect(modules.size).toBeGreaterThan(100);
  // What Temporal's entry point loads at startup (shared before preloading existed).
  const bootstrap = [...modules.keys()].filter((id) =>
    /@temporalio\/workflow\/lib\/(worker-interface|global-overrides)\.js$/.test(id),
  );
  expect(bootstrap).toHaveLength(2);
  const sharedBefore = closure(modules, bootstrap);
  const preloadBlock = /exports\.preloadModules = function preloadModules\(\) \{([\s\S]*?)\n\}/.exec(code);
  expect(preloadBlock).not.toBeNull();
  const preloaded = [
    ...preloadBlock![1].matchAll(/__webpack_require__\((?:\/\*[^*]*(?:\*(?!\/)[^*]*)*\*\/\s*)*"([^"]+)"\)/g),
  ].map((match) => match[1]);
  expect(preloaded).toHaveLength(workflowPreloadModules().length);
  const shared = closure(modules, [...bootstrap, ...preloaded]);

  const reviewed = new Set(
    workflowPreloadModules()
      .filter((module) => path.isAbsolute(module))
      .map(moduleId),
  );
  expect(reviewed.size).toBe(PRELOADED_WORKFLOW_SOURCES.length);
  const ours = [...modules.keys()].filter((id) => !id.startsWith('./node_modules/') && !id.startsWith('?'));
  expect(ours.length).toBeGreaterThan(30);
  // A module imported by workflows/ but not reviewed would be preloaded unreviewed: list it in bundle-options.ts.
  // Ours that Temporal's bootstrap loads (the payload converter, workflowPayloadConverterPath) are shared already.
  expect(ours.filter((id) => !reviewed.has(id) && !sharedBefore.has(id))).toEqual([]);
  expect(ours.filter((id) => sharedBefore.has(id))).toEqual([
    './client/tenant-payload-converter.ts',
    './protocol/tenancy.ts',
  ]);
  // Every one of ours is evaluated once per worker thread, none per workflow.
  expect(ours.filter((id) => !shared.has(id))).toEqual([]);
  // Of the packages, preloading adds only @temporalio/workflow's own modules to what was shared already.
  const addedPackages = [...shared].filter((id) => id.startsWith('./node_modules/') && !sharedBefore.has(id));
  expect(addedPackages.length).toBeGreaterThan(0);
  expect(addedPackages.filter((id) => !id.startsWith('./node_modules/@temporalio/workflow/lib/'))).toEqual([]);
});

test('two operations of the same type in one worker keep their own state', async () => {
  seller.setDefaultScript('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
  const start = async () =>
    (
      await stack.orchestrator.start({
        sellerId: 'fixture',
        task: 'create_media_buy',
        params: createMediaBuyParams(),
        idempotencyKey: randomUUID(),
      })
    ).operationId;
  const state = (operationId: string) =>
    stack.client.workflow.getHandle(operationId).query(statusQuery) as Promise<OperationState>;
  const submitted = (operationId: string) =>
    eventually(async () => {
      const current = await state(operationId);
      return current.status === 'submitted' ? current : undefined;
    });

  const [first, second] = await Promise.all([start(), start()]);
  await Promise.all([submitted(first), submitted(second)]);

  await stack.orchestrator.cancel(first, { requestedBy: 'ops-first', reason: 'first pulled' });
  const firstFinal = await stack.orchestrator.result(first);
  expect(firstFinal.status).toBe('canceled');
  expect(firstFinal.cancellation).toMatchObject({ requestedBy: 'ops-first', reason: 'first pulled' });

  // The other one, cached in the same worker, saw none of it.
  const secondNow = await state(second);
  expect(secondNow.status).toBe('submitted');
  expect(secondNow.cancellation).toBeUndefined();
  expect(secondNow.transitions.map((transition) => `${transition.from}>${transition.to}`)).toEqual([
    'pending>submitted',
  ]);

  // One started after the first ended begins from a clean state too.
  const third = await start();
  const thirdNow = await submitted(third);
  expect(thirdNow.cancellation).toBeUndefined();
  expect(thirdNow.transitions.map((transition) => `${transition.from}>${transition.to}`)).toEqual([
    'pending>submitted',
  ]);
  expect(thirdNow.taskId).not.toBe(secondNow.taskId);

  await stack.orchestrator.cancel(second, { requestedBy: 'ops-second', reason: 'second pulled' });
  await stack.orchestrator.cancel(third, { requestedBy: 'ops-third', reason: 'third pulled' });
  const [secondFinal, thirdFinal] = await Promise.all([
    stack.orchestrator.result(second),
    stack.orchestrator.result(third),
  ]);
  expect(secondFinal.cancellation).toMatchObject({ requestedBy: 'ops-second', reason: 'second pulled' });
  expect(thirdFinal.cancellation).toMatchObject({ requestedBy: 'ops-third', reason: 'third pulled' });
});

test('every committed history replays through one worker, one after another in the same V8 context', async () => {
  const dirs = [
    'test/histories',
    'test/fixtures/media-buy-seller/histories',
    'test/fixtures/campaign-sellers/histories',
  ];
  const histories = dirs.flatMap((dir) =>
    readdirSync(path.join(ROOT, dir))
      .filter((file) => file.endsWith('.json'))
      .map((file) => ({
        workflowId: `${dir}/${file}`,
        history: JSON.parse(readFileSync(path.join(ROOT, dir, file), 'utf8')) as unknown,
      })),
  );
  expect(histories.length).toBeGreaterThanOrEqual(13);
  const failures: string[] = [];
  let replayed = 0;
  for await (const result of Worker.runReplayHistories({ workflowBundle: await workflowBundle() }, histories)) {
    replayed += 1;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  expect(failures).toEqual([]);
  expect(replayed).toBe(histories.length);
});
