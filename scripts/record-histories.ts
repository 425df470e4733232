/**
 * `npm run record-histories`: runs representative operations against a fresh Temporal dev server and the scripted
 * seller and writes their event histories to test/histories/. The replay test runs today's workflow code over them,
 * so a change that running operations would replay differently fails CI (then: `patched()` or a new workflow type).
 * Record again only on purpose, when a history format change is intended, and commit the files.
 */
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { closeMCPConnections } from '@adcp/sdk';
import { freePort, startDevServer } from './lib/dev-server';
import { resolveTemporalCli } from './lib/temporal-binaries';
import { startScriptedSeller } from '../test/fixtures/scripted-seller';
import { createMediaBuyParams, getProductsParams } from '../test/harness/demo-requests';
import { eventually, registry, startTestStack } from '../test/harness/temporal';
import { type WebhookDelivery, webhookReceivedSignal } from '../contract/operation';

const OUT = path.resolve(__dirname, '..', 'test', 'histories');
/**
 * Histories are named by the workflow code that wrote them: `v1-*` predate the convergence rewrite (they replay on
 * workflows/legacy/), `v2-*` were started without an input revision (the path `patched()` chose), `v3-*` are today's
 * (OperationInput.revision 3: no patch marker, reads planned in their call, looks on the activity's own cadence), `v4-*`
 * revision 4 (a webhook that leaves the status as it is does not end the looks). All must keep replaying; recording
 * writes only the current generation's files.
 */
const GENERATION = 'v4';

async function main(): Promise<void> {
  const server = await startDevServer({ port: await freePort(), headless: true });
  const seller = await startScriptedSeller();
  const stack = await startTestStack({
    address: server.address,
    sellers: registry([{ id: 'fixture', url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activities: { env: { FIXTURE_TOKEN: seller.authToken } },
  });
  const record = async (name: string, operationId: string) => {
    await stack.orchestrator.result(operationId).catch(() => undefined);
    // Exactly what operators export with the CLI, and what the replayer reads back.
    const json = execFileSync(
      resolveTemporalCli(),
      ['workflow', 'show', '--workflow-id', operationId, '--address', server.address, '--output', 'json'],
      { encoding: 'utf8' },
    );
    writeFileSync(path.join(OUT, `${GENERATION}-${name}.json`), json.endsWith('\n') ? json : `${json}\n`);
    const history = JSON.parse(json) as { events?: unknown[] };
    console.log(`record-histories: ${name} (${history.events?.length ?? 0} events)`);
  };
  const start = (task = 'create_media_buy') =>
    stack.orchestrator
      .start({
        sellerId: 'fixture',
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

    // A synchronous read (one local activity), and a read that goes async and is completed at a look.
    await record('sync-read', await start('get_products'));
    seller.script('get_products', [
      { status: 'submitted' },
      { status: 'completed', afterPolls: 1, payload: { products: [] } },
    ]);
    await record('read-submitted-completed', await start('get_products'));

    // Webhooks during the looks: a repeat of the status and progress reports are applied while the looks go on (revision
    // 4); a new status ends them; the completion arrives by webhook. Signalled as the gateway would, after verification.
    seller.script('get_products', [
      { status: 'submitted' },
      { status: 'completed', afterMs: 600_000, payload: { products: [] } },
    ]);
    const pushed = await start('get_products');
    const taskId = await eventually(async () => (await stack.orchestrator.status(pushed)).state?.taskId);
    const push = async (key: string, snapshot: WebhookDelivery['snapshot']) => {
      await stack.client.workflow
        .getHandle(pushed)
        .signal(webhookReceivedSignal, { eventKey: key, snapshot, receivedAt: new Date().toISOString() });
      await eventually(async () =>
        ((await stack.orchestrator.status(pushed)).state?.webhooksApplied ?? 0) >= Number(key) ? true : undefined,
      );
    };
    await push('1', { status: 'submitted', taskId, message: 'queued behind other requests' });
    await push('2', { status: 'working', taskId, progress: { percentage: 30 } });
    await push('3', { status: 'working', taskId, progress: { percentage: 60 } });
    await push('4', { status: 'completed', taskId, result: { products: [] } });
    await record('webhooks-during-looks', pushed);

    seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: 600_000 }]);
    const canceled = await start();
    await eventually(async () =>
      (await stack.orchestrator.status(canceled)).state?.status === 'submitted' ? true : undefined,
    );
    await stack.orchestrator.cancel(canceled, { requestedBy: 'recorder', reason: 'replay fixture' });
    await record('canceled-while-submitted', canceled);
  } finally {
    await stack.close();
    await seller.close();
    await closeMCPConnections().catch(() => undefined);
    await server.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
