import { z } from 'zod';
import { ConfigError } from './errors';
import { formatZodIssues } from './zod-format';

/** Settings of the worker and the gateway, from the environment. Temporal's own settings use its usual variables. */
const runtimeSchema = z
  .object({
    ADCP_TASK_QUEUE: z.string().min(1).default('adcp-operations'),
    ADCP_GATEWAY_HOST: z.string().min(1).default('127.0.0.1'),
    ADCP_GATEWAY_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    /**
     * A second listener for seller webhooks (/webhooks/*) and /healthz, so exposing webhooks to sellers does not expose
     * the operations API. Unset: webhooks are served on the gateway's own listener, as before.
     */
    ADCP_WEBHOOK_HOST: z.string().min(1).optional(),
    ADCP_WEBHOOK_PORT: z.coerce.number().int().min(0).max(65535).optional(),
    /**
     * How long the gateway keeps an idle kept-alive connection (ms). Behind a load balancer, set it above the
     * balancer's idle timeout: a request sent on a connection the gateway is closing fails ("socket hang up").
     */
    ADCP_GATEWAY_KEEP_ALIVE_MS: z.coerce.number().int().min(1_000).max(600_000).default(5_000),
    /** Host header values the gateway answers besides loopback and ADCP_PUBLIC_BASE_URL's host (DNS rebinding). */
    ADCP_GATEWAY_ALLOWED_HOSTS: z.string().optional(),
    /** Sustained /v1 requests per second per principal (bursts of 3×), and per client address before authentication (4×). */
    ADCP_RATE_LIMIT_PER_SECOND: z.coerce.number().positive().max(100_000).default(20),
    ADCP_ADDRESS_RATE_LIMIT_PER_SECOND: z.coerce.number().positive().max(100_000).default(50),
    /** Web UI origins allowed to call the codec server at /codec from a browser; default ADCP_WEB_UI_URL's origin. */
    ADCP_CODEC_CORS_ORIGINS: z.string().optional(),
    /** Where sellers reach the gateway from outside; webhook URLs are built on it. */
    ADCP_PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
    ADCP_WEB_UI_URL: z.url().default('http://127.0.0.1:8233'),
    /** Upper bound for one protocol call to a seller, in milliseconds. */
    ADCP_CALL_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(60_000),
    /** Where the worker serves Prometheus metrics (`host:port`, path /metrics); unset: no metrics endpoint. */
    ADCP_METRICS_ADDRESS: z
      .string()
      .regex(/^[^\s:]+:\d{1,5}$/, 'must be host:port, e.g. 127.0.0.1:9464')
      .optional(),
    /** Per-seller circuit breaker: consecutive failures that open it, and how long it stays open. */
    ADCP_CIRCUIT_FAILURES: z.coerce.number().int().min(1).max(1000).default(5),
    ADCP_CIRCUIT_COOL_OFF_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
    /**
     * How a failed seller call is retried when the seller names no retry_after: the first wait, doubling (±25 %) up to
     * the longest. A seller's retry_after, and 60 s on RATE_LIMITED, still win. Lower them only for tests and demos.
     */
    ADCP_RETRY_INITIAL_INTERVAL_MS: z.coerce.number().int().min(10).max(600_000).default(1_000),
    ADCP_RETRY_MAX_INTERVAL_MS: z.coerce.number().int().min(10).max(3_600_000).default(60_000),
    /** How often each seller is reconciled by its Temporal Schedule: `30s`, `15m`, `1h`, or `off`. */
    ADCP_RECONCILE_EVERY: z
      .string()
      .regex(/^(off|\d+(s|m|h))$/, 'must be a duration such as 30s, 15m or 1h, or "off"')
      .default('15m'),
    /** Chunks of a seller's buy listing (five of its pages each) one scheduled orphan pass reads; the next goes on. */
    ADCP_RECONCILE_ORPHAN_CHUNKS: z.coerce.number().int().min(1).max(400).default(40),
  })
  .superRefine((env, ctx) => {
    if (env.ADCP_RETRY_MAX_INTERVAL_MS < env.ADCP_RETRY_INITIAL_INTERVAL_MS)
      ctx.addIssue({
        code: 'custom',
        path: ['ADCP_RETRY_MAX_INTERVAL_MS'],
        message: `must be at least ADCP_RETRY_INITIAL_INTERVAL_MS (${env.ADCP_RETRY_INITIAL_INTERVAL_MS}): it is the longest wait between two tries`,
      });
    if (env.ADCP_WEBHOOK_HOST !== undefined && env.ADCP_WEBHOOK_PORT === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['ADCP_WEBHOOK_PORT'],
        message: 'is required with ADCP_WEBHOOK_HOST (the webhook listener needs its own port)',
      });
  });

