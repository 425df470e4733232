import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SellerRegistry, parseAgentsFile } from '../../config/sellers';
import { ConfigError } from '../../config/errors';
import { loadRuntimeConfig } from '../../config/runtime';
import { loadTaskDefaults, parseTasksFile } from '../../config/tasks';

const good = { agents: [{ id: 'demo', url: 'http://127.0.0.1:3004/mcp', protocol: 'mcp', token_env: 'DEMO_TOKEN' }] };

test('a valid seller list loads', () => {
  const registry = parseAgentsFile(JSON.stringify(good), 'agents.json');
  expect(registry.get('demo').url).toBe('http://127.0.0.1:3004/mcp');
});

test.each([
  [{ agents: [{ ...good.agents[0], url: 'ftp://x' }] }, 'agents[0].url'],
  [{ agents: [{ ...good.agents[0], protocol: 'grpc' }] }, 'agents[0].protocol'],
  [{ agents: [{ ...good.agents[0], token_env: 'not a var' }] }, 'agents[0].token_env'],
  [{ agents: [{ ...good.agents[0], token: 'secret-inline' }] }, 'agents[0]'],
  [{ agents: [good.agents[0], good.agents[0]] }, 'agents[1].id'],
  [{ agents: [] }, 'agents'],
  [{ sellers: [] }, '(root)'],
])('an invalid file names the bad field (%#)', (file, field) => {
  expect(() => parseAgentsFile(JSON.stringify(file), 'agents.json')).toThrow(
    new RegExp(`agents\\.json is invalid: .*${field.replace(/[.[\]()]/g, '\\$&')}`),
  );
});

describe('inline webhook-signing keys are checked at start (issue #9 item 9)', () => {
  const key = { kty: 'OKP', crv: 'Ed25519', x: 'AAAA', kid: 'k1', adcp_use: 'webhook-signing', key_ops: ['verify'] };
  const withKey = (jwk: Record<string, unknown>) => ({
    agents: [{ ...good.agents[0], webhooks: { scheme: 'rfc9421', jwks: { keys: [jwk] } } }],
  });

  test('a key that can verify webhooks loads', () => {
    expect(parseAgentsFile(JSON.stringify(withKey(key)), 'agents.json').get('demo').webhooks?.jwks?.keys).toHaveLength(
      1,
    );
  });

  test('a key without key_ops "verify" (the old README example) is refused, naming the field', () => {
    const { key_ops: _omitted, ...withoutKeyOps } = key;
    expect(() => parseAgentsFile(JSON.stringify(withKey(withoutKeyOps)), 'agents.json')).toThrow(
      /agents\[0\]\.webhooks\.jwks\.keys\[0\]\.key_ops: must include "verify"/,
    );
    expect(() => parseAgentsFile(JSON.stringify(withKey({ ...key, key_ops: ['sign'] })), 'agents.json')).toThrow(
      /key_ops/,
    );
  });

  test('a key for another purpose is refused, naming adcp_use', () => {
    expect(() =>
      parseAgentsFile(JSON.stringify(withKey({ ...key, adcp_use: 'request-signing' })), 'agents.json'),
    ).toThrow(/agents\[0\]\.webhooks\.jwks\.keys\[0\]\.adcp_use: must be "webhook-signing"/);
  });

  test('the inline JWKS example in docs/webhooks.md passes validation', () => {
    const readme = readFileSync(path.join(__dirname, '../../docs/webhooks.md'), 'utf8');
    const line = readme
      .split('\n')
      .find((candidate) => candidate.startsWith('"webhooks": { "scheme": "rfc9421", "jwks":'));
    expect(line).toBeDefined();
    const webhooks = JSON.parse(`{${line!.replace(/,\s*$/, '')}}`).webhooks;
    expect(() =>
      parseAgentsFile(JSON.stringify({ agents: [{ ...good.agents[0], webhooks }] }), 'agents.json'),
    ).not.toThrow();
  });
});

test('not JSON at all is a clear error', () => {
  expect(() => parseAgentsFile('{agents:', 'agents.json')).toThrow(/agents\.json is not valid JSON/);
});

test('tokens come from the environment at call time, and a missing one is named', () => {
  const registry = new SellerRegistry(parseAgentsFile(JSON.stringify(good), 'f').sellers, 'f');
  expect(registry.token('demo', { DEMO_TOKEN: 'abc' })).toBe('abc');
  expect(() => registry.token('demo', {})).toThrow(/DEMO_TOKEN/);
  expect(() => registry.get('other')).toThrow(ConfigError);
});

