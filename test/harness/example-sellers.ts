/**
 * The example sellers @adcp/sdk ships (examples/hello_*), each run unmodified from node_modules as a child process
 * on loopback, behind its own `adcp mock-server` upstream where it wraps one. Nobody on this team wrote them: they
 * are how the interop tests learn what real AdCP 3.0.6 sellers answer. Everything comes from node_modules, so CI
 * runs them offline. Same process handling as the demo seller (scripts/lib/demo-seller.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { SellerConfig } from '../../config/sellers';
import { DEMO_SELLER_TOKEN } from '../../scripts/lib/demo-seller';
import { freePort } from '../../scripts/lib/dev-server';
import { type ManagedProcess, startProcess, waitForListening } from '../../scripts/lib/processes';
import type { AdcpJsonWebKey } from '@adcp/sdk/signing/client';
import { mintWebhookSigningKey } from '../fixtures/webhook-signing';

export type ExampleSellerName =
  | 'guaranteed'
  | 'non_guaranteed'
  | 'social'
  | 'multi_tenant'
  | 'signals_marketplace'
  | 'creative_ad_server'
  | 'creative_template'
  | 'error_compliant'
  | 'comply_controller'
  | 'seller_test_controller'
  | DecisioningSellerName;

/** The decisioning-platform examples: platform classes without a server, served by test/fixtures/decisioning-sellers. */
export type DecisioningSellerName = 'broadcast_tv' | 'programmatic' | 'mock_seller';

const DECISIONING_RUNNER = path.join('test', 'fixtures', 'decisioning-sellers', 'serve.ts');

interface ExampleSellerSpec {
  /** The file under node_modules/@adcp/sdk/examples. */
  file: string;
  /** The `adcp mock-server` specialism the example wraps, if it wraps one. */
  upstream?: string;
  /**
   * For examples that export a platform but start no server: the runner (under test/fixtures) that serves it,
   * given the example's name in DECISIONING_EXAMPLE. It signs HITL task webhooks with a fresh key per start.
   */
  runner?: string;
  /** The port the example hard-codes in `serve(..., { port })`: redirected to a free one (test/fixtures/example-port.cjs). */
  fixedPort?: number;
  /** Extra environment the example reads (e.g. ADCP_SANDBOX=1 to register comply_test_controller). */
  env?: Record<string, string>;
}

export const EXAMPLE_SELLERS: Readonly<Record<ExampleSellerName, ExampleSellerSpec>> = {
  guaranteed: { file: 'hello_seller_adapter_guaranteed.ts', upstream: 'sales-guaranteed' },
  non_guaranteed: { file: 'hello_seller_adapter_non_guaranteed.ts', upstream: 'sales-non-guaranteed' },
  social: { file: 'hello_seller_adapter_social.ts', upstream: 'sales-social' },
  multi_tenant: { file: 'hello_seller_adapter_multi_tenant.ts' },
  signals_marketplace: { file: 'hello_signals_adapter_marketplace.ts', upstream: 'signal-marketplace' },
  // Creative agents (list_creative_formats, build_creative, preview_creative; the ad server also sync/list_creatives).
  creative_ad_server: { file: 'hello_creative_adapter_ad_server.ts', upstream: 'creative-ad-server' },
  creative_template: { file: 'hello_creative_adapter_template.ts', upstream: 'creative-template' },
  // Sellers that answer errors (test/integration/interop-errors.test.ts): AdCP structured errors from adcpError(), and
  // the compliance test controller (seed / force scenarios) behind the sandbox gate. They ignore the bearer token.
  error_compliant: { file: 'error-compliant-server.ts', fixedPort: 3456 },
  comply_controller: { file: 'comply-controller-seller.ts', fixedPort: 3456, env: { ADCP_SANDBOX: '1' } },
  seller_test_controller: { file: 'seller-test-controller.ts', fixedPort: 3457, env: { ADCP_SANDBOX: '1' } },
  // Decisioning-platform examples (test/integration/interop-decisioning.test.ts): HITL create/sync via task handoff.
  broadcast_tv: { file: 'decisioning-platform-broadcast-tv.ts', runner: DECISIONING_RUNNER },
  programmatic: { file: 'decisioning-platform-programmatic.ts', runner: DECISIONING_RUNNER },
  mock_seller: { file: 'decisioning-platform-mock-seller.ts', runner: DECISIONING_RUNNER },
};

