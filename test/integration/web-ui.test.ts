/**
 * What an operator sees in the Temporal Web UI (#13 item 4), in headless Chromium (Debian's chromium package driven
 * by playwright-core; scripts/setup-browser.sh installs it). A create_media_buy that the scripted seller fails ends
 * its workflow Failed: the page wears the red Failed badge, and its summary and current details name the seller, the
 * task and the status. Worker and client encrypt payloads (client/encryption-codec.ts); with the dev server's UI
 * pointed at the codec server (api/codec-server.ts, `--ui-codec-endpoint`) the browser shows the input decrypted;
 * after a restart without the codec endpoint the same history shows only ciphertext (`binary/encrypted`).
 *
 * The codec server is the real one with its real API-key check: the browser adds an operator's key to its calls, as
 * an authenticating proxy in front of the UI would (the dev server's UI has no login to pass a token from).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express from 'express';
import { Client, Connection } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { Browser, Page } from 'playwright-core';
import { ApiKeyStore, createAuthentication, generateApiKey, writeKeysFile } from '../../api/auth';
import { createCodecServer } from '../../api/codec-server';
import {
  ENCRYPTED_ENCODING,
  encryptedDataConverter,
  loadPayloadKeys,
  payloadCodecs,
} from '../../client/encryption-codec';
import { OrchestratorClient } from '../../client/orchestrator-client';
import type { OperationState } from '../../contract/operation';
import { type DevServer, freePort, startDevServer } from '../../scripts/lib/dev-server';
import { type ScriptedSeller, startScriptedSeller } from '../fixtures/scripted-seller';
import { createMediaBuyParams } from '../harness/demo-requests';
import { eventually, quietRuntime, registry } from '../harness/temporal';
import { startEncryptedWorker } from '../harness/encrypted-worker';
import { launchChromium, parseCssColor, screenshotPath } from '../harness/web-ui';
import { connectGrpc } from '../../config/grpc-connection';

jest.setTimeout(240_000);

/** The browser's, inside `evaluate` (the project compiles without the DOM library). */
declare const getComputedStyle: (element: unknown) => { color: string };

const env = { ADCP_PAYLOAD_KEYS: `webui:${randomBytes(32).toString('base64')}` };
const poNumber = `PO-WEBUI-${randomUUID().slice(0, 8)}`;
const SELLER_ID = 'fixture';

let dir: string;
let browser: Browser;
let codecServer: Server;
let codecUrl: string;
let operatorKey: string;
let temporal: DevServer;
let ports: { port: number; uiPort: number };
let seller: ScriptedSeller;
let connection: Connection;
let worker: Worker | undefined;
let workerRun: Promise<void> | undefined;
let operationId: string;
let state: OperationState;

const uiOrigin = () => `http://127.0.0.1:${ports.uiPort}`;

beforeAll(async () => {
  quietRuntime();
  // First: without a browser this test fails here, naming scripts/setup-browser.sh.
  browser = await launchChromium();
  dir = mkdtempSync(path.join(tmpdir(), 'adcp-web-ui-'));
  ports = { port: await freePort(), uiPort: await freePort() };

  const operator = generateApiKey('ops');
  operatorKey = operator.key;
  const keysFile = path.join(dir, 'keys.json');
  writeKeysFile(keysFile, {
    keys: [{ key_id: 'ops', hash: operator.hash, principal: 'ops@acme', tenant: 'acme', roles: ['operator', 'admin'] }],
  });
  const app = express();
  app.use(
    '/codec',
    createCodecServer({
      codecs: payloadCodecs(loadPayloadKeys(env)),
      authentication: createAuthentication({ apiKeys: new ApiKeyStore({ file: keysFile }) }),
      corsOrigins: [uiOrigin()],
      namespaces: ['default'],
    }),
  );
  const codecPort = await freePort();
  codecServer = await new Promise<Server>((resolve) => {
    const listening = app.listen(codecPort, '127.0.0.1', () => resolve(listening));
  });
  codecUrl = `http://127.0.0.1:${codecPort}/codec`;

  [temporal, seller] = await Promise.all([
    startDevServer({
      ...ports,
      uiCodecEndpoint: codecUrl,
      dbFilename: path.join(dir, 'temporal.sqlite'),
      startTimeoutMs: 120_000,
    }),
    startScriptedSeller(),
  ]);
  connection = await connectGrpc({ address: temporal.address });
  const client = new Client({ connection, dataConverter: encryptedDataConverter(env) });
  const taskQueue = `web-ui-${randomUUID()}`;
  ({ worker, run: workerRun } = await startEncryptedWorker({
    address: temporal.address,
    taskQueue,
    env,
    sellers: registry([{ id: SELLER_ID, url: seller.url, protocol: 'mcp', token_env: 'FIXTURE_TOKEN' }]),
    activityEnv: { FIXTURE_TOKEN: seller.authToken },
  }));

  seller.script('create_media_buy', [
    { status: 'submitted' },
    {
      status: 'failed',
      afterPolls: 1,
      errors: [{ code: 'PRODUCT_UNAVAILABLE', message: 'Sold out', recovery: 'correctable' }],
    },
  ]);
  const orchestrator = new OrchestratorClient({ client, taskQueue });
  ({ operationId } = await orchestrator.start({
    sellerId: SELLER_ID,
    task: 'create_media_buy',
    params: { ...createMediaBuyParams(), po_number: poNumber },
    idempotencyKey: randomUUID(),
  }));
  state = await eventually(async () => {
    const view = await orchestrator.status(operationId);
    return view.running ? undefined : view.state;
  }, 90_000);
});

