/**
 * The embedded dev server as `npm start` and the tests use it: real `temporal server start-dev` processes from
 * the provisioned CLI, on free loopback ports. Starts its own servers (it restarts them), not the shared one.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import {
  type DevServer,
  DevServerExitedEarly,
  ensureSearchAttributes,
  freePort,
  startDevServer,
} from '../../scripts/lib/dev-server';
import { resolveTemporalCli } from '../../scripts/lib/temporal-binaries';
import { SA_SELLER, SA_STATUS, SA_TASK, SEARCH_ATTRIBUTES } from '../../config/search-attributes';
import { connectGrpc } from '../../config/grpc-connection';

const INDEXED = temporal.api.enums.v1.IndexedValueType;
/** The server's type for each of our attribute type names. */
const SERVER_TYPE: Record<string, number> = {
  Keyword: INDEXED.INDEXED_VALUE_TYPE_KEYWORD,
  Text: INDEXED.INDEXED_VALUE_TYPE_TEXT,
  Int: INDEXED.INDEXED_VALUE_TYPE_INT,
  Double: INDEXED.INDEXED_VALUE_TYPE_DOUBLE,
  Bool: INDEXED.INDEXED_VALUE_TYPE_BOOL,
  Datetime: INDEXED.INDEXED_VALUE_TYPE_DATETIME,
  KeywordList: INDEXED.INDEXED_VALUE_TYPE_KEYWORD_LIST,
};

