import path from 'node:path';
import { ConfigError } from '../../config/errors';
import { readFileSync } from 'node:fs';
import { WORKER_NODE_FLAGS, loadWorkerTuning } from '../../config/worker-tuning';
import { loadWorkflowBundle } from '../../workers/workflow-bundle';

describe('worker tuning', () => {
  it('keeps 100 workflows cached unless told otherwise', () => {
    expect(loadWorkerTuning({})).toEqual({ maxCachedWorkflows: 100 });
    expect(loadWorkerTuning({ ADCP_MAX_CACHED_WORKFLOWS: '0' })).toEqual({ maxCachedWorkflows: 0 });
    expect(loadWorkerTuning({ ADCP_MAX_CACHED_WORKFLOWS: '2500' })).toEqual({ maxCachedWorkflows: 2500 });
  });

  it('refuses a cache size that is not a whole number, naming the variable', () => {
    expect(() => loadWorkerTuning({ ADCP_MAX_CACHED_WORKFLOWS: 'lots' })).toThrow(ConfigError);
    expect(() => loadWorkerTuning({ ADCP_MAX_CACHED_WORKFLOWS: '-1' })).toThrow(/ADCP_MAX_CACHED_WORKFLOWS/);
  });

  it('loads a prebuilt bundle by path and refuses one that does not exist', async () => {
    const existing = await loadWorkflowBundle({ ADCP_WORKFLOW_BUNDLE: __filename });
    expect(existing).toMatchObject({ codePath: __filename, source: 'prebuilt' });
    const missing = path.join(__dirname, 'no-such-bundle.js');
    await expect(loadWorkflowBundle({ ADCP_WORKFLOW_BUNDLE: missing })).rejects.toThrow(
      /does not exist: run `npm run build:workflows`/,
    );
  });

  it('npm run worker passes the worker node flags that npm start and the bench use', () => {
    const root = path.resolve(__dirname, '..', '..');
    const scripts = (
      JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
    ).scripts;
    expect(WORKER_NODE_FLAGS.length).toBeGreaterThan(0);
    expect(scripts.worker).toContain(`node ${WORKER_NODE_FLAGS.join(' ')} scripts/worker.cjs`);
  });
});