function csv(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000 } as const;

export type RuntimeConfig = {
  taskQueue: string;
  gatewayHost: string;
  gatewayPort: number;
  /** Set when webhooks listen on their own address (ADCP_WEBHOOK_HOST / ADCP_WEBHOOK_PORT). */
  webhookListener?: { host: string; port: number };
  /** Idle time of a kept-alive connection on the gateway's listeners (ADCP_GATEWAY_KEEP_ALIVE_MS). */
  keepAliveTimeoutMs: number;
  allowedHosts: string[];
  codecCorsOrigins: string[];
  rateLimits: { principal: { perSecond: number; burst: number }; address: { perSecond: number; burst: number } };
  publicBaseUrl?: string;
  webUiUrl: string;
  callTimeoutMs: number;
  metricsAddress?: string;
  circuitBreaker: { failureThreshold: number; coolOffMs: number };
  /** First and longest wait between tries of a failed seller call (ADCP_RETRY_INITIAL_INTERVAL_MS, ADCP_RETRY_MAX_INTERVAL_MS). */
  retryBackoff: { initialMs: number; maxMs: number };
  /** Interval of the per-seller reconciliation schedules; undefined when turned off. */
  reconcileEveryMs?: number;
  /** Chunks of a seller's buy listing one scheduled orphan pass reads (ADCP_RECONCILE_ORPHAN_CHUNKS). */
  reconcileOrphanChunks: number;
};

export function loadRuntimeConfig(env: NodeJS.ProcessEnv = process.env): RuntimeConfig {
  const parsed = runtimeSchema.safeParse(env);
  if (!parsed.success) throw new ConfigError(`Invalid environment: ${formatZodIssues(parsed.error.issues)}`);
  const value = parsed.data;
  return {
    taskQueue: value.ADCP_TASK_QUEUE,
    gatewayHost: value.ADCP_GATEWAY_HOST,
    gatewayPort: value.ADCP_GATEWAY_PORT,
    ...(value.ADCP_WEBHOOK_PORT !== undefined
      ? { webhookListener: { host: value.ADCP_WEBHOOK_HOST ?? value.ADCP_GATEWAY_HOST, port: value.ADCP_WEBHOOK_PORT } }
      : {}),
    keepAliveTimeoutMs: value.ADCP_GATEWAY_KEEP_ALIVE_MS,
    allowedHosts: csv(value.ADCP_GATEWAY_ALLOWED_HOSTS),
    rateLimits: {
      principal: {
        perSecond: value.ADCP_RATE_LIMIT_PER_SECOND,
        burst: Math.ceil(value.ADCP_RATE_LIMIT_PER_SECOND * 3),
      },
      address: {
        perSecond: value.ADCP_ADDRESS_RATE_LIMIT_PER_SECOND,
        burst: Math.ceil(value.ADCP_ADDRESS_RATE_LIMIT_PER_SECOND * 4),
      },
    },
    codecCorsOrigins: value.ADCP_CODEC_CORS_ORIGINS
      ? csv(value.ADCP_CODEC_CORS_ORIGINS)
      : [new URL(value.ADCP_WEB_UI_URL).origin],
    publicBaseUrl: value.ADCP_PUBLIC_BASE_URL?.replace(/\/+$/, ''),
    webUiUrl: value.ADCP_WEB_UI_URL.replace(/\/+$/, ''),
    callTimeoutMs: value.ADCP_CALL_TIMEOUT_MS,
    circuitBreaker: { failureThreshold: value.ADCP_CIRCUIT_FAILURES, coolOffMs: value.ADCP_CIRCUIT_COOL_OFF_MS },
    retryBackoff: { initialMs: value.ADCP_RETRY_INITIAL_INTERVAL_MS, maxMs: value.ADCP_RETRY_MAX_INTERVAL_MS },
    ...(value.ADCP_METRICS_ADDRESS ? { metricsAddress: value.ADCP_METRICS_ADDRESS } : {}),
    reconcileOrphanChunks: value.ADCP_RECONCILE_ORPHAN_CHUNKS,
    ...(value.ADCP_RECONCILE_EVERY === 'off'
      ? {}
      : {
          reconcileEveryMs:
            Number.parseInt(value.ADCP_RECONCILE_EVERY, 10) *
            UNIT_MS[value.ADCP_RECONCILE_EVERY.slice(-1) as keyof typeof UNIT_MS],
        }),
  };
}