afterAll(async () => {
  await stopWorker();
  await browser?.close();
  await connection?.close();
  await seller?.close();
  await temporal?.stop();
  await new Promise<void>((resolve) => (codecServer ? codecServer.close(() => resolve()) : resolve()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function stopWorker(): Promise<void> {
  if (worker?.getState() === 'RUNNING') worker.shutdown();
  await workerRun?.catch(() => undefined);
  worker = undefined;
}

/** A page of the Web UI whose calls to the codec server carry the operator's key. */
async function operatorPage(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1100 } });
  const page = await context.newPage();
  await page.route(`${codecUrl}/**`, (route) =>
    route.continue({ headers: { ...route.request().headers(), authorization: `Bearer ${operatorKey}` } }),
  );
  return page;
}

const workflowUrl = (tab = '') =>
  `${uiOrigin()}/namespaces/default/workflows/${encodeURIComponent(operationId)}${tab ? `/${tab}` : ''}`;

test('the failed operation wears the red Failed badge; summary and details name the seller, task and status', async () => {
  expect(state.status).toBe('failed');
  const page = await operatorPage();
  await page.goto(workflowUrl());
  const badge = page.getByTestId('execution-status');
  await badge.waitFor({ timeout: 60_000 });
  expect((await badge.innerText()).trim().toLowerCase()).toBe('failed');
  const [red, green, blue] = parseCssColor(
    await badge
      .locator('span')
      .first()
      .evaluate((element) => getComputedStyle(element).color),
  );
  expect(red).toBeGreaterThan(green + 60);
  expect(red).toBeGreaterThan(blue + 60);
  // The failure's message, shown as the workflow's result.
  await page.getByText(`create_media_buy at ${SELLER_ID} failed: Sold out`).first().waitFor({ timeout: 30_000 });
  await page.screenshot({ path: screenshotPath('web-ui-failed-operation.png'), fullPage: true });

  await page.getByTestId('user-metadata-tab').click();
  // The UI renders the summary and the current details (both encrypted payloads, decoded through the codec server)
  // as markdown, each in its own frame.
  const summary = `create_media_buy at ${SELLER_ID}`;
  const details = `create_media_buy at ${SELLER_ID}: failed · task ${state.taskId}`;
  const frames = await eventually(async () => {
    const texts = await Promise.all(
      page.frames().map((frame) =>
        frame
          .locator('body')
          .innerText()
          .catch(() => ''),
      ),
    );
    const rendered = texts.map((text) => text.trim());
    return rendered.includes(summary) && rendered.some((text) => text.startsWith(details)) ? rendered : undefined;
  }, 30_000);
  expect(frames).toContain(summary);
  expect(frames.find((text) => text.startsWith(details))).toMatch(/ · polls: \d+$/);
  await page.screenshot({ path: screenshotPath('web-ui-failed-operation-metadata.png'), fullPage: true });
  await page.context().close();
});

test('with the codec endpoint the browser shows the encrypted input decrypted', async () => {
  const page = await operatorPage();
  await page.goto(workflowUrl());
  await page.getByTestId('data-encoder-status-success').waitFor({ timeout: 60_000 });
  await page.getByText(poNumber).first().waitFor({ timeout: 30_000 });
  expect(await page.locator('main').innerText()).toContain(`"po_number": "${poNumber}"`);
  await page.context().close();
});

test('without the codec endpoint the same history shows only ciphertext (binary/encrypted)', async () => {
  await stopWorker();
  await temporal.stop();
  temporal = await startDevServer({
    ...ports,
    dbFilename: temporal.dbFilename,
    startTimeoutMs: 120_000,
  });
  const page = await operatorPage();
  const codecCalls: string[] = [];
  page.on('request', (request) => {
    if (request.url().startsWith(codecUrl)) codecCalls.push(request.url());
  });
  await page.goto(workflowUrl());
  await page.getByTestId('execution-status').waitFor({ timeout: 60_000 });
  // The failure details list the encrypted payload's metadata as the server stores it (base64).
  const encodingBase64 = Buffer.from(ENCRYPTED_ENCODING).toString('base64');
  await page.getByText(encodingBase64).first().waitFor({ timeout: 30_000 });
  const text = await page.locator('main').innerText();
  expect(text).not.toContain(poNumber);
  expect(text).not.toContain('"sellerId"');
  expect(codecCalls).toEqual([]);
  await page.screenshot({ path: screenshotPath('web-ui-ciphertext.png'), fullPage: true });
  await page.context().close();
});
