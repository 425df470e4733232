import path from 'node:path';
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
