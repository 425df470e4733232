/**
 * API keys. A key is `adcpk.<key_id>.<secret>`: the key id selects one entry of the keys file, the secret is checked
 * against that entry's salted SHA-256 in constant time. The file holds only hashes, so reading it does not let anyone
 * call the gateway. Keys carry 256 random bits, so a fast hash is enough (a slow one only helps guessable passwords).
 *
 * Rotation: add an entry for the new key (same principal, new key_id), move callers over, then remove the old entry
 * or give it a `not_after`. The file is re-read when it changes, so no restart is needed.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { formatZodIssues } from '../../config/zod-format';
import { type Principal, roleSchema } from './principal';

export const API_KEY_PREFIX = 'adcpk';
const KEY_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const SECRET_PATTERN = /^[A-Za-z0-9_-]{32,128}$/;
const HASH_PATTERN = /^sha256:[A-Za-z0-9_-]{16,}:[A-Za-z0-9_-]{43}$/;

const entrySchema = z
  .object({
    key_id: z.string().regex(KEY_ID_PATTERN, 'must be 1-64 letters, digits, "_" or "-"'),
    hash: z.string().regex(HASH_PATTERN, 'must be "sha256:<salt>:<digest>" as printed by `npm run auth:hash-key`'),
    principal: z.string().min(1).max(200),
    tenant: z.string().min(1).max(200),
    roles: z.array(roleSchema).min(1),
    not_after: z.iso.datetime({ offset: true }).optional(),
  })
  .strict();

export const apiKeysFileSchema = z
  .object({ keys: z.array(entrySchema) })
  .strict()
  .superRefine((file, ctx) => {
    const seen = new Set<string>();
    file.keys.forEach((entry, index) => {
      if (seen.has(entry.key_id))
        ctx.addIssue({ code: 'custom', path: ['keys', index, 'key_id'], message: `"${entry.key_id}" appears twice` });
      seen.add(entry.key_id);
    });
  });

export type ApiKeyEntry = z.infer<typeof entrySchema>;
export type ApiKeysFile = z.infer<typeof apiKeysFileSchema>;

function digest(salt: string, key: string): Buffer {
  return createHash('sha256').update(salt).update(':').update(key).digest();
}

/** A new key for `keyId`, and the hash to store for it. The key is shown once; only the hash is kept. */
export function generateApiKey(keyId: string): { key: string; hash: string } {
  if (!KEY_ID_PATTERN.test(keyId)) throw new Error(`The key id "${keyId}" must be 1-64 letters, digits, "_" or "-".`);
  const key = `${API_KEY_PREFIX}.${keyId}.${randomBytes(32).toString('base64url')}`;
  return { key, hash: hashApiKey(key) };
}

export function hashApiKey(key: string, salt = randomBytes(16).toString('base64url')): string {
  return `sha256:${salt}:${digest(salt, key).toString('base64url')}`;
}

export function verifyApiKeyHash(key: string, hash: string): boolean {
  const [, salt, expected] = hash.split(':');
  if (!salt || !expected) return false;
  const expectedBytes = Buffer.from(expected, 'base64url');
  const actual = digest(salt, key);
  return expectedBytes.length === actual.length && timingSafeEqual(expectedBytes, actual);
}

/** The key id of something shaped like one of our keys, or undefined (then it may be a JWT). */
export function apiKeyId(token: string): string | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== API_KEY_PREFIX) return undefined;
  return KEY_ID_PATTERN.test(parts[1]!) && SECRET_PATTERN.test(parts[2]!) ? parts[1] : undefined;
}

export class ApiKeysFileError extends Error {}

export function parseApiKeysFile(text: string, source: string): ApiKeysFile {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ApiKeysFileError(`${source} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = apiKeysFileSchema.safeParse(json);
  if (!parsed.success) throw new ApiKeysFileError(`${source} is invalid: ${formatZodIssues(parsed.error.issues)}`);
  return parsed.data;
}

export type ApiKeyCheck =
  { ok: true; principal: Principal } | { ok: false; reason: 'unknown_key' | 'expired_key' | 'not_an_api_key' };

export interface ApiKeyStoreOptions {
  /** The keys file (ADCP_API_KEYS_FILE). */
  file: string;
  /** How often, at most, the file's modification time is checked for a rotation. */
  recheckMs?: number;
  now?: () => number;
  log?: (line: string) => void;
}

/** The keys file, loaded at construction (a bad file fails start) and re-read when it changes. */
export class ApiKeyStore {
  private entries = new Map<string, ApiKeyEntry>();
  private loadedMtimeMs = -1;
  private checkedAt = 0;
  private readonly now: () => number;
  private readonly log: (line: string) => void;

  constructor(private readonly options: ApiKeyStoreOptions) {
    this.now = options.now ?? Date.now;
    this.log = options.log ?? ((line) => console.error(line));
    this.reload();
  }

  get size(): number {
    return this.entries.size;
  }

  /** Reads the file now. Throws when it is missing or invalid; the keys loaded before stay in force. */
  reload(): void {
    const mtimeMs = statSync(this.options.file).mtimeMs;
    const file = parseApiKeysFile(readFileSync(this.options.file, 'utf8'), this.options.file);
    this.entries = new Map(file.keys.map((entry) => [entry.key_id, entry]));
    this.loadedMtimeMs = mtimeMs;
    this.checkedAt = this.now();
  }

  private refresh(): void {
    if (this.now() - this.checkedAt < (this.options.recheckMs ?? 2_000)) return;
    this.checkedAt = this.now();
    try {
      if (statSync(this.options.file).mtimeMs !== this.loadedMtimeMs) {
        this.reload();
        this.log(`auth: reloaded ${this.options.file} (${this.entries.size} keys)`);
      }
    } catch (error) {
      this.log(`auth: kept the keys loaded before: ${(error as Error).message}`);
    }
  }

  check(token: string): ApiKeyCheck {
    const keyId = apiKeyId(token);
    if (!keyId) return { ok: false, reason: 'not_an_api_key' };
    this.refresh();
    const entry = this.entries.get(keyId);
    // Hash anyway for an unknown id, so the answer takes the same time whether the id exists or not.
    const matches = verifyApiKeyHash(token, entry?.hash ?? hashApiKey('', 'timing-equaliser-salt'));
    if (!entry || !matches) return { ok: false, reason: 'unknown_key' };
    if (entry.not_after && Date.parse(entry.not_after) <= this.now()) return { ok: false, reason: 'expired_key' };
    return {
      ok: true,
      principal: {
        id: entry.principal,
        tenant: entry.tenant,
        roles: new Set(entry.roles),
        via: { kind: 'api-key', keyId },
      },
    };
  }
}
