/**
 * Express middleware: `authenticate` turns credentials into `req.principal` (401 otherwise), `requireRole` answers
 * 403 for a missing role, and `requireOperationTenant` answers 404 for another tenant's operation, with the same body
 * as an operation that does not exist, so a caller cannot probe which operations exist.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { ApiKeyStore } from './api-keys';
import { refuse } from '../problems';
import { quoted } from './errors';
import { type JwtCheck } from './jwt';
import { type Principal, type Role, hasRole } from './principal';

/** Security-relevant events (AdCP's audit set: auth_success, auth_failure, access_denied). No secrets in them. */
export type AuthEvent =
  | { type: 'auth_success'; principal: string; tenant: string; via: string; method: string; path: string }
  | { type: 'auth_failure'; reason: string; method: string; path: string; ip?: string }
  | {
      type: 'access_denied';
      principal: string;
      tenant: string;
      reason: 'missing_role' | 'other_tenant';
      method: string;
      path: string;
    };

export interface AuthenticationOptions {
  /** API keys (hashes in ADCP_API_KEYS_FILE). */
  apiKeys?: ApiKeyStore;
  /** Bearer JWTs verified against a JWKS (createJwtVerifier). */
  jwt?: (token: string) => Promise<JwtCheck>;
  /** The realm in `WWW-Authenticate`; default "adcp-orchestrator". */
  realm?: string;
  onEvent?: (event: AuthEvent) => void;
}

export interface Authentication {
  /** Whether any credential source is configured (assertSafeBind needs to know). */
  readonly configured: boolean;
  authenticate: RequestHandler;
  /** The principal for a bearer token, or why not (for non-express callers such as the codec server's tests). */
  verify(token: string): Promise<{ ok: true; principal: Principal } | { ok: false; description: string }>;
}

/** The path as the caller sent it, without the query (inside a router `req.path` is relative to its mount point). */
function requestPath(req: Request): string {
  return `${req.baseUrl}${req.path}`;
}

const BEARER = /^Bearer[ \t]+([A-Za-z0-9\-._~+/]+=*)[ \t]*$/i;

export function createAuthentication(options: AuthenticationOptions): Authentication {
  const realm = options.realm ?? 'adcp-orchestrator';
  const emit = options.onEvent ?? (() => undefined);
  const configured = Boolean(options.apiKeys || options.jwt);

  const verify: Authentication['verify'] = async (token) => {
    if (options.apiKeys) {
      const checked = options.apiKeys.check(token);
      if (checked.ok) return checked;
      if (checked.reason === 'expired_key') return { ok: false, description: 'The API key is past its not_after.' };
      if (checked.reason === 'unknown_key') return { ok: false, description: 'The API key is not valid.' };
    }
    if (options.jwt && token.split('.').length === 3 && !token.startsWith('adcpk.')) return options.jwt(token);
    return { ok: false, description: 'The token is neither a valid API key nor a valid JWT.' };
  };

  const challenge = (res: Response, description?: string): void => {
    // RFC 6750 §3.1: no error code when the request carried no credentials at all.
    res.set(
      'WWW-Authenticate',
      `Bearer realm=${quoted(realm)}${description ? `, error="invalid_token", error_description=${quoted(description)}` : ''}`,
    );
  };

  const authenticate: RequestHandler = async (req: Request, res: Response, next: NextFunction) => {
    const header = req.get('authorization');
    if (!configured) {
      challenge(res);
      refuse(
        res,
        401,
        'UNAUTHENTICATED',
        'This gateway has no authentication configured, so it serves no /v1 requests.',
      );
      return;
    }
    if (!header) {
      emit({ type: 'auth_failure', reason: 'no credentials', method: req.method, path: requestPath(req), ip: req.ip });
      challenge(res);
      refuse(
        res,
        401,
        'UNAUTHENTICATED',
        'This request needs credentials: send "Authorization: Bearer <API key or JWT>".',
      );
      return;
    }
    const match = BEARER.exec(header);
    const checked = match
      ? await verify(match[1]!)
      : { ok: false as const, description: 'Only the Bearer scheme is accepted.' };
    if (!checked.ok) {
      emit({
        type: 'auth_failure',
        reason: checked.description,
        method: req.method,
        path: requestPath(req),
        ip: req.ip,
      });
      challenge(res, checked.description);
      refuse(res, 401, 'UNAUTHENTICATED', `The credentials were refused: ${checked.description}`);
      return;
    }
    req.principal = checked.principal;
    const via = checked.principal.via;
    emit({
      type: 'auth_success',
      principal: checked.principal.id,
      tenant: checked.principal.tenant,
      via: via.kind === 'api-key' ? `api-key:${via.keyId}` : `jwt:${via.issuer ?? ''}`,
      method: req.method,
      path: requestPath(req),
    });
    next();
  };

  return { configured, authenticate, verify };
}

