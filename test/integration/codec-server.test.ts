/**
 * The codec server (#12 item 4) through a real express app and the real Temporal dev server: an operation's input is
 * stored encrypted; the Temporal CLI (the project's own binary) and Web-UI-shaped requests see plaintext through the
 * codec server with an operator's credentials, and ciphertext or a refusal without them. CORS admits the Web UI.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import express from 'express';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { ApiKeyStore, createAuthentication, generateApiKey, writeKeysFile } from '../../api/auth';
import { createCodecServer } from '../../api/codec-server';
import { securityHeaders } from '../../api/hardening';
import {
  ENCRYPTED_ENCODING,
  encryptedDataConverter,
  loadPayloadKeys,
  payloadCodecs,
} from '../../client/encryption-codec';
import { testAddress } from '../harness/temporal';
import { connectGrpc } from '../../config/grpc-connection';

const WEB_UI = 'http://127.0.0.1:8233';
const TEMPORAL_CLI = path.join(__dirname, '../../.temporal/bin/temporal');
const env = {
  ADCP_PAYLOAD_KEYS: `k2026-05:${randomBytes(32).toString('base64')},k2026-11:${randomBytes(32).toString('base64')}`,
};
const params = { brand: { domain: 'acme.example' }, po_number: 'PO-4711', budget: { total: 125000, currency: 'EUR' } };

let dir: string;
let server: Server;
let codecUrl: string;
let connection: Connection;
let encrypted: Client;
let plain: Client;
const keys: Record<'operator' | 'reader', string> = { operator: '', reader: '' };
const workflowId = `adcp-create_media_buy-codec-${randomUUID()}`;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'adcp-codec-'));
  const file = path.join(dir, 'keys.json');
  const operator = generateApiKey('ops');
  const reader = generateApiKey('viewer');
  keys.operator = operator.key;
  keys.reader = reader.key;
  writeKeysFile(file, {
    keys: [
      { key_id: 'ops', hash: operator.hash, principal: 'ops@acme', tenant: 'acme', roles: ['operator', 'admin'] },
      { key_id: 'viewer', hash: reader.hash, principal: 'viewer@acme', tenant: 'acme', roles: ['reader', 'buyer'] },
    ],
  });
  const app = express();
  app.use(securityHeaders());
  app.use(
    '/codec',
    createCodecServer({
      codecs: payloadCodecs(loadPayloadKeys(env)),
      authentication: createAuthentication({ apiKeys: new ApiKeyStore({ file }) }),
      corsOrigins: [WEB_UI],
      namespaces: ['default'],
    }),
  );
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  codecUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/codec`;

  connection = await connectGrpc({ address: testAddress() });
  encrypted = new Client({ connection, dataConverter: encryptedDataConverter(env) });
  plain = new Client({ connection });
  // No worker polls this queue: the start alone writes the input into history, which is all this test reads.
  await encrypted.workflow.start('adcpOperation', {
    workflowId,
    taskQueue: `codec-${randomUUID()}`,
    args: [{ sellerId: 'demo', task: 'create_media_buy', params }],
  });
});
afterAll(async () => {
  await encrypted?.workflow
    .getHandle(workflowId)
    .terminate('test over')
    .catch(() => undefined);
  await connection?.close();
  await new Promise((resolve) => server?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

/** The start event's input as the Web UI holds it: base64 metadata values and data. */
async function storedInput(): Promise<{ metadata: Record<string, string>; data: string }> {
  const history = await plain.workflow.getHandle(workflowId).fetchHistory();
  const payload = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
  return {
    metadata: Object.fromEntries(
      Object.entries(payload.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    ),
    data: Buffer.from(payload.data!).toString('base64'),
  };
}

function codec(route: 'decode' | 'encode', body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${codecUrl}/${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: WEB_UI, 'x-namespace': 'default', ...headers },
    body: JSON.stringify(body),
  });
}

test('history holds ciphertext only: no params in clear, the key id in the metadata', async () => {
  const input = await storedInput();
  expect(Buffer.from(input.metadata.encoding!, 'base64').toString()).toBe(ENCRYPTED_ENCODING);
  expect(Buffer.from(input.metadata['encryption-key-id']!, 'base64').toString()).toBe('k2026-11');
  const history = await plain.workflow.getHandle(workflowId).fetchHistory();
  const bytes = Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('latin1');
  expect(bytes).toContain(workflowId); // the check can see plaintext where there is some
  for (const secret of ['PO-4711', 'acme.example', '125000']) expect(bytes).not.toContain(secret);
});

