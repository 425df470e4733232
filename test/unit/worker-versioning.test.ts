/**
 * The worker's Worker Deployment settings (config/worker-versioning.ts), its build id (workers/versioning.ts), when it
 * makes its build current, and that every workflow the bundle exports declares its behaviour across builds
 * (workflows/versioning.ts). The behaviours themselves, on a real server, are test/integration/worker-upgrade.test.ts.
 */
import type { temporal } from '@temporalio/proto';
import { ConfigError } from '../../config/errors';
import { loadWorkerVersioning } from '../../config/worker-versioning';
import { buildIdFor, bundleDigest, nextPromotionStep, packageVersion } from '../../workers/versioning';
import * as workflows from '../../workflows';

const MAP = '//# sourceMappingURL=data:application/json;charset=utf-8;base64,';

describe('worker versioning settings', () => {
  it('are on by default, in deployment adcp-orchestrator, with the build named by the code and made current', () => {
    expect(loadWorkerVersioning('adcp-operations', {})).toEqual({
      enabled: true,
      deploymentName: 'adcp-orchestrator',
      promote: 'auto',
    });
    expect(
      loadWorkerVersioning('adcp-operations', {
        ADCP_WORKER_DEPLOYMENT: 'adcp-eu',
        ADCP_WORKER_BUILD_ID: 'release-42',
        ADCP_WORKER_PROMOTE: 'never',
      }),
    ).toEqual({ enabled: true, deploymentName: 'adcp-eu', buildId: 'release-42', promote: 'never' });
    expect(
      loadWorkerVersioning('adcp-operations', { ADCP_WORKER_VERSIONING: 'off', ADCP_WORKER_BUILD_ID: 'x' }),
    ).toEqual({
      enabled: false,
    });
  });

  it("name another task queue's workers a deployment of their own, unless told", () => {
    expect(loadWorkerVersioning('staging.ops', {})).toMatchObject({ deploymentName: 'adcp-orchestrator-staging-ops' });
    expect(loadWorkerVersioning('staging.ops', { ADCP_WORKER_DEPLOYMENT: 'adcp-staging' })).toMatchObject({
      deploymentName: 'adcp-staging',
    });
    const long = loadWorkerVersioning('q'.repeat(300), {});
    const longer = loadWorkerVersioning(`${'q'.repeat(300)}r`, {});
    expect(long).toMatchObject({ deploymentName: expect.stringMatching(/^adcp-orchestrator-q+-[0-9a-f]{12}$/) });
    expect(long.enabled && long.deploymentName.length).toBeLessThanOrEqual(120);
    expect(longer).not.toEqual(long);
  });

  it('refuse what Temporal would not take, naming the variable', () => {
    expect(() => loadWorkerVersioning('adcp-operations', { ADCP_WORKER_DEPLOYMENT: 'adcp.eu' })).toThrow(
      /ADCP_WORKER_DEPLOYMENT: must have no dots/,
    );
    expect(() => loadWorkerVersioning('adcp-operations', { ADCP_WORKER_BUILD_ID: 'a b' })).toThrow(
      /ADCP_WORKER_BUILD_ID/,
    );
    expect(() => loadWorkerVersioning('adcp-operations', { ADCP_WORKER_BUILD_ID: '__internal' })).toThrow(
      /reserved by Temporal/,
    );
    expect(() => loadWorkerVersioning('adcp-operations', { ADCP_WORKER_PROMOTE: 'sometimes' })).toThrow(ConfigError);
    expect(() => loadWorkerVersioning('adcp-operations', { ADCP_WORKER_VERSIONING: 'yes' })).toThrow(
      /ADCP_WORKER_VERSIONING/,
    );
  });
});

