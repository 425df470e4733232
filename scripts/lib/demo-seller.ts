import { createHmac } from 'node:crypto';
import path from 'node:path';
import type { MediaBuySeller } from '../../test/fixtures/media-buy-seller';
import { type ManagedProcess, isListening, startProcess, waitForListening } from './processes';

/**
 * The bundled demo seller: @adcp/sdk's mock ad server (a GAM-like upstream) plus the SDK maintainers' unmodified
 * example seller in front of it, both on loopback. Nobody on this team wrote them, which is why tests use them.
 */
export const DEMO_SELLER_TOKEN = 'sk_harness_do_not_use_in_prod';
export const DEMO_UPSTREAM_KEY = 'mock_sales_guaranteed_key_do_not_use_in_prod';
/** The identity the mock maps to its network `net_acmeoutdoor`. */
export const DEMO_ACCOUNT = { brand: { domain: 'acmeoutdoor.example' }, operator: 'acmeoutdoor.example' } as const;
export const DEMO_BRAND = { domain: 'acmeoutdoor.example' } as const;

export interface DemoSeller {
  mcpUrl: string;
  upstreamUrl: string;
  /** Both were already listening, so this call started nothing (and `stop` stops nothing). */
  alreadyRunning: boolean;
  /** Stops what this call started (nothing, if both were already running). */
  stop(): Promise<void>;
}

const root = path.resolve(__dirname, '..', '..');
const bin = (name: string) => path.join(root, 'node_modules', '.bin', name);

