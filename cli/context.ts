/**
 * What every CLI command shares: the connection to Temporal (the same environment variables as the worker), the
 * seller list, the output mode, and the mapping from errors to exit codes.
 */
import { readFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { InvalidArgumentError } from 'commander';
import { type SellerRegistry, ConfigError, loadSellers, resolveSellersFile } from '../config/sellers';
import { loadRuntimeConfig } from '../config/runtime';
import { temporalSettings } from '../config/temporal-connection';
import {
  IdempotencyConflictError,
  OperationEndedError,
  OperationNotFoundError,
  OperationRejectedError,
  OperationRequestError,
  SellerNotFoundError,
} from '../client/operation-errors';
import { OrchestratorClient } from '../client/orchestrator-client';
import { ENCRYPTED_ENCODING, PayloadDecryptionError } from '../client/encryption-codec';
import { dataConverter } from '../client/payload-codec';
import { type PendingActivityView, pendingActivityView } from '../client/pending-activity';
import { isTemporalUnavailable } from '../client/temporal-errors';
import { connectGrpc } from '../config/grpc-connection';

export const EXIT = {
  OK: 0,
  /** The operation ended failed, rejected or canceled (status, watch), or it refused the request. */
  FAILED: 1,
  USAGE: 2,
  NOT_FOUND: 3,
  TEMPORAL_UNAVAILABLE: 4,
} as const;

export const EXIT_CODES_HELP = `
Exit codes:
  0  ok (for status and watch: the operation is running or completed)
  1  the operation ended failed, rejected or canceled (status, watch), or it refused the request (answer, cancel)
  2  usage or configuration error (unknown option, invalid filter, malformed JSON, bad agents file)
  3  not found (no such operation or seller)
  4  Temporal unavailable (TEMPORAL_ADDRESS unreachable or not answering)

Environment:
  TEMPORAL_ADDRESS    Temporal frontend (default 127.0.0.1:7233); TEMPORAL_NAMESPACE (default "default"),
                      TEMPORAL_API_KEY, TEMPORAL_TLS* and TEMPORAL_PROFILE work as in every Temporal SDK
  ADCP_TASK_QUEUE     the workers' task queue (default "adcp-operations")
  ADCP_AGENTS_FILE    the seller list (default agents.json, else agents.example.json)`;

/** A failure the CLI reports with its own exit code and message. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export interface GlobalOptions {
  json?: boolean;
  address?: string;
  namespace?: string;
  taskQueue?: string;
}

/** The seller list the worker uses: ADCP_AGENTS_FILE, else agents.json, else agents.example.json (as `npm start`). */
export function agentsFile(env: NodeJS.ProcessEnv = process.env): string {
  return resolveSellersFile(env).file;
}

export function loadConfiguredSellers(env: NodeJS.ProcessEnv = process.env): SellerRegistry {
  return loadSellers(agentsFile(env));
}

/** The seller list when it can be read; commands that only check ids go on without it (the worker checks too). */
function sellersIfReadable(): SellerRegistry | undefined {
  try {
    return loadConfiguredSellers();
  } catch {
    return undefined;
  }
}

export interface Session {
  orchestrator: OrchestratorClient;
  client: Client;
  taskQueue: string;
  close(): Promise<void>;
}

/** Connects to Temporal; an unreachable server is exit code 4 within a few seconds, not a hang. */
export async function connect(options: GlobalOptions, env: NodeJS.ProcessEnv = process.env): Promise<Session> {
  let settings: ReturnType<typeof temporalSettings>;
  let taskQueue: string;
  try {
    settings = temporalSettings(env);
    taskQueue = options.taskQueue ?? loadRuntimeConfig(env).taskQueue;
  } catch (error) {
    throw new CliError(`Invalid configuration: ${(error as Error).message}`, EXIT.USAGE);
  }
  const address = options.address ?? settings.connectionOptions.address;
  const namespace = options.namespace ?? settings.namespace;
  let connection: Connection;
  try {
    connection = await connectGrpc({ ...settings.connectionOptions, address, connectTimeout: '5s' });
  } catch (error) {
    throw new CliError(
      `Temporal at ${address} is unavailable: ${(error as Error).message}. Start it (npm start) or set TEMPORAL_ADDRESS.`,
      EXIT.TEMPORAL_UNAVAILABLE,
    );
  }
  const client = new Client({ connection, namespace, dataConverter: dataConverter() });
  const sellers = sellersIfReadable();
  const orchestrator = new OrchestratorClient({
    client,
    taskQueue,
    ...(sellers ? { knownSeller: (id: string) => sellers.has(id) } : {}),
  });
  return { orchestrator, client, taskQueue, close: () => connection.close() };
}

/** Runs a command body with a Temporal session, closing it whatever happens. */
export async function withSession<T>(options: GlobalOptions, run: (session: Session) => Promise<T>): Promise<T> {
  const session = await connect(options);
  try {
    return await run(session);
  } finally {
    await session.close().catch(() => undefined);
  }
}

/**
 * Whether the error is a payload this process cannot decode: encrypted (ADCP_PAYLOAD_KEYS) with a key it does not
 * hold, or with no keys at all (Temporal's converter then meets the `binary/encrypted` encoding).
 */
function isUnreadablePayload(error: unknown): boolean {
  for (let cause = error, depth = 0; cause && depth < 5; cause = (cause as { cause?: unknown }).cause, depth++) {
    if (cause instanceof PayloadDecryptionError) return true;
    const message = (cause as { message?: unknown }).message;
    if (typeof message === 'string' && message.includes(`Unknown encoding: ${ENCRYPTED_ENCODING}`)) return true;
  }
  return false;
}

/** The exit code and message for an error a command threw. */
export function exitFor(error: unknown): { code: number; message: string } {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof CliError) return { code: error.exitCode, message };
  // A configuration error (exit 2): the operator runs without the keys the workers encrypt with.
  if (isUnreadablePayload(error))
    return {
      code: EXIT.USAGE,
      message: `The operation's payloads are encrypted and this CLI cannot decrypt them (${message}). Set ADCP_PAYLOAD_KEYS to the keys the workers use, and run it again.`,
    };
  if (error instanceof OperationNotFoundError || error instanceof SellerNotFoundError)
    return { code: EXIT.NOT_FOUND, message };
  if (error instanceof OperationRequestError || error instanceof ConfigError) return { code: EXIT.USAGE, message };
  if (
    error instanceof IdempotencyConflictError ||
    error instanceof OperationEndedError ||
    error instanceof OperationRejectedError
  ) {
    return { code: EXIT.FAILED, message };
  }
  if (isTemporalUnavailable(error)) {
    return {
      code: EXIT.TEMPORAL_UNAVAILABLE,
      message: `Temporal did not answer in time (${message}); is it running, and does a worker poll the task queue?`,
    };
  }
  return { code: EXIT.FAILED, message };
}

