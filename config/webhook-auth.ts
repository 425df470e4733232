/**
 * How the gateway authenticates one seller's webhooks: the `webhooks` field of a seller entry in agents.json.
 * Source: adcp-protocol.md §3.5 (legacy HMAC-SHA256 and Bearer, rc.2) and §11 (RFC 9421, 3.x).
 * Credentials never live in the file: HMAC secrets and bearer tokens are named by environment variable.
 */
import { z } from 'zod';
import { ConfigError } from './errors';
import { formatZodIssues } from './zod-format';

/** Shared secrets and tokens shorter than this are refused (push_notification_config credentials, §3.1). */
export const MIN_SHARED_SECRET_LENGTH = 32;

export const WEBHOOK_AUTH_SCHEMES = ['rfc9421', 'hmac-sha256', 'bearer'] as const;
export type WebhookAuthScheme = (typeof WEBHOOK_AUTH_SCHEMES)[number];

function isLoopbackHostname(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** A URL the gateway fetches keys or revocation lists from: https, or plain http on loopback for development. */
const fetchableUrl = z.url().refine(
  (value) => {
    const url = new URL(value);
    return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHostname(url.hostname));
  },
  { message: 'Expected an https:// URL (plain http:// is accepted only for loopback hosts in development).' },
);

const envVarName = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]*$/,
    'Expected the name of an environment variable (letters, digits, underscore), not the credential itself.',
  );

/**
 * A seller's public webhook-signing key. Structure only: purpose (`adcp_use`), `key_ops` and algorithm are
 * enforced by the verifier on every request, so keys fetched from `jwks_uri` get exactly the same checks.
 */
export const webhookJwkSchema = z
  .looseObject({
    kid: z.string().min(1),
    kty: z.enum(['OKP', 'EC'], {
      message:
        'Expected kty "OKP" (Ed25519) or "EC" (P-256): AdCP webhook signing allows only ed25519 and ecdsa-p256-sha256.',
    }),
    crv: z.string().optional(),
    alg: z.string().optional(),
    use: z.string().optional(),
    key_ops: z.array(z.string()).optional(),
    adcp_use: z.string().optional(),
    x: z.string().optional(),
    y: z.string().optional(),
  })
  .refine((key) => !('d' in key), {
    message: 'This JWK carries private key material ("d"). Configure only the seller\'s public key; remove "d".',
    path: ['d'],
  });

export const webhookJwksSchema = z.object({ keys: z.array(webhookJwkSchema) });

const compatSchema = z.strictObject({
  /** Accept an ISO-8601 `X-ADCP-Timestamp` (salesagent reporting webhooks); the header is signed as sent. */
  iso_timestamp: z.boolean().optional(),
  /** Accept a bare hex `X-ADCP-Signature` without the `sha256=` prefix. */
  missing_sha256_prefix: z.boolean().optional(),
});

const RFC9421_ONLY = ['jwks', 'jwks_uri', 'revocation_list_uri', 'revoked_key_ids'] as const;

