/**
 * An upgrade across two worker builds whose workflow code differs incompatibly (test/fixtures/upgrade-build: build B
 * starts every operation with a timer, and every new media buy run with a patched timer), on a dev server of its own,
 * both builds polling one task queue in one Worker Deployment, as a rolling deploy leaves them:
 *
 *   - operations started on build A finish on build A after build B becomes current (PINNED), and the old build then
 *     reports itself drained, which is what the operator waits for before stopping its workers;
 *   - operations started after the promotion run on build B;
 *   - a media buy started on build A moves to build B (AUTO_UPGRADE) and continues as new there;
 *   - no workflow task fails anywhere: no nondeterminism error in any history on the task queue.
 *
 * Were operations AUTO_UPGRADE, the first workflow task of an A operation after the promotion would replay its
 * history on build B and fail; the test reports that failure from the history.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { DefaultLogger, NativeConnection, type Worker, bundleWorkflowCode } from '@temporalio/worker';
import { MediaBuyClient } from '../../client/media-buy-client';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { dataConverter } from '../../client/payload-codec';
import { freePort, startDevServer, type DevServer } from '../../scripts/lib/dev-server';
import { workflowPreloadModules } from '../../workers/bundle-options';
import { buildIdFor, promoteBuild } from '../../workers/versioning';
import { createOperationWorker } from '../../workers/worker';
import { refreshMediaBuySignal } from '../../contract/media-buy';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { BUILD_B_PATCH } from '../fixtures/upgrade-build';
import { createMediaBuyParams } from '../harness/demo-requests';
import { eventually, quietRuntime, registry, workflowBundle } from '../harness/temporal';
import { connectGrpc } from '../../config/grpc-connection';

const { EventType, VersioningBehavior, VersionDrainageStatus } = temporal.api.enums.v1;
type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Low enough that a few refreshes take the media buy past it, above what an operation or a new buy writes. */
const SUGGEST_CONTINUE_AS_NEW_AT = 150;

const deploymentName = `adcp-upgrade-${randomUUID().slice(0, 8)}`;
const taskQueue = `upgrade-${randomUUID()}`;
let server: DevServer;
let seller: ScriptedSeller;
let buys: MediaBuySeller;
let connection: Connection;
let client: Client;
let workerConnection: NativeConnection;
const workers: { worker: Worker; running: Promise<void> }[] = [];

