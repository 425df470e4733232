/**
 * The gateway's Prometheus metrics, served at GET /metrics: requests by route template and status code, their
 * latency, webhook verification failures by reason, and the operations still pending by task and status (counted
 * from Temporal visibility when scraped, cached briefly). Each gateway has its own registry, so tests can run
 * several gateways in one process. The API error rate is the 5xx share of `adcp_gateway_http_requests_total`.
 */
import type { Client } from '@temporalio/client';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { SA_STATUS, SA_TASK } from '../config/search-attributes';
import { type WebhookVerificationFailure, webhookVerificationFailures } from './webhook-events';

export interface PendingCount {
  task: string;
  status: string;
  count: number;
}

/** How long a visibility count serves scrapes: Prometheus scrapes every 15-60 s; the count needs no fresher. */
const PENDING_CACHE_MS = 15_000;
/** Beyond this many running operations the count stops (and says so in adcp_operations_pending_truncated). */
const PENDING_COUNT_LIMIT = 10_000;

/** Running operation workflows, tallied by their AdcpTask and AdcpStatus search attributes. */
export async function countPendingOperations(
  client: Client,
  limit = PENDING_COUNT_LIMIT,
): Promise<{ counts: PendingCount[]; truncated: boolean }> {
  const tally = new Map<string, PendingCount>();
  let seen = 0;
  for await (const execution of client.workflow.list({
    query: "WorkflowType = 'adcpOperation' AND ExecutionStatus = 'Running'",
    pageSize: 1000,
  })) {
    if (seen >= limit) return { counts: [...tally.values()], truncated: true };
    seen += 1;
    const task = execution.typedSearchAttributes.get(SA_TASK) ?? 'unknown';
    const status = execution.typedSearchAttributes.get(SA_STATUS) ?? 'unknown';
    const key = `${task}\u0000${status}`;
    const entry = tally.get(key) ?? { task, status, count: 0 };
    entry.count += 1;
    tally.set(key, entry);
  }
  return { counts: [...tally.values()], truncated: false };
}

/** The /v1 collections and the actions on their members: the only path words a template made from a raw path keeps. */
const V1_COLLECTIONS = new Set(['operations', 'media-buys', 'sellers', 'discoveries', 'campaigns']);
const V1_ACTIONS = new Set([
  'input',
  'cancel',
  'credentials-refreshed',
  'reconcile',
  'delivery',
  'changes',
  'creatives',
  'refresh',
  'selection',
  'approval',
  'capabilities-changed',
]);

/**
 * The template of a /v1 path that no route matched because it was answered before routing (401, 403 and 429 from
 * authentication, roles and rate limits): `/v1/operations/:id/cancel`. Only known words are kept, so a caller cannot
 * grow the series by inventing paths; anything else is `unmatched`.
 */
export function templateOfPath(path: string): string {
  const segments = path.split('?')[0]!.replace(/\/+$/, '').split('/').slice(1);
  if (segments[0]?.toLowerCase() !== 'v1' || segments.length < 2 || segments.length > 4) return 'unmatched';
  const collection = segments[1]!.toLowerCase();
  if (!V1_COLLECTIONS.has(collection)) return 'unmatched';
  if (segments.length === 2) return `/v1/${collection}`;
  if (segments.length === 3) return `/v1/${collection}/:id`;
  const action = segments[3]!.toLowerCase();
  return V1_ACTIONS.has(action) ? `/v1/${collection}/:id/${action}` : 'unmatched';
}

interface RequestSeries {
  requests: { inc(): void };
  duration: { observe(seconds: number): void };
}

/** Set on a request once a GatewayMetrics middleware counts it, so an outer and an inner mount count it once. */
const COUNTED = Symbol('adcp.gateway-metrics.counted');

/** The route as declared (`/v1/operations/:id`), never the raw path: one series per route, not per operation. */
export function routeTemplate(req: Request): string {
  const route = (req as Request & { route?: { path?: unknown } }).route;
  if (!route || typeof route.path !== 'string') return templateOfPath(req.originalUrl);
  if (req.baseUrl) return `${req.baseUrl}${route.path}`;
  // An error answered outside the router that matched has lost that router's mount path: take it from the URL.
  const mount = /^\/v\d+(?=\/)/.exec(req.originalUrl)?.[0];
  return mount && !route.path.startsWith(mount) ? `${mount}${route.path}` : route.path;
}

