/**
 * Run as its own process by test/integration/unreachable-seller.test.ts: one call through the real seller client to
 * a seller that refuses connections, then nothing else. The process must exit by itself.
 */
import { closeMCPConnections } from '@adcp/sdk';
import { createSdkSellerClient } from '../../activities/seller-client';

async function main(): Promise<void> {
  const port = Number(process.argv[2]);
  const seller = createSdkSellerClient();
  const agent = { id: 'down', url: `http://127.0.0.1:${port}/mcp`, protocol: 'mcp' as const };
  try {
    await seller.listTasks({ agent, token: 'x', signal: AbortSignal.timeout(10_000), filters: {} });
    console.log('unexpected: the call succeeded');
  } catch (error) {
    console.log(`call failed as expected: ${(error as Error).message.slice(0, 120)}`);
  }
  await closeMCPConnections();
}

void main();