export const webhookAuthSchema = z
  .strictObject({
    /** No default: every seller's scheme is an explicit choice, so nobody lands on bearer by omission. */
    scheme: z.enum(WEBHOOK_AUTH_SCHEMES, {
      message: 'Expected scheme "rfc9421" (AdCP 3.x), "hmac-sha256" or "bearer" (legacy rc.2).',
    }),
    /** RFC 9421: the seller's public keys, inline. */
    jwks: webhookJwksSchema.optional(),
    /** RFC 9421: where the seller publishes its JWKS (cached; refetched when an unknown keyid arrives). */
    jwks_uri: fetchableUrl.optional(),
    /** RFC 9421: an AdCP revocation snapshot to consult; verification fails closed when it goes stale. */
    revocation_list_uri: fetchableUrl.optional(),
    /** RFC 9421: key ids we refuse whatever the JWKS says. */
    revoked_key_ids: z.array(z.string().min(1)).optional(),
    /** HMAC-SHA256: the environment variable holding the shared secret (at least 32 characters). */
    secret_env: envVarName.optional(),
    /** Bearer: the environment variable holding the expected token (at least 32 characters). */
    token_env: envVarName.optional(),
    /** HMAC-SHA256: deviations we tolerate from one seller until it is fixed. All off by default. */
    compat: compatSchema.optional(),
  })
  .superRefine((config, ctx) => {
    const misplaced = (field: string, scheme: WebhookAuthScheme) =>
      ctx.addIssue({
        code: 'custom',
        path: [field],
        message: `"${field}" is only used with scheme "${scheme}", but scheme is "${config.scheme}". Remove it or change the scheme.`,
      });
    if (config.scheme === 'rfc9421') {
      if (!config.jwks && !config.jwks_uri) {
        ctx.addIssue({
          code: 'custom',
          path: ['jwks'],
          message: 'Scheme "rfc9421" needs the seller\'s public keys: set "jwks" (inline {keys:[...]}) or "jwks_uri".',
        });
      }
    } else {
      for (const field of RFC9421_ONLY) if (config[field] !== undefined) misplaced(field, 'rfc9421');
    }
    if (config.scheme === 'hmac-sha256') {
      if (!config.secret_env) {
        ctx.addIssue({
          code: 'custom',
          path: ['secret_env'],
          message:
            'Scheme "hmac-sha256" needs "secret_env": the name of the environment variable that holds the shared secret.',
        });
      }
    } else {
      if (config.secret_env !== undefined) misplaced('secret_env', 'hmac-sha256');
      if (config.compat !== undefined) misplaced('compat', 'hmac-sha256');
    }
    if (config.scheme === 'bearer') {
      if (!config.token_env) {
        ctx.addIssue({
          code: 'custom',
          path: ['token_env'],
          message:
            'Scheme "bearer" needs "token_env": the name of the environment variable that holds the expected token.',
        });
      }
    } else if (config.token_env !== undefined) {
      misplaced('token_env', 'bearer');
    }
  });

/**
 * The `webhooks` entry of a seller in agents.json: the structure above, plus inline keys that can verify at all.
 * Checked at start because the verifier refuses such a key on every webhook (401
 * webhook_signature_key_purpose_invalid), which would otherwise be the first sign of a config mistake. The
 * structural schema stays permissive so that the conformance vectors can hand the verifier wrong-purpose keys.
 */
export const sellerWebhookAuthSchema = webhookAuthSchema.superRefine((config, ctx) => {
  config.jwks?.keys.forEach((key, index) => {
    const where = ['jwks', 'keys', index];
    if (key.adcp_use !== 'webhook-signing') {
      ctx.addIssue({
        code: 'custom',
        path: [...where, 'adcp_use'],
        message: `must be "webhook-signing" (got ${key.adcp_use === undefined ? 'nothing' : JSON.stringify(key.adcp_use)}); the verifier accepts no other key purpose.`,
      });
    }
    if (!key.key_ops?.includes('verify')) {
      ctx.addIssue({
        code: 'custom',
        path: [...where, 'key_ops'],
        message: `must include "verify" (got ${key.key_ops === undefined ? 'nothing' : JSON.stringify(key.key_ops)}); a key without it fails every webhook with webhook_signature_key_purpose_invalid. Use "key_ops": ["verify"].`,
      });
    }
  });
});

export type WebhookAuthConfig = z.infer<typeof webhookAuthSchema>;
export type WebhookJwk = z.infer<typeof webhookJwkSchema>;

/** The secret values a config names, read from the environment. */
export interface WebhookCredentials {
  hmacSecret?: string;
  bearerToken?: string;
}

/** The environment does not hold a credential the config names, or holds one too short to be safe. */
export class WebhookAuthConfigError extends Error {
  override readonly name = 'WebhookAuthConfigError';
}

type Environment = Readonly<Record<string, string | undefined>>;

function readSecret(env: Environment, variable: string, what: string, seller: string): string {
  const value = env[variable];
  if (value === undefined || value === '') {
    throw new WebhookAuthConfigError(
      `Seller ${seller}: environment variable ${variable} (the ${what}) is not set. Set it to the value exchanged with the seller.`,
    );
  }
  if (value.length < MIN_SHARED_SECRET_LENGTH) {
    throw new WebhookAuthConfigError(
      `Seller ${seller}: environment variable ${variable} (the ${what}) is ${value.length} characters; at least ${MIN_SHARED_SECRET_LENGTH} are required. Exchange a longer credential with the seller.`,
    );
  }
  return value;
}

/**
 * Reads the credentials a config names. Call it when the seller config is loaded so a missing or short
 * secret stops the gateway at start, not at the first webhook; the verifier calls it again per request.
 */
