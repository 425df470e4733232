/**
 * Which tenant owns an operation, a media buy, a campaign or a discovery, for the /v1 access policy (404 for another tenant's resource).
 *
 * The owner is read from the workflow itself, the source of truth: its `AdcpTenant` search attribute (set at start),
 * else the `tenant` in the state it publishes in its memo. A workflow that records neither was started before
 * operations carried a tenant; it belongs to `untenantedTenant` when one is configured (the development key's tenant
 * under `npm start`, ADCP_UNTENANTED_TENANT otherwise) and to nobody (404 for everyone) when not: fail closed.
 *
 * A tenant never changes, so answers are cached (bounded); a resource that does not exist is not cached.
 */
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { LRUCache } from 'lru-cache';
import { SA_TENANT } from '../../config/search-attributes';
import { OPERATION_STATE_MEMO } from '../../contract/operation';
import type { ResourceKind } from './access-control';
import type { TenantOf } from './middleware';

export interface TenantResolverOptions {
  client: Client;
  /** The tenant of workflows that record none (started before tenancy); undefined: such workflows have no owner. */
  untenantedTenant?: string;
  /** Bound on Temporal's answer, so a request fails (503) rather than hangs; default 4 s. */
  deadlineMs?: number;
  cacheSize?: number;
}

/** The tenant a described workflow records, from its search attribute or its published state; undefined if none. */
export function recordedTenant(description: {
  typedSearchAttributes: { get(key: typeof SA_TENANT): string | undefined };
  memo?: Record<string, unknown> | undefined;
}): string | undefined {
  const fromAttribute = description.typedSearchAttributes.get(SA_TENANT);
  if (fromAttribute) return fromAttribute;
  // The operation's published state (OPERATION_STATE_MEMO), or another workflow's memo that carries `tenant`.
  const memo = description.memo ?? {};
  for (const value of [memo[OPERATION_STATE_MEMO], ...Object.values(memo)]) {
    const tenant = (value as { tenant?: unknown } | null | undefined)?.tenant;
    if (typeof tenant === 'string' && tenant !== '') return tenant;
  }
  return undefined;
}

/**
 * `tenantOf` for every kind of /v1 resource: operations, media buys, campaigns and discoveries are all workflows whose
 * ID is in the path.
 */
export function createTenantResolvers(options: TenantResolverOptions): Record<ResourceKind, TenantOf> {
  const deadlineMs = options.deadlineMs ?? 4_000;
  const cacheSize = options.cacheSize ?? 10_000;
  const cache = new LRUCache<string, string>({ max: cacheSize });

  const tenantOfWorkflow: TenantOf = async (workflowId) => {
    const cached = cache.get(workflowId);
    if (cached !== undefined) return cached;
    let description;
    try {
      description = await options.client.withDeadline(Date.now() + deadlineMs, () =>
        options.client.workflow.getHandle(workflowId).describe(),
      );
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return undefined;
      // An ID Temporal refuses as malformed names no workflow either.
      if ((error as { code?: number }).code === 3 /* INVALID_ARGUMENT */) return undefined;
      throw error;
    }
    const tenant =
      recordedTenant({ typedSearchAttributes: description.typedSearchAttributes, memo: description.memo }) ??
      options.untenantedTenant;
    if (tenant === undefined) return undefined;
    cache.set(workflowId, tenant);
    return tenant;
  };

  return {
    operation: tenantOfWorkflow,
    'media-buy': tenantOfWorkflow,
    campaign: tenantOfWorkflow,
    discovery: tenantOfWorkflow,
  };
}