test('runtime settings have defaults and reject bad values', () => {
  expect(loadRuntimeConfig({})).toMatchObject({
    taskQueue: 'adcp-operations',
    gatewayHost: '127.0.0.1',
    gatewayPort: 8080,
    keepAliveTimeoutMs: 5_000,
  });
  expect(() => loadRuntimeConfig({ ADCP_GATEWAY_PORT: 'eighty' })).toThrow(/ADCP_GATEWAY_PORT/);
  expect(loadRuntimeConfig({ ADCP_GATEWAY_KEEP_ALIVE_MS: '65000' }).keepAliveTimeoutMs).toBe(65_000);
  expect(() => loadRuntimeConfig({ ADCP_GATEWAY_KEEP_ALIVE_MS: '0' })).toThrow(/ADCP_GATEWAY_KEEP_ALIVE_MS/);
  expect(() => loadRuntimeConfig({ ADCP_GATEWAY_KEEP_ALIVE_MS: 'long' })).toThrow(/ADCP_GATEWAY_KEEP_ALIVE_MS/);
  expect(loadRuntimeConfig({ ADCP_PUBLIC_BASE_URL: 'https://buyer.example/' }).publicBaseUrl).toBe(
    'https://buyer.example',
  );
});

test("failed seller calls' retry backoff: 1 s to 60 s by default, set by the environment, the longest never below the first", () => {
  expect(loadRuntimeConfig({}).retryBackoff).toEqual({ initialMs: 1_000, maxMs: 60_000 });
  expect(
    loadRuntimeConfig({ ADCP_RETRY_INITIAL_INTERVAL_MS: '50', ADCP_RETRY_MAX_INTERVAL_MS: '1000' }).retryBackoff,
  ).toEqual({ initialMs: 50, maxMs: 1_000 });
  expect(() => loadRuntimeConfig({ ADCP_RETRY_INITIAL_INTERVAL_MS: 'soon' })).toThrow(/ADCP_RETRY_INITIAL_INTERVAL_MS/);
  expect(() => loadRuntimeConfig({ ADCP_RETRY_INITIAL_INTERVAL_MS: '0' })).toThrow(/ADCP_RETRY_INITIAL_INTERVAL_MS/);
  expect(() =>
    loadRuntimeConfig({ ADCP_RETRY_INITIAL_INTERVAL_MS: '5000', ADCP_RETRY_MAX_INTERVAL_MS: '1000' }),
  ).toThrow(/ADCP_RETRY_MAX_INTERVAL_MS.*at least ADCP_RETRY_INITIAL_INTERVAL_MS/);
});

describe('per-task defaults (ADCP_TASKS_FILE)', () => {
  test('a valid file becomes defaults in milliseconds', () => {
    const defaults = parseTasksFile(
      JSON.stringify({
        tasks: {
          create_media_buy: {
            budget_seconds: 172_800,
            retry: { max_attempts: 5, maximum_interval_seconds: 30 },
            interaction: { max_rounds: 2 },
          },
          get_products: { auth_deadline_seconds: 600 },
        },
      }),
      'tasks.json',
    );
    expect(defaults).toEqual({
      create_media_buy: {
        budgetMs: 172_800_000,
        retry: { maximumAttempts: 5, maximumIntervalMs: 30_000 },
        interaction: { maxRounds: 2 },
      },
      get_products: { authDeadlineMs: 600_000 },
    });
  });
  test.each([
    [{ tasks: { 'Create Media Buy': {} } }, 'tasks.Create Media Buy'],
    [{ tasks: { create_media_buy: { budget_seconds: -1 } } }, 'tasks.create_media_buy.budget_seconds'],
    [{ tasks: { create_media_buy: { retry: { max_attempts: 0 } } } }, 'tasks.create_media_buy.retry.max_attempts'],
    [{ tasks: { create_media_buy: { budget: 10 } } }, 'tasks.create_media_buy'],
  ])('an invalid file names the bad field (%#)', (file, field) => {
    expect(() => parseTasksFile(JSON.stringify(file), 'tasks.json')).toThrow(ConfigError);
    expect(() => parseTasksFile(JSON.stringify(file), 'tasks.json')).toThrow(field);
  });
  test('no ADCP_TASKS_FILE: no defaults; a missing file is a clear error', () => {
    expect(loadTaskDefaults({})).toEqual({});
    expect(() => loadTaskDefaults({ ADCP_TASKS_FILE: '/nonexistent/tasks.json' })).toThrow(
      /ADCP_TASKS_FILE names \/nonexistent\/tasks.json/,
    );
  });
});
