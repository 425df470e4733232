/**
 * config/grpc-connection.ts: a call whose retry timer fires after its connection closed ends as the call's failure
 * (CANCELLED) instead of an uncaught "Channel has been shut down" that kills the process. Each case runs in a child
 * process, since the unguarded one dies.
 */
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';

const root = path.resolve(__dirname, '..', '..');

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function run(port: number, mode: 'guarded' | 'plain') {
  return spawnSync(
    process.execPath,
    [
      '--require',
      path.join(root, 'test/harness/swc-register.cjs'),
      'test/fixtures/retry-after-close.ts',
      String(port),
      mode,
    ],
    { cwd: root, encoding: 'utf8', timeout: 60_000 },
  );
}

test('without the guard, a retry that fires after close() throws from its timer and the process dies', async () => {
  const result = run(await closedPort(), 'plain');
  expect(result.status).not.toBe(0);
  expect(result.stderr).toMatch(/Channel has been shut down/);
  expect(result.stdout).not.toMatch(/exited cleanly/);
});

test('with the guard, the waiting call fails CANCELLED and the process goes on', async () => {
  const result = run(await closedPort(), 'guarded');
  expect(result.stderr).not.toMatch(/Channel has been shut down/);
  expect(result.stdout).toMatch(/rejected: .*CANCELLED: the connection to Temporal is closed/);
  expect(result.stdout).toMatch(/exited cleanly/);
  expect(result.status).toBe(0);
});
