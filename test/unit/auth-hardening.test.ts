/**
 * Hardening (#12 item 5) in front of the real gateway app (createGateway, its Temporal connection lazy and never
 * reached): every input below answered 500 (or was accepted) before, and now answers 4xx without reaching recursive
 * code. Also the Host check, security headers, per-principal rate limits, and server timeouts and connection cap.
 */
import http, { type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import express from 'express';
import { Client, Connection } from '@temporalio/client';
import { createGateway } from '../../api/app';
import { jsonNestingExceeds, parseJsonStrict } from '../../api/body';
import {
  LOOPBACK_HOSTS,
  createHardenedServer,
  hostAllowList,
  rateLimit,
  rejectMalformedPath,
  securityHeaders,
} from '../../api/hardening';
import { OrchestratorClient } from '../../client/orchestrator-client';
import { lazyGrpc } from '../../config/grpc-connection';

let connection: Connection;
let server: Server;
let base: string;
let port: number;

beforeAll(async () => {
  connection = lazyGrpc({ address: '127.0.0.1:1' });
  const orchestrator = new OrchestratorClient({
    client: new Client({ connection }),
    taskQueue: 'unused',
    knownSeller: (id) => id === 'demo',
  });
  const app = express();
  app.disable('x-powered-by');
  app.use(securityHeaders());
  app.use(hostAllowList(LOOPBACK_HOSTS));
  app.use(rejectMalformedPath());
  app.use(createGateway({ orchestrator }));
  server = createHardenedServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await connection.close().catch(() => undefined);
});

async function post(body: string | Buffer, headers: Record<string, string> = {}) {
  const response = await fetch(`${base}/v1/operations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

const start = (params: string, agent = 'unknown-seller') =>
  `{"agent_id":"${agent}","task":"get_products","params":${params}}`;
const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

/** The gateway itself answered (its validation of a parsed body), so the body passed hardening. */
const REACHED_GATEWAY = { status: 400, body: { error: { code: 'INVALID_REQUEST', field: 'agent_id' } } };

describe('inputs that answered 500 or were silently accepted', () => {
  test('malformed percent-encoding in the path: 400, not 500', async () => {
    const response = await fetch(`${base}/v1/operations/%ZZ`);
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      status: 400,
      code: 'MALFORMED_PATH',
      error: { code: 'MALFORMED_PATH', message: expect.any(String) },
    });
    expect((await fetch(`${base}/v1/operations/adcp-x%E0%A4%A`)).status).toBe(400);
  });

  test('an unknown charset: 415; UTF-8 declared explicitly is fine', async () => {
    const refused = await post(start('{}'), { 'content-type': 'application/json; charset=koi8-r' });
    expect(refused).toMatchObject({ status: 415, body: { error: { code: 'UNSUPPORTED_CHARSET' } } });
    expect(await post(start('{}'), { 'content-type': 'application/json; charset=UTF-8' })).toMatchObject(
      REACHED_GATEWAY,
    );
  });

  test('a garbage gzip body: 400; a real gzip body is decompressed', async () => {
    const garbage = await post('not gzip at all', { 'content-encoding': 'gzip' });
    expect(garbage).toMatchObject({ status: 400, body: { error: { code: 'MALFORMED_BODY' } } });
    expect(garbage.body.error.message).toContain('not valid gzip');
    expect(await post(gzipSync(start('{}')), { 'content-encoding': 'gzip' })).toMatchObject(REACHED_GATEWAY);
  });

  test('a gzip bomb is stopped at the size limit after decompression: 413', async () => {
    const bomb = gzipSync(Buffer.from(start(`"${'0'.repeat(20 * 1024 * 1024)}"`)));
    expect(bomb.byteLength).toBeLessThan(100 * 1024);
    expect(await post(bomb, { 'content-encoding': 'gzip' })).toMatchObject({
      status: 413,
      body: { error: { code: 'PAYLOAD_TOO_LARGE' } },
    });
  });

  test('an unsupported content encoding: 415', async () => {
    expect(await post(start('{}'), { 'content-encoding': 'compress' })).toMatchObject({
      status: 415,
      body: { error: { code: 'UNSUPPORTED_CONTENT_ENCODING' } },
    });
  });

  test.each([4_000, 100_000])('params nested %i levels deep: 400 before any recursive code', async (depth) => {
    const answer = await post(start(nested(depth), 'demo'));
    expect(answer).toMatchObject({ status: 400, body: { error: { code: 'NESTING_TOO_DEEP' } } });
    expect(answer.body.error.message).toContain('deeper than 64 levels');
  });

  test('nesting within the limit passes', async () => {
    expect(await post(start(nested(60)))).toMatchObject(REACHED_GATEWAY);
  });

  test.each(['1e309', '-1e309', '123e999'])(
    '%s, a number JSON cannot carry: 400, not stored as null',
    async (number) => {
      const answer = await post(start(`{"budget":{"total":${number}}}`, 'demo'));
      expect(answer).toMatchObject({ status: 400, body: { error: { code: 'NUMBER_OUT_OF_RANGE' } } });
      expect(answer.body.error.message).toContain('"total"');
    },
  );

  test('malformed JSON and invalid UTF-8: 400', async () => {
    expect(await post('{"agent_id": ')).toMatchObject({ status: 400, body: { error: { code: 'MALFORMED_JSON' } } });
    expect(await post(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]))).toMatchObject({
      status: 400,
      body: { error: { code: 'MALFORMED_BODY', message: 'The body is not valid UTF-8.' } },
    });
  });

  test('a body over 1 MiB: 413, whether declared or streamed', async () => {
    const large = start(`"${'x'.repeat(1_100_000)}"`);
    expect((await post(large)).status).toBe(413);
    const streamed = await new Promise<number>((resolve, reject) => {
      const request = http.request(
        `${base}/v1/operations`,
        { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
        (response) => {
          response.resume();
          resolve(response.statusCode!);
        },
      );
      request.on('error', reject);
      for (let i = 0; i < 12; i++) request.write('x'.repeat(100_000));
      request.end();
    });
    expect(streamed).toBe(413);
  });

  test('the gateway still answers its own errors for other bodies (415 for a non-JSON type)', async () => {
    expect(await post('a=1', { 'content-type': 'application/x-www-form-urlencoded' })).toMatchObject({
      status: 415,
      body: { error: { code: 'UNSUPPORTED_MEDIA_TYPE' } },
    });
  });
});

describe('Host check (DNS rebinding)', () => {
  function withHost(host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: '/v1/operations/x', headers: { host } }, (response) => {
          response.resume();
          resolve(response.statusCode!);
        })
        .on('error', reject);
    });
  }

  test('a page on another site that re-points its name at 127.0.0.1 is refused: 421', async () => {
    expect(await withHost(`attacker.example:${port}`)).toBe(421);
    expect(await withHost('127.0.0.1.attacker.example')).toBe(421);
  });

  test('the configured names pass', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`]) {
      expect(await withHost(host)).not.toBe(421);
    }
  });

  test('an entry with a port matches that port only', async () => {
    const app = express();
    app.use(hostAllowList(['gateway.example.com:8443']));
    app.get('/', (_req, res) => res.send('ok'));
    const only = http.createServer(app);
    await new Promise<void>((resolve) => only.listen(0, '127.0.0.1', resolve));
    const onlyPort = (only.address() as AddressInfo).port;
    const status = (host: string) =>
      new Promise<number>((resolve) =>
        http.get({ host: '127.0.0.1', port: onlyPort, path: '/', headers: { host } }, (response) => {
          response.resume();
          resolve(response.statusCode!);
        }),
      );
    expect(await status('gateway.example.com:8443')).toBe(200);
    expect(await status('gateway.example.com:443')).toBe(421);
    await new Promise((resolve) => only.close(resolve));
  });
});

