/**
 * The gateway as it runs (api/main.ts): createGateway's routes behind #12's protections (createSecureGateway), the
 * codec server at /codec, and, when configured, a second listener that serves only webhooks and /healthz.
 * Split from main.ts so tests mount exactly what runs.
 *
 * Authentication comes from the environment (api/auth/config.ts). With none configured the gateway may only bind to
 * loopback, and accepts a development key: ADCP_API_KEY when `npm start` issued one, else a new one it prints.
 */
import path from 'node:path';
import type { AdcpJsonWebKey } from '@adcp/sdk/signing/server';
import type { Client } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import type express from 'express';
import type { MediaBuyClient } from '../client/media-buy-client';
import type { OrchestratorClient } from '../client/orchestrator-client';
import type { TaskRefusal } from '../client/seller-capabilities-client';
import type { SellerRegistry } from '../config/sellers';
import type { RuntimeConfig } from '../config/runtime';
import { WebhookAuthConfigError, resolveWebhookCredentials } from '../config/webhook-auth';
import { projectRoot } from '../config/project-root';
import { type Logger, createLogger } from '../observability/logger';
import { createGateway } from './app';
import {
  type AuthConfig,
  type AuthEvent,
  type Authentication,
  DEVELOPMENT_TENANT,
  ROLES,
  type DevelopmentKey,
  assertSafeBind,
  authenticationFromConfig,
  createDevelopmentKey,
  createSecureGateway,
  createTenantResolvers,
  isLoopbackHost,
} from './auth';
import { createCodecServer } from './codec-server';
import { LOOPBACK_HOSTS } from './hardening';
import { createMediaBuyRouter } from './media-buys';
import { createReportingWebhookRouter } from './reporting-webhooks';
import { type WebhookReplayStore, createWebhookAuthenticator } from './webhook-verification';
import { createWebhookRouter } from './webhooks';

export interface MountOptions {
  client: Client;
  orchestrator: OrchestratorClient;
  mediaBuys: MediaBuyClient;
  sellers: SellerRegistry;
  runtime: RuntimeConfig;
  auth: AuthConfig;
  /** The data converter's codecs (payloadCodecs()), for the codec server. */
  codecs: PayloadCodec[];
  /** Where the development key's hash file goes; default `.data` of the project. */
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
  onEvent?: (event: AuthEvent) => void;
  /** Public keys of the notification signing key (config/notification-key.ts), served at /.well-known/jwks.json. */
  notificationJwks?: readonly AdcpJsonWebKey[];
  /** Rate limits, for tests that make many calls; default the secure gateway's. */
  principalRateLimit?: { burst: number; perSecond: number };
  /** RFC 9421 nonce store (openWebhookReplayStore: ADCP_REPLAY_STORE_URL); default this process's memory. */
  replayStore?: WebhookReplayStore;
  /** Where webhook refusals are logged (pino); default a gateway logger of its own. */
  logger?: Logger;
  /** Campaigns (#14): the sellers, discoveries and campaigns routers, mounted by createGateway. */
  campaignRouters?: express.Router[];
  /** Refuses a task the seller's capabilities do not offer before the operation starts (createGateway). */
  taskSupport?: (sellerId: string, task: string) => Promise<TaskRefusal | undefined>;
}

export interface MountedGateway {
  /** /v1, /codec and /healthz; also the webhooks unless they have their own listener. */
  api: express.Express;
  /** Webhooks and /healthz, when runtime.webhookListener is set. */
  webhooks?: express.Express;
  authentication: Authentication;
  /** Set when no authentication is configured and the gateway runs on loopback with a development key. */
  developmentKey?: DevelopmentKey & { issuedHere: boolean };
  /** Configuration the gateway runs with but should not: logged once at start, and listed in /healthz. */
  warnings: string[];
}

/**
 * Sellers whose webhook credential variable is unset (or too short): their webhooks are refused (401, as a bad
 * signature would be) until it is set. Said once at start and in /healthz rather than on every refused webhook.
 */
export function webhookWarnings(sellerRegistry: SellerRegistry, env: NodeJS.ProcessEnv = process.env): string[] {
  const warnings: string[] = [];
  for (const agent of sellerRegistry.sellers) {
    if (!agent.webhooks) continue;
    try {
      resolveWebhookCredentials(agent.webhooks, env, agent.id);
    } catch (error) {
      if (!(error instanceof WebhookAuthConfigError)) throw error;
      warnings.push(`${error.message} Until then its webhooks are refused (401).`);
    }
  }
  return warnings;
}

/** Authentication from the config, or (none configured, loopback only) the development key. */
export function gatewayAuthentication(options: {
  auth: AuthConfig;
  host: string;
  /** The API listener's port: each gateway on this machine keeps its own development key file. */
  port?: number;
  env?: NodeJS.ProcessEnv;
  dataDir?: string;
  onEvent?: (event: AuthEvent) => void;
}): { authentication: Authentication; developmentKey?: DevelopmentKey & { issuedHere: boolean } } {
  const env = options.env ?? process.env;
  const eventOptions = options.onEvent ? { onEvent: options.onEvent } : {};
  if (options.auth.apiKeysFile || options.auth.jwt) {
    const authentication = authenticationFromConfig(options.auth, eventOptions);
    assertSafeBind(options.host, authentication.configured);
    return { authentication };
  }
  // Nothing configured: a clear refusal off loopback, a development key on it.
  assertSafeBind(options.host, false);
  const passed = env.ADCP_API_KEY?.trim();
  const developmentKey = createDevelopmentKey({
    // The project's .data/ from api/ and from dist/app/api/ alike (the compiled gateway, scripts/gateway.cjs).
    dataDir: options.dataDir ?? path.join(projectRoot(), '.data'),
    fileName: `dev-api-keys-${options.port ?? 'default'}.json`,
    ...(passed ? { key: passed } : {}),
  });
  const authentication = authenticationFromConfig({ ...options.auth, apiKeysFile: developmentKey.file }, eventOptions);
  return { authentication, developmentKey: { ...developmentKey, issuedHere: !passed } };
}

