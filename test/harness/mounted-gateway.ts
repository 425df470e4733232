/**
 * The gateway exactly as api/main.ts mounts it (api/mount.ts: createGateway behind createSecureGateway, the codec
 * server, optionally a separate webhook listener), on hardened servers on loopback, over a test stack's client.
 * API keys for every role of each tenant asked for are issued into a temporary keys file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { PayloadCodec } from '@temporalio/common';
import { ROLES, type Role, generateApiKey, loadAuthConfig, writeKeysFile } from '../../api/auth';
import { createHardenedServer } from '../../api/hardening';
import { mountGateway } from '../../api/mount';
import { MediaBuyClient } from '../../client/media-buy-client';
import type { SellerRegistry } from '../../config/sellers';
import { loadRuntimeConfig } from '../../config/runtime';
import type { TestStack } from './temporal';

export interface MountedTestGateway {
  /** The API listener (/v1, /codec, /healthz; webhooks too unless split). */
  apiUrl: string;
  /** The webhook listener when split, else apiUrl. */
  webhookUrl: string;
  /** `keys["acme/buyer"]`: an API key holding that one role in that tenant; `keys["acme/all"]` holds every role. */
  keys: Record<string, string>;
  /** Raw port numbers, for requests with a forged Host header. */
  apiPort: number;
  close(): Promise<void>;
}

/** A server listening on a free loopback port, whose handler is attached later (the stack needs its URL first). */
export async function reserveServer(): Promise<{ server: http.Server; url: string; port: number }> {
  const server = createHardenedServer((_req, res) => {
    res.statusCode = 503;
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { server, url: `http://127.0.0.1:${port}`, port };
}

function attach(server: http.Server, app: http.RequestListener): void {
  server.removeAllListeners('request');
  server.on('request', app);
}

export async function mountTestGateway(options: {
  stack: TestStack;
  sellers: SellerRegistry;
  tenants: string[];
  codecs: PayloadCodec[];
  /** Servers reserved before the stack started (their URLs went into publicBaseUrl); reserved here otherwise. */
  apiServer?: { server: http.Server; url: string; port: number };
  webhookServer?: { server: http.Server; url: string; port: number };
  /** Serve webhooks on their own listener. */
  split?: boolean;
  publicBaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  /** The per-principal rate limit; default one no test reaches (the limits have their own tests). */
  principalRateLimit?: { burst: number; perSecond: number };
  /** The operations client the gateway forwards to; default the stack's. */
  orchestrator?: TestStack['orchestrator'];
  /** Public keys of a notification signing key, served at /.well-known/jwks.json. */
  notificationJwks?: Parameters<typeof mountGateway>[0]['notificationJwks'];
  /** The sellers, discoveries and campaigns routers, and the task-support check, as api/main.ts passes them. */
  campaignRouters?: Parameters<typeof mountGateway>[0]['campaignRouters'];
  taskSupport?: Parameters<typeof mountGateway>[0]['taskSupport'];
}): Promise<MountedTestGateway> {
  const dir = mkdtempSync(path.join(tmpdir(), 'adcp-mounted-'));
  const file = path.join(dir, 'keys.json');
  const keys: Record<string, string> = {};
  const entries = [];
  for (const tenant of options.tenants) {
    for (const role of ROLES as readonly Role[]) {
      const issued = generateApiKey(`${tenant}-${role}`);
      keys[`${tenant}/${role}`] = issued.key;
      entries.push({
        key_id: `${tenant}-${role}`,
        hash: issued.hash,
        principal: `${role}@${tenant}`,
        tenant,
        roles: [role],
      });
    }
    const all = generateApiKey(`${tenant}-all`);
    keys[`${tenant}/all`] = all.key;
    entries.push({ key_id: `${tenant}-all`, hash: all.hash, principal: `all@${tenant}`, tenant, roles: [...ROLES] });
  }
  writeKeysFile(file, { keys: entries });

  const api = options.apiServer ?? (await reserveServer());
  const webhooks = options.split ? (options.webhookServer ?? (await reserveServer())) : undefined;
  const env: NodeJS.ProcessEnv = {
    ADCP_TASK_QUEUE: options.stack.taskQueue,
    ADCP_GATEWAY_PORT: String(api.port),
    ...(webhooks ? { ADCP_WEBHOOK_PORT: String(webhooks.port) } : {}),
    ...(options.publicBaseUrl ? { ADCP_PUBLIC_BASE_URL: options.publicBaseUrl } : {}),
    ADCP_API_KEYS_FILE: file,
    ...options.env,
  };
  const mounted = mountGateway({
    client: options.stack.client,
    orchestrator: options.orchestrator ?? options.stack.orchestrator,
    mediaBuys: new MediaBuyClient({
      client: options.stack.client,
      taskQueue: options.stack.taskQueue,
      knownSeller: (id) => options.sellers.has(id),
    }),
    sellers: options.sellers,
    runtime: loadRuntimeConfig(env),
    auth: loadAuthConfig(env),
    codecs: options.codecs,
    env,
    // Tests make many calls in a row; the limits themselves are covered by their own tests.
    principalRateLimit: options.principalRateLimit ?? { burst: 10_000, perSecond: 10_000 },
    ...(options.notificationJwks ? { notificationJwks: options.notificationJwks } : {}),
    ...(options.campaignRouters ? { campaignRouters: options.campaignRouters } : {}),
    ...(options.taskSupport ? { taskSupport: options.taskSupport } : {}),
  });
  attach(api.server, mounted.api);
  if (webhooks && mounted.webhooks) attach(webhooks.server, mounted.webhooks);
  return {
    apiUrl: api.url,
    webhookUrl: webhooks?.url ?? api.url,
    keys,
    apiPort: api.port,
    async close() {
      await Promise.all(
        [api.server, webhooks?.server].map(
          (server) =>
            new Promise((resolve) => {
              if (!server) return resolve(undefined);
              server.closeAllConnections();
              server.close(resolve);
            }),
        ),
      );
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
