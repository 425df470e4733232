/**
 * Issue an API key: `npm run auth:hash-key -- --key-id ops-2026-11 --principal ops@buyer.example --tenant acme
 *   --roles reader,approver [--not-after 2027-03-01T00:00:00Z] [--file keys.json]`
 * prints the new key once (give it to the caller; it is not stored) and adds its hash to the keys file, or prints
 * the entry to paste when --file is not given. `--key <existing key>` hashes a key you already have instead.
 * Rotation: issue a second key for the same principal, move callers over, then remove or expire the old entry.
 */
import { parseArgs } from 'node:util';
import { type ApiKeyEntry, apiKeyId, apiKeysFileSchema, generateApiKey, hashApiKey } from './api-keys';
import { upsertKeyEntry } from './keys-file';

function main(): void {
  const { values } = parseArgs({
    options: {
      'key-id': { type: 'string' },
      principal: { type: 'string' },
      tenant: { type: 'string' },
      roles: { type: 'string' },
      'not-after': { type: 'string' },
      file: { type: 'string' },
      key: { type: 'string' },
    },
  });
  const existing = values.key;
  const keyId = existing ? apiKeyId(existing) : values['key-id'];
  if (!keyId) throw new Error(existing ? 'The --key is not an adcpk.<key_id>.<secret> key.' : '--key-id is required.');
  if (existing && values['key-id'] && values['key-id'] !== keyId)
    throw new Error(`The key's own id is "${keyId}", not "${values['key-id']}".`);
  const issued = existing ? { key: existing, hash: hashApiKey(existing) } : generateApiKey(keyId);
  const entry: ApiKeyEntry = {
    key_id: keyId,
    hash: issued.hash,
    principal: values.principal ?? '',
    tenant: values.tenant ?? '',
    roles: (values.roles ?? '')
      .split(',')
      .map((role) => role.trim())
      .filter(Boolean) as ApiKeyEntry['roles'],
    ...(values['not-after'] ? { not_after: values['not-after'] } : {}),
  };
  // Validate the entry the same way the gateway will read it.
  const checked = apiKeysFileSchema.safeParse({ keys: [entry] });
  if (!checked.success) {
    throw new Error(
      checked.error.issues
        .map((issue) => `--${String(issue.path.at(-1)).replace('_', '-')}: ${issue.message}`)
        .join('; '),
    );
  }
  if (values.file) {
    upsertKeyEntry(values.file, entry);
    console.error(`Added key "${keyId}" for ${entry.principal} (tenant ${entry.tenant}) to ${values.file}.`);
  } else {
    console.error('Add this entry to the "keys" array of the file named by ADCP_API_KEYS_FILE:');
    console.error(JSON.stringify(entry, null, 2));
  }
  if (!existing) {
    console.error('The key (shown once; it is not stored anywhere):');
    console.log(issued.key);
  }
}

try {
  main();
} catch (error) {
  console.error(`auth:hash-key: ${(error as Error).message}`);
  process.exit(2);
}
