/**
 * Authentication from the environment. Nothing set means no authentication: the gateway then serves /v1 only on
 * loopback, with a development key (see dev-key.ts and assertSafeBind).
 */
import { z } from 'zod';
import { ConfigError } from '../../config/errors';
import { formatZodIssues } from '../../config/zod-format';
import { ApiKeyStore, ApiKeysFileError } from './api-keys';
import { type JwtOptions, createJwtVerifier } from './jwt';
import { type Authentication, type AuthEvent, createAuthentication } from './middleware';
import { roleSchema } from './principal';

const list = z.string().transform((value) =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean),
);

const authEnvSchema = z
  .object({
    ADCP_API_KEYS_FILE: z.string().min(1).optional(),
    ADCP_JWT_JWKS_URL: z.url({ protocol: /^https?$/ }).optional(),
    ADCP_JWT_JWKS_FILE: z.string().min(1).optional(),
    ADCP_JWT_ISSUER: list.optional(),
    ADCP_JWT_AUDIENCE: list.optional(),
    ADCP_JWT_ALGORITHMS: list.optional(),
    ADCP_JWT_CLOCK_TOLERANCE_SECONDS: z.coerce.number().int().min(0).max(300).default(30),
    ADCP_JWT_MAX_AGE_SECONDS: z.coerce.number().int().min(1).optional(),
    ADCP_JWT_PRINCIPAL_CLAIM: z.string().min(1).default('sub'),
    ADCP_JWT_TENANT_CLAIM: z.string().min(1).default('tenant'),
    ADCP_JWT_ROLES_CLAIM: z.string().min(1).default('roles'),
    ADCP_JWT_DEFAULT_TENANT: z.string().min(1).optional(),
    ADCP_JWT_ROLE_MAP: z
      .string()
      .transform((text, ctx) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          ctx.addIssue({ code: 'custom', message: 'must be a JSON object such as {"adcp.approve":"approver"}' });
          return z.NEVER;
        }
      })
      .pipe(z.record(z.string(), roleSchema))
      .optional(),
    ADCP_AUTH_REALM: z.string().min(1).default('adcp-orchestrator'),
    /** The tenant of operations that record none (started before operations carried one); unset: nobody's. */
    ADCP_UNTENANTED_TENANT: z.string().min(1).optional(),
  })
  .superRefine((env, ctx) => {
    const jwks = env.ADCP_JWT_JWKS_URL ?? env.ADCP_JWT_JWKS_FILE;
    if (env.ADCP_JWT_JWKS_URL && env.ADCP_JWT_JWKS_FILE)
      ctx.addIssue({
        code: 'custom',
        path: ['ADCP_JWT_JWKS_FILE'],
        message: 'set ADCP_JWT_JWKS_URL or ADCP_JWT_JWKS_FILE, not both',
      });
    for (const name of ['ADCP_JWT_ISSUER', 'ADCP_JWT_AUDIENCE'] as const) {
      if (jwks && !env[name]?.length)
        ctx.addIssue({ code: 'custom', path: [name], message: 'is required when a JWKS is configured' });
    }
  });

export interface AuthConfig {
  apiKeysFile?: string;
  jwt?: JwtOptions;
  realm: string;
  untenantedTenant?: string;
}

export function loadAuthConfig(env: NodeJS.ProcessEnv = process.env): AuthConfig {
  const parsed = authEnvSchema.safeParse(env);
  if (!parsed.success)
    throw new ConfigError(`Invalid authentication settings: ${formatZodIssues(parsed.error.issues)}`);
  const value = parsed.data;
  const jwks = value.ADCP_JWT_JWKS_URL ?? value.ADCP_JWT_JWKS_FILE;
  return {
    realm: value.ADCP_AUTH_REALM,
    ...(value.ADCP_UNTENANTED_TENANT ? { untenantedTenant: value.ADCP_UNTENANTED_TENANT } : {}),
    ...(value.ADCP_API_KEYS_FILE ? { apiKeysFile: value.ADCP_API_KEYS_FILE } : {}),
    ...(jwks
      ? {
          jwt: {
            ...(value.ADCP_JWT_JWKS_URL
              ? { jwksUrl: value.ADCP_JWT_JWKS_URL }
              : { jwksFile: value.ADCP_JWT_JWKS_FILE }),
            issuer: value.ADCP_JWT_ISSUER!,
            audience: value.ADCP_JWT_AUDIENCE!,
            ...(value.ADCP_JWT_ALGORITHMS ? { algorithms: value.ADCP_JWT_ALGORITHMS } : {}),
            clockToleranceSeconds: value.ADCP_JWT_CLOCK_TOLERANCE_SECONDS,
            ...(value.ADCP_JWT_MAX_AGE_SECONDS ? { maxTokenAgeSeconds: value.ADCP_JWT_MAX_AGE_SECONDS } : {}),
            principalClaim: value.ADCP_JWT_PRINCIPAL_CLAIM,
            tenantClaim: value.ADCP_JWT_TENANT_CLAIM,
            rolesClaim: value.ADCP_JWT_ROLES_CLAIM,
            ...(value.ADCP_JWT_DEFAULT_TENANT ? { defaultTenant: value.ADCP_JWT_DEFAULT_TENANT } : {}),
            ...(value.ADCP_JWT_ROLE_MAP ? { roleMap: value.ADCP_JWT_ROLE_MAP } : {}),
          },
        }
      : {}),
  };
}

/** The gateway's authentication from its configuration. A bad keys file or JWKS file fails here, at start. */
export function authenticationFromConfig(
  config: AuthConfig,
  options: { onEvent?: (event: AuthEvent) => void; log?: (line: string) => void } = {},
): Authentication {
  let apiKeys: ApiKeyStore | undefined;
  if (config.apiKeysFile) {
    try {
      apiKeys = new ApiKeyStore({ file: config.apiKeysFile, ...(options.log ? { log: options.log } : {}) });
    } catch (error) {
      if (error instanceof ApiKeysFileError) throw new ConfigError(error.message);
      throw new ConfigError(`Cannot read ADCP_API_KEYS_FILE ${config.apiKeysFile}: ${(error as Error).message}`);
    }
  }
  return createAuthentication({
    realm: config.realm,
    ...(apiKeys ? { apiKeys } : {}),
    ...(config.jwt ? { jwt: createJwtVerifier(config.jwt) } : {}),
    ...(options.onEvent ? { onEvent: options.onEvent } : {}),
  });
}
