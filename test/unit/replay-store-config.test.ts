/** ADCP_REPLAY_STORE_URL and friends: which nonce store the gateway opens, and clear errors for bad values. */
import { ConfigError } from '../../config/errors';
import { loadReplayStoreConfig, redactUrl } from '../../config/webhook-auth';

test('unset, empty or "memory": the in-memory store of one gateway, with the default caps', () => {
  for (const env of [{}, { ADCP_REPLAY_STORE_URL: '' }, { ADCP_REPLAY_STORE_URL: 'memory' }]) {
    expect(loadReplayStoreConfig(env)).toEqual({ kind: 'memory', maxEntries: 200_000, maxEntriesPerScope: 10_000 });
  }
});

test('a postgres:// URL selects the shared store; the password never appears in what is logged', () => {
  const config = loadReplayStoreConfig({
    ADCP_REPLAY_STORE_URL: 'postgresql://gateway:s3cret-value@db.internal:5432/adcp?sslmode=require',
    ADCP_REPLAY_STORE_MAX_PER_SCOPE: '500',
  });
  expect(config).toMatchObject({
    kind: 'postgres',
    url: 'postgresql://gateway:s3cret-value@db.internal:5432/adcp?sslmode=require',
    tableName: 'adcp_replay_cache',
    maxEntries: 200_000,
    maxEntriesPerScope: 500,
  });
  expect(config.kind === 'postgres' && config.redactedUrl).toBe(
    'postgresql://gateway:***@db.internal:5432/adcp?sslmode=require',
  );
  expect(redactUrl('postgres://u:p@h/db?password=x')).toBe('postgres://u:***@h/db?password=***');
});

test.each([
  ['redis://cache:6379', /ADCP_REPLAY_STORE_URL: uses "redis:\/\/"; the shared replay store supports PostgreSQL only/],
  ['not a url with s3cret', /ADCP_REPLAY_STORE_URL: is not a URL/],
  ['postgres://u:s3cret@:5432/db', /ADCP_REPLAY_STORE_URL: (names no host|is not a URL)/],
])('ADCP_REPLAY_STORE_URL=%s stops the gateway at start, naming the variable and not the secret', (url, message) => {
  let error: unknown;
  try {
    loadReplayStoreConfig({ ADCP_REPLAY_STORE_URL: url });
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as Error).message).toMatch(message);
  expect((error as Error).message).not.toContain('s3cret');
});

test('table names and caps are checked too', () => {
  expect(() => loadReplayStoreConfig({ ADCP_REPLAY_STORE_TABLE: 'Nonces; DROP TABLE x' })).toThrow(
    /ADCP_REPLAY_STORE_TABLE: must be a lowercase SQL identifier/,
  );
  expect(() => loadReplayStoreConfig({ ADCP_REPLAY_STORE_MAX_ENTRIES: '10' })).toThrow(/ADCP_REPLAY_STORE_MAX_ENTRIES/);
});
