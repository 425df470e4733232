/**
 * Runs the Temporal dev server (`temporal server start-dev`) for `npm start`, the demo and the tests, with the
 * project's search attributes registered, and registers them on external servers (ensureSearchAttributes).
 *
 * Not the SDK's TestWorkflowEnvironment.createLocal(): its launcher gives the server 5 s to come up, too short
 * on a 2-core machine under test load, and it cannot keep state across a restart.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection, isGrpcServiceError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import {
  SEARCH_ATTRIBUTES,
  type SearchAttributeDefinition,
  type SearchAttributeTypeName,
} from '../../config/search-attributes';
import { resolveTemporalCli } from './temporal-binaries';
import { connectGrpc } from '../../config/grpc-connection';

export interface DevServerOptions {
  /** Address the gRPC frontend (and the UI) bind to. Default 127.0.0.1. */
  ip?: string;
  /** gRPC port. Default 7233; tests pass `await freePort()`. */
  port?: number;
  /** Web UI port. Default: the CLI's own, `port` + 1000. Ignored when `headless`. */
  uiPort?: number;
  /** No Web UI (tests). Default false. */
  headless?: boolean;
  /**
   * The codec server the Web UI asks to decode payloads (`--ui-codec-endpoint`), e.g. the gateway's `/codec` when
   * payloads are encrypted; the browser calls it directly, so it must admit the UI's origin (CORS). Ignored when
   * `headless`.
   */
  uiCodecEndpoint?: string;
  /**
   * SQLite file that keeps workflows across restarts (its folder is created). Without one, state lives
   * in memory and dies with the process.
   */
  dbFilename?: string;
  /**
   * SQLite pragmas, used only with `dbFilename`. Default journal_mode=WAL, synchronous=NORMAL: in WAL mode
   * NORMAL skips the fsync on each commit (about as fast as OFF) yet survives a killed server and keeps the
   * file consistent; only an OS crash or power cut can lose the last commits. OFF could corrupt the file then.
   */
  sqlitePragmas?: Record<string, string>;
  /** Namespace to create and wait for. Default 'default'. */
  namespace?: string;
  /** Server log level. Default 'warn'. */
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** Default SEARCH_ATTRIBUTES. */
  searchAttributes?: readonly SearchAttributeDefinition[];
  /** Extra `KEY=JSON` dynamic config values, on top of the project's. */
  dynamicConfig?: Record<string, unknown>;
  /** Default resolveTemporalCli(). */
  cliPath?: string;
  /** How long to wait for the namespace to answer. Default 60 s. */
  startTimeoutMs?: number;
  /** How long stop() waits after SIGTERM before SIGKILL. Default 10 s. */
  stopGraceMs?: number;
  /** Copy the server's output to this process's stderr (it is always kept for error messages). Default false. */
  echoOutput?: boolean;
}

