/**
 * Integration tests share one real Temporal dev server (the project's own binary) and one @adcp/sdk example seller
 * behind its mock ad server, all on loopback and on free ports. Tests that restart servers start their own.
 */
import { freePort, startDevServer } from '../../scripts/lib/dev-server';
import { startDemoSeller } from '../../scripts/lib/demo-seller';

export default async function globalSetup(): Promise<void> {
  const [temporalPort, upstreamPort, sellerPort] = [await freePort(), await freePort(), await freePort()];
  const [temporal, seller] = await Promise.all([
    startDevServer({ port: temporalPort, headless: true }),
    startDemoSeller({ upstreamPort, sellerPort }),
  ]);
  process.env.TEMPORAL_TEST_ADDRESS = temporal.address;
  process.env.DEMO_SELLER_URL = seller.mcpUrl;
  process.env.DEMO_UPSTREAM_URL = seller.upstreamUrl;
  (globalThis as Record<string, unknown>).__ADCP_HARNESS__ = { temporal, seller };
}
