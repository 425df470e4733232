/**
 * Who is calling: every authenticated request carries `req.principal`. A principal belongs to exactly one tenant and
 * holds roles; operations are scoped to the tenant that started them (AdCP "Principal Isolation").
 */
import { z } from 'zod';

export const ROLES = ['reader', 'buyer', 'approver', 'operator', 'admin'] as const;
export const roleSchema = z.enum(ROLES);
export type Role = z.infer<typeof roleSchema>;

/**
 * reader: read operations; buyer: start them; approver: answer input-required; operator: cancel, reconcile, decode
 * the tenant's payloads; admin: decode every tenant's payloads and those of no tenant (the codec server's shared key).
 */
export interface Principal {
  /** Stable id of the caller (an API key's `principal`, a JWT's `sub` by default). */
  id: string;
  tenant: string;
  roles: ReadonlySet<Role>;
  /** How the caller authenticated, and which key (never the secret) for the audit log. */
  via: { kind: 'api-key'; keyId: string } | { kind: 'jwt'; issuer?: string };
}

/** Every role can read: a buyer who starts an operation must be able to follow it. */
export function hasRole(principal: Principal, role: Role): boolean {
  return principal.roles.has(role) || (role === 'reader' && principal.roles.size > 0);
}

/** The actor recorded in history for answers, cancels and refreshes: `tenant/principal`. */
export function auditActor(principal: Principal): string {
  return `${principal.tenant}/${principal.id}`;
}

declare module 'express-serve-static-core' {
  interface Request {
    /** Set by the authentication middleware (api/auth); absent on routes outside authentication. */
    principal?: Principal;
  }
}