const sellers = () =>
  registry([
    { id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' },
    { id: 'life', url: buys.url, protocol: 'mcp', token_env: 'LIFE_TOKEN' },
  ]);

async function startBuild(bundle: { code: string }, buildId: string): Promise<void> {
  const worker = await createOperationWorker({
    connection: workerConnection,
    namespace: 'default',
    taskQueue,
    workflowBundle: bundle,
    activities: { sellers: sellers(), env: { FIXTURE_TOKEN: seller.authToken, LIFE_TOKEN: buys.authToken } },
    client,
    shutdownGraceTime: '2s',
    deployment: { deploymentName, buildId },
  });
  workers.push({ worker, running: worker.run() });
}

beforeAll(async () => {
  quietRuntime();
  server = await startDevServer({
    port: await freePort(),
    headless: true,
    dynamicConfig: {
      'limit.historyCount.suggestContinueAsNew': SUGGEST_CONTINUE_AS_NEW_AT,
      // How soon a version no longer current reports DRAINED once its last pinned workflow has closed.
      'matching.wv.VersionDrainageStatusRefreshInterval': '1s',
      'matching.wv.VersionDrainageStatusVisibilityGracePeriod': '1s',
    },
  });
  [seller, buys] = await Promise.all([startScriptedSeller({ a2a: false }), startMediaBuySeller()]);
  // Operations stay `working` until the test moves them on.
  seller.setDefaultScript('create_media_buy', [{ status: 'working' }, { status: 'completed', afterMs: 600_000 }]);
  connection = await connectGrpc({ address: server.address });
  client = new Client({ connection, dataConverter: dataConverter() });
  workerConnection = await NativeConnection.connect({ address: server.address });
});

afterAll(async () => {
  for (const { worker } of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
  await Promise.all(workers.map(({ running }) => running.catch(() => undefined)));
  await workerConnection?.close();
  await connection?.close();
  await seller?.close();
  await buys?.close();
  await server?.stop();
});

/** Every run of a workflow, first to last, following continue-as-new. */
async function runsOf(workflowId: string, firstRunId: string): Promise<{ runId: string; events: HistoryEvent[] }[]> {
  const runs: { runId: string; events: HistoryEvent[] }[] = [];
  for (let runId: string | undefined = firstRunId; runId;) {
    const events: HistoryEvent[] = (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
    runs.push({ runId, events });
    runId = events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId || undefined;
  }
  return runs;
}

/** The build and behaviour each completed workflow task of a history was stamped with, in order. */
function completedTasks(events: HistoryEvent[]): { buildId: string; behavior: number; atMs: number }[] {
  return events.flatMap((event) => {
    const completed = event.workflowTaskCompletedEventAttributes;
    return completed
      ? [
          {
            buildId: completed.deploymentVersion?.buildId ?? '',
            behavior: completed.versioningBehavior ?? 0,
            atMs: tsToMs(event.eventTime),
          },
        ]
      : [];
  });
}

function failedTasks(events: HistoryEvent[]): string[] {
  return events.flatMap((event) => {
    const failed = event.workflowTaskFailedEventAttributes;
    if (!failed) return [];
    const cause = temporal.api.enums.v1.WorkflowTaskFailedCause[failed.cause ?? 0];
    return [`${cause}: ${failed.failure?.message ?? ''}`.slice(0, 400)];
  });
}

/** Resolves once the workflow has completed; throws as soon as one of its workflow tasks has failed (nondeterminism). */
async function completed(workflowId: string, timeoutMs = 90_000): Promise<HistoryEvent[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const failures = failedTasks(events);
    if (failures.length > 0) throw new Error(`${workflowId}: a workflow task failed: ${failures.join('; ')}`);
    if (events.at(-1)?.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED) return events;
    if (Date.now() > deadline) throw new Error(`${workflowId} did not complete within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The command build B's operations issue first: a timer, right after the first workflow task. */
const startsWithTimer = (events: HistoryEvent[]): boolean => {
  const firstCompleted = events.findIndex((event) => event.workflowTaskCompletedEventAttributes);
  return events[firstCompleted + 1]?.eventType === EventType.EVENT_TYPE_TIMER_STARTED;
};

/** Markers of build B's patch in a history. */
const patchMarkers = (events: HistoryEvent[]): number =>
  events.filter((event) =>
    Object.values(event.markerRecordedEventAttributes?.details ?? {}).some((details) =>
      (details.payloads ?? []).some((payload) =>
        Buffer.from(payload.data ?? [])
          .toString()
          .includes(BUILD_B_PATCH),
      ),
    ),
  ).length;

test('pinned operations drain on the old build, new ones run on the new build, a media buy upgrades', async () => {
  const bundleA = await workflowBundle();
  const bundleB = await bundleWorkflowCode({
    workflowsPath: require.resolve('../fixtures/upgrade-build'),
    preloadModules: workflowPreloadModules(),
    logger: new DefaultLogger('WARN'),
  });
  const buildA = buildIdFor(bundleA.code);
  const buildB = buildIdFor(bundleB.code);
  expect(buildA).not.toBe(buildB);
  const versionA = { deploymentName, buildId: buildA };
  const versionB = { deploymentName, buildId: buildB };
  const orchestrator = new OrchestratorClient({ client, taskQueue });
  const mediaBuys = new MediaBuyClient({ client, taskQueue });

  // Build A alone, made current as its worker does at start.
  await startBuild(bundleA, buildA);
  await expect(promoteBuild({ client, namespace: 'default', version: versionA, mode: 'auto' })).resolves.toEqual({
    outcome: 'promoted',
  });

  // Two operations waiting at the seller, and a live media buy, all on build A.
  const before = await Promise.all(
    [1, 2].map(() =>
      orchestrator.start({
        sellerId: 'fixture',
        task: 'create_media_buy',
        params: createMediaBuyParams(),
        idempotencyKey: randomUUID(),
      }),
    ),
  );
  await eventually(async () =>
    seller.tasks().filter((task) => task.status === 'working').length === 2 ? true : undefined,
  );
  const now = Date.now();
  const { mediaBuyWorkflowId } = await mediaBuys.create({
    buyKey: `upgrade-${randomUUID()}`,
    sellerId: 'life',
    params: {
      account: { account_id: 'acct_upgrade' },
      start_time: new Date(now + DAY).toISOString(),
      end_time: new Date(now + 30 * DAY).toISOString(),
      packages: [{ product_id: 'display_a', budget: 5_000 }],
    },
  });
  const created = await eventually(async () => {
    const state = await mediaBuys.state(mediaBuyWorkflowId);
    return state.mediaBuyId ? state : undefined;
  });
  expect(created.run).toBe(1);
  const buyFirstRunId = (await client.workflow.getHandle(mediaBuyWorkflowId).describe()).runId;

  // Build B starts polling and becomes current. Build A's worker, restarting now, would leave it so.
  await startBuild(bundleB, buildB);
  await expect(promoteBuild({ client, namespace: 'default', version: versionB, mode: 'auto' })).resolves.toEqual({
    outcome: 'promoted',
  });
  await expect(promoteBuild({ client, namespace: 'default', version: versionA, mode: 'auto' })).resolves.toMatchObject({
    outcome: 'left',
    current: versionB,
  });
  const routing = (await connection.workflowService.describeWorkerDeployment({ namespace: 'default', deploymentName }))
    .workerDeploymentInfo?.routingConfig;
  expect(routing?.currentDeploymentVersion).toMatchObject(versionB);
  const promotedAtMs = tsToMs(routing?.currentVersionChangedTime);

  // The old operations finish, on build A.
  for (const task of seller.tasks()) seller.advanceTask(task.taskId);
  for (const { operationId } of before) {
    const events = await completed(operationId);
    const tasks = completedTasks(events);
    expect(tasks.map((task) => task.buildId)).toEqual(tasks.map(() => buildA));
    expect(tasks.every((task) => task.behavior === VersioningBehavior.VERSIONING_BEHAVIOR_PINNED)).toBe(true);
    expect(tasks.some((task) => task.atMs > promotedAtMs)).toBe(true);
    expect(startsWithTimer(events)).toBe(false);
    expect((await orchestrator.result(operationId)).status).toBe('completed');
  }

  // New operations run on build B, with its code.
  const after = await Promise.all(
    [1, 2].map(() =>
      orchestrator.start({
        sellerId: 'fixture',
        task: 'create_media_buy',
        params: createMediaBuyParams(),
        idempotencyKey: randomUUID(),
      }),
    ),
  );
  await eventually(async () =>
    seller.tasks().filter((task) => task.status === 'working').length === 2 ? true : undefined,
  );
  for (const task of seller.tasks().filter((task) => task.status === 'working')) seller.advanceTask(task.taskId);
  for (const { operationId } of after) {
    const events = await completed(operationId);
    const tasks = completedTasks(events);
    expect(tasks.map((task) => task.buildId)).toEqual(tasks.map(() => buildB));
    expect(tasks.every((task) => task.behavior === VersioningBehavior.VERSIONING_BEHAVIOR_PINNED)).toBe(true);
    expect(startsWithTimer(events)).toBe(true);
  }

  // The media buy moved to build B at its next workflow task; refreshes grow its history until it continues as new.
  const buy = client.workflow.getHandle(mediaBuyWorkflowId);
  const buyFirstRun = client.workflow.getHandle(mediaBuyWorkflowId, buyFirstRunId);
  for (let refreshes = 0; ; refreshes++) {
    const events = (await buyFirstRun.fetchHistory()).events ?? [];
    // A failed workflow task (the buy replayed on build B differently) ends the wait at once.
    expect({ failures: failedTasks(events) }).toEqual({ failures: [] });
    if (events.at(-1)?.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW) break;
    if (refreshes >= 120) throw new Error(`the media buy did not continue as new after ${refreshes} refreshes`);
    await buy.signal(refreshMediaBuySignal, { requestedBy: 'upgrade-test' });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  const [first, second] = await runsOf(mediaBuyWorkflowId, buyFirstRunId);
  expect(first.events.at(-1)?.eventType).toBe(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW);
  const firstTasks = completedTasks(first.events);
  // On build A until the promotion, on build B after it; replayed on B without B's patch.
  expect(firstTasks[0].buildId).toBe(buildA);
  expect(firstTasks.filter((task) => task.atMs > promotedAtMs).map((task) => task.buildId)).toEqual(
    firstTasks.filter((task) => task.atMs > promotedAtMs).map(() => buildB),
  );
  expect(firstTasks.at(-1)?.buildId).toBe(buildB);
  expect(firstTasks.every((task) => task.behavior === VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE)).toBe(true);
  expect(patchMarkers(first.events)).toBe(0);
  // The run after continue-as-new started on build B and took its patched change.
  const secondTasks = completedTasks(second.events);
  expect(secondTasks.length).toBeGreaterThan(0);
  expect(secondTasks.map((task) => task.buildId)).toEqual(secondTasks.map(() => buildB));
  expect(patchMarkers(second.events)).toBe(1);
  expect((await mediaBuys.state(mediaBuyWorkflowId)).mediaBuyId).toBe(created.mediaBuyId);

  // No workflow task failed in any run of any workflow on the task queue (the buy's own operations included).
  const executions: { workflowId: string; runId: string }[] = [];
  for await (const execution of client.workflow.list({ query: `TaskQueue = '${taskQueue}'` }))
    executions.push({ workflowId: execution.workflowId, runId: execution.runId });
  expect(executions.length).toBeGreaterThanOrEqual(before.length + after.length + 3);
  for (const { workflowId, runId } of executions) {
    const events = (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
    expect({ workflowId, failures: failedTasks(events) }).toEqual({ workflowId, failures: [] });
  }

  // Nothing pinned is left on build A: the server reports it drained, the operator's cue to stop its workers.
  await eventually(async () => {
    const { workerDeploymentVersionInfo } = await connection.workflowService.describeWorkerDeploymentVersion({
      namespace: 'default',
      deploymentVersion: versionA,
    });
    return workerDeploymentVersionInfo?.drainageInfo?.status === VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED
      ? true
      : undefined;
  }, 90_000);
}, 600_000);
