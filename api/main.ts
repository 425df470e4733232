/**
 * Gateway process: `npm run gateway`. Binds to loopback (ADCP_GATEWAY_HOST) until authentication lands.
 */
import { MediaBuyClient } from '../client/media-buy-client';
import { OrchestratorClient } from '../client/orchestrator-client';
import { loadAgents } from '../config/agents';
import { loadRuntimeConfig } from '../config/runtime';
import { loadTaskDefaults } from '../config/tasks';
import { connectClient } from '../config/temporal-connection';
import { createGateway } from './app';
import { createMediaBuyRouter } from './media-buys';
import { createReportingWebhookRouter } from './reporting-webhooks';
import { createWebhookAuthenticator } from './webhook-verification';
import { createWebhookRouter } from './webhooks';

async function main(): Promise<void> {
  const runtime = loadRuntimeConfig();
  const agents = loadAgents();
  const taskDefaults = loadTaskDefaults();
  const client = await connectClient();
  const orchestrator = new OrchestratorClient({
    client,
    taskQueue: runtime.taskQueue,
    knownAgent: (id) => agents.has(id),
    taskDefaults,
  });
  // One authenticator (one nonce replay store) for task and reporting webhooks alike.
  const authenticator = createWebhookAuthenticator();
  const webhookRouter = createWebhookRouter({
    client,
    agents,
    authenticator,
    publicBaseUrl: runtime.publicBaseUrl,
  });
  const mediaBuys = new MediaBuyClient({
    client,
    taskQueue: runtime.taskQueue,
    ...(runtime.publicBaseUrl ? { reportingBaseUrl: runtime.publicBaseUrl } : {}),
    knownAgent: (id) => agents.has(id),
  });
  const app = createGateway({
    orchestrator,
    webUiUrl: runtime.webUiUrl,
    namespace: client.options.namespace,
    webhookRouter,
    reportingWebhookRouter: createReportingWebhookRouter({
      client,
      agents,
      authenticator,
      publicBaseUrl: runtime.publicBaseUrl,
    }),
    mediaBuyRouter: createMediaBuyRouter({
      mediaBuys,
      webUiUrl: runtime.webUiUrl,
      namespace: client.options.namespace,
    }),
  });
  const server = app.listen(runtime.gatewayPort, runtime.gatewayHost, () => {
    console.log(`gateway: http://${runtime.gatewayHost}:${runtime.gatewayPort} (operations API, webhooks, /healthz)`);
  });
  const stop = () => {
    server.close(() => {
      void client.connection.close().finally(() => process.exit(0));
    });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error) => {
  console.error(`gateway: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