export interface DevServer {
  /** `host:port` of the gRPC frontend, for Connection.connect / NativeConnection.connect. */
  address: string;
  port: number;
  /** Undefined when headless. */
  uiPort?: number;
  namespace: string;
  dbFilename?: string;
  child: ChildProcess;
  /** Sends `signal` (default SIGTERM), then SIGKILL after the grace period; resolves once the process has exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Dynamic config the project relies on (workflow updates; async-accepted updates from the API). */
const PROJECT_DYNAMIC_CONFIG: Record<string, unknown> = {
  'frontend.enableUpdateWorkflowExecution': true,
  'frontend.enableUpdateWorkflowExecutionAsyncAccepted': true,
};

const DEFAULT_SQLITE_PRAGMAS = { journal_mode: 'WAL', synchronous: 'NORMAL' };
const OUTPUT_HEAD_CHARS = 2000;
const OUTPUT_TAIL_CHARS = 4000;
const POLL_INTERVAL_MS = 200;
/** Starts made when the server dies at start-up on a port it picked for itself (see `startDevServer`). */
const START_ATTEMPTS = 3;
/**
 * Output of a server that died binding a port: the CLI picks free ports for its internal services (history,
 * matching, worker, metrics) and another process can take one before the server binds it. It then panics.
 */
const LOST_PORT_RACE = /address already in use|bind: /;

/** The server exited before it was ready; `output` is what it printed (its head and tail). */
export class DevServerExitedEarly extends Error {
  constructor(
    message: string,
    readonly output: string,
  ) {
    super(message);
    this.name = 'DevServerExitedEarly';
  }
}

/**
 * Starts the server and waits until its namespace answers. A server that dies at start-up because another process
 * took one of the ports it picked for itself is started again (up to three times in all); any other early exit, or a
 * timeout, is reported at once with the server's own output.
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOnce(options);
    } catch (error) {
      const lostRace = error instanceof DevServerExitedEarly && LOST_PORT_RACE.test(error.output);
      if (!lostRace || attempt >= START_ATTEMPTS) throw error;
    }
  }
}

async function startOnce(options: DevServerOptions): Promise<DevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const port = options.port ?? 7233;
  const namespace = options.namespace ?? 'default';
  const headless = options.headless ?? false;
  const uiPort = headless ? undefined : (options.uiPort ?? port + 1000);
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const stopGraceMs = options.stopGraceMs ?? 10_000;
  const cliPath = options.cliPath ?? resolveTemporalCli();

  // Another server on the port would answer the readiness check in place of ours.
  await assertPortFree(port, ip);
  if (uiPort !== undefined) await assertPortFree(uiPort, ip);

  const args = ['server', 'start-dev', '--ip', ip, '--port', String(port), '--namespace', namespace];
  args.push('--log-level', options.logLevel ?? 'warn');
  if (headless) args.push('--headless');
  else args.push('--ui-port', String(uiPort));
  if (!headless && options.uiCodecEndpoint) args.push('--ui-codec-endpoint', options.uiCodecEndpoint);
  let dbFilename: string | undefined;
  if (options.dbFilename) {
    dbFilename = resolve(options.dbFilename);
    mkdirSync(dirname(dbFilename), { recursive: true });
    args.push('--db-filename', dbFilename);
    for (const [pragma, value] of Object.entries(options.sqlitePragmas ?? DEFAULT_SQLITE_PRAGMAS)) {
      args.push('--sqlite-pragma', `${pragma}=${value}`);
    }
  }
  for (const [key, value] of Object.entries({ ...PROJECT_DYNAMIC_CONFIG, ...options.dynamicConfig })) {
    args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  }
  for (const { name, type } of options.searchAttributes ?? SEARCH_ATTRIBUTES) {
    args.push('--search-attribute', `${name}=${type}`);
  }

  const child = spawn(cliPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  // The head keeps the first error (a Go panic's message comes before its long stack), the tail the last words.
  let head = '';
  let tail = '';
  let dropped = false;
  const keep = (chunk: Buffer) => {
    let text = chunk.toString('utf8');
    if (head.length < OUTPUT_HEAD_CHARS) {
      const room = OUTPUT_HEAD_CHARS - head.length;
      head += text.slice(0, room);
      text = text.slice(room);
    }
    const joined = tail + text;
    if (joined.length > OUTPUT_TAIL_CHARS) dropped = true;
    tail = joined.slice(-OUTPUT_TAIL_CHARS);
    if (options.echoOutput) process.stderr.write(chunk);
  };
  const output = () => (tail ? `${head}${dropped ? '\n[…]\n' : ''}${tail}` : head).trim() || '(none)';
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);

  let spawnError: Error | undefined;
  const exited = new Promise<void>((resolveExit) => {
    child.once('exit', () => resolveExit());
    child.once('error', (error) => {
      spawnError = error;
      resolveExit();
    });
  });
  // A test runner or script that exits without stop() must not leave a server behind.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  void exited.then(() => process.removeListener('exit', killOnExit));

  const hasExited = () => child.exitCode !== null || child.signalCode !== null || spawnError !== undefined;
  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<void> => {
    if (hasExited()) return;
    child.kill(signal);
    const escalate = setTimeout(() => child.kill('SIGKILL'), stopGraceMs);
    try {
      await exited;
    } finally {
      clearTimeout(escalate);
    }
  };

  const address = `${ip}:${port}`;
  const describe = () => `\`${cliPath} ${args.join(' ')}\``;
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (hasExited()) {
      const how = spawnError
        ? `could not start (${spawnError.message})`
        : `exited (code ${child.exitCode}, signal ${child.signalCode})`;
      throw new DevServerExitedEarly(
        `Temporal dev server ${how} before it was ready.\nCommand: ${describe()}\nOutput:\n${output()}`,
        output(),
      );
    }
    if (await namespaceAnswers(address, namespace)) break;
    if (Date.now() > deadline) {
      await stop('SIGKILL');
      throw new Error(
        `Temporal dev server did not answer on ${address} (namespace ${namespace}) within ${startTimeoutMs} ms; killed it. ` +
          `Raise startTimeoutMs if the machine is busy.\nCommand: ${describe()}\nOutput:\n${output()}`,
      );
    }
    await sleep(POLL_INTERVAL_MS);
  }
  return { address, port, uiPort, namespace, dbFilename, child, stop };
}

/** True once the frontend answers and the namespace exists; false while it is still coming up. */
async function namespaceAnswers(address: string, namespace: string): Promise<boolean> {
  const [host, port] = splitAddress(address);
  if (!(await canConnect(port, host))) return false;
  let connection: Connection | undefined;
  try {
    connection = await connectGrpc({ address, connectTimeout: 2_000 });
    await connection.workflowService.describeNamespace({ namespace });
    return true;
  } catch {
    return false;
  } finally {
    await connection?.close();
  }
}

/** A port the OS considers free right now (bound to 0, then released; another process could still take it). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port ? resolvePort(port) : reject(new Error('Could not read the bound port.'))));
    });
  });
}

/** Resolves once something accepts TCP connections on host:port; rejects after timeoutMs. */
export async function waitForPort(port: number, host = '127.0.0.1', timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await canConnect(port, host))) {
    if (Date.now() > deadline)
      throw new Error(`Nothing accepted connections on ${host}:${port} within ${timeoutMs} ms.`);
    await sleep(POLL_INTERVAL_MS);
  }
}

