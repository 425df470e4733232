import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { TENANT_PATTERN, TENANT_RULE } from '../protocol/tenancy';
import { ConfigError } from './errors';
import { projectRoot } from './project-root';
import { sellerWebhookAuthSchema } from './webhook-auth';
import { formatZodIssues } from './zod-format';

/**
 * Sellers (AdCP sales agents) are configuration: the file named by ADCP_AGENTS_FILE (default agents.json).
 * Credentials never appear in the file, only the names of the environment variables that hold them, so
 * nothing secret can reach workflow inputs, history or search attributes: activities look them up by seller id.
 */
export const sellerSchema = z
  .object({
    id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 characters of letters, digits, "_", "." or "-"'),
    name: z.string().min(1).optional(),
    url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
    protocol: z.enum(['mcp', 'a2a']),
    token_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable')
      .optional(),
    webhooks: sellerWebhookAuthSchema.optional(),
    /**
     * The AdCP version the seller speaks: `3` (default; 3.0.x, idempotency_key correlates) or `rc.2` (3.0.0-rc.2:
     * create_media_buy also carries a deterministic buyer_ref, and lost creates are looked up by it).
     */
    adcp_version: z.enum(['3', 'rc.2']).optional(),
  })
  .strict();

/** An AdCP account reference (`{ account_id }` or `{ brand, operator }`): compared as JSON, never interpreted. */
const accountReferenceSchema = z.record(z.string(), z.unknown());

/** One tenant's access to one seller: its own credential (by environment variable) and its own accounts there. */
export const tenantSellerSchema = z
  .object({
    token_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable')
      .optional(),
    /** The account references this tenant may use at this seller; a request naming another account is refused. */
    accounts: z.array(accountReferenceSchema).min(1).optional(),
  })
  .strict();

/**
 * A tenant (#12): seller credentials keyed by (tenant, seller), so two tenants never use each other's, and where its
 * notifications go. Secrets stay in the environment; the file holds only variable names.
 */
export const tenantConfigSchema = z
  .object({
    id: z.string().regex(TENANT_PATTERN, TENANT_RULE),
    sellers: z.record(z.string(), tenantSellerSchema).default({}),
    /** The buyer's endpoint for operation notifications (input-required, completed, failed, rejected, timed out). */
    notification_url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  })
  .strict();

export const agentsFileSchema = z
  .object({
    agents: z.array(sellerSchema).min(1, 'must list at least one seller'),
    tenants: z.array(tenantConfigSchema).optional(),
  })
  .strict()
  .superRefine((file, ctx) => {
    const seen = new Set<string>();
    file.agents.forEach((agent, index) => {
      if (seen.has(agent.id)) {
        ctx.addIssue({ code: 'custom', path: ['agents', index, 'id'], message: `duplicate seller id "${agent.id}"` });
      }
      seen.add(agent.id);
    });
    const tenants = new Set<string>();
    (file.tenants ?? []).forEach((tenant, index) => {
      if (tenants.has(tenant.id))
        ctx.addIssue({ code: 'custom', path: ['tenants', index, 'id'], message: `duplicate tenant "${tenant.id}"` });
      tenants.add(tenant.id);
      for (const sellerId of Object.keys(tenant.sellers)) {
        if (!seen.has(sellerId))
          ctx.addIssue({
            code: 'custom',
            path: ['tenants', index, 'sellers', sellerId],
            message: `names seller "${sellerId}", which agents does not list`,
          });
      }
    });
  });

