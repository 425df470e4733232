import { Client, type ClientInterceptors } from '@temporalio/client';
import { type ConnectClientOptions, connectTemporal } from '../config/temporal-connection';
import { dataConverter } from './payload-codec';

/**
 * The orchestrator's Temporal Client for this process: the connection the environment names
 * (config/temporal-connection.ts), its namespace, and the data converter every orchestrator Client and Worker shares.
 */
export async function connectClient(
  env: NodeJS.ProcessEnv = process.env,
  /** Client interceptors, e.g. tracing's (observability/tracing.ts). */
  interceptors?: ClientInterceptors,
  options: ConnectClientOptions = {},
): Promise<Client> {
  const { connection, namespace } = await connectTemporal(env, options);
  return new Client({
    connection,
    namespace,
    dataConverter: dataConverter(env),
    ...(interceptors ? { interceptors } : {}),
  });
}