/** 403 unless the principal holds one of `roles` (any role may read). Mount after `authenticate`. */
export function requireRole(
  role: Role | Role[],
  options: { onEvent?: (event: AuthEvent) => void } = {},
): RequestHandler {
  const roles = Array.isArray(role) ? role : [role];
  return (req, res, next) => {
    const principal = req.principal;
    if (!principal) {
      refuse(res, 401, 'UNAUTHENTICATED', 'This request needs credentials.');
      return;
    }
    if (roles.some((candidate) => hasRole(principal, candidate))) return next();
    options.onEvent?.({
      type: 'access_denied',
      principal: principal.id,
      tenant: principal.tenant,
      reason: 'missing_role',
      method: req.method,
      path: requestPath(req),
    });
    const held = [...principal.roles];
    res.set('WWW-Authenticate', `Bearer error="insufficient_scope", scope=${quoted(roles.join(' '))}`);
    refuse(
      res,
      403,
      'FORBIDDEN',
      `${req.method} ${requestPath(req)} needs the ${roles.map((name) => `"${name}"`).join(' or ')} role; principal "${principal.id}" holds ${held.length ? held.join(', ') : 'no roles'}. Ask an administrator of tenant "${principal.tenant}" for the role.`,
      { extra: { required_roles: roles } },
    );
  };
}

/** Where an operation's tenant comes from (its search attribute or state); undefined when there is no such operation. */
export type TenantOf = (operationId: string) => Promise<string | undefined>;

/** How a resource that is not there (or not the caller's) is answered: the same body either way. */
export interface NotFoundAnswer {
  code: string;
  /** "operation", "media buy": the message is `No <noun> <id>.` */
  noun: string;
}

export const OPERATION_NOT_FOUND: NotFoundAnswer = { code: 'OPERATION_NOT_FOUND', noun: 'operation' };

/**
 * Whether `id` belongs to the principal's tenant. If not (another tenant's, or none at all) it answers 404 with the
 * body of a missing resource, records access_denied, and returns false. An error of `tenantOf` is thrown to the
 * caller (Temporal down: the app answers 503).
 */
export async function ensureSameTenant(
  req: Request,
  res: Response,
  id: string,
  tenantOf: TenantOf | undefined,
  notFound: NotFoundAnswer,
  onEvent?: (event: AuthEvent) => void,
): Promise<boolean> {
  const principal = req.principal!;
  // No lookup for this kind of resource: refuse (fail closed) rather than serve it unchecked.
  const tenant = tenantOf ? await tenantOf(id) : undefined;
  if (tenant !== undefined && tenant === principal.tenant) return true;
  onEvent?.({
    type: 'access_denied',
    principal: principal.id,
    tenant: principal.tenant,
    reason: 'other_tenant',
    method: req.method,
    path: requestPath(req),
  });
  refuse(res, 404, notFound.code, `No ${notFound.noun} ${id}.`);
  return false;
}

/**
 * 404 `OPERATION_NOT_FOUND` (the body of a missing operation) unless `req.params[param]` names an operation of the
 * principal's tenant. For routes outside createAccessControl; mount after `authenticate`.
 */
export function requireOperationTenant(
  tenantOf: TenantOf,
  options: { param?: string; onEvent?: (event: AuthEvent) => void } = {},
): RequestHandler {
  const param = options.param ?? 'id';
  return async (req, res, next) => {
    if (!req.principal) {
      refuse(res, 401, 'UNAUTHENTICATED', 'This request needs credentials.');
      return;
    }
    const operationId = String(req.params[param] ?? '');
    if (await ensureSameTenant(req, res, operationId, tenantOf, OPERATION_NOT_FOUND, options.onEvent)) next();
  };
}