describe('build id', () => {
  it('is the package version and a digest of the code, whatever the source map names', () => {
    const code = 'exports.a = 1;\n';
    const here = `${code}${MAP}${Buffer.from(JSON.stringify({ sources: ['/home/a/workflows/operation.ts'] })).toString('base64')}\n`;
    const there = `${code}${MAP}${Buffer.from(JSON.stringify({ sources: ['/srv/b/workflows/operation.ts'] })).toString('base64')}\n`;
    expect(bundleDigest(here)).toBe(bundleDigest(there));
    expect(bundleDigest(Buffer.from(here))).toBe(bundleDigest(here));
    expect(bundleDigest(here)).toMatch(/^[0-9a-f]{12}$/);
    expect(bundleDigest('exports.a = 2;\n')).not.toBe(bundleDigest(here));
    expect(buildIdFor(here)).toBe(`${packageVersion()}+${bundleDigest(here)}`);
    expect(packageVersion()).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('making a build current', () => {
  const version = { deploymentName: 'adcp-orchestrator', buildId: 'b' };
  const at = (seconds: number) => ({ seconds, nanos: 0 });
  const summary = (buildId: string, fields: Record<string, unknown> = {}) => ({
    deploymentVersion: { deploymentName: 'adcp-orchestrator', buildId },
    ...fields,
  });
  const deployment = (
    summaries: ReturnType<typeof summary>[],
    current?: string,
  ): temporal.api.deployment.v1.IWorkerDeploymentInfo =>
    ({
      versionSummaries: summaries,
      routingConfig: current
        ? { currentDeploymentVersion: { deploymentName: 'adcp-orchestrator', buildId: current } }
        : {},
    }) as temporal.api.deployment.v1.IWorkerDeploymentInfo;

  it('waits until the server has seen the build poll', () => {
    expect(nextPromotionStep(undefined, version, 'auto')).toEqual({ step: 'wait' });
    expect(nextPromotionStep(deployment([summary('a')], 'a'), version, 'auto')).toEqual({ step: 'wait' });
  });

  it('promotes a new build over an older current one, or when nothing is current', () => {
    const info = deployment(
      [summary('a', { createTime: at(100), firstActivationTime: at(100) }), summary('b', { createTime: at(200) })],
      'a',
    );
    expect(nextPromotionStep(info, version, 'auto')).toEqual({ step: 'promote' });
    expect(nextPromotionStep(deployment([summary('b', { createTime: at(200) })]), version, 'auto')).toEqual({
      step: 'promote',
    });
  });

  it('leaves a current build alone when this one is older or was current before (a restart, a rollback)', () => {
    const older = deployment([summary('b', { createTime: at(100) }), summary('c', { createTime: at(200) })], 'c');
    expect(nextPromotionStep(older, version, 'auto')).toMatchObject({
      step: 'leave',
      current: { buildId: 'c' },
      reason: expect.stringMatching(/first polled after this one/),
    });
    const rolledBack = deployment(
      [summary('a', { createTime: at(100) }), summary('b', { createTime: at(200), firstActivationTime: at(300) })],
      'a',
    );
    expect(nextPromotionStep(rolledBack, version, 'auto')).toMatchObject({ step: 'leave', current: { buildId: 'a' } });
    // `always` takes the deployment in both cases.
    expect(nextPromotionStep(older, version, 'always')).toEqual({ step: 'promote' });
    expect(nextPromotionStep(rolledBack, version, 'always')).toEqual({ step: 'promote' });
  });

  it('has nothing to do when the build is current', () => {
    expect(nextPromotionStep(deployment([summary('b')], 'b'), version, 'auto')).toEqual({ step: 'current' });
  });
});

describe('workflow behaviours across builds (workflows/versioning.ts)', () => {
  it('are declared for every workflow the bundle exports', () => {
    const exported = Object.entries(workflows).filter(([, value]) => typeof value === 'function');
    expect(exported.length).toBeGreaterThanOrEqual(7);
    const undeclared = exported
      .filter(
        ([, fn]) => typeof (fn as { workflowDefinitionOptions?: unknown }).workflowDefinitionOptions !== 'function',
      )
      .map(([name]) => name);
    expect(undeclared).toEqual([]);
  });
});
