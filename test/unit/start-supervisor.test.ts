/**
 * `npm start`'s supervision and banner (scripts/start.ts, scripts/lib/supervisor.ts), with real child processes: the
 * restart delays double and start over after a healthy stretch, a restart that fails to come up is tried again (it
 * was given up on), Ctrl-C reaching a child at the moment the stack stops is not taken for a crash ("restarting in
 * 1 s" was printed), the banner keeps its Gateway line and says where credentials come from, and with payload keys
 * the dev server's Web UI is pointed at the gateway's codec server.
 */
import { spawn } from 'node:child_process';
import { bannerLines, devServerOptionsFor } from '../../scripts/start';
import { RestartBackoff, type RunningProcess, Supervised } from '../../scripts/lib/supervisor';

function child(script: string): RunningProcess & { kill(signal: NodeJS.Signals): void } {
  const spawned = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    spawned.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    exited,
    kill: (signal) => spawned.kill(signal),
    stop: async () => {
      if (spawned.exitCode === null && spawned.signalCode === null) spawned.kill('SIGTERM');
      await exited;
    },
  };
}

const LONG_LIVED = "process.on('SIGINT', () => process.exit(0)); setInterval(() => {}, 1e9);";
const until = async (probe: () => boolean, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

test('restart delays double up to the cap, and start over after a healthy stretch', () => {
  const backoff = new RestartBackoff({ startMs: 1_000, maxMs: 30_000, stableAfterMs: 60_000 });
  expect([1, 2, 3, 4, 5, 6, 7].map(() => backoff.exited(500).delayMs)).toEqual([
    1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000,
  ]);
  expect(backoff.exited(61_000)).toEqual({ delayMs: 1_000, inARow: 1 });
  expect(backoff.exited(100)).toEqual({ delayMs: 2_000, inARow: 2 });
});

test('a process that exits on its own is restarted; a restart that fails to start is tried again', async () => {
  const lines: string[] = [];
  let attempt = 0;
  const supervised = new Supervised({
    name: 'flaky',
    log: (line) => lines.push(line),
    backoff: { startMs: 10, maxMs: 40, stableAfterMs: 60_000 },
    start: async () => {
      attempt += 1;
      if (attempt === 2) throw new Error('port still in use');
      return child(attempt === 1 ? 'process.exit(3)' : LONG_LIVED);
    },
  });
  await supervised.start();
  await until(() => supervised.starts === 3);
  await supervised.stop();
  expect(lines).toEqual([
    'flaky exited (code 3); restarting in 0.01 s (restart 1 in a row).',
    'flaky did not start (port still in use); restarting in 0.02 s (restart 2 in a row).',
  ]);
});

test('stopping marks every process first: a child that Ctrl-C ends at that moment is not restarted', async () => {
  const lines: string[] = [];
  const children: ReturnType<typeof child>[] = [];
  const make = (name: string) =>
    new Supervised({
      name,
      log: (line) => lines.push(line),
      backoff: { startMs: 10, maxMs: 10, stableAfterMs: 60_000 },
      start: async () => {
        const started = child(LONG_LIVED);
        children.push(started);
        return started;
      },
    });
  const gateway = make('gateway');
  const temporal = make('Temporal dev server');
  await gateway.start();
  await temporal.start();
  // The terminal's SIGINT reaches the dev server (same process group) while npm start begins stopping.
  gateway.beginStop();
  temporal.beginStop();
  children[1]!.kill('SIGINT');
  await gateway.stop();
  await new Promise((resolve) => setTimeout(resolve, 100));
  await temporal.stop();
  expect(lines).toEqual([]);
  expect(temporal.starts).toBe(1);
});

test('the banner keeps its Gateway line with ADCP_API_KEYS_FILE and says where the keys are', () => {
  const stack = {
    address: '127.0.0.1:7233',
    namespace: 'default',
    gatewayUrl: 'http://127.0.0.1:8080',
    runtime: { taskQueue: 'adcp-operations' },
    polling: true,
  };
  const withKeys = bannerLines({ ...stack, apiKeysFile: '/etc/adcp/keys.json' }).join('\n');
  expect(withKeys).toMatch(/^ {2}Gateway {4}http:\/\/127\.0\.0\.1:8080 /m);
  expect(withKeys).toContain('API keys   from /etc/adcp/keys.json (ADCP_API_KEYS_FILE)');
  const dev = bannerLines({
    ...stack,
    developmentKey: 'adcpk.dev.secret',
    devServer: { uiPort: 8233 },
    encrypted: true,
  });
  expect(dev.join('\n')).toMatch(/^ {2}Gateway {4}http/m);
  expect(dev.join('\n')).toContain('adcpk.dev.secret');
  expect(dev.join('\n')).toContain('payloads decoded by the codec server at http://127.0.0.1:8080/codec');
});

test("with ADCP_PAYLOAD_KEYS the dev server's Web UI decodes through the gateway's codec server", () => {
  expect(devServerOptionsFor({ ADCP_PAYLOAD_KEYS: 'k1:abc' }, 'http://127.0.0.1:8080')).toMatchObject({
    uiPort: 8233,
    uiCodecEndpoint: 'http://127.0.0.1:8080/codec',
  });
  expect(devServerOptionsFor({}, 'http://127.0.0.1:8080').uiCodecEndpoint).toBeUndefined();
});
