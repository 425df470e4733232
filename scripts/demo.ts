/**
 * `npm run demo`: with `npm start` running, starts the bundled demo seller if it is not running, then runs
 * get_products and create_media_buy through the gateway's HTTP API, printing each status change as it happens,
 * with the media_buy_id and the Web UI link to the operation; then a media buy's whole life in demo time
 * (scripts/demo-media-buy.ts, also `npm run demo:media-buy`).
 */
import { randomUUID } from 'node:crypto';
import { mediaBuyDemoOptionsFromEnv, runMediaBuyDemo } from './demo-media-buy';
import { DEMO_ACCOUNT, DEMO_BRAND, startDemoSeller } from './lib/demo-seller';

const gateway = (process.env.ADCP_GATEWAY_URL ?? `http://127.0.0.1:${process.env.ADCP_GATEWAY_PORT ?? 8080}`).replace(
  /\/+$/,
  '',
);
const sellerId = process.env.DEMO_AGENT_ID ?? 'demo-seller';

interface OperationBody {
  operation_id: string;
  status: string;
  running: boolean;
  transitions?: Array<{ from: string; to: string; source: string; at: string }>;
  result?: Record<string, unknown> | null;
  message?: string | null;
  errors?: Array<{ code: string; message: string }>;
  web_ui?: string;
}

async function http<T>(method: string, url: string, body?: unknown): Promise<T> {
  const response = await fetch(url, {
    method,
    headers: {
      ...(body ? { 'content-type': 'application/json' } : {}),
      // The key `npm start` printed (its development key), or one of ADCP_API_KEYS_FILE's.
      ...(process.env.ADCP_API_KEY ? { authorization: `Bearer ${process.env.ADCP_API_KEY}` } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${url} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

async function run(task: string, params: Record<string, unknown>): Promise<OperationBody> {
  const started = await http<{ operation_id: string }>('POST', `${gateway}/v1/operations`, {
    agent_id: sellerId,
    task,
    params,
    idempotency_key: `demo-${randomUUID()}`,
  });
  console.log(`\n${task}: operation ${started.operation_id}`);
  let printed = 0;
  for (;;) {
    const operation = await http<OperationBody>('GET', `${gateway}/v1/operations/${started.operation_id}`);
    const transitions = operation.transitions ?? [];
    for (const transition of transitions.slice(printed)) {
      console.log(`  ${transition.at}  ${transition.from} -> ${transition.to}  (${transition.source})`);
    }
    printed = transitions.length;
    if (!operation.running) return operation;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function main(): Promise<void> {
  try {
    await http('GET', `${gateway}/healthz`);
  } catch (error) {
    throw new Error(`The gateway at ${gateway} is not healthy (${(error as Error).message}). Run \`npm start\` first.`);
  }
  console.log('Starting the demo seller (mock ad server on :4450, example seller on :3004) if needed...');
  const seller = await startDemoSeller();
  try {
    const products = await run('get_products', {
      buying_mode: 'brief',
      brief: 'Outdoor billboards for a spring campaign',
      account: DEMO_ACCOUNT,
      brand: DEMO_BRAND,
    });
    if (products.status !== 'completed')
      throw new Error(`get_products ended ${products.status}: ${JSON.stringify(products.errors ?? products.message)}`);
    const product = (products.result?.products as Array<Record<string, unknown>>)[0];
    const pricing = (product.pricing_options as Array<Record<string, unknown>>)[0];
    console.log(`  product ${String(product.product_id)} at ${String(pricing.pricing_option_id)}`);
    const start = new Date(Date.now() + 7 * 86_400_000);
    const buy = await run('create_media_buy', {
      account: DEMO_ACCOUNT,
      brand: DEMO_BRAND,
      start_time: start.toISOString(),
      end_time: new Date(start.getTime() + 30 * 86_400_000).toISOString(),
      packages: [{ product_id: product.product_id, pricing_option_id: pricing.pricing_option_id, budget: 20_000 }],
    });
    if (buy.status !== 'completed')
      throw new Error(`create_media_buy ended ${buy.status}: ${JSON.stringify(buy.errors ?? buy.message)}`);
    console.log(`\nmedia_buy_id: ${String(buy.result?.media_buy_id)}`);
    console.log(`Web UI: ${buy.web_ui ?? '(set ADCP_WEB_UI_URL)'}`);
  } finally {
    await seller.stop();
  }
  await runMediaBuyDemo(mediaBuyDemoOptionsFromEnv());
}

main().catch((error) => {
  console.error(`demo: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
