/**
 * Bearer JWTs from the buyer's identity provider, verified against its JWKS with `jose`: signature, `iss`, `aud`,
 * `exp` (required) and `nbf`, with a small clock tolerance. A token may be presented many times until it expires
 * (JWT bearer semantics); an expired one is refused. Claims map to the principal, its tenant and its roles.
 */
import { readFileSync } from 'node:fs';
import {
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
  createLocalJWKSet,
  createRemoteJWKSet,
  errors,
  jwtVerify,
} from 'jose';
import { type Principal, type Role, roleSchema } from './principal';

export interface JwtOptions {
  /** Where the identity provider publishes its keys (`https://idp.example/.well-known/jwks.json`). */
  jwksUrl?: string;
  /** Or a local JWKS file (`{"keys": [...]}`), for air-gapped setups and tests. */
  jwksFile?: string;
  /** Or the key set itself. */
  jwks?: JSONWebKeySet;
  issuer: string | string[];
  audience: string | string[];
  /** Accepted signature algorithms; default: what the JWKS keys declare (jose never accepts `none`). */
  algorithms?: string[];
  /** Seconds of clock skew accepted on `exp` and `nbf`; default 30. */
  clockToleranceSeconds?: number;
  /** Longest accepted token age from `iat` (e.g. 900 for AdCP's financial tier); default: only `exp` counts. */
  maxTokenAgeSeconds?: number;
  /** The claim naming the principal; default `sub`. */
  principalClaim?: string;
  /** The claim naming the tenant; default `tenant`. A dotted path (`org.id`) reaches into objects. */
  tenantClaim?: string;
  /** Tenant for tokens without the tenant claim; default: such tokens are refused. */
  defaultTenant?: string;
  /** The claim with the roles, an array or a space-separated string (like `scope`); default `roles`. */
  rolesClaim?: string;
  /** Identity-provider role names to ours (`{"adcp.approve": "approver"}`); names that are already ours pass as is. */
  roleMap?: Record<string, Role>;
}

export type JwtCheck = { ok: true; principal: Principal } | { ok: false; description: string };

function claim(payload: JWTPayload, name: string): unknown {
  if (name in payload) return payload[name];
  let value: unknown = payload;
  for (const part of name.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

export function createJwtVerifier(options: JwtOptions): (token: string) => Promise<JwtCheck> {
  let keys: JWTVerifyGetKey;
  if (options.jwksUrl) keys = createRemoteJWKSet(new URL(options.jwksUrl), { cooldownDuration: 30_000 });
  else if (options.jwks) keys = createLocalJWKSet(options.jwks);
  else if (options.jwksFile)
    keys = createLocalJWKSet(JSON.parse(readFileSync(options.jwksFile, 'utf8')) as JSONWebKeySet);
  else throw new Error('JWT authentication needs a JWKS: set jwksUrl, jwksFile or jwks.');

  const principalClaim = options.principalClaim ?? 'sub';
  const tenantClaim = options.tenantClaim ?? 'tenant';
  const rolesClaim = options.rolesClaim ?? 'roles';

  return async (token) => {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: options.issuer,
        audience: options.audience,
        ...(options.algorithms ? { algorithms: options.algorithms } : {}),
        clockTolerance: options.clockToleranceSeconds ?? 30,
        requiredClaims: ['exp'],
        ...(options.maxTokenAgeSeconds ? { maxTokenAge: options.maxTokenAgeSeconds } : {}),
      }));
    } catch (error) {
      if (error instanceof errors.JWTExpired) return { ok: false, description: 'The token has expired.' };
      if (error instanceof errors.JWTClaimValidationFailed)
        return { ok: false, description: `The token's '${error.claim}' claim is not accepted (${error.reason}).` };
      if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWSSignatureVerificationFailed)
        return { ok: false, description: 'The token is not signed by a key of the configured JWKS.' };
      if (error instanceof errors.JOSEAlgNotAllowed)
        return { ok: false, description: 'The token uses a refused algorithm.' };
      if (error instanceof errors.JWKSTimeout || error instanceof errors.JOSEError) {
        // A JWKS that cannot be fetched is our problem, not the caller's, but we still cannot accept the token.
        return { ok: false, description: `The token could not be verified (${error.code}).` };
      }
      throw error;
    }
    const id = claim(payload, principalClaim);
    if (typeof id !== 'string' || id === '')
      return { ok: false, description: `The token has no '${principalClaim}' claim naming the caller.` };
    const tenantValue = claim(payload, tenantClaim) ?? options.defaultTenant;
    if (typeof tenantValue !== 'string' || tenantValue === '')
      return { ok: false, description: `The token has no '${tenantClaim}' claim naming the tenant.` };
    const rawRoles = claim(payload, rolesClaim);
    const names = Array.isArray(rawRoles)
      ? rawRoles.filter((value): value is string => typeof value === 'string')
      : typeof rawRoles === 'string'
        ? rawRoles.split(/\s+/)
        : [];
    const roles = new Set<Role>();
    for (const name of names) {
      const mapped = options.roleMap?.[name] ?? (roleSchema.safeParse(name).success ? (name as Role) : undefined);
      if (mapped) roles.add(mapped);
    }
    return {
      ok: true,
      principal: {
        id,
        tenant: tenantValue,
        roles,
        via: { kind: 'jwt', ...(typeof payload.iss === 'string' ? { issuer: payload.iss } : {}) },
      },
    };
  };
}
