/**
 * Integration tests share one real Temporal dev server (the project's own binary) and one @adcp/sdk example seller
 * behind its mock ad server, all on loopback and on free ports. Tests that restart servers start their own. The run's
 * temporary directory holds what the files build once for all of them (test/harness/shared-build.ts).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TEST_RETRY_ENVIRONMENT } from './retry-backoff';
import { SHARED_DIRECTORY_VARIABLE } from './shared-build';
import { freePort, startDevServer } from '../../scripts/lib/dev-server';
import { startDemoSeller } from '../../scripts/lib/demo-seller';

export default async function globalSetup(): Promise<void> {
  const [temporalPort, upstreamPort, sellerPort] = [await freePort(), await freePort(), await freePort()];
  const [temporal, seller] = await Promise.all([
    startDevServer({ port: temporalPort, headless: true }),
    startDemoSeller({ upstreamPort, sellerPort }),
  ]);
  const sharedDirectory = mkdtempSync(path.join(os.tmpdir(), 'adcp-test-run-'));
  process.env[SHARED_DIRECTORY_VARIABLE] = sharedDirectory;
  process.env.TEMPORAL_TEST_ADDRESS = temporal.address;
  // Every worker a test starts as a process (npm run worker, the demos, npm start) retries on the test backoff.
  Object.assign(process.env, TEST_RETRY_ENVIRONMENT);
  process.env.DEMO_SELLER_URL = seller.mcpUrl;
  process.env.DEMO_UPSTREAM_URL = seller.upstreamUrl;
  (globalThis as Record<string, unknown>).__ADCP_HARNESS__ = { temporal, seller, sharedDirectory };
}
