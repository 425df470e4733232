import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors';
import { sellerWebhookAuthSchema } from './webhook-auth';
import { formatZodIssues } from './zod-format';

/**
 * Sellers (AdCP sales agents) are configuration: the file named by ADCP_AGENTS_FILE (default agents.json).
 * Credentials never appear in the file, only the names of the environment variables that hold them, so
 * nothing secret can reach workflow inputs, history or search attributes: activities look them up by seller id.
 */
export const agentSchema = z
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

export const agentsFileSchema = z
  .object({
    agents: z.array(agentSchema).min(1, 'must list at least one seller'),
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
  });

export type AgentConfig = z.infer<typeof agentSchema>;

/** Re-exported for existing importers; the class lives in config/errors.ts. */
export { ConfigError };

export class AgentRegistry {
  private readonly byId: ReadonlyMap<string, AgentConfig>;

  constructor(
    readonly agents: readonly AgentConfig[],
    readonly source: string,
  ) {
    this.byId = new Map(agents.map((agent) => [agent.id, agent]));
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  get(id: string): AgentConfig {
    const agent = this.byId.get(id);
    if (!agent) {
      throw new ConfigError(`Unknown seller "${id}": ${this.source} lists ${[...this.byId.keys()].join(', ')}.`);
    }
    return agent;
  }

  /** The seller's bearer token, read from its environment variable at the moment of the call. */
  token(id: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
    const agent = this.get(id);
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

export function parseAgentsFile(content: string, source: string): AgentRegistry {
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
  return new AgentRegistry(parsed.data.agents, source);
}

export function agentsFilePath(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  return path.resolve(cwd, env.ADCP_AGENTS_FILE ?? 'agents.json');
}

export function loadAgents(file: string = agentsFilePath()): AgentRegistry {
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
