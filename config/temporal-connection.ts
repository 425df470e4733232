import { Client, type ClientInterceptors, Connection } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { NativeConnection } from '@temporalio/worker';
import { dataConverter } from '../client/payload-codec';

/**
 * Temporal connection settings come from the usual Temporal environment variables (TEMPORAL_ADDRESS,
 * TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, or a TEMPORAL_PROFILE in the config file),
 * so the same code runs against the embedded dev server, a cluster or Temporal Cloud.
 */
export function temporalSettings(env: NodeJS.ProcessEnv = process.env) {
  const { connectionOptions, namespace } = loadClientConnectConfig({
    overrideEnvVars: Object.fromEntries(
      Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined),
    ),
  });
  return {
    connectionOptions: { ...connectionOptions, address: connectionOptions.address ?? '127.0.0.1:7233' },
    namespace: namespace ?? 'default',
  };
}

export async function connectClient(
  env: NodeJS.ProcessEnv = process.env,
  /** Client interceptors, e.g. tracing's (observability/tracing.ts). */
  interceptors?: ClientInterceptors,
): Promise<Client> {
  const { connectionOptions, namespace } = temporalSettings(env);
  const connection = await Connection.connect(connectionOptions);
  return new Client({
    connection,
    namespace,
    dataConverter: dataConverter(),
    ...(interceptors ? { interceptors } : {}),
  });
}

export async function connectWorker(
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ connection: NativeConnection; namespace: string }> {
  const { connectionOptions, namespace } = temporalSettings(env);
  // Loaded here, not at the top: the gateway, the CLI and the packed client use this module too, and
  // @temporalio/worker (its native core, webpack) is only the worker's.
  const { NativeConnection: Native } = await import('@temporalio/worker');
  const connection = await Native.connect(connectionOptions);
  return { connection, namespace };
}
