/**
 * `npm run demo:media-buy` (and the end of `npm run demo`): a media buy's whole life through the gateway's HTTP API,
 * in demo time. It starts the demo life seller (scripts/lib/demo-seller.ts: a flight of seconds, a report every few
 * seconds) if nothing listens on its port, then creates a buy (`POST /v1/media-buys`), syncs its creatives, waits for
 * the flight to start, pauses and resumes it, raises one package's budget, and follows it to its end: every status
 * change as the gateway shows it (`GET /v1/media-buys/:id`), the delivery totals as reporting webhooks bring them in,
 * and the end-of-flight reconciliation with the seller's lifetime numbers.
 *
 * Settings (environment): ADCP_GATEWAY_URL (default http://127.0.0.1:8080), ADCP_API_KEY (sent as a Bearer token on
 * every /v1 request when set), DEMO_MEDIA_BUY_AGENT_ID (default demo-life-seller), DEMO_LIFE_SELLER_PORT (3005),
 * DEMO_FLIGHT_SECONDS (45), DEMO_REPORT_EVERY_MS (3000).
 */
import { randomUUID } from 'node:crypto';
import { DEMO_ACCOUNT, DEMO_BRAND, startDemoLifeSeller } from './lib/demo-seller';

type Json = Record<string, unknown>;

/** The parts of `GET /v1/media-buys/:id` (api/media-buys.ts mediaBuyView) the demo prints. */
interface BuyView {
  id?: string;
  status: string;
  done?: boolean;
  media_buy_id?: string | null;
  status_history?: { at: string; from: string; to: string; source: string }[];
  packages?: { package_id: string }[];
  failure?: unknown;
  links?: { web_ui?: string };
  delivery?: {
    registered?: unknown;
    totals?: { impressions?: number; spend?: number };
    reports?: { applied?: number };
    sequence?: { highest?: number };
    final_report?: unknown;
    reconciliation?: { outcome?: string } | null;
  };
}

/** The answer of a change or a creatives attachment. */
interface ChangeView {
  outcome: string;
  status: string;
  operation_id?: string | null;
}

export interface MediaBuyDemoOptions {
  gateway: string;
  sellerId: string;
  sellerPort: number;
  flightSeconds: number;
  reportEveryMs: number;
  apiKey?: string;
  print: (line: string) => void;
}

