/**
 * Safe defaults (#12 item 7) and configuration: the gateway refuses a non-loopback bind without authentication,
 * `npm start` gets a development key whose hash alone is written, and bad settings fail naming the variable.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  ApiKeyStore,
  assertSafeBind,
  authenticationFromConfig,
  createDevelopmentKey,
  describeDevelopmentKey,
  isLoopbackHost,
  loadAuthConfig,
} from '../../api/auth';

test.each(['127.0.0.1', '127.8.9.10', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1'])('%s is loopback', (host) => {
  expect(isLoopbackHost(host)).toBe(true);
  expect(() => assertSafeBind(host, false)).not.toThrow();
});

test.each(['0.0.0.0', '::', '192.168.1.20', 'gateway.example.com', '10.0.0.1'])(
  'binding %s without authentication is refused with a clear error; with it, allowed',
  (host) => {
    expect(() => assertSafeBind(host, false)).toThrow(
      new RegExp(
        `Refusing to bind the gateway to ${host.replace(/\./g, '\\.')}: without authentication .*ADCP_API_KEYS_FILE.*ADCP_GATEWAY_HOST=127\\.0\\.0\\.1`,
      ),
    );
    expect(() => assertSafeBind(host, true)).not.toThrow();
  },
);

describe('development key', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'adcp-dev-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test('has every role in tenant "dev"; only its hash is written, owner-only; each start issues a new one', () => {
    const first = createDevelopmentKey({ dataDir: dir });
    expect(first.file).toBe(path.join(dir, 'dev-api-keys.json'));
    expect(statSync(first.file).mode & 0o777).toBe(0o600);
    const text = readFileSync(first.file, 'utf8');
    expect(text).not.toContain(first.key.split('.')[2]);
    const checked = new ApiKeyStore({ file: first.file }).check(first.key);
    expect(checked.ok && [...checked.principal.roles].sort()).toEqual([
      'admin',
      'approver',
      'buyer',
      'operator',
      'reader',
    ]);
    expect(checked.ok && checked.principal.tenant).toBe('dev');
    expect(describeDevelopmentKey(first, 'http://127.0.0.1:8080')).toContain(first.key);

    const second = createDevelopmentKey({ dataDir: dir });
    expect(new ApiKeyStore({ file: second.file }).check(first.key).ok).toBe(false);
    expect(new ApiKeyStore({ file: second.file }).check(second.key).ok).toBe(true);
  });
});

describe('loadAuthConfig', () => {
  test('nothing set: no authentication configured', () => {
    const config = loadAuthConfig({});
    expect(config).toEqual({ realm: 'adcp-orchestrator' });
    expect(authenticationFromConfig(config).configured).toBe(false);
  });

  test('a JWKS needs issuer and audience', () => {
    expect(() => loadAuthConfig({ ADCP_JWT_JWKS_URL: 'https://idp.example/jwks.json' })).toThrow(
      /ADCP_JWT_ISSUER: is required when a JWKS is configured; ADCP_JWT_AUDIENCE: is required/,
    );
  });

  test('JWT settings map to verifier options', () => {
    expect(
      loadAuthConfig({
        ADCP_JWT_JWKS_URL: 'https://idp.example/jwks.json',
        ADCP_JWT_ISSUER: 'https://idp.example/',
        ADCP_JWT_AUDIENCE: 'adcp-orchestrator,adcp',
        ADCP_JWT_TENANT_CLAIM: 'org.id',
        ADCP_JWT_ROLE_MAP: '{"adcp.approve":"approver"}',
        ADCP_JWT_MAX_AGE_SECONDS: '900',
      }).jwt,
    ).toEqual({
      jwksUrl: 'https://idp.example/jwks.json',
      issuer: ['https://idp.example/'],
      audience: ['adcp-orchestrator', 'adcp'],
      clockToleranceSeconds: 30,
      maxTokenAgeSeconds: 900,
      principalClaim: 'sub',
      tenantClaim: 'org.id',
      rolesClaim: 'roles',
      roleMap: { 'adcp.approve': 'approver' },
    });
    expect(() => loadAuthConfig({ ADCP_JWT_ROLE_MAP: '{"x":"superuser"}' })).toThrow(/ADCP_JWT_ROLE_MAP/);
  });

  test('a keys file that is missing fails at start, naming it', () => {
    expect(() => authenticationFromConfig(loadAuthConfig({ ADCP_API_KEYS_FILE: '/nonexistent/keys.json' }))).toThrow(
      /Cannot read ADCP_API_KEYS_FILE \/nonexistent\/keys\.json/,
    );
  });
});
