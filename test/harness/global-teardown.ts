import { rmSync } from 'node:fs';
import type { DevServer } from '../../scripts/lib/dev-server';
import type { DemoSeller } from '../../scripts/lib/demo-seller';

export default async function globalTeardown(): Promise<void> {
  const harness = (globalThis as Record<string, unknown>).__ADCP_HARNESS__ as
    { temporal: DevServer; seller: DemoSeller; sharedDirectory: string } | undefined;
  if (!harness) return;
  await Promise.all([harness.temporal.stop(), harness.seller.stop()]);
  rmSync(harness.sharedDirectory, { recursive: true, force: true });
}
