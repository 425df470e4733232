/**
 * A call to a seller that cannot be reached must leave nothing running behind it. (The MCP client's SSE fallback
 * otherwise keeps an EventSource reconnecting for ever: a worker would accumulate one loop per failed call.)
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { freePort } from '../../scripts/lib/dev-server';

test('after a failed call to an unreachable seller, the process exits by itself', async () => {
  const root = path.resolve(__dirname, '..', '..');
  const port = await freePort(); // free, so nothing listens there
  const result = spawnSync(
    path.join(root, 'node_modules', '.bin', 'tsx'),
    [path.join(root, 'test', 'harness', 'unreachable-call.ts'), String(port)],
    {
      encoding: 'utf8',
      timeout: 30_000,
    },
  );
  expect(result.stdout).toContain('call failed as expected');
  expect(result.signal).toBeNull(); // not killed by the timeout
  expect(result.status).toBe(0);
}, 60_000);
