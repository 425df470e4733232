/**
 * `GET /.well-known/jwks.json`: the public keys our notifications to buyers are signed with (RFC 9421, AdCP webhook
 * profile; config/notification-key.ts). Public, outside authentication: a buyer's receiver fetches it to verify.
 * During a key rotation it lists the old and the new key, so notifications signed with either verify.
 */
import express from 'express';
import type { AdcpJsonWebKey } from '@adcp/sdk/signing/client';

/** Only the public members of each key, whatever the caller passed in. */
function publicOnly(key: AdcpJsonWebKey): AdcpJsonWebKey {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...rest } = key as AdcpJsonWebKey & Record<string, unknown>;
  return rest as AdcpJsonWebKey;
}

export function createJwksRouter(keys: readonly AdcpJsonWebKey[]): express.Router {
  const router = express.Router();
  const body = { keys: keys.map(publicOnly) };
  router.get('/.well-known/jwks.json', (_req, res) => {
    res.set('Cache-Control', 'public, max-age=300').type('application/jwk-set+json').send(JSON.stringify(body));
  });
  return router;
}
