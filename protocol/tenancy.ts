/**
 * Tenants and principals inside operations (#12): who started an operation, and whose it is. Pure, so the workflow,
 * the typed client and the API share one rule for tenant names and tenant-scoped operation keys.
 *
 * A tenant name ends up in operation IDs (workflow IDs, webhook URLs) and in visibility queries, so it is limited to
 * characters that are safe in both: letters, digits, "_", "." and "-" (no ":", which separates it from the key).
 */

/** Who asks: the authenticated principal's tenant and id (never a secret). */
export interface CallerIdentity {
  tenant: string;
  /** The principal's id as recorded for the audit trail, e.g. `acme/ops@acme.example`. */
  principal: string;
}

export const TENANT_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
export const TENANT_RULE = 'a tenant is 1-64 characters of letters, digits, "_", "." or "-"';

/** Longest caller key the operation ID pattern allows (protocol/ids.ts CALLER_KEY_PATTERN). */
const MAX_SCOPED_KEY = 200;

export function isTenantName(value: unknown): value is string {
  return typeof value === 'string' && TENANT_PATTERN.test(value);
}

/**
 * The key an operation ID is built from: the caller's key prefixed by the tenant (`<tenant>:<key>`), so two tenants
 * using the same business key get two operations. Without a tenant (single-tenant/dev mode) the caller's key as is,
 * which keeps every operation ID minted before tenancy unchanged. Undefined when the scoped key would be too long.
 */
export function tenantScopedKey(tenant: string | undefined, callerKey: string): string | undefined {
  if (tenant === undefined) return callerKey;
  const scoped = `${tenant}:${callerKey}`;
  return scoped.length <= MAX_SCOPED_KEY ? scoped : undefined;
}

/** The longest idempotency key a caller of `tenant` may use (the tenant prefix takes part of the 200 characters). */
export function maxCallerKeyLength(tenant: string | undefined): number {
  return tenant === undefined ? MAX_SCOPED_KEY : MAX_SCOPED_KEY - tenant.length - 1;
}
