/**
 * Gateway process: `npm run gateway`. The operations API (/v1), the codec server (/codec) and /healthz on
 * ADCP_GATEWAY_HOST:ADCP_GATEWAY_PORT; seller webhooks there too, or on their own ADCP_WEBHOOK_HOST:ADCP_WEBHOOK_PORT.
 * Every /v1 and /codec request is authenticated (api/mount.ts); without authentication configured the gateway binds
 * only to loopback and accepts a development key.
 */
import type http from 'node:http';
import { loadPayloadKeys, payloadCodecs } from '../client/encryption-codec';
import { CampaignClient } from '../client/campaign-client';
import { MediaBuyClient } from '../client/media-buy-client';
import { SellerCapabilitiesClient, taskSupportCheck } from '../client/seller-capabilities-client';
import { OrchestratorClient } from '../client/orchestrator-client';
import { loadSellers, resolveSellersFile } from '../config/sellers';
import { notificationKeyFromEnv } from '../config/notification-key';
import { loadRuntimeConfig } from '../config/runtime';
import { loadTaskDefaults } from '../config/tasks';
import { loadReplayStoreConfig } from '../config/webhook-auth';
import { connectClient } from '../client/connect';
import { gatewayTemporalTransport } from '../config/temporal-connection';
import { observeGateway } from '../observability/gateway-observability';
import { TemporalPinoLogger, createLogger } from '../observability/logger';
import { tracingClientInterceptors, tracingFromEnvironment } from '../observability/tracing';
import { describeDevelopmentKey, loadAuthConfig } from './auth';
import { createCampaignRouter } from './campaigns';
import { createDiscoveryRouter } from './discoveries';
import { createHardenedServer } from './hardening';
import { mountGateway, untenantedTenantOf } from './mount';
import { createSellerRouter } from './sellers';
import { openWebhookReplayStore } from './webhook-verification/postgres-replay-store';

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function main(): Promise<void> {
  const runtime = loadRuntimeConfig();
  const auth = loadAuthConfig();
  // As npm start does: without ADCP_AGENTS_FILE or agents.json here, the bundled demo sellers (agents.example.json).
  const sellersFile = resolveSellersFile();
  const sellerRegistry = loadSellers(sellersFile.file);
  const taskDefaults = loadTaskDefaults();
  const replayStoreConfig = loadReplayStoreConfig();
  // Read before connecting, so a bad key fails the start with its own message.
  const codecs = payloadCodecs(loadPayloadKeys());
  const notificationKey = notificationKeyFromEnv();
  const logger = createLogger({ service: 'gateway', sync: false });
  if (sellersFile.example)
    logger.info(
      `gateway: no agents.json here and ADCP_AGENTS_FILE unset: using ${sellersFile.file} (the demo sellers).`,
    );
  // Client spans for starts, signals, updates and queries when an OTLP endpoint is set (observability/tracing.ts).
  const tracing = tracingFromEnvironment('adcp-orchestrator-gateway');
  // ADCP_GATEWAY_TEMPORAL_TRANSPORT: the Rust core's gRPC client (default) or grpc-js (config/temporal-connection.ts).
  const transport = gatewayTemporalTransport();
  const client = await connectClient(
    process.env,
    { workflow: tracingClientInterceptors(tracing) },
    { transport, runtimeLogger: new TemporalPinoLogger(logger) },
  );
  const untenantedTenant = untenantedTenantOf(auth);
  const orchestrator = new OrchestratorClient({
    client,
    taskQueue: runtime.taskQueue,
    knownSeller: (id) => sellerRegistry.has(id),
    taskDefaults,
    ...(untenantedTenant ? { untenantedTenant } : {}),
    // A tenant uses only the sellers and accounts agents.json gives it (config/agents.ts), refused before any call.
    checkTenantAccess: (sellerId, tenant, account) => sellerRegistry.checkTenantAccess(sellerId, tenant, account),
    // Notifications to the tenant's systems (ADCP_NOTIFICATION_KEY_FILE signs them) where it configured a URL.
    notifies: (tenant) => notificationKey !== undefined && Boolean(sellerRegistry.tenant(tenant)?.notification_url),
  });
  const mediaBuys = new MediaBuyClient({
    client,
    taskQueue: runtime.taskQueue,
    ...(runtime.publicBaseUrl ? { reportingBaseUrl: runtime.publicBaseUrl } : {}),
    knownSeller: (id) => sellerRegistry.has(id),
    ...(untenantedTenant ? { untenantedTenant } : {}),
  });
  // Campaigns (#14): sellers' capabilities, discoveries across sellers, campaigns.
  const sellers = new SellerCapabilitiesClient({ client, taskQueue: runtime.taskQueue, sellers: sellerRegistry });
  const campaigns = new CampaignClient({
    client,
    taskQueue: runtime.taskQueue,
    sellers,
    ...(runtime.publicBaseUrl ? { reportingBaseUrl: runtime.publicBaseUrl } : {}),
    ...(untenantedTenant ? { untenantedTenant } : {}),
  });
  // Nonces live in ADCP_REPLAY_STORE_URL (PostgreSQL) when gateways are replicated, else in this process.
  const replayStore = await openWebhookReplayStore(replayStoreConfig);
  logger.info(`gateway: webhook replay store: ${replayStore.description}; Temporal transport: ${transport}`);
  const mounted = mountGateway({
    replayStore: replayStore.store,
    campaignRouters: [
      createSellerRouter({ sellers }),
      createDiscoveryRouter({ campaigns }),
      createCampaignRouter({ campaigns }),
    ],
    taskSupport: taskSupportCheck(sellers),
    client,
    orchestrator,
    mediaBuys,
    sellers: sellerRegistry,
    runtime,
    auth,
    codecs,
    logger,
    ...(notificationKey ? { notificationJwks: [notificationKey.publicJwk] } : {}),
    // AdCP's audit set: failures and denials go to the log (no secrets in them); successes would drown it.
    onEvent: (event) => {
      if (event.type !== 'auth_success') logger.warn({ audit: event }, `auth: ${event.type}`);
    },
  });
  for (const warning of mounted.warnings) logger.warn(`gateway: ${warning}`);
  const servers: http.Server[] = [];
  // The request log wraps everything (refusals by authentication included). GET /metrics is the gateway's own.
  const limits = { keepAliveTimeoutMs: runtime.keepAliveTimeoutMs };
  const apiServer = createHardenedServer(observeGateway(mounted.api, { logger }), limits);
  servers.push(apiServer);
  await listen(apiServer, runtime.gatewayPort, runtime.gatewayHost);
  const url = `http://${runtime.gatewayHost}:${runtime.gatewayPort}`;
  const encrypted = codecs.length > 1 ? ', payloads encrypted' : '';
  if (mounted.webhooks && runtime.webhookListener) {
    const webhookServer = createHardenedServer(observeGateway(mounted.webhooks, { logger }), limits);
    servers.push(webhookServer);
    await listen(webhookServer, runtime.webhookListener.port, runtime.webhookListener.host);
    logger.info(`gateway: ${url} (operations API, codec server at /codec, /healthz${encrypted})`);
    logger.info(
      `gateway: http://${runtime.webhookListener.host}:${runtime.webhookListener.port} (seller webhooks, /healthz)`,
    );
  } else {
    logger.info(`gateway: ${url} (operations API, webhooks, codec server at /codec, /healthz${encrypted})`);
  }
  const dev = mounted.developmentKey;
  if (dev?.issuedHere)
    logger.info(`gateway: no authentication configured; loopback only.\n${describeDevelopmentKey(dev, url)}`);
  else if (dev)
    logger.info('gateway: no authentication configured; loopback only, accepting the development key (ADCP_API_KEY).');

  const stop = () => {
    let open = servers.length;
    for (const server of servers)
      server.close(() => {
        if (--open === 0)
          void Promise.allSettled([client.connection.close(), tracing?.shutdown(), replayStore.close()]).finally(() =>
            process.exit(0),
          );
      });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error) => {
  console.error(`gateway: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
