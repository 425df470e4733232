/**
 * `npm run record-histories`: records every committed history the replay tests run today's workflow code over, so a
 * change that running workflows would replay differently fails CI. Operations, a reconciliation and a seller's
 * capabilities run here against a fresh Temporal dev server and the scripted seller (test/histories/); the media buy
 * and the campaigns are recorded by the integration tests that drive them, run here with their recording switch
 * (test/fixtures/media-buy-seller/histories/, test/fixtures/campaign-sellers/histories/). Record again only on
 * purpose (a new baseline, a new scenario), and commit the files. `npm run record-histories -- operations` records
 * only the operations' histories (test/histories/operation-*.json), after a change to the operation workflow alone;
 * `-- server-only` records every history of test/histories/ (operations, reconciliations, capabilities) without the
 * recording tests.
 */
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { closeMCPConnections } from '@adcp/sdk';
import { ProtocolClient } from '@adcp/sdk/advanced';
import { freePort, startDevServer } from './lib/dev-server';
import { resolveTemporalCli } from './lib/temporal-binaries';
import { startScriptedSeller } from '../test/fixtures/scripted-seller';
import { createMediaBuyParams, getProductsParams } from '../test/harness/demo-requests';
import { eventually, registry, startTestStack } from '../test/harness/temporal';
import { SellerCapabilitiesClient } from '../client/seller-capabilities-client';
import { type WebhookDelivery, webhookReceivedSignal } from '../contract/operation';
import { taskWatcherQuery, taskWatcherWorkflowId } from '../contract/task-watcher';

const ROOT = path.resolve(__dirname, '..');
const OUT = path.join(ROOT, 'test', 'histories');
/** The integration tests that record the histories of the workflows they drive, and the switch that makes them. */
const HISTORY_DIRS = [
  'test/histories',
  'test/fixtures/media-buy-seller/histories',
  'test/fixtures/campaign-sellers/histories',
];
const RECORDING_TESTS = [
  { file: 'test/integration/media-buy-api.test.ts', env: 'RECORD_MEDIA_BUY_HISTORIES' },
  { file: 'test/integration/campaign.test.ts', env: 'RECORD_CAMPAIGN_HISTORIES' },
  { file: 'test/integration/campaign-creatives.test.ts', env: 'RECORD_CAMPAIGN_HISTORIES' },
  { file: 'test/integration/campaign-moves-api.test.ts', env: 'RECORD_CAMPAIGN_HISTORIES' },
  { file: 'test/integration/campaign-moves-restarts.test.ts', env: 'RECORD_CAMPAIGN_HISTORIES' },
] as const;