/** Every example accepts the SDK's harness bearer token (its ADCP_AUTH_TOKEN default, set explicitly here). */
export const EXAMPLE_SELLER_TOKEN = DEMO_SELLER_TOKEN;
/** The environment variable the agent configs below name; pass `{ [EXAMPLE_SELLER_TOKEN_ENV]: token }` to activities. */
export const EXAMPLE_SELLER_TOKEN_ENV = 'EXAMPLE_SELLER_TOKEN';

export interface ExampleSeller {
  name: ExampleSellerName;
  mcpUrl: string;
  upstreamUrl?: string;
  /** The public key the seller signs its webhooks with (runner-served examples only; also in `agent.webhooks`). */
  webhookJwks?: { keys: AdcpJsonWebKey[] };
  /** The seller as the orchestrator's registry knows it (agent id = the example's name). */
  agent: SellerConfig;
  /** The last lines the seller and its upstream printed, for failure messages. */
  output(): string;
  /**
   * Moves the seller's Date.now() `byMs` further ahead of the real clock (test/fixtures/example-clock.cjs; a seller
   * started with `clock: true` only). The seller is told by a signal and applies it on a later turn of its event
   * loop: a test confirms the move from what the seller answers.
   */
  advanceClock(byMs: number): void;
  stop(): Promise<void>;
}

const root = path.resolve(__dirname, '..', '..');
const examplesDir = path.join(root, 'node_modules', '@adcp', 'sdk', 'examples');
const bin = (name: string) => path.join(root, 'node_modules', '.bin', name);
/** SWC's require hook (with a compile cache) instead of tsx: about 1 s less CPU per seller start on 2 cores. */
const SWC_REGISTER = path.join(root, 'test', 'harness', 'swc-register.cjs');

/**
 * Starts one example seller (and its mock upstream) on free loopback ports. The example's TypeScript runs under
 * node with the SWC hook `startWorkerProcess` uses; on a busy 2-core machine a first compile can still take tens of
 * seconds, hence the generous start-up limit.
 */