export type SellerConfig = z.infer<typeof sellerSchema>;
export type TenantConfig = z.infer<typeof tenantConfigSchema>;
export type TenantSellerConfig = z.infer<typeof tenantSellerSchema>;

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${stableJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Re-exported for existing importers; the class lives in config/errors.ts. */
export { ConfigError };

/** A tenant may not use this seller, or this account at it; `field` names what the caller should change. */
export class TenantAccessError extends ConfigError {
  constructor(
    readonly field: 'agent_id' | 'params.account',
    message: string,
  ) {
    super(message);
  }
}

export class SellerRegistry {
  private readonly byId: ReadonlyMap<string, SellerConfig>;
  private readonly tenantsById: ReadonlyMap<string, TenantConfig>;

  constructor(
    readonly sellers: readonly SellerConfig[],
    readonly source: string,
    /** Per-tenant seller credentials and notification URLs; without any, every operation uses the seller's own token. */
    readonly tenants: readonly TenantConfig[] = [],
  ) {
    this.byId = new Map(sellers.map((agent) => [agent.id, agent]));
    this.tenantsById = new Map(tenants.map((tenant) => [tenant.id, tenant]));
  }

  /** Whether credentials are kept per tenant (the file has a `tenants` list). */
  get multiTenant(): boolean {
    return this.tenantsById.size > 0;
  }

  tenant(id: string): TenantConfig | undefined {
    return this.tenantsById.get(id);
  }

  /**
   * The tenant's entry for a seller. With tenants configured, an operation of a tenant that has none for this seller
   * is refused: falling back to the seller's shared token would let one tenant act with another's credentials.
   */
  private tenantSeller(sellerId: string, tenant: string): TenantSellerConfig {
    this.get(sellerId);
    const entry = this.tenantsById.get(tenant)?.sellers[sellerId];
    if (!entry) {
      throw new TenantAccessError(
        'agent_id',
        `Tenant "${tenant}" has no access configured for seller "${sellerId}": add { "token_env": ..., "accounts": [...] } under tenants[id=${tenant}].sellers.${sellerId} in ${this.source}.`,
      );
    }
    return entry;
  }

  /**
   * Throws ConfigError when the tenant may not call this seller (no entry for it under the tenant) or names an account
   * that is not one of the tenant's there (each tenant has its own accounts). Without tenants configured, without a
   * tenant, or when the tenant lists no accounts for the seller, any account passes. The worker checks it before every
   * call plan; the gateway's client checks it at start so the caller hears it as a 400.
   */
  checkTenantAccess(sellerId: string, tenant: string | undefined, account: unknown): void {
    if (tenant === undefined || !this.multiTenant) return;
    const accounts = this.tenantSeller(sellerId, tenant).accounts;
    if (!accounts || account === undefined) return;
    const wanted = stableJson(account);
    if (!accounts.some((candidate) => stableJson(candidate) === wanted)) {
      throw new TenantAccessError(
        'params.account',
        `The account ${wanted} is not one of tenant "${tenant}"'s accounts at seller "${sellerId}" (${this.source} lists ${accounts.length}); use one of them.`,
      );
    }
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  get(id: string): SellerConfig {
    const agent = this.byId.get(id);
    if (!agent) {
      throw new ConfigError(`Unknown seller "${id}": ${this.source} lists ${[...this.byId.keys()].join(', ')}.`);
    }
    return agent;
  }

  /**
   * The bearer token for a call to the seller, read from its environment variable at the moment of the call: the
   * tenant's own when tenants are configured and the operation has a tenant, else the seller's.
   */
  token(id: string, env: NodeJS.ProcessEnv = process.env, tenant?: string): string | undefined {
    const agent = this.get(id);
    if (tenant !== undefined && this.multiTenant) {
      const entry = this.tenantSeller(id, tenant);
      if (!entry.token_env) return undefined;
      const token = env[entry.token_env];
      if (!token) {
        throw new ConfigError(
          `Tenant "${tenant}" needs its token for seller "${id}" in the environment variable ${entry.token_env}, which is not set.`,
        );
      }
      return token;
    }
    if (!agent.token_env) return undefined;
    const token = env[agent.token_env];
    if (!token) {
      throw new ConfigError(
        `Seller "${id}" needs its token in the environment variable ${agent.token_env}, which is not set.`,
      );
    }
    return token;
  }
}

export function parseAgentsFile(content: string, source: string): SellerRegistry {
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch (error) {
    throw new ConfigError(`${source} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = agentsFileSchema.safeParse(json);
  if (!parsed.success) {
    throw new ConfigError(`${source} is invalid: ${formatZodIssues(parsed.error.issues)}`);
  }
  return new SellerRegistry(parsed.data.agents, source, parsed.data.tenants ?? []);
}

export function agentsFilePath(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  return path.resolve(cwd, env.ADCP_AGENTS_FILE ?? 'agents.json');
}

/**
 * The seller list a process uses: ADCP_AGENTS_FILE, else agents.json in the working folder, else the bundled
 * agents.example.json (the demo sellers), as `npm start` does. `example` says the last was taken.
 */
export function resolveSellersFile(
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
): { file: string; example: boolean } {
  const configured = agentsFilePath(env, cwd);
  if (env.ADCP_AGENTS_FILE || existsSync(configured)) return { file: configured, example: false };
  const example = path.join(projectRoot(), 'agents.example.json');
  return existsSync(example) ? { file: example, example: true } : { file: configured, example: false };
}

export function loadSellers(file: string = agentsFilePath()): SellerRegistry {
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : (error as Error).message;
    throw new ConfigError(
      `The seller list ${file} ${reason}. Copy agents.example.json to agents.json or set ADCP_AGENTS_FILE.`,
    );
  }
  return parseAgentsFile(content, file);
}