/** Reads a JSON object from an argument: inline JSON, or `@path` for a file (`@-` for stdin). */
export async function readJsonObject(value: string, what: string): Promise<Record<string, unknown>> {
  let text = value;
  if (value.startsWith('@')) {
    const file = value.slice(1);
    try {
      text = file === '-' ? await readStdin() : await readFile(path.resolve(file), 'utf8');
    } catch (error) {
      throw new CliError(`Cannot read ${what} from ${file}: ${(error as Error).message}.`, EXIT.USAGE);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new CliError(
      `${what} is not valid JSON (${(error as Error).message}); pass a JSON object, or @file.json.`,
      EXIT.USAGE,
    );
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new CliError(`${what} must be a JSON object, e.g. '{"brief": "..."}'.`, EXIT.USAGE);
  }
  return parsed as Record<string, unknown>;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}

/** Writes a JSON document on one line per value (watch writes one per event). */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

export function print(line = ''): void {
  process.stdout.write(`${line}\n`);
}

/** Who is asking, for the audit fields of cancel, answer and reconcile. */
export function defaultRequester(): string {
  try {
    return `${userInfo().username}@cli`;
  } catch {
    return 'adcp-orchestrator-cli';
  }
}

export function positiveInteger(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new InvalidArgumentError('must be a whole number of at least 1.');
  return Number(value);
}

/** The calls in flight of a running operation; an empty list when Temporal cannot say. */
export async function pendingActivities(client: Client, operationId: string): Promise<PendingActivityView[]> {
  try {
    const description = await client.withDeadline(Date.now() + 3_000, () =>
      client.workflow.getHandle(operationId).describe(),
    );
    return pendingActivityView(description);
  } catch {
    return [];
  }
}