export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly duration: Histogram<'method' | 'route' | 'status'>;
  private readonly verificationFailures: Counter<'webhook' | 'reason'>;
  private readonly onVerificationFailure = (message: unknown) => {
    const failure = message as WebhookVerificationFailure;
    this.verificationFailures.inc({ webhook: failure.webhook, reason: failure.reason });
  };
  private readonly series = new Map<string, RequestSeries>();
  private pendingCache: { at: number; value: Promise<{ counts: PendingCount[]; truncated: boolean }> } | undefined;

  constructor(
    options: {
      /** Where pending operations are counted; without it the pending gauges are not exported. */
      pendingOperations?: () => Promise<{ counts: PendingCount[]; truncated: boolean }>;
      now?: () => number;
      /** Node process metrics (memory, event loop lag); default on. */
      processMetrics?: boolean;
    } = {},
  ) {
    const registers = [this.registry];
    const now = options.now ?? Date.now;
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'adcp_gateway_' });
    this.requests = new Counter({
      name: 'adcp_gateway_http_requests_total',
      help: 'HTTP requests the gateway answered, by route template and status code',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'adcp_gateway_http_request_duration_seconds',
      help: 'Time from request to the end of the response, by route template and status code',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.verificationFailures = new Counter({
      name: 'adcp_gateway_webhook_verification_failures_total',
      help: 'Seller webhooks refused because their authentication failed, by receiver and reason',
      labelNames: ['webhook', 'reason'],
      registers,
    });
    // Published where the receivers refuse (api/webhooks.ts); zero series until the first failure of a reason.
    webhookVerificationFailures.subscribe(this.onVerificationFailure);
    const pendingOperations = options.pendingOperations;
    if (pendingOperations) {
      const load = () => {
        if (!this.pendingCache || now() - this.pendingCache.at >= PENDING_CACHE_MS) {
          const value = pendingOperations();
          this.pendingCache = { at: now(), value };
          // A failed count is not cached: the next scrape asks again.
          value.catch(() => (this.pendingCache = undefined));
        }
        return this.pendingCache.value;
      };
      let truncated = false;
      const failures = new Counter({
        name: 'adcp_gateway_pending_count_failures_total',
        help: 'Scrapes whose pending-operation count from Temporal visibility failed (the gauge kept its last values)',
        registers,
      });
      new Gauge({
        name: 'adcp_operations_pending',
        help: 'Running AdCP operations by task and status (Temporal visibility, cached 15 s)',
        labelNames: ['task', 'status'],
        registers,
        async collect() {
          let result: { counts: PendingCount[]; truncated: boolean };
          try {
            result = await load();
          } catch {
            failures.inc();
            return;
          }
          truncated = result.truncated;
          this.reset();
          for (const entry of result.counts) this.set({ task: entry.task, status: entry.status }, entry.count);
        },
      });
      new Gauge({
        name: 'adcp_operations_pending_truncated',
        help: `1 when more operations were running than the pending count reads (${PENDING_COUNT_LIMIT})`,
        registers,
        collect() {
          this.set(truncated ? 1 : 0);
        },
      });
    }
  }

  /**
   * Counts and times every request once its response has finished. Mounted by createGateway, and again in front of
   * the secure gateway's protections (createSecureGateway), so refusals by authentication, roles, rate limits and the
   * Host allow-list are counted too; a request is counted once, by the outermost mount.
   */
  middleware(): RequestHandler {
    return (req: Request, res: Response, next: NextFunction) => {
      const marked = req as Request & { [COUNTED]?: true };
      if (marked[COUNTED]) return next();
      marked[COUNTED] = true;
      const started = process.hrtime.bigint();
      res.once('finish', () => {
        const series = this.seriesOf(req.method, routeTemplate(req), res.statusCode);
        series.requests.inc();
        series.duration.observe(Number(process.hrtime.bigint() - started) / 1e9);
      });
      next();
    };
  }

  /**
   * The counter and histogram children of one (method, route, status), kept, so a request allocates no label objects
   * or timer closures. Bounded as the series are: by methods, status codes and route templates (templateOfPath keeps
   * callers from inventing them).
   */
  private seriesOf(method: string, route: string, status: number): RequestSeries {
    const key = `${method} ${status} ${route}`;
    let series = this.series.get(key);
    if (series === undefined) {
      const labels = { method, route, status: String(status) };
      series = { requests: this.requests.labels(labels), duration: this.duration.labels(labels) };
      this.series.set(key, series);
    }
    return series;
  }

  /** Stops counting webhook failures (a gateway that shuts down in a process that lives on, as in tests). */
  close(): void {
    webhookVerificationFailures.unsubscribe(this.onVerificationFailure);
  }

  /** The exposition text, for GET /metrics. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** The metrics createGateway made for an app, so the wrapper around it (createSecureGateway) counts with them. */
export function gatewayMetricsOf(app: { locals: Record<string, unknown> }): GatewayMetrics | undefined {
  const metrics = app.locals.adcpGatewayMetrics;
  return metrics instanceof GatewayMetrics ? metrics : undefined;
}

export function attachGatewayMetrics(app: { locals: Record<string, unknown> }, metrics: GatewayMetrics): void {
  app.locals.adcpGatewayMetrics = metrics;
}
