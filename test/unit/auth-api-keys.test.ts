/**
 * API keys (#12 item 1): only salted hashes are stored, two keys of one principal are valid at once (rotation), a key
 * past its not_after is refused, the file is re-read when it changes, and a bad file fails at start naming the field.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  type ApiKeyEntry,
  ApiKeyStore,
  ApiKeysFileError,
  apiKeyId,
  generateApiKey,
  hashApiKey,
  parseApiKeysFile,
  verifyApiKeyHash,
  writeKeysFile,
} from '../../api/auth';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'adcp-keys-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function entry(keyId: string, hash: string, overrides: Partial<ApiKeyEntry> = {}): ApiKeyEntry {
  return {
    key_id: keyId,
    hash,
    principal: 'ops@buyer.example',
    tenant: 'acme',
    roles: ['reader', 'buyer'],
    ...overrides,
  };
}

test('a generated key verifies against its hash, and the hash reveals nothing of the key', () => {
  const { key, hash } = generateApiKey('ops-2026-11');
  expect(key).toMatch(/^adcpk\.ops-2026-11\.[A-Za-z0-9_-]{43}$/);
  expect(apiKeyId(key)).toBe('ops-2026-11');
  expect(verifyApiKeyHash(key, hash)).toBe(true);
  expect(hash).not.toContain(key.split('.')[2]);
  expect(verifyApiKeyHash(`${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`, hash)).toBe(false);
  // A per-key salt: the same key hashed twice gives two different stored values, both valid.
  const again = hashApiKey(key);
  expect(again).not.toBe(hash);
  expect(verifyApiKeyHash(key, again)).toBe(true);
});

test('rotation: old and new key of one principal are both valid until the old entry is removed', () => {
  let clock = 1_000_000;
  const file = path.join(dir, 'keys.json');
  const old = generateApiKey('ops-2026-05');
  const fresh = generateApiKey('ops-2026-11');
  writeKeysFile(file, { keys: [entry('ops-2026-05', old.hash), entry('ops-2026-11', fresh.hash)] });
  const store = new ApiKeyStore({ file, recheckMs: 1_000, now: () => clock, log: () => undefined });

  for (const key of [old.key, fresh.key]) {
    const checked = store.check(key);
    expect(checked).toMatchObject({ ok: true, principal: { id: 'ops@buyer.example', tenant: 'acme' } });
  }
  const viaOld = store.check(old.key);
  expect(viaOld.ok && viaOld.principal.via).toEqual({ kind: 'api-key', keyId: 'ops-2026-05' });

  // The operator removes the old entry; the gateway notices without a restart.
  writeKeysFile(file, { keys: [entry('ops-2026-11', fresh.hash)] });
  utimesSync(file, new Date(), new Date(Date.now() + 5_000)); // a distinct mtime even on coarse file systems
  clock += 1_500;
  expect(store.check(old.key)).toEqual({ ok: false, reason: 'unknown_key' });
  expect(store.check(fresh.key).ok).toBe(true);
});

test('a key past its not_after is refused; before it, accepted', () => {
  const file = path.join(dir, 'keys.json');
  const retiring = generateApiKey('retiring');
  writeKeysFile(file, { keys: [entry('retiring', retiring.hash, { not_after: '2026-12-01T00:00:00Z' })] });
  let clock = Date.parse('2026-11-30T12:00:00Z');
  const store = new ApiKeyStore({ file, now: () => clock });
  expect(store.check(retiring.key).ok).toBe(true);
  clock = Date.parse('2026-12-01T00:00:01Z');
  expect(store.check(retiring.key)).toEqual({ ok: false, reason: 'expired_key' });
});

test('an unknown key id, a wrong secret, and something that is not a key are refused', () => {
  const file = path.join(dir, 'keys.json');
  const known = generateApiKey('known');
  writeKeysFile(file, { keys: [entry('known', known.hash)] });
  const store = new ApiKeyStore({ file });
  expect(store.check(generateApiKey('other').key)).toEqual({ ok: false, reason: 'unknown_key' });
  expect(store.check(generateApiKey('known').key)).toEqual({ ok: false, reason: 'unknown_key' });
  expect(store.check('eyJhbGciOiJFUzI1NiJ9.e30.sig')).toEqual({ ok: false, reason: 'not_an_api_key' });
});

test('a broken rewrite of the file keeps the keys loaded before, and says so', () => {
  let clock = 0;
  const lines: string[] = [];
  const file = path.join(dir, 'keys.json');
  const key = generateApiKey('k1');
  writeKeysFile(file, { keys: [entry('k1', key.hash)] });
  const store = new ApiKeyStore({ file, recheckMs: 10, now: () => clock, log: (line) => lines.push(line) });
  writeFileSync(file, '{"keys": [');
  utimesSync(file, new Date(), new Date(Date.now() + 10_000));
  clock += 100;
  expect(store.check(key.key).ok).toBe(true);
  expect(lines.join('\n')).toMatch(/kept the keys loaded before: .*keys\.json is not valid JSON/);
});

test('an invalid keys file fails naming the field', () => {
  const { hash } = generateApiKey('a');
  expect(() => parseApiKeysFile(JSON.stringify({ keys: [entry('a', hash), entry('a', hash)] }), 'keys.json')).toThrow(
    /keys\.json is invalid: keys\[1\]\.key_id: "a" appears twice/,
  );
  expect(() =>
    parseApiKeysFile(JSON.stringify({ keys: [entry('a', hash, { roles: ['superuser' as never] })] }), 'keys.json'),
  ).toThrow(ApiKeysFileError);
  expect(() =>
    parseApiKeysFile(JSON.stringify({ keys: [{ ...entry('a', hash), hash: 'plaintext-key' }] }), 'k.json'),
  ).toThrow(/keys\[0\]\.hash: must be "sha256:<salt>:<digest>"/);
});

test('npm run auth:hash-key issues a key once and adds only its hash to the file', async () => {
  const file = path.join(dir, 'keys.json');
  const { stdout, stderr } = await promisify(execFile)(
    process.execPath,
    [
      require.resolve('tsx/cli'),
      path.join(__dirname, '../../api/auth/hash-key.ts'),
      '--key-id',
      'ci-2026-11',
      '--principal',
      'ci@buyer.example',
      '--tenant',
      'acme',
      '--roles',
      'reader,buyer',
      '--file',
      file,
    ],
    { cwd: dir },
  );
  const key = stdout.trim();
  expect(apiKeyId(key)).toBe('ci-2026-11');
  expect(stderr).toContain('shown once');
  const text = readFileSync(file, 'utf8');
  expect(text).not.toContain(key.split('.')[2]);
  const store = new ApiKeyStore({ file });
  expect(store.check(key)).toMatchObject({ ok: true, principal: { id: 'ci@buyer.example', tenant: 'acme' } });
});
