import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type ApiKeyEntry, type ApiKeysFile, parseApiKeysFile } from './api-keys';

/** Adds (or, for the same key_id, replaces) an entry, writing atomically with owner-only permissions. */
export function upsertKeyEntry(file: string, entry: ApiKeyEntry): ApiKeysFile {
  const current: ApiKeysFile = existsSync(file) ? parseApiKeysFile(readFileSync(file, 'utf8'), file) : { keys: [] };
  const next: ApiKeysFile = { keys: [...current.keys.filter((key) => key.key_id !== entry.key_id), entry] };
  writeKeysFile(file, next);
  return next;
}

export function writeKeysFile(file: string, content: ApiKeysFile): void {
  mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(content, null, 2)}\n`, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, file);
}