test('security headers are set on answers and on errors', async () => {
  for (const response of [await fetch(`${base}/v1/operations/%ZZ`), await fetch(`${base}/nope`)]) {
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('x-frame-options')).toBe('DENY');
    expect(response.headers.get('content-security-policy')).toBe("default-src 'none';frame-ancestors 'none'");
    expect(response.headers.get('referrer-policy')).toBe('no-referrer');
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('x-powered-by')).toBeNull();
  }
});

describe('rate limits per principal', () => {
  let limited: Server;
  let url: string;
  beforeAll(async () => {
    const app = express();
    app.use((req, _res, next) => {
      const who = req.get('x-test-principal');
      if (who)
        req.principal = { id: who, tenant: 'acme', roles: new Set(['reader']), via: { kind: 'api-key', keyId: who } };
      next();
    });
    // A window of 600 s: the test never waits for it to pass.
    app.use(rateLimit({ burst: 3, perSecond: 3 / 600 }));
    app.get('/v1/x', (_req, res) => res.json({ ok: true }));
    limited = http.createServer(app);
    await new Promise<void>((resolve) => limited.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(limited.address() as AddressInfo).port}/v1/x`;
  });
  afterAll(() => new Promise((resolve) => limited.close(resolve)));
  const as = (who: string) => fetch(url, { headers: { 'x-test-principal': who } });

  test('a burst passes, the next request answers 429 with Retry-After; another principal is unaffected', async () => {
    for (let i = 0; i < 3; i++) expect((await as('alice')).status).toBe(200);
    const refused = await as('alice');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(600);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(((await refused.json()) as any).error).toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringContaining('principal "alice"'),
    });
    expect((await as('bob')).status).toBe(200);
    expect((await as('alice')).status).toBe(429);
  });
});

describe('server limits', () => {
  let slow: Server;
  let slowPort: number;
  beforeAll(async () => {
    const app = express();
    app.post('/v1/x', express.json(), (_req, res) => res.json({ ok: true }));
    app.get('/v1/x', (_req, res) => res.json({ ok: true }));
    slow = createHardenedServer(app, { headersTimeoutMs: 300, requestTimeoutMs: 600, maxConnections: 2 });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    slowPort = (slow.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((resolve) => slow.close(resolve)));

  /** Sends `first`, never finishes the request, and resolves with what the server wrote before closing. */
  function stall(first: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(slowPort, '127.0.0.1', () => socket.write(first));
      let received = '';
      socket.on('data', (chunk) => (received += chunk.toString()));
      socket.on('close', () => resolve(received));
      socket.on('error', reject);
      setTimeout(() => {
        socket.destroy();
        reject(new Error('the server kept a stalled request open'));
      }, 10_000).unref();
    });
  }

  test('headers that never finish (slowloris): the server answers 408 and closes', async () => {
    expect(await stall('GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ')).toMatch(/^HTTP\/1\.1 408/);
  });

  test('a body that never finishes: the server answers 408 and closes', async () => {
    const head =
      'POST /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":';
    expect(await stall(head)).toMatch(/^HTTP\/1\.1 408/);
  });

  test('connections over the cap are closed at once', async () => {
    const open = await Promise.all(
      [0, 1].map(
        () =>
          new Promise<net.Socket>((resolve) => {
            const socket = net.connect(slowPort, '127.0.0.1', () => resolve(socket));
          }),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    const third = await new Promise<string>((resolve) => {
      const socket = net.connect(slowPort, '127.0.0.1', () => socket.write('GET /v1/x HTTP/1.1\r\nHost: a\r\n\r\n'));
      let received = '';
      socket.on('data', (chunk) => (received += chunk.toString()));
      socket.on('close', () => resolve(received));
      socket.on('error', () => resolve(received));
    });
    expect(third).toBe('');
    open.forEach((socket) => socket.destroy());
  });

  test('an idle kept-alive connection is closed after keepAliveTimeoutMs (ADCP_GATEWAY_KEEP_ALIVE_MS), not before', async () => {
    const app = express();
    app.get('/v1/x', (_req, res) => res.json({ ok: true }));
    /** Answers one keep-alive request, then reports whether the server closed the idle connection within `idleMs`. */
    const closedWhileIdle = async (keepAliveTimeoutMs: number, idleMs: number): Promise<boolean> => {
      const server = createHardenedServer(app, { keepAliveTimeoutMs });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      try {
        return await new Promise<boolean>((resolve, reject) => {
          const socket = net.connect(port, '127.0.0.1', () =>
            socket.write('GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n'),
          );
          let answered = false;
          socket.on('data', (chunk) => {
            if (answered || !chunk.toString().startsWith('HTTP/1.1 200')) return;
            answered = true;
            setTimeout(() => {
              socket.destroy();
              resolve(false);
            }, idleMs);
          });
          socket.on('end', () => resolve(answered));
          socket.on('error', reject);
        });
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    };
    expect(await closedWhileIdle(1_000, 2_500)).toBe(true);
    expect(await closedWhileIdle(30_000, 2_500)).toBe(false);
  });
});

describe('the JSON rules on their own (for the webhook receiver)', () => {
  test('nesting is measured without recursion, and brackets inside strings do not count', () => {
    expect(jsonNestingExceeds(nested(1_000_000), 64)).toBe(true);
    expect(jsonNestingExceeds(`{"a":"${'['.repeat(500)}\\"${'{'.repeat(500)}"}`, 2)).toBe(false);
    expect(jsonNestingExceeds('[[[]]]', 3)).toBe(false);
    expect(jsonNestingExceeds('[[[[]]]]', 3)).toBe(true);
  });

  test('parseJsonStrict refuses deep nesting and non-finite numbers, and parses the rest', () => {
    expect(() => parseJsonStrict(`[${nested(6_000)}]`)).toThrow(/deeper than 64/);
    expect(() => parseJsonStrict('[1e400]')).toThrow(/outside what JSON numbers can carry/);
    expect(parseJsonStrict('{"a":[1e308,-2.5,"1e309"]}')).toEqual({ a: [1e308, -2.5, '1e309'] });
  });
});
