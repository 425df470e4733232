/**
 * Zero-configuration `npm start` on loopback: a fresh development key with every role, for tenant "dev", whose hash
 * is written to `.data/dev-api-keys-<port>.json` (owner-only). The key itself is printed once, at start, and is never
 * written. Each start issues a new key, so a key printed in an old terminal stops working.
 */
import path from 'node:path';
import { apiKeyId, generateApiKey, hashApiKey } from './api-keys';
import { writeKeysFile } from './keys-file';
import { ROLES } from './principal';

export interface DevelopmentKey {
  /** Set ADCP_API_KEYS_FILE to this for the gateway. */
  file: string;
  key: string;
  principal: string;
  tenant: string;
}

/** The development key's tenant: operations that record no tenant belong to it under `npm start`. */
export const DEVELOPMENT_TENANT = 'dev';

/**
 * A development key's hash file. `key` is one `npm start` already issued (it passes ADCP_API_KEY to the gateway it
 * supervises, so a restarted gateway keeps accepting the key that was printed); without it a new key is issued.
 */
export function createDevelopmentKey(
  options: { dataDir?: string; fileName?: string; principal?: string; tenant?: string; key?: string } = {},
): DevelopmentKey {
  const file = path.join(options.dataDir ?? '.data', options.fileName ?? 'dev-api-keys.json');
  const principal = options.principal ?? 'developer';
  const tenant = options.tenant ?? DEVELOPMENT_TENANT;
  const keyId = options.key ? apiKeyId(options.key) : 'dev';
  if (!keyId)
    throw new Error('ADCP_API_KEY is not an API key of the form adcpk.<key_id>.<secret>; unset it to get a new one.');
  const { key, hash } = options.key ? { key: options.key, hash: hashApiKey(options.key) } : generateApiKey(keyId);
  writeKeysFile(file, { keys: [{ key_id: keyId, hash, principal, tenant, roles: [...ROLES] }] });
  return { file, key, principal, tenant };
}

/** The lines `npm start` prints once. */
export function describeDevelopmentKey(dev: DevelopmentKey, gatewayUrl: string): string {
  return [
    `  API key    ${dev.key}`,
    `             (development key, every role, tenant "${dev.tenant}"; new at each start; for example:`,
    `             curl -H "Authorization: Bearer ${dev.key}" ${gatewayUrl}/v1/operations/<id>)`,
  ].join('\n');
}
