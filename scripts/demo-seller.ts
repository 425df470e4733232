/**
 * `npm run seller`: the bundled demo seller (scripts/lib/demo-seller.ts), kept running until Ctrl-C, for curl
 * experiments and for a gateway started with `npm start`. `npm run demo` starts it too, but stops it on exit.
 * Whatever already listens on the ports is reused, not restarted.
 */
import { DEMO_SELLER_TOKEN, startDemoSeller } from './lib/demo-seller';

async function main(): Promise<void> {
  console.log('Starting the demo seller (mock ad server on :4450, example seller on :3004)...');
  const seller = await startDemoSeller({ echo: process.argv.includes('--verbose') });
  if (seller.alreadyRunning) {
    console.log(`The demo seller is already running (${seller.mcpUrl}), started elsewhere; nothing to do here.`);
    return;
  }
  console.log(
    [
      '',
      'Demo seller is running:',
      `  Seller (MCP)     ${seller.mcpUrl}  (bearer token ${DEMO_SELLER_TOKEN})`,
      `  Mock ad server   ${seller.upstreamUrl}`,
      '',
      'agents.example.json points at it. Ctrl-C stops it.',
      '',
    ].join('\n'),
  );
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    console.log('\nStopping the demo seller...');
    void seller.stop().finally(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  // Stay alive: the seller's processes are children of this one.
  setInterval(() => undefined, 1 << 30);
}

main().catch((error) => {
  console.error(`seller: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