export async function startExampleSeller(
  name: ExampleSellerName,
  options: {
    echo?: boolean;
    startTimeoutMs?: number;
    /** The seller's port (default: a free one); a restart test starts a second seller where the first one was. */
    port?: number;
    /** Environment for this run on top of the spec's (e.g. NODE_ENV=production: the seller as deployed). */
    env?: Record<string, string>;
    /**
     * A clock the test can move forward (`advanceClock`): for an example whose answers follow its own clock, such as
     * the error-compliant server's 60 s rate-limit window (test/fixtures/example-clock.cjs).
     */
    clock?: boolean;
  } = {},
): Promise<ExampleSeller> {
  const spec = EXAMPLE_SELLERS[name];
  const timeoutMs = options.startTimeoutMs ?? 180_000;
  const started: ManagedProcess[] = [];
  let upstreamUrl: string | undefined;
  const clockDir = options.clock ? mkdtempSync(path.join(os.tmpdir(), 'adcp-example-clock-')) : undefined;
  const clockFile = clockDir ? path.join(clockDir, 'ahead-ms') : undefined;
  const removeClock = () => {
    if (clockDir) rmSync(clockDir, { recursive: true, force: true });
  };
  let clockAheadMs = 0;
  const preloads = [
    ...(spec.fixedPort !== undefined ? [path.join(root, 'test', 'fixtures', 'example-port.cjs')] : []),
    ...(clockFile ? [path.join(root, 'test', 'fixtures', 'example-clock.cjs')] : []),
  ];
  try {
    if (spec.upstream) {
      const upstreamPort = await freePort();
      const upstream = startProcess(
        `${name}-upstream`,
        bin('adcp'),
        ['mock-server', spec.upstream, '--port', String(upstreamPort)],
        { echo: options.echo },
      );
      started.push(upstream);
      await waitForListening(upstreamPort, '127.0.0.1', timeoutMs, upstream);
      upstreamUrl = `http://127.0.0.1:${upstreamPort}`;
    }
    const sellerPort = options.port ?? (await freePort());
    const signing = spec.runner ? mintWebhookSigningKey(`${name}-webhooks`) : undefined;
    const script = spec.runner ? path.join(root, spec.runner) : path.join(examplesDir, spec.file);
    const seller = startProcess(name, process.execPath, ['--require', SWC_REGISTER, script], {
      env: {
        ...(signing ? { DECISIONING_EXAMPLE: name, ADCP_WEBHOOK_SIGNER_KEY: JSON.stringify(signing.signerKey) } : {}),
        // In-memory state and task stores are refused outside development/test.
        NODE_ENV: 'development',
        PORT: String(sellerPort),
        ADCP_AUTH_TOKEN: EXAMPLE_SELLER_TOKEN,
        ...(upstreamUrl ? { UPSTREAM_URL: upstreamUrl } : {}),
        ...spec.env,
        ...options.env,
        ...(spec.fixedPort !== undefined ? { ADCP_EXAMPLE_FIXED_PORT: String(spec.fixedPort) } : {}),
        ...(clockFile ? { ADCP_EXAMPLE_CLOCK_FILE: clockFile } : {}),
        ...(preloads.length > 0
          ? {
              NODE_OPTIONS: [process.env.NODE_OPTIONS ?? '', ...preloads.map((preload) => `--require ${preload}`)]
                .join(' ')
                .trim(),
            }
          : {}),
      },
      echo: options.echo,
    });
    started.push(seller);
    await waitForListening(sellerPort, '127.0.0.1', timeoutMs, seller);
    const mcpUrl = `http://127.0.0.1:${sellerPort}/mcp`;
    return {
      name,
      mcpUrl,
      ...(upstreamUrl ? { upstreamUrl } : {}),
      ...(signing ? { webhookJwks: { keys: [signing.publicJwk] } } : {}),
      agent: {
        id: name,
        name: `@adcp/sdk example ${spec.file}`,
        url: mcpUrl,
        protocol: 'mcp',
        token_env: EXAMPLE_SELLER_TOKEN_ENV,
        ...(signing
          ? { webhooks: { scheme: 'rfc9421', jwks: { keys: [signing.publicJwk] } } as SellerConfig['webhooks'] }
          : {}),
      },
      output: () => started.map((process) => `[${process.name}]\n${process.output()}`).join('\n'),
      advanceClock: (byMs: number) => {
        if (!clockFile || seller.child.pid === undefined)
          throw new Error(`${name} was not started with a clock to move (startExampleSeller(name, { clock: true })).`);
        clockAheadMs += byMs;
        writeFileSync(clockFile, String(clockAheadMs));
        process.kill(seller.child.pid, 'SIGUSR2');
      },
      stop: async () => {
        await Promise.all([...started].reverse().map((process) => process.stop()));
        removeClock();
      },
    };
  } catch (error) {
    await Promise.all(started.map((process) => process.stop()));
    removeClock();
    throw error;
  }
}

/** Starts several example sellers side by side; if one fails to start, stops the others and throws. */
export async function startExampleSellers<N extends ExampleSellerName>(
  names: readonly N[],
  options: { echo?: boolean } = {},
): Promise<Record<N, ExampleSeller>> {
  const results = await Promise.allSettled(names.map((name) => startExampleSeller(name, options)));
  const failed = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed.length > 0) {
    await Promise.all(results.map((result) => (result.status === 'fulfilled' ? result.value.stop() : undefined)));
    throw failed[0].reason;
  }
  return Object.fromEntries(
    results.map((result, index) => [names[index], (result as PromiseFulfilledResult<ExampleSeller>).value]),
  ) as Record<N, ExampleSeller>;
}

export async function stopExampleSellers(
  sellers: Partial<Record<ExampleSellerName, ExampleSeller>> | undefined,
): Promise<void> {
  if (!sellers) return;
  await Promise.all(Object.values(sellers).map((seller) => seller?.stop()));
}

/**
 * The seller's MCP tool list. Not an AdCP task (tools/list is MCP's own discovery), so it is read directly rather
 * than as an orchestrator operation; tests use it to skip the steps a seller does not offer.
 */
export async function listTools(
  seller: Pick<ExampleSeller, 'mcpUrl'>,
  token = EXAMPLE_SELLER_TOKEN,
): Promise<string[]> {
  const client = new Client({ name: 'adcp-orchestrator-tests', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(seller.mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    return tools.map((tool) => tool.name);
  } finally {
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  }
}
