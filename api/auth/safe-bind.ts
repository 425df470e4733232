/**
 * The gateway's safe default: without authentication it binds to loopback only, where nothing but this machine can
 * reach it. A non-loopback address (0.0.0.0, a LAN or public IP, a host name) needs authentication configured.
 */
import { isIP } from 'node:net';
import { ConfigError } from '../../config/errors';

export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (bare === 'localhost') return true;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1' || /^::ffff:127\./.test(bare);
  return false;
}

export function assertSafeBind(host: string, authConfigured: boolean): void {
  if (authConfigured || isLoopbackHost(host)) return;
  throw new ConfigError(
    `Refusing to bind the gateway to ${host}: without authentication anyone who can reach that address could start, ` +
      'answer and cancel operations. Configure authentication (ADCP_API_KEYS_FILE with hashed keys from ' +
      '`npm run auth:hash-key`, or ADCP_JWT_JWKS_URL with ADCP_JWT_ISSUER and ADCP_JWT_AUDIENCE), ' +
      'or bind to loopback (ADCP_GATEWAY_HOST=127.0.0.1).',
  );
}
