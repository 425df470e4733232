/**
 * Integration tests share one real Temporal dev server (the project's own binary) and one @adcp/sdk example seller
 * behind its mock ad server, all on loopback and on free ports. Tests that restart servers start their own. The
 * workflow bundle is built here once for the run and read by every file (test/harness/temporal.ts, workflowBundle);
 * worker processes share one too (test/harness/worker-process.ts), in the run's shared directory.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SHARED_BUNDLE_VARIABLE, SHARED_DIRECTORY_VARIABLE, bundleTestWorkflows } from './temporal';
import { freePort, startDevServer } from '../../scripts/lib/dev-server';
import { startDemoSeller } from '../../scripts/lib/demo-seller';

export default async function globalSetup(): Promise<void> {
  const [temporalPort, upstreamPort, sellerPort] = [await freePort(), await freePort(), await freePort()];
  const [temporal, seller, bundle] = await Promise.all([
    startDevServer({ port: temporalPort, headless: true }),
    startDemoSeller({ upstreamPort, sellerPort }),
    bundleTestWorkflows(),
  ]);
  const bundleDirectory = mkdtempSync(path.join(os.tmpdir(), 'adcp-test-bundle-'));
  const bundleFile = path.join(bundleDirectory, 'workflow-bundle.json');
  writeFileSync(bundleFile, JSON.stringify(bundle));
  process.env[SHARED_BUNDLE_VARIABLE] = bundleFile;
  process.env[SHARED_DIRECTORY_VARIABLE] = bundleDirectory;
  process.env.TEMPORAL_TEST_ADDRESS = temporal.address;
  process.env.DEMO_SELLER_URL = seller.mcpUrl;
  process.env.DEMO_UPSTREAM_URL = seller.upstreamUrl;
  (globalThis as Record<string, unknown>).__ADCP_HARNESS__ = { temporal, seller, bundleDirectory };
}