async function recordOperations(operationsOnly: boolean): Promise<void> {
  // The set is replaced as a whole: a scenario dropped from here leaves no stale file behind.
  const replaced = (name: string) => name.endsWith('.json') && (!operationsOnly || name.startsWith('operation-'));
  for (const file of readdirSync(OUT).filter(replaced)) rmSync(path.join(OUT, file));
  const server = await startDevServer({ port: await freePort(), headless: true });
  const seller = await startScriptedSeller();
  // A seller with no task read or listing, whose media-buy listing echoes the create's context: lost answers are
  // found by the listing only.
  const listing = await startScriptedSeller({
    profile: { 'no-tasks-get': true, 'buy-listing': { echo: ['context'], defaultStatusFilter: true } },
  });
  const sellers = registry([
    { id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' },
    { id: 'listing', url: listing.url, protocol: 'mcp', token_env: 'LISTING_TOKEN' },
  ]);
  const stack = await startTestStack({
    address: server.address,
    sellers,
    activities: {
      // A 10 s watcher round: the watched operation below is told of its task's move seconds after it joins.
      env: { FIXTURE_TOKEN: seller.authToken, LISTING_TOKEN: listing.authToken, ADCP_TASK_WATCHER_INTERVAL: '10s' },
      callTimeoutMs: 2_000,
    },
  });
  const show = (workflowId: string) =>
    // Exactly what operators export with the CLI, and what the replayer reads back.
    execFileSync(
      resolveTemporalCli(),
      ['workflow', 'show', '--workflow-id', workflowId, '--address', server.address, '--output', 'json'],
      { encoding: 'utf8' },
    );
  const write = (name: string, json: string) => {
    writeFileSync(path.join(OUT, `${name}.json`), json.endsWith('\n') ? json : `${json}\n`);
    const history = JSON.parse(json) as { events?: unknown[] };
    console.log(`record-histories: ${name} (${history.events?.length ?? 0} events)`);
  };
  const record = async (name: string, operationId: string) => {
    await stack.orchestrator.result(operationId).catch(() => undefined);
    write(`operation-${name}`, show(operationId));
  };
  const start = (task = 'create_media_buy', sellerId = 'fixture') =>
    stack.orchestrator
      .start({
        sellerId,
        task,
        params: task === 'get_products' ? getProductsParams : createMediaBuyParams(),
        idempotencyKey: randomUUID(),
      })
      .then((started) => started.operationId);
  try {
    seller.script('create_media_buy', [
      { status: 'submitted' },
      { status: 'working', afterPolls: 1, progress: { percentage: 50 } },
      { status: 'completed', afterPolls: 1 },
    ]);
    await record('submitted-working-completed', await start());

    seller.script('create_media_buy', [
      { status: 'input-required', reason: 'APPROVAL_REQUIRED' },
      { status: 'completed' },
    ]);
    const asked = await start();
    await eventually(async () =>
      (await stack.orchestrator.status(asked)).state?.status === 'input-required' ? true : undefined,
    );
    await stack.orchestrator.provideInput(asked, {
      input: { approved: true },
      idempotencyKey: 'approve-1',
      providedBy: 'recorder',
    });
    await record('input-required-answered', asked);

    seller.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 2 });
    seller.fault('create_media_buy', {
      kind: 'adcp-error',
      error: { code: 'IDEMPOTENCY_CONFLICT', recovery: 'correctable' },
    });
    await record('idempotency-conflict-adopted', await start());

    // A synchronous read (one local activity), and a read that goes async and is completed at a poll.
    await record('sync-read', await start('get_products'));
    seller.script('get_products', [
      { status: 'submitted' },
      { status: 'completed', afterPolls: 1, payload: { products: [] } },
    ]);
    await record('read-submitted-completed', await start('get_products'));

    // Webhooks during the polls: a repeat of the status and progress reports are applied while the polls go on; a new
    // status ends them; the completion arrives by webhook. Signalled as the gateway would, after verification, with
    // the seller that verified it; one verified as another seller is refused.
    seller.script('get_products', [
      { status: 'submitted' },
      { status: 'completed', afterMs: 600_000, payload: { products: [] } },
    ]);
    const pushed = await start('get_products');
    const taskId = await eventually(async () => (await stack.orchestrator.status(pushed)).state?.taskId);
    const signal = (key: string, snapshot: WebhookDelivery['snapshot'], sellerId: string) =>
      stack.client.workflow.getHandle(pushed).signal(webhookReceivedSignal, {
        eventKey: key,
        snapshot,
        receivedAt: new Date().toISOString(),
        verifiedBy: 'rfc9421',
        sellerId,
      });
    const push = async (key: string, snapshot: WebhookDelivery['snapshot']) => {
      await signal(key, snapshot, 'fixture');
      await eventually(async () =>
        ((await stack.orchestrator.status(pushed)).state?.webhooksApplied ?? 0) >= Number(key) ? true : undefined,
      );
    };
    await push('1', { status: 'submitted', taskId, message: 'queued behind other requests' });
    await push('2', { status: 'working', taskId, progress: { percentage: 30 } });
    await signal('forged', { status: 'completed', taskId, result: { products: ['forged'] } }, 'another-seller');
    await eventually(async () =>
      ((await stack.orchestrator.status(pushed)).state?.webhooksRefused ?? 0) >= 1 ? true : undefined,
    );
    await push('3', { status: 'working', taskId, progress: { percentage: 60 } });
    await push('4', { status: 'completed', taskId, result: { products: [] } });
    await record('webhooks-during-polls', pushed);

    seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
    const canceled = await start();
    await eventually(async () =>
      (await stack.orchestrator.status(canceled)).state?.status === 'submitted' ? true : undefined,
    );
    await stack.orchestrator.cancel(canceled, { requestedBy: 'recorder', reason: 'replay fixture' });
    await record('canceled-while-submitted', canceled);

    // The create's every answer lost at the listing-only seller: the buy is found in its listing (matched_by context).
    listing.script('create_media_buy', [{ status: 'completed' }]);
    listing.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 3 });
    await record('buy-found-by-listing', await start('create_media_buy', 'listing'));

    // The same while the listing is down: the operation cannot know; its reconcile update reads the listing and adopts.
    listing.script('create_media_buy', [{ status: 'completed' }]);
    listing.fault('create_media_buy', { kind: 'drop-after-processing' }, { times: 3 });
    listing.chaos('get_media_buys', { rate: 1, faults: [{ kind: 'http-status', status: 503 }] });
    const unknown = await start('create_media_buy', 'listing');
    await eventually(async () => {
      const state = (await stack.orchestrator.status(unknown)).state;
      return state?.status === 'unknown' && !state.callInFlight ? true : undefined;
    }, 60_000);
    listing.chaos('get_media_buys', undefined);
    await stack.orchestrator.reconcileOperation(unknown, 'recorder');
    await record('reconcile-update-adopts', unknown);

    // Parked past its quick polls, the operation joins the seller's task watcher; the seller completes the task, the
    // watcher's listing sees it and tells the operation, which reads it and completes. Both histories are kept.
    seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterPolls: 1_000_000 }]);
    const watched = await start();
    const watcherId = taskWatcherWorkflowId(stack.taskQueue, 'fixture', 0);
    await eventually(async () => {
      const view = await stack.client.workflow
        .getHandle(watcherId)
        .query(taskWatcherQuery)
        .catch(() => undefined);
      return view && view.watching > 0 ? true : undefined;
    }, 180_000);
    seller.advanceTask((await stack.orchestrator.status(watched)).state!.taskId!);
    await record('watched-completed', watched);
    write('task-watcher-told-a-move', show(watcherId));
    await stack.client.workflow
      .getHandle(watcherId)
      .terminate('recorded')
      .catch(() => undefined);

    if (operationsOnly) return;

    // The orphan pass: the buy another client of the listing seller made is no operation's.
    listing.script('create_media_buy', [{ status: 'completed' }]);
    await ProtocolClient.callTool(listing.agent('mcp', 'listing') as never, 'create_media_buy', {
      ...createMediaBuyParams(),
      idempotency_key: `someone-else-${randomUUID()}`,
    });
    const orphansId = `reconciliation:listing:${randomUUID()}`;
    await (
      await stack.client.workflow.start('reconcileSeller', {
        workflowId: orphansId,
        taskQueue: stack.taskQueue,
        args: [{ sellerId: 'listing', requestedBy: 'recorder' }],
      })
    ).result();
    write('reconciliation-orphan-reported', show(orphansId));

    // A reconciliation of the seller while one operation waits in submitted: it is told to poll now.
    seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
    const waiting = await start();
    await eventually(async () => (await stack.orchestrator.status(waiting)).state?.taskId);
    const reconciliationId = `reconciliation:fixture:${randomUUID()}`;
    await (
      await stack.client.workflow.start('reconcileSeller', {
        workflowId: reconciliationId,
        taskQueue: stack.taskQueue,
        args: [{ sellerId: 'fixture', requestedBy: 'recorder' }],
      })
    ).result();
    write('reconciliation-poll-now', show(reconciliationId));
    await stack.orchestrator.cancel(waiting, { requestedBy: 'recorder', reason: 'replay fixture' });

    // The seller's capabilities workflow after its first refresh (it runs for ever; the history so far replays).
    const capabilities = new SellerCapabilitiesClient({ client: stack.client, taskQueue: stack.taskQueue, sellers });
    await capabilities.ensure('fixture');
    await capabilities.refreshed('fixture', 1);
    const capabilitiesId = capabilities.workflowId('fixture');
    write('seller-capabilities-refreshed', show(capabilitiesId));
    await stack.client.workflow.getHandle(capabilitiesId).terminate('recorded');
  } finally {
    await stack.close();
    await seller.close();
    await listing.close();
    await closeMCPConnections().catch(() => undefined);
    await server.stop();
  }
}