export async function startDemoSeller(
  options: { upstreamPort?: number; sellerPort?: number; echo?: boolean } = {},
): Promise<DemoSeller> {
  const upstreamPort = options.upstreamPort ?? 4450;
  const sellerPort = options.sellerPort ?? 3004;
  const started: ManagedProcess[] = [];
  try {
    if (!(await isListening(upstreamPort))) {
      const upstream = startProcess(
        'mock-ad-server',
        bin('adcp'),
        ['mock-server', 'sales-guaranteed', '--port', String(upstreamPort)],
        { echo: options.echo },
      );
      started.push(upstream);
      await waitForListening(upstreamPort, '127.0.0.1', 60_000, upstream);
    }
    if (!(await isListening(sellerPort))) {
      const seller = startProcess(
        'example-seller',
        bin('tsx'),
        [path.join(root, 'node_modules/@adcp/sdk/examples/hello_seller_adapter_guaranteed.ts')],
        {
          env: {
            NODE_ENV: 'development',
            UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}`,
            PORT: String(sellerPort),
            ADCP_AUTH_TOKEN: DEMO_SELLER_TOKEN,
          },
          echo: options.echo,
        },
      );
      started.push(seller);
      await waitForListening(sellerPort, '127.0.0.1', 90_000, seller);
    }
  } catch (error) {
    await Promise.all(started.map((process) => process.stop()));
    throw error;
  }
  return {
    mcpUrl: `http://127.0.0.1:${sellerPort}/mcp`,
    upstreamUrl: `http://127.0.0.1:${upstreamPort}`,
    alreadyRunning: started.length === 0,
    stop: async () => {
      await Promise.all(started.reverse().map((process) => process.stop()));
    },
  };
}

/** Orders (media buys) the mock ad server holds for the demo network: the ground truth for "exactly one buy". */
export async function demoOrders(upstreamUrl: string, budget?: number): Promise<Array<Record<string, unknown>>> {
  const response = await fetch(`${upstreamUrl}/v1/orders`, {
    headers: { authorization: `Bearer ${DEMO_UPSTREAM_KEY}`, 'x-network-code': 'net_acmeoutdoor' },
  });
  if (!response.ok) throw new Error(`mock ad server /v1/orders answered ${response.status}: ${await response.text()}`);
  const body = (await response.json()) as Record<string, unknown>;
  const orders = (body.orders ?? body.items ?? body.data ?? body) as unknown;
  const list = Array.isArray(orders) ? (orders as Array<Record<string, unknown>>) : [];
  return budget === undefined ? list : list.filter((order) => order.budget === budget);
}

// ---- the demo life seller ----------------------------------------------------------------------------------------

const HOUR = 3_600_000;

export interface DemoLifeSeller {
  mcpUrl: string;
  /** The fixture seller behind it (in this process), or undefined when one was already listening. */
  seller?: MediaBuySeller;
  alreadyRunning: boolean;
  stop(): Promise<void>;
}

/**
 * The seller that lives a media buy's whole life in demo time (`npm run demo:media-buy`): the project's media-buy
 * fixture seller (a real @adcp/sdk server; test/fixtures/media-buy-seller) with delivery by the second instead of by
 * the hour, so a flight of seconds starts, delivers and completes by the wall clock, reporting as `reportInDemoTime`
 * says. It accepts the demo seller's token, so `DEMO_SELLER_TOKEN` serves both.
 */
export async function startDemoLifeSeller(
  options: { port?: number; reportEveryMs?: number; log?: (line: string) => void } = {},
): Promise<DemoLifeSeller> {
  const port = options.port ?? 3005;
  const mcpUrl = `http://127.0.0.1:${port}/mcp`;
  if (await isListening(port)) return { mcpUrl, alreadyRunning: true, stop: async () => undefined };
  // Loaded here, so the processes that only need the token (npm start) do not load a seller.
  const { startMediaBuySeller } = await import('../../test/fixtures/media-buy-seller');
  const seller = await startMediaBuySeller({ port, authToken: DEMO_SELLER_TOKEN, deliveryUnitMs: 1_000 });
  const reports = reportInDemoTime(seller, options);
  return {
    mcpUrl,
    seller,
    alreadyRunning: false,
    stop: async () => {
      await reports.stop();
      await seller.close();
    },
  };
}

/**
 * Reporting webhooks in demo time, for a media-buy fixture seller whose delivery runs by the second
 * (`deliveryUnitMs`): every `reportEveryMs` it posts each running buy's reporting webhook to the URL the buyer
 * registered: the hourly period the flight is in, with the numbers delivered so far (restated on each fire), signed
 * the way the buyer asked (HMAC-SHA256 or Bearer with the `reporting_webhook.authentication` credential, else RFC 9421
 * with its own key), and a `final` report after the end.
 */
export function reportInDemoTime(
  seller: MediaBuySeller,
  options: { reportEveryMs?: number; log?: (line: string) => void } = {},
): { stop(): Promise<void> } {
  const log = options.log ?? (() => undefined);
  const reported = new Map<string, { sequence: number; final: boolean; coveredThroughMs?: number }>();

  async function post(url: string, body: Record<string, unknown>, authentication: unknown): Promise<number> {
    const auth = (authentication ?? {}) as { schemes?: unknown; credentials?: unknown };
    const schemes = Array.isArray(auth.schemes) ? auth.schemes.map(String) : [];
    const credentials = typeof auth.credentials === 'string' ? auth.credentials : undefined;
    if (credentials && (schemes.includes('HMAC-SHA256') || schemes.includes('Bearer'))) {
      const raw = JSON.stringify(body);
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (schemes.includes('HMAC-SHA256')) {
        const timestamp = String(Math.floor(Date.now() / 1000));
        headers['x-adcp-timestamp'] = timestamp;
        headers['x-adcp-signature'] =
          `sha256=${createHmac('sha256', credentials).update(`${timestamp}.${raw}`).digest('hex')}`;
      } else {
        headers.authorization = `Bearer ${credentials}`;
      }
      const response = await fetch(url, { method: 'POST', headers, body: raw, signal: AbortSignal.timeout(10_000) });
      return response.status;
    }
    // RFC 9421 through the SDK's emitter (it sets its own idempotency_key).
    const { idempotency_key: _key, ...payload } = body;
    const [delivery] = await seller.scripted.sendUnbackedWebhook(url, payload);
    return delivery?.finalStatus ?? 0;
  }

  async function fire(): Promise<void> {
    const now = Date.now();
    for (const buy of seller.buys()) {
      const webhook = buy.request.reporting_webhook as Record<string, unknown> | undefined;
      const url = typeof webhook?.url === 'string' ? webhook.url : undefined;
      const progress = reported.get(buy.mediaBuyId) ?? { sequence: 0, final: false };
      if (!url || progress.final || now < buy.startMs || buy.creativesSinceMs === undefined) continue;
      const ended = now >= buy.endMs || buy.canceledAtMs !== undefined;
      const lastMs = Math.min(now, buy.endMs) - 1;
      // Each hourly period delivered in since the last fire (usually one): its numbers so far; the last one `final`
      // after the end. A period that ended since the last fire gets its complete numbers first.
      const fromMs = Math.max(buy.startMs, progress.coveredThroughMs ?? buy.startMs);
      for (let start = Math.floor(fromMs / HOUR) * HOUR; start <= lastMs; start += HOUR) {
        const last = start + HOUR > lastMs;
        progress.sequence += 1;
        const body = seller.reportEnvelope(buy.mediaBuyId, {
          sequenceNumber: progress.sequence,
          periodStartMs: start,
          notificationType: ended && last ? 'final' : 'scheduled',
          atMs: now,
        });
        try {
          const status = await post(url, body, webhook?.authentication);
          log(`report ${progress.sequence} for ${buy.mediaBuyId} answered ${status}`);
        } catch (error) {
          log(`report ${progress.sequence} for ${buy.mediaBuyId} failed: ${(error as Error).message}`);
        }
      }
      progress.coveredThroughMs = Math.min(now, buy.endMs);
      if (ended) progress.final = true;
      reported.set(buy.mediaBuyId, progress);
    }
  }

  let running: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(fire, fire);
  }, options.reportEveryMs ?? 3_000);
  return {
    stop: async () => {
      clearInterval(timer);
      await running.catch(() => undefined);
    },
  };
}