test('an operator decodes it as the Web UI would, with the CORS headers the browser needs', async () => {
  const response = await codec(
    'decode',
    { payloads: [await storedInput()] },
    { authorization: `Bearer ${keys.operator}` },
  );
  expect(response.status).toBe(200);
  expect(response.headers.get('access-control-allow-origin')).toBe(WEB_UI);
  expect(response.headers.get('access-control-allow-credentials')).toBe('true');
  const { payloads } = (await response.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
  expect(Buffer.from(payloads[0]!.metadata.encoding!, 'base64').toString()).toBe('json/plain');
  expect(JSON.parse(Buffer.from(payloads[0]!.data, 'base64').toString())).toMatchObject({ params });
});

test('without the operator role: 403 (the UI keeps showing ciphertext); without credentials: 401', async () => {
  const body = { payloads: [await storedInput()] };
  const reader = await codec('decode', body, { authorization: `Bearer ${keys.reader}` });
  expect(reader.status).toBe(403);
  expect(((await reader.json()) as any).error).toMatchObject({
    code: 'FORBIDDEN',
    required_roles: ['operator', 'admin'],
  });
  expect(reader.headers.get('access-control-allow-origin')).toBe(WEB_UI); // so the UI can read the refusal
  const anonymous = await codec('decode', body);
  expect(anonymous.status).toBe(401);
  expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="adcp-orchestrator"');
});

test('the Temporal CLI shows plaintext through --codec-endpoint with an operator key, ciphertext without it', async () => {
  const show = (...extra: string[]) =>
    promisify(execFile)(
      TEMPORAL_CLI,
      ['workflow', 'show', '--workflow-id', workflowId, '--address', testAddress(), '--output', 'json', ...extra],
      { env: { PATH: process.env.PATH, HOME: dir } },
    );
  const startInput = (stdout: string) => {
    const payload = JSON.parse(stdout).events[0].workflowExecutionStartedEventAttributes.input.payloads[0];
    return {
      encoding: Buffer.from(payload.metadata.encoding, 'base64').toString(),
      data: Buffer.from(payload.data, 'base64'),
    };
  };
  const decoded = startInput(
    (await show('--codec-endpoint', codecUrl, '--codec-auth', `Bearer ${keys.operator}`)).stdout,
  );
  expect(decoded.encoding).toBe('json/plain');
  expect(JSON.parse(decoded.data.toString())).toMatchObject({ params });
  const raw = startInput((await show()).stdout);
  expect(raw.encoding).toBe(ENCRYPTED_ENCODING);
  expect(raw.data.toString('latin1')).not.toContain('PO-4711');
  // A reader's key: the codec server refuses (403) and the CLI shows nothing decoded (it retries, then gives up).
  const refused = show(
    '--command-timeout',
    '3s',
    '--codec-endpoint',
    codecUrl,
    '--codec-auth',
    `Bearer ${keys.reader}`,
  );
  await expect(refused).rejects.toThrow(/failed getting next history event/);
  await expect(refused).rejects.not.toThrow(/PO-4711/);
});

test('preflight from the Web UI origin: 204 allowing POST, Content-Type, Authorization and X-Namespace, no credentials needed', async () => {
  const response = await fetch(`${codecUrl}/decode`, {
    method: 'OPTIONS',
    headers: {
      origin: WEB_UI,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type,x-namespace,authorization',
    },
  });
  expect(response.status).toBe(204);
  expect(response.headers.get('access-control-allow-origin')).toBe(WEB_UI);
  expect(response.headers.get('access-control-allow-methods')).toBe('POST, OPTIONS');
  expect(response.headers.get('access-control-allow-headers')?.toLowerCase().split(/,\s*/)).toEqual(
    expect.arrayContaining(['content-type', 'authorization', 'x-namespace']),
  );
  expect(response.headers.get('vary')).toContain('Origin');
});

test('another origin is not admitted: no CORS headers, and its preflight is refused', async () => {
  const preflight = await fetch(`${codecUrl}/decode`, {
    method: 'OPTIONS',
    headers: { origin: 'https://attacker.example', 'access-control-request-method': 'POST' },
  });
  expect(preflight.status).toBe(403);
  expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
  const direct = await codec(
    'decode',
    { payloads: [] },
    { origin: 'https://attacker.example', authorization: `Bearer ${keys.operator}` },
  );
  expect(direct.headers.get('access-control-allow-origin')).toBeNull();
});

test('encode then decode round-trips; encoding also needs the operator role', async () => {
  const original = {
    metadata: { encoding: Buffer.from('json/plain').toString('base64') },
    data: Buffer.from('{"a":1}').toString('base64'),
  };
  const auth = { authorization: `Bearer ${keys.operator}` };
  const encoded = (await (await codec('encode', { payloads: [original] }, auth)).json()) as { payloads: any[] };
  expect(Buffer.from(encoded.payloads[0].metadata.encoding, 'base64').toString()).toBe(ENCRYPTED_ENCODING);
  const decoded = (await (await codec('decode', encoded, auth)).json()) as { payloads: any[] };
  expect(decoded.payloads).toEqual([original]);
  expect((await codec('encode', { payloads: [original] }, { authorization: `Bearer ${keys.reader}` })).status).toBe(
    403,
  );
});

test('a payload under a key the server does not hold: 422 saying which key', async () => {
  const foreign = await payloadCodecs(
    loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `elsewhere:${randomBytes(32).toString('base64')}` }),
  )[1]!.encode([{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('{}') }]);
  const body = {
    payloads: foreign.map((payload) => ({
      metadata: Object.fromEntries(
        Object.entries(payload.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
      ),
      data: Buffer.from(payload.data!).toString('base64'),
    })),
  };
  const response = await codec('decode', body, { authorization: `Bearer ${keys.operator}` });
  expect(response.status).toBe(422);
  expect(((await response.json()) as any).error).toMatchObject({
    code: 'DECODE_FAILED',
    message: expect.stringContaining('key "elsewhere", which is not configured'),
  });
});

test('bad requests: another namespace 403, a body that is not payloads 400, GET 405', async () => {
  const auth = { authorization: `Bearer ${keys.operator}` };
  expect((await codec('decode', { payloads: [] }, { ...auth, 'x-namespace': 'other' })).status).toBe(403);
  const bad = await codec('decode', { payloads: [{ data: 'not base64!' }] }, auth);
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as any).error.message).toContain('payloads.0.data: must be base64');
  expect((await codec('decode', { nope: 1 }, auth)).status).toBe(400);
  const get = await fetch(`${codecUrl}/decode`, { headers: auth });
  expect(get.status).toBe(405);
  expect(get.headers.get('allow')).toBe('POST, OPTIONS');
});