/** One test file at a time (the machine's cores are shared), each with its recording switch on. */
function recordByTests(): void {
  for (const test of RECORDING_TESTS) {
    console.log(`record-histories: ${test.file} with ${test.env}=1`);
    execFileSync(path.join(ROOT, 'node_modules', '.bin', 'jest'), [test.file, '--runInBand'], {
      cwd: ROOT,
      stdio: 'inherit',
      env: { ...process.env, [test.env]: '1' },
    });
  }
}

/** Stack traces name the files of the clone that recorded them: keep them relative to the repository. */
function withoutClonePaths(): void {
  for (const dir of HISTORY_DIRS) {
    for (const name of readdirSync(path.join(ROOT, dir)).filter((file) => file.endsWith('.json'))) {
      const file = path.join(ROOT, dir, name);
      const text = readFileSync(file, 'utf8');
      const relative = text.split(`${ROOT}${path.sep}`).join('');
      if (relative !== text) writeFileSync(file, relative);
    }
  }
}

async function main(): Promise<void> {
  const operationsOnly = process.argv.slice(2).includes('operations');
  const serverOnly = process.argv.slice(2).includes('server-only');
  await recordOperations(operationsOnly);
  if (!operationsOnly && !serverOnly) recordByTests();
  withoutClonePaths();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
