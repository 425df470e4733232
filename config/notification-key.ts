/**
 * Our own RFC 9421 signing key for notifications to the buyer's systems (#12 item 6). The worker signs with the
 * private key; the gateway publishes the public key at `/.well-known/jwks.json`, where a buyer's receiver fetches it.
 * Both read the same file, named by ADCP_NOTIFICATION_KEY_FILE: a JSON object with an Ed25519 private JWK
 * (`{ "kty": "OKP", "crv": "Ed25519", "x", "d", "kid" }`), kept out of the repository. `ensureNotificationKeyFile`
 * creates one (mode 0600) for development.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { AdcpJsonWebKey, SignerKey } from '@adcp/sdk/signing/client';
import { z } from 'zod';
import { ConfigError } from './errors';
import { formatZodIssues } from './zod-format';

const privateJwkSchema = z
  .object({
    kty: z.literal('OKP'),
    crv: z.literal('Ed25519'),
    x: z.string().min(1),
    d: z.string().min(1),
    kid: z
      .string()
      .regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'must be 1-128 characters of letters, digits, "_", ".", ":" or "-"'),
  })
  .passthrough();

export interface NotificationSigningKey {
  /** For signWebhook (the worker). */
  signerKey: SignerKey;
  /** For the JWKS the gateway serves: public members only. */
  publicJwk: AdcpJsonWebKey;
}

/** The key from a private JWK: tagged for webhook signing, as AdCP's verifiers require of a webhook key. */
export function notificationKeyFromJwk(jwk: unknown, source = 'the notification key'): NotificationSigningKey {
  const parsed = privateJwkSchema.safeParse(jwk);
  if (!parsed.success)
    throw new ConfigError(`${source} is not an Ed25519 private JWK: ${formatZodIssues(parsed.error.issues)}`);
  const { kty, crv, x, d, kid } = parsed.data;
  const tags = { kid, alg: 'EdDSA', use: 'sig', adcp_use: 'webhook-signing' };
  return {
    signerKey: { keyid: kid, alg: 'ed25519', privateKey: { kty, crv, x, d, ...tags, key_ops: ['sign'] } },
    publicJwk: { kty, crv, x, ...tags, key_ops: ['verify'] },
  };
}

/** A fresh Ed25519 private JWK (node:crypto; no ESM-only dependency). */
export function generateNotificationJwk(kid = `adcp-notify-${randomUUID()}`): Record<string, string> {
  const { privateKey } = generateKeyPairSync('ed25519');
  const { kty, crv, x, d } = privateKey.export({ format: 'jwk' });
  if (kty !== 'OKP' || crv !== 'Ed25519' || !x || !d)
    throw new Error('node:crypto exported an unexpected Ed25519 JWK.');
  return { kty, crv, x, d, kid };
}

export function loadNotificationKey(file: string): NotificationSigningKey {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError(`The notification signing key ${file} cannot be read: ${(error as Error).message}`);
  }
  return notificationKeyFromJwk(json, file);
}

/** Loads the key file, creating it first (owner-only) when it does not exist: zero configuration for development. */
export function ensureNotificationKeyFile(file: string): NotificationSigningKey {
  if (!existsSync(file)) writeFileSync(file, JSON.stringify(generateNotificationJwk(), null, 2), { mode: 0o600 });
  return loadNotificationKey(file);
}

/** The key named by ADCP_NOTIFICATION_KEY_FILE, or undefined when it is not set (no notifications are signed). */
export function notificationKeyFromEnv(env: NodeJS.ProcessEnv = process.env): NotificationSigningKey | undefined {
  const file = env.ADCP_NOTIFICATION_KEY_FILE;
  return file ? loadNotificationKey(file) : undefined;
}