function canConnect(port: number, host: string): Promise<boolean> {
  return new Promise((resolveConnect) => {
    const socket = createConnection({ port, host });
    const done = (ok: boolean) => {
      socket.destroy();
      resolveConnect(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function assertPortFree(port: number, host: string): Promise<void> {
  const free = await new Promise<boolean>((resolveFree) => {
    const server = createServer();
    server.once('error', () => resolveFree(false));
    server.listen(port, host, () => server.close(() => resolveFree(true)));
  });
  if (!free) {
    throw new Error(
      `Port ${port} on ${host} is already in use (another Temporal server?). Stop it, or start the dev server on another port.`,
    );
  }
}

function splitAddress(address: string): [string, number] {
  const index = address.lastIndexOf(':');
  return [address.slice(0, index), Number(address.slice(index + 1))];
}

const { IndexedValueType } = temporal.api.enums.v1;
const INDEXED_VALUE_TYPES: Record<SearchAttributeTypeName, temporal.api.enums.v1.IndexedValueType> = {
  Text: IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
  Keyword: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  Int: IndexedValueType.INDEXED_VALUE_TYPE_INT,
  Double: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
  Bool: IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
  Datetime: IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
  KeywordList: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
};
const GRPC_ALREADY_EXISTS = 6;

/**
 * Registers the project's search attributes on a server started without them (TEMPORAL_ADDRESS pointing at a
 * cluster, or temporal-dev.yml before its one-shot service ran). Idempotent; returns the names it added.
 * Throws if an attribute exists with another type: workflows would fail to upsert it.
 */
export async function ensureSearchAttributes(
  connection: Connection,
  namespace: string,
  attributes: readonly SearchAttributeDefinition[] = SEARCH_ATTRIBUTES,
  timeoutMs = 30_000,
): Promise<string[]> {
  const existing = await listCustomSearchAttributes(connection, namespace);
  const conflicts = attributes.filter(
    ({ name, type }) => name in existing && existing[name] !== INDEXED_VALUE_TYPES[type],
  );
  if (conflicts.length > 0) {
    const detail = conflicts.map(
      ({ name, type }) => `${name} is ${IndexedValueType[existing[name]]}, expected ${type}`,
    );
    throw new Error(
      `Search attributes in namespace ${namespace} have the wrong type: ${detail.join('; ')}. Remove or rename them on the server.`,
    );
  }
  const missing = attributes.filter(({ name }) => !(name in existing));
  if (missing.length === 0) return [];
  try {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map(({ name, type }) => [name, INDEXED_VALUE_TYPES[type]])),
    });
  } catch (error) {
    // Someone else (another worker starting up) added them first.
    if (!(isGrpcServiceError(error) && error.code === GRPC_ALREADY_EXISTS)) throw error;
  }
  // The frontend may serve a cached list for a moment; wait until every new attribute is visible.
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = await listCustomSearchAttributes(connection, namespace);
    const stillMissing = missing.filter(({ name }) => !(name in now)).map(({ name }) => name);
    if (stillMissing.length === 0) return missing.map(({ name }) => name);
    if (Date.now() > deadline) {
      throw new Error(
        `Added search attributes ${stillMissing.join(', ')} to namespace ${namespace}, but they were not listed within ${timeoutMs} ms.`,
      );
    }
    await sleep(POLL_INTERVAL_MS);
  }
}

async function listCustomSearchAttributes(
  connection: Connection,
  namespace: string,
): Promise<Record<string, temporal.api.enums.v1.IndexedValueType>> {
  const response = await connection.operatorService.listSearchAttributes({ namespace });
  return response.customAttributes ?? {};
}