export function mediaBuyDemoOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): MediaBuyDemoOptions {
  const number = (name: string, fallback: number, min: number) => {
    const value = env[name] === undefined ? fallback : Number(env[name]);
    if (!Number.isFinite(value) || value < min)
      throw new Error(`${name} must be a number >= ${min}; got "${env[name]}".`);
    return value;
  };
  return {
    gateway: (env.ADCP_GATEWAY_URL ?? `http://127.0.0.1:${env.ADCP_GATEWAY_PORT ?? 8080}`).replace(/\/+$/, ''),
    sellerId: env.DEMO_MEDIA_BUY_AGENT_ID ?? 'demo-life-seller',
    sellerPort: number('DEMO_LIFE_SELLER_PORT', 3005, 1),
    flightSeconds: number('DEMO_FLIGHT_SECONDS', 45, 20),
    reportEveryMs: number('DEMO_REPORT_EVERY_MS', 3_000, 200),
    ...(env.ADCP_API_KEY ? { apiKey: env.ADCP_API_KEY } : {}),
    print: (line) => console.log(line),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runMediaBuyDemo(options: MediaBuyDemoOptions): Promise<BuyView> {
  const { gateway, print } = options;

  async function http(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (options.apiKey && path.startsWith('/v1/')) headers.authorization = `Bearer ${options.apiKey}`;
    const response = await fetch(`${gateway}${path}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    let parsed: Json;
    try {
      parsed = JSON.parse(text) as Json;
    } catch {
      parsed = { text };
    }
    return { status: response.status, body: parsed };
  }
  async function ok<T>(method: string, path: string, body?: unknown): Promise<T> {
    const answer = await http(method, path, body);
    if (answer.status >= 300)
      throw new Error(`${method} ${path} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
    return answer.body as T;
  }

  print(`\nMedia buy: starting the demo life seller on :${options.sellerPort} if needed...`);
  const seller = await startDemoLifeSeller({ port: options.sellerPort, reportEveryMs: options.reportEveryMs });
  try {
    const startMs = Date.now() + 12_000;
    const endMs = startMs + options.flightSeconds * 1_000;
    const buyKey = `demo-${randomUUID()}`;
    const created = await http('POST', '/v1/media-buys', {
      buy_key: buyKey,
      agent_id: options.sellerId,
      params: {
        account: DEMO_ACCOUNT,
        brand: DEMO_BRAND,
        start_time: new Date(startMs).toISOString(),
        end_time: new Date(endMs).toISOString(),
        packages: [
          { product_id: 'demo_display', pricing_option_id: 'cpm', budget: 20_000 },
          { product_id: 'demo_video', pricing_option_id: 'cpm', budget: 10_000 },
        ],
      },
      reporting: { frequency: 'hourly', requested_metrics: ['impressions', 'spend'], expected_delay_minutes: 60 },
      requested_by: 'demo@buyer',
    });
    const refusal = created.body.error as { field?: string } | undefined;
    if (created.status === 400 && refusal?.field === 'agent_id') {
      throw new Error(
        `The gateway has no seller "${options.sellerId}": add the demo life seller to its agents file ` +
          '(agents.example.json has it) or set DEMO_MEDIA_BUY_AGENT_ID.',
      );
    }
    if (created.status >= 300)
      throw new Error(`POST /v1/media-buys answered ${created.status}: ${JSON.stringify(created.body)}`);
    const id = created.body.id as string;
    print(`media buy ${id} (flight ${options.flightSeconds} s, starting in 12 s)`);

    // Follows the buy: prints each status change and each new delivery total as the gateway shows them.
    let printedTransitions = 0;
    let printedDelivery = '';
    const poll = async (): Promise<BuyView> => {
      const view = await ok<BuyView>('GET', `/v1/media-buys/${id}`);
      const history = view.status_history ?? [];
      for (const move of history.slice(printedTransitions))
        print(`  ${move.at}  ${move.from} -> ${move.to}  (${move.source})`);
      printedTransitions = history.length;
      const delivery = view.delivery ?? {};
      const totals = delivery.totals ?? {};
      const applied = delivery.reports?.applied ?? 0;
      if (applied > 0) {
        const line = `  delivery: ${totals.impressions ?? 0} impressions, spend ${totals.spend ?? 0} (${applied} reports, sequence ${delivery.sequence?.highest})`;
        if (line !== printedDelivery) print(line);
        printedDelivery = line;
      }
      return view;
    };
    const until = async (what: string, done: (buy: BuyView) => boolean, timeoutMs: number): Promise<BuyView> => {
      const deadline = Date.now() + timeoutMs;
      let lastRefresh = Date.now();
      for (;;) {
        const buy = await poll();
        if (done(buy)) return buy;
        if (['rejected', 'canceled', 'create_failed'].includes(buy.status))
          throw new Error(
            `The media buy ended ${buy.status} while waiting for ${what}: ${JSON.stringify(buy.failure)}`,
          );
        if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what} (the buy is ${buy.status}).`);
        // Without a reporting webhook (no ADCP_PUBLIC_BASE_URL at the gateway) only reads move it: ask for one.
        if (!buy.delivery?.registered && Date.now() - lastRefresh > 3_000) {
          lastRefresh = Date.now();
          await ok('POST', `/v1/media-buys/${id}/refresh`, { requested_by: 'demo@buyer' });
        }
        await sleep(400);
      }
    };
    const change = async (body: Json & { kind: string }): Promise<void> => {
      const answer = await ok<ChangeView>('POST', `/v1/media-buys/${id}/changes`, {
        requested_by: 'demo@buyer',
        idempotency_key: `${buyKey}-${body.kind}-${randomUUID().slice(0, 8)}`,
        ...body,
      });
      print(`${body.kind}: ${answer.outcome}, the buy is ${answer.status} (operation ${answer.operation_id})`);
      await poll();
    };

    const pending = await until('the seller to create the buy', (buy) => buy.status === 'pending_creatives', 60_000);
    print(`media_buy_id: ${pending.media_buy_id}`);
    if (!pending.delivery?.registered)
      print(
        '  (no reporting webhook: the gateway has no ADCP_PUBLIC_BASE_URL, so delivery comes from reads and the end-of-flight pull)',
      );
    const packageIds = (pending.packages ?? []).map((pkg) => pkg.package_id);
    const synced = await ok<ChangeView>('POST', `/v1/media-buys/${id}/creatives`, {
      creatives: [{ creative_id: 'demo_spring_300x250', name: 'Spring 300x250' }],
      assignments: { demo_spring_300x250: packageIds },
      requested_by: 'demo@buyer',
      idempotency_key: `${buyKey}-creatives`,
    });
    print(`creatives synced: ${synced.outcome} (operation ${synced.operation_id})`);
    await until('pending_start', (buy) => buy.status !== 'pending_creatives', 30_000);
    await until('the flight to start', (buy) => buy.status === 'active', 12_000 + 30_000);
    if (pending.delivery?.registered)
      await until('delivery to come in', (buy) => (buy.delivery?.totals?.impressions ?? 0) > 0, 20_000);
    else await sleep(3_000);
    await change({ kind: 'pause', reason: 'creative refresh' });
    await sleep(Math.max(2 * options.reportEveryMs, 4_000));
    await poll();
    await change({ kind: 'resume' });
    await sleep(options.reportEveryMs);
    await change({ kind: 'budget', budgets: { [packageIds[0]]: 30_000 } });
    const finished = await until(
      'the flight to end and the final report to settle',
      (buy) => buy.done === true,
      Math.max(0, endMs - Date.now()) + 90_000,
    );
    const delivery = finished.delivery ?? {};
    const reconciliation = delivery.reconciliation;
    print(
      `final: ${finished.status}; ${delivery.totals?.impressions ?? 0} impressions, spend ${delivery.totals?.spend ?? 0}; ` +
        `final report ${delivery.final_report ? 'recorded' : 'not received'}; ` +
        `seller's lifetime numbers: ${reconciliation ? reconciliation.outcome : 'not compared'}`,
    );
    print(`Web UI: ${finished.links?.web_ui ?? '(set ADCP_WEB_UI_URL)'}`);
    return finished;
  } finally {
    await seller.stop();
  }
}

if (require.main === module) {
  runMediaBuyDemo(mediaBuyDemoOptionsFromEnv())
    .then(() => process.exit(0))
    .catch((error) => {
      console.error(`demo:media-buy: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    });
}
