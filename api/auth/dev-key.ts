/**
 * Zero-configuration `npm start` on loopback: a fresh development key with every role, for tenant "dev", whose hash
 * is written to `.data/dev-api-keys.json` (owner-only). The key itself is returned to be printed once, at start, and
 * is never written. Each start issues a new key, so a key printed in an old terminal stops working.
 */
import path from 'node:path';
import { generateApiKey } from './api-keys';
import { writeKeysFile } from './keys-file';
import { ROLES } from './principal';

export interface DevelopmentKey {
  /** Set ADCP_API_KEYS_FILE to this for the gateway. */
  file: string;
  key: string;
  principal: string;
  tenant: string;
}

export function createDevelopmentKey(
  options: { dataDir?: string; principal?: string; tenant?: string } = {},
): DevelopmentKey {
  const file = path.join(options.dataDir ?? '.data', 'dev-api-keys.json');
  const principal = options.principal ?? 'developer';
  const tenant = options.tenant ?? 'dev';
  const { key, hash } = generateApiKey('dev');
  writeKeysFile(file, { keys: [{ key_id: 'dev', hash, principal, tenant, roles: [...ROLES] }] });
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
