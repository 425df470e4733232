import { AgentRegistry, ConfigError, parseAgentsFile } from '../../config/agents';
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
  expect(() => parseAgentsFile(JSON.stringify(file), 'agents.json')).toThrow(new RegExp(`agents\\.json is invalid: .*${field.replace(/[.[\]()]/g, '\\$&')}`));
});

test('not JSON at all is a clear error', () => {
  expect(() => parseAgentsFile('{agents:', 'agents.json')).toThrow(/agents\.json is not valid JSON/);
});

test('tokens come from the environment at call time, and a missing one is named', () => {
  const registry = new AgentRegistry(parseAgentsFile(JSON.stringify(good), 'f').agents, 'f');
  expect(registry.token('demo', { DEMO_TOKEN: 'abc' })).toBe('abc');
  expect(() => registry.token('demo', {})).toThrow(/DEMO_TOKEN/);
  expect(() => registry.get('other')).toThrow(ConfigError);
});

test('runtime settings have defaults and reject bad values', () => {
  expect(loadRuntimeConfig({})).toMatchObject({ taskQueue: 'adcp-operations', gatewayHost: '127.0.0.1', gatewayPort: 8080 });
  expect(() => loadRuntimeConfig({ ADCP_GATEWAY_PORT: 'eighty' })).toThrow(/ADCP_GATEWAY_PORT/);
  expect(loadRuntimeConfig({ ADCP_PUBLIC_BASE_URL: 'https://buyer.example/' }).publicBaseUrl).toBe('https://buyer.example');
});

describe('per-task defaults (ADCP_TASKS_FILE)', () => {
  test('a valid file becomes defaults in milliseconds', () => {
    const defaults = parseTasksFile(
      JSON.stringify({ tasks: { create_media_buy: { budget_seconds: 172_800, retry: { max_attempts: 5, maximum_interval_seconds: 30 }, interaction: { max_rounds: 2 } }, get_products: { auth_deadline_seconds: 600 } } }),
      'tasks.json',
    );
    expect(defaults).toEqual({
      create_media_buy: { budgetMs: 172_800_000, retry: { maximumAttempts: 5, maximumIntervalMs: 30_000 }, interaction: { maxRounds: 2 } },
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
    expect(() => loadTaskDefaults({ ADCP_TASKS_FILE: '/nonexistent/tasks.json' })).toThrow(/ADCP_TASKS_FILE names \/nonexistent\/tasks.json/);
  });
});