let scratch: string;
const servers: DevServer[] = [];
const connections: Connection[] = [];

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'adcp-dev-server-'));
});
afterEach(async () => {
  await Promise.all(connections.splice(0).map((connection) => connection.close()));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function start(options: Parameters<typeof startDevServer>[0]): Promise<DevServer> {
  const server = await startDevServer({ headless: true, ...options });
  servers.push(server);
  return server;
}

async function connect(server: DevServer): Promise<Connection> {
  const connection = await connectGrpc({ address: server.address });
  connections.push(connection);
  return connection;
}

async function customSearchAttributes(connection: Connection) {
  return (await connection.operatorService.listSearchAttributes({ namespace: 'default' })).customAttributes ?? {};
}

describe('startDevServer', () => {
  it('registers the search attributes and keeps workflows and their attributes across a restart on the same db file', async () => {
    const port = await freePort();
    // A folder that does not exist yet: startDevServer creates it.
    const dbFilename = join(scratch, 'state', 'nested', 'temporal.sqlite');
    const workflowId = 'dev-server-restart-check';

    const first = await start({ port, dbFilename });
    const firstConnection = await connect(first);
    const registered = await customSearchAttributes(firstConnection);
    for (const { name, type } of SEARCH_ATTRIBUTES) expect(registered[name]).toBe(SERVER_TYPE[type]);

    // No worker polls this task queue, so the workflow just stays open; that is all a restart must keep.
    await new Client({ connection: firstConnection }).workflow.start('neverPolled', {
      workflowId,
      taskQueue: 'dev-server-test-nobody-polls',
      typedSearchAttributes: [
        { key: SA_TASK, value: 'create_media_buy' },
        { key: SA_SELLER, value: 'restart-check-agent' },
        { key: SA_STATUS, value: 'submitted' },
      ],
    });
    await Promise.all(connections.splice(0).map((connection) => connection.close()));
    await first.stop();
    expect(first.child.exitCode ?? first.child.signalCode).not.toBeNull();
    servers.splice(0);

    const second = await start({ port, dbFilename });
    const client = new Client({ connection: await connect(second) });
    const description = await client.workflow.getHandle(workflowId).describe();
    expect(description.status.name).toBe('RUNNING');
    expect(description.typedSearchAttributes.get(SA_SELLER)).toBe('restart-check-agent');
    // Visibility answers queries on the project's attributes after the restart too.
    const found: string[] = [];
    for await (const execution of client.workflow.list({
      query: `AdcpAgent = "restart-check-agent" AND AdcpTask = "create_media_buy"`,
    })) {
      found.push(execution.workflowId);
    }
    expect(found).toEqual([workflowId]);
    await client.workflow.getHandle(workflowId).terminate('test done');
  });

  it('keeps a started workflow when the server is killed (SIGKILL) rather than stopped', async () => {
    const port = await freePort();
    const dbFilename = join(scratch, 'killed', 'temporal.sqlite');
    const workflowId = 'dev-server-kill-check';

    const first = await start({ port, dbFilename });
    const firstConnection = await connect(first);
    await new Client({ connection: firstConnection }).workflow.start('neverPolled', {
      workflowId,
      taskQueue: 'dev-server-test-nobody-polls',
    });
    await Promise.all(connections.splice(0).map((connection) => connection.close()));
    await first.stop('SIGKILL');
    expect(first.child.signalCode).toBe('SIGKILL');
    servers.splice(0);

    const second = await start({ port, dbFilename });
    const client = new Client({ connection: await connect(second) });
    expect((await client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
    await client.workflow.getHandle(workflowId).terminate('test done');
  });

  it('refuses a port that is already in use instead of talking to whatever listens there', async () => {
    const port = await freePort();
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
    try {
      await expect(start({ port })).rejects.toThrow(`Port ${port} on 127.0.0.1 is already in use`);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  it("reports the server's own output when it exits before it is ready", async () => {
    const cliPath = join(scratch, 'broken-temporal');
    writeFileSync(cliPath, '#!/bin/sh\necho "Error: failed starting server: simulated" >&2\nexit 3\n');
    chmodSync(cliPath, 0o755);

    await expect(start({ port: await freePort(), cliPath })).rejects.toThrow(
      /exited \(code 3, signal null\) before it was ready[\s\S]*Error: failed starting server: simulated/,
    );
  });
});

describe('startDevServer when the server loses a race for a port it picked', () => {
  it('starts it again after a panic binding an internal port, and keeps the head of the output of one that fails', async () => {
    const realCli = resolveTemporalCli();
    const marker = join(scratch, 'lost-race-once');
    const cliPath = join(scratch, 'loses-a-port-race-once');
    // The first start dies as the CLI does when another process took a port it picked (a panic, then a long stack).
    writeFileSync(
      cliPath,
      `#!/bin/sh\nif [ ! -e "${marker}" ]; then touch "${marker}"; ` +
        `echo "panic: listen tcp 127.0.0.1:39999: bind: address already in use" >&2; ` +
        `i=0; while [ $i -lt 400 ]; do echo "go.uber.org/dig.paramList.BuildList(...) frame $i" >&2; i=$((i+1)); done; exit 2; fi\n` +
        `exec "${realCli}" "$@"\n`,
    );
    chmodSync(cliPath, 0o755);
    const server = await start({ port: await freePort(), cliPath });
    const connection = await connect(server);
    await expect(connection.workflowService.describeNamespace({ namespace: 'default' })).resolves.toBeDefined();

    // One that always loses: three starts, then the error names the panic (the head) and the stack's end (the tail).
    const alwaysPath = join(scratch, 'always-loses-a-port-race');
    const starts = join(scratch, 'starts');
    writeFileSync(
      alwaysPath,
      `#!/bin/sh\necho x >> "${starts}"\necho "panic: listen tcp 127.0.0.1:39999: bind: address already in use" >&2\n` +
        `i=0; while [ $i -lt 1000 ]; do echo "frame $i" >&2; i=$((i+1)); done; exit 2\n`,
    );
    chmodSync(alwaysPath, 0o755);
    const failure = await start({ port: await freePort(), cliPath: alwaysPath }).catch((error: Error) => error);
    expect(failure).toBeInstanceOf(DevServerExitedEarly);
    expect((failure as Error).message).toMatch(/^panic: listen tcp 127\.0\.0\.1:39999: bind: address already in use$/m);
    expect((failure as Error).message).toContain('[…]');
    expect((failure as Error).message).toContain('frame 999');
    expect(readFileSync(starts, 'utf8').trim().split('\n')).toHaveLength(3);
  });
});

describe('ensureSearchAttributes', () => {
  it('adds the missing attributes to a server started without them, idempotently, and refuses a type clash', async () => {
    const server = await start({ port: await freePort(), searchAttributes: [{ name: 'AdcpTask', type: 'Text' }] });
    const connection = await connect(server);

    await expect(ensureSearchAttributes(connection, 'default')).rejects.toThrow(
      'AdcpTask is INDEXED_VALUE_TYPE_TEXT, expected Keyword',
    );

    const others = SEARCH_ATTRIBUTES.filter(({ name }) => name !== 'AdcpTask');
    await expect(ensureSearchAttributes(connection, 'default', others)).resolves.toEqual(
      others.map(({ name }) => name),
    );
    await expect(ensureSearchAttributes(connection, 'default', others)).resolves.toEqual([]);
    const registered = await customSearchAttributes(connection);
    for (const { name, type } of others) expect(registered[name]).toBe(SERVER_TYPE[type]);
  });
});
