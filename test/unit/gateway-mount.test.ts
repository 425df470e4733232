/**
 * How api/main.ts decides its authentication and listeners (api/mount.ts, config/runtime.ts): no authentication
 * configured means loopback only with a development key (the one `npm start` passes in ADCP_API_KEY, else a new one);
 * a non-loopback address without authentication is refused before anything listens.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generateApiKey, loadAuthConfig, writeKeysFile } from '../../api/auth';
import { allowedHosts, gatewayAuthentication } from '../../api/mount';
import { loadRuntimeConfig } from '../../config/runtime';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'adcp-mount-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('without authentication a non-loopback address is refused, naming what to configure', () => {
  for (const host of ['0.0.0.0', '192.168.1.20', 'gateway.example.com'])
    expect(() => gatewayAuthentication({ auth: loadAuthConfig({}), host, env: {}, dataDir: dir })).toThrow(
      /Refusing to bind the gateway to .*ADCP_API_KEYS_FILE/,
    );
});

test('on loopback without authentication the gateway accepts the key npm start passed, and only it', async () => {
  const passed = generateApiKey('dev').key;
  const { authentication, developmentKey } = gatewayAuthentication({
    auth: loadAuthConfig({}),
    host: '127.0.0.1',
    env: { ADCP_API_KEY: passed },
    dataDir: dir,
  });
  expect(developmentKey).toMatchObject({ key: passed, tenant: 'dev', issuedHere: false });
  expect(readFileSync(developmentKey!.file, 'utf8')).not.toContain(passed.split('.')[2]);
  expect(await authentication.verify(passed)).toMatchObject({ ok: true, principal: { tenant: 'dev' } });
  expect((await authentication.verify(generateApiKey('dev').key)).ok).toBe(false);
});

test('on loopback without ADCP_API_KEY the gateway issues its own development key', async () => {
  const { authentication, developmentKey } = gatewayAuthentication({
    auth: loadAuthConfig({}),
    host: 'localhost',
    env: {},
    dataDir: dir,
  });
  expect(developmentKey?.issuedHere).toBe(true);
  expect((await authentication.verify(developmentKey!.key)).ok).toBe(true);
});

test('with a keys file any address may be bound, and no development key is made', async () => {
  const issued = generateApiKey('ops');
  const file = path.join(dir, 'keys.json');
  writeKeysFile(file, {
    keys: [{ key_id: 'ops', hash: issued.hash, principal: 'ops', tenant: 'acme', roles: ['operator'] }],
  });
  const { authentication, developmentKey } = gatewayAuthentication({
    auth: loadAuthConfig({ ADCP_API_KEYS_FILE: file }),
    host: '0.0.0.0',
    env: { ADCP_API_KEY: generateApiKey('dev').key },
    dataDir: dir,
  });
  expect(developmentKey).toBeUndefined();
  expect(await authentication.verify(issued.key)).toMatchObject({ ok: true, principal: { tenant: 'acme' } });
});

test('webhooks get their own listener only when ADCP_WEBHOOK_PORT is set', () => {
  expect(loadRuntimeConfig({}).webhookListener).toBeUndefined();
  expect(loadRuntimeConfig({ ADCP_WEBHOOK_PORT: '8081' }).webhookListener).toEqual({ host: '127.0.0.1', port: 8081 });
  expect(loadRuntimeConfig({ ADCP_WEBHOOK_HOST: '0.0.0.0', ADCP_WEBHOOK_PORT: '8443' }).webhookListener).toEqual({
    host: '0.0.0.0',
    port: 8443,
  });
  expect(() => loadRuntimeConfig({ ADCP_WEBHOOK_HOST: '0.0.0.0' })).toThrow(/ADCP_WEBHOOK_PORT/);
});

test('the Host allow-list: loopback, the public base URL, a named bound host, ADCP_GATEWAY_ALLOWED_HOSTS', () => {
  const hosts = allowedHosts(
    loadRuntimeConfig({
      ADCP_GATEWAY_HOST: '0.0.0.0',
      ADCP_WEBHOOK_HOST: 'hooks.buyer.example',
      ADCP_WEBHOOK_PORT: '8443',
      ADCP_PUBLIC_BASE_URL: 'https://hooks.buyer.example:8443/',
      ADCP_GATEWAY_ALLOWED_HOSTS: 'api.buyer.example, api.internal:8080',
    }),
  );
  expect(hosts).toEqual(
    expect.arrayContaining([
      '127.0.0.1',
      'localhost',
      'hooks.buyer.example:8443',
      'hooks.buyer.example',
      'api.buyer.example',
      'api.internal:8080',
    ]),
  );
  expect(hosts).not.toContain('0.0.0.0');
});