/**
 * Who owns operations recorded without a tenant (started before tenants existed, or by backend code without a caller):
 * the development tenant when the gateway runs on its development key, else ADCP_UNTENANTED_TENANT, else nobody.
 */
export function untenantedTenantOf(auth: AuthConfig): string | undefined {
  return auth.apiKeysFile || auth.jwt ? auth.untenantedTenant : DEVELOPMENT_TENANT;
}

/** Host header values served: loopback, the public base URL's host, the bound host, ADCP_GATEWAY_ALLOWED_HOSTS. */
export function allowedHosts(runtime: RuntimeConfig): string[] {
  const bound = [runtime.gatewayHost, runtime.webhookListener?.host].filter(
    (host): host is string => !!host && !['0.0.0.0', '::', '[::]'].includes(host) && !isLoopbackHost(host),
  );
  return [
    ...LOOPBACK_HOSTS,
    ...(runtime.publicBaseUrl ? [new URL(runtime.publicBaseUrl).host] : []),
    ...bound,
    ...runtime.allowedHosts,
  ];
}

export function mountGateway(options: MountOptions): MountedGateway {
  const { client, runtime, sellers: sellerRegistry } = options;
  const namespace = client.options.namespace;
  const { authentication, developmentKey } = gatewayAuthentication({
    auth: options.auth,
    host: runtime.gatewayHost,
    port: runtime.gatewayPort,
    ...(options.env ? { env: options.env } : {}),
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.onEvent ? { onEvent: options.onEvent } : {}),
  });
  // One authenticator (one nonce replay store) for task and reporting webhooks alike.
  const logger = options.logger ?? createLogger({ service: 'gateway' });
  const authenticator = createWebhookAuthenticator(options.replayStore ? { replayStore: options.replayStore } : {});
  // The webhook receivers read credentials from the process's environment.
  const warnings = webhookWarnings(sellerRegistry);
  const gateway = createGateway({
    warnings,
    orchestrator: options.orchestrator,
    webUiUrl: runtime.webUiUrl,
    namespace,
    webhookRouter: createWebhookRouter({
      client,
      sellers: sellerRegistry,
      authenticator,
      publicBaseUrl: runtime.publicBaseUrl,
      log: (line) => logger.warn({ webhook: 'task' }, line),
    }),
    reportingWebhookRouter: createReportingWebhookRouter({
      client,
      sellers: sellerRegistry,
      authenticator,
      publicBaseUrl: runtime.publicBaseUrl,
      log: (line) => logger.warn({ webhook: 'reporting' }, line),
    }),
    mediaBuyRouter: createMediaBuyRouter({ mediaBuys: options.mediaBuys, webUiUrl: runtime.webUiUrl, namespace }),
    ...(options.campaignRouters ? { campaignRouters: options.campaignRouters } : {}),
    ...(options.taskSupport ? { taskSupport: options.taskSupport } : {}),
    ...(options.notificationJwks ? { notificationJwks: options.notificationJwks } : {}),
  });
  const untenantedTenant = untenantedTenantOf(options.auth);
  const common = {
    gateway,
    authentication,
    tenantOf: createTenantResolvers({ client, ...(untenantedTenant ? { untenantedTenant } : {}) }),
    allowedHosts: allowedHosts(runtime),
    hsts: runtime.publicBaseUrl?.startsWith('https:') ?? false,
    ...(options.onEvent ? { onEvent: options.onEvent } : {}),
    principalRateLimit: options.principalRateLimit ?? runtime.rateLimits.principal,
    addressRateLimit: runtime.rateLimits.address,
  };
  const codecServer = createCodecServer({
    codecs: options.codecs,
    authentication,
    corsOrigins: runtime.codecCorsOrigins,
    namespaces: [namespace],
    // On the development key (loopback only) the dev server's Web UI, which sends no credentials, is the developer.
    ...(developmentKey
      ? {
          webUiPrincipal: {
            id: developmentKey.principal,
            tenant: developmentKey.tenant,
            roles: new Set(ROLES),
            via: { kind: 'api-key' as const, keyId: 'web-ui' },
          },
        }
      : {}),
    ...(options.onEvent ? { onEvent: options.onEvent } : {}),
  });
  const split = runtime.webhookListener !== undefined;
  return {
    api: createSecureGateway({ ...common, codecServer, serve: split ? 'api' : 'all' }),
    ...(split ? { webhooks: createSecureGateway({ ...common, serve: 'webhooks' }) } : {}),
    authentication,
    ...(developmentKey ? { developmentKey } : {}),
    warnings,
  };
}