export function resolveWebhookCredentials(
  config: WebhookAuthConfig,
  env?: Environment,
  sellerId = '(unnamed)',
): WebhookCredentials {
  const source: Environment = env ?? process.env;
  if (config.scheme === 'hmac-sha256' && config.secret_env) {
    return { hmacSecret: readSecret(source, config.secret_env, 'HMAC-SHA256 webhook secret', sellerId) };
  }
  if (config.scheme === 'bearer' && config.token_env) {
    return { bearerToken: readSecret(source, config.token_env, 'webhook bearer token', sellerId) };
  }
  return {};
}

/**
 * Where the gateway keeps RFC 9421 nonces (the replay cache). Unset: in the gateway's memory, right for one gateway.
 * Several gateways behind a load balancer must share one store, or a webhook replayed to a sibling is accepted:
 * `ADCP_REPLAY_STORE_URL=postgres://user:password@host:5432/db` (the table is created on start if missing).
 */
export type ReplayStoreConfig =
  | { kind: 'memory'; maxEntries: number; maxEntriesPerScope: number }
  | {
      kind: 'postgres';
      url: string;
      /** The URL without its password, for logs and error messages. */
      redactedUrl: string;
      tableName: string;
      maxEntries: number;
      maxEntriesPerScope: number;
    };

/** A URL with its password (and any password-like query parameter) replaced, safe for a log line. */
export function redactUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.password) url.password = '***';
    for (const key of [...url.searchParams.keys()]) {
      if (/pass|secret|key|token/i.test(key)) url.searchParams.set(key, '***');
    }
    return url.toString();
  } catch {
    return '(unparseable URL)';
  }
}

const replayStoreEnvSchema = z.object({
  ADCP_REPLAY_STORE_URL: z
    .string()
    .optional()
    .transform((value) => (value?.trim() ? value.trim() : undefined))
    .superRefine((value, ctx) => {
      if (value === undefined || value === 'memory') return;
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        ctx.addIssue({
          code: 'custom',
          message: `is not a URL (${redactUrl(value)}). Expected postgres://user:password@host:5432/database, "memory", or leave it unset for the in-memory store of one gateway.`,
        });
        return;
      }
      if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
        ctx.addIssue({
          code: 'custom',
          message: `uses "${url.protocol}//"; the shared replay store supports PostgreSQL only: postgres://user:password@host:5432/database.`,
        });
      } else if (!url.hostname) {
        ctx.addIssue({
          code: 'custom',
          message: 'names no host. Expected postgres://user:password@host:5432/database.',
        });
      }
    }),
  /** Table for the nonces in the shared store (lowercase letters, digits, underscores). */
  ADCP_REPLAY_STORE_TABLE: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lowercase SQL identifier (letters, digits, underscores)')
    .default('adcp_replay_cache'),
  /** Live nonces kept in total; when full, new webhooks are refused (fail closed) until old nonces expire. */
  ADCP_REPLAY_STORE_MAX_ENTRIES: z.coerce.number().int().min(1_000).max(100_000_000).default(200_000),
  /** Live nonces per (seller, key, operation URL): the per-key cap behind webhook_signature_rate_abuse. */
  ADCP_REPLAY_STORE_MAX_PER_SCOPE: z.coerce.number().int().min(10).max(10_000_000).default(10_000),
});

/** Reads the replay-store settings; a bad value stops the gateway at start with the variable named. */
export function loadReplayStoreConfig(env: Environment = process.env): ReplayStoreConfig {
  const parsed = replayStoreEnvSchema.safeParse(env);
  if (!parsed.success) throw new ConfigError(`Invalid environment: ${formatZodIssues(parsed.error.issues)}`);
  const value = parsed.data;
  const caps = {
    maxEntries: value.ADCP_REPLAY_STORE_MAX_ENTRIES,
    maxEntriesPerScope: value.ADCP_REPLAY_STORE_MAX_PER_SCOPE,
  };
  if (value.ADCP_REPLAY_STORE_URL === undefined || value.ADCP_REPLAY_STORE_URL === 'memory') {
    return { kind: 'memory', ...caps };
  }
  return {
    kind: 'postgres',
    url: value.ADCP_REPLAY_STORE_URL,
    redactedUrl: redactUrl(value.ADCP_REPLAY_STORE_URL),
    tableName: value.ADCP_REPLAY_STORE_TABLE,
    ...caps,
  };
}
