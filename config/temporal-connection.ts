import { type ConnectionLike, isGrpcServiceError } from '@temporalio/client';
import type { Logger as TemporalLogger } from '@temporalio/common';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { NativeConnection } from '@temporalio/worker';
import { z } from 'zod';
import { ConfigError } from './errors';
import { connectGrpc } from './grpc-connection';

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

/**
 * How a client talks to Temporal: `grpc-js` (@temporalio/client's Connection, pure JavaScript) or `native`
 * (@temporalio/worker's NativeConnection: the Rust core's gRPC client, the workers' transport). The gateway picks one
 * with ADCP_GATEWAY_TEMPORAL_TRANSPORT (README, "Gateway CPU per webhook"); everything else uses grpc-js.
 */
export const TEMPORAL_TRANSPORTS = ['native', 'grpc-js'] as const;
export type TemporalTransport = (typeof TEMPORAL_TRANSPORTS)[number];

/** The gateway's default: measured cheaper per signal (README, "Gateway CPU per webhook"). */
export const DEFAULT_GATEWAY_TEMPORAL_TRANSPORT: TemporalTransport = 'native';

const transportSchema = z.enum(TEMPORAL_TRANSPORTS);

/** ADCP_GATEWAY_TEMPORAL_TRANSPORT, or the default; anything else fails the start with what is accepted. */
export function gatewayTemporalTransport(env: NodeJS.ProcessEnv = process.env): TemporalTransport {
  const raw = env.ADCP_GATEWAY_TEMPORAL_TRANSPORT?.trim();
  if (!raw) return DEFAULT_GATEWAY_TEMPORAL_TRANSPORT;
  const parsed = transportSchema.safeParse(raw.toLowerCase());
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    `ADCP_GATEWAY_TEMPORAL_TRANSPORT is ${JSON.stringify(raw.slice(0, 40))}; expected one of ${TEMPORAL_TRANSPORTS.join(', ')} (default ${DEFAULT_GATEWAY_TEMPORAL_TRANSPORT}).`,
  );
}

export interface ConnectClientOptions {
  /** Default grpc-js; the gateway passes gatewayTemporalTransport(). */
  transport?: TemporalTransport;
  /**
   * With the native transport: where the Rust core's own lines go (the gateway passes its pino logger as
   * TemporalPinoLogger), unless this process installed Temporal's Runtime already. Without it they go to stderr in
   * the core's format.
   */
  runtimeLogger?: TemporalLogger;
}

/**
 * A connection to the Temporal the environment names (temporalSettings), over the transport asked for, and the
 * namespace to use on it. client/connect.ts makes the orchestrator's Client of it.
 */
export async function connectTemporal(
  env: NodeJS.ProcessEnv = process.env,
  options: ConnectClientOptions = {},
): Promise<{ connection: ConnectionLike; namespace: string }> {
  const { connectionOptions, namespace } = temporalSettings(env);
  const connection: ConnectionLike =
    options.transport === 'native'
      ? await connectNative(connectionOptions, options.runtimeLogger)
      : await connectGrpc(connectionOptions);
  return { connection, namespace };
}

/** gRPC status codes (grpc/status.proto), as client/temporal-errors.ts reads them. */
const UNKNOWN = 2;
const DEADLINE_EXCEEDED = 4;
const UNAVAILABLE = 14;

/**
 * The Rust core's client, answering as grpc-js does where the gateway relies on it (client/temporal-errors.ts):
 *   - a server out of reach is UNAVAILABLE (the core says UNKNOWN "transport error"), so the gateway answers 503;
 *   - `withDeadline` bounds the whole call, retries included (the core retries out of reach servers past it), so a
 *     seller hears 503 at the gateway's deadline, not seconds later.
 * Everything else (other codes, WorkflowNotFoundError, the Client's API) is the NativeConnection's own.
 */
async function connectNative(
  connectionOptions: ReturnType<typeof temporalSettings>['connectionOptions'],
  logger: TemporalLogger | undefined,
): Promise<ConnectionLike> {
  // Loaded only when asked for: @temporalio/worker brings the Rust core (tens of MiB of RSS).
  const { NativeConnection: Native, Runtime } = await import('@temporalio/worker');
  if (logger) {
    try {
      Runtime.install({ logger, telemetryOptions: { logging: { forward: {} } } });
    } catch {
      // Installed already (a process that is also a worker, or tests): its logger stays.
    }
  }
  const native = await Native.connect(connectionOptions);
  Object.defineProperty(native, 'workflowService', {
    value: withGrpcJsFailures(native.workflowService, () => native.callContextStorage.getStore()?.deadline),
  });
  return native;
}

type ServiceCall = (request: unknown) => Promise<unknown>;

function withGrpcJsFailures<S extends object>(service: S, deadlineOf: () => number | Date | undefined): S {
  const wrapped = new Map<PropertyKey, ServiceCall>();
  return new Proxy(service, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || property === 'constructor') return value;
      let call = wrapped.get(property);
      if (call === undefined) {
        const method = (value as ServiceCall).bind(target);
        call = (request) => bounded(method(request).catch(rethrowAsGrpcJs), deadlineOf());
        wrapped.set(property, call);
      }
      return call;
    },
  });
}

function rethrowAsGrpcJs(error: unknown): never {
  const failure = error as { code?: unknown; message?: unknown; details?: unknown; metadata?: unknown };
  if (
    isGrpcServiceError(error) &&
    failure.code === UNKNOWN &&
    typeof failure.message === 'string' &&
    failure.message.startsWith('transport error')
  ) {
    failure.code = UNAVAILABLE;
  }
  throw error;
}

function bounded<T>(call: Promise<T>, deadline: number | Date | undefined): Promise<T> {
  if (deadline === undefined) return call;
  const remainingMs = +deadline - Date.now();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(grpcError(DEADLINE_EXCEEDED, 'Deadline exceeded')), Math.max(0, remainingMs));
  });
  // The core's own attempt goes on until its retries end; its late answer is dropped.
  call.catch(() => undefined);
  return Promise.race([call, expired]).finally(() => clearTimeout(timer));
}

/**
 * An error isGrpcServiceError() recognises, shaped as grpc-js makes them: numeric `code`, `details`, and `metadata`
 * with the one method the Temporal client reads (`get`, for rich status details: there are none here).
 */
function grpcError(code: number, details: string): Error {
  return Object.assign(new Error(`${code} ${details}`), { code, details, metadata: { get: (): Buffer[] => [] } });
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
