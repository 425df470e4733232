/**
 * Worker process: `npm run worker`. Connects with the usual Temporal environment variables, reads the seller
 * list, and runs until SIGINT/SIGTERM, finishing in-flight activities within the grace time.
 */
import { readFileSync } from 'node:fs';
import { closeIdleMcpConnections } from '../activities/mcp-connection';
import { DEFAULT_RETRY_BACKOFF } from '../activities/transport-errors';
import { Runtime } from '@temporalio/worker';
import { loadSellers } from '../config/sellers';
import { notificationKeyFromEnv } from '../config/notification-key';
import { loadRuntimeConfig } from '../config/runtime';
import { connectClient } from '../client/connect';
import { connectWorker, temporalSettings } from '../config/temporal-connection';
import { loadWorkerTuning } from '../config/worker-tuning';
import { loadWorkerVersioning } from '../config/worker-versioning';
import { TemporalPinoLogger, createLogger } from '../observability/logger';
import { tracingFromEnvironment } from '../observability/tracing';
import { WORKER_HISTOGRAM_BUCKETS } from '../observability/worker-metrics';
import { ensureReconciliationSchedules } from './schedules';
import { SellerCapabilitiesClient } from '../client/seller-capabilities-client';
import { keepTrying } from './keep-trying';
import { createOperationWorker } from './worker';
import { loadWorkflowBundle } from './workflow-bundle';
import { buildIdFor, describeVersion, promoteBuild } from './versioning';

async function main(): Promise<void> {
  const runtime = loadRuntimeConfig();
  const sellerRegistry = loadSellers();
  const tuning = loadWorkerTuning();
  const versioning = loadWorkerVersioning(runtime.taskQueue);
  // Bundled in a child process (or prebuilt): webpack's memory never enters the worker.
  const bundle = await loadWorkflowBundle();
  // This build in its Worker Deployment (workers/versioning.ts): named by the code it runs unless ADCP_WORKER_BUILD_ID.
  const deployment = versioning.enabled
    ? {
        deploymentName: versioning.deploymentName,
        buildId: versioning.buildId ?? buildIdFor(readFileSync(bundle.codePath)),
      }
    : undefined;
  const logger = createLogger({ service: 'worker' });
  const tracing = tracingFromEnvironment('adcp-orchestrator-worker');
  Runtime.install({
    // The worker's, the workflows' and the activities' lines, as pino JSON with the operation's correlation fields.
    logger: new TemporalPinoLogger(logger),
    telemetryOptions: {
      // The Rust core's own lines (connection trouble, nondeterminism, slot warnings) into the same pino stream, not
      // to stderr in the core's format.
      logging: { forward: {} },
      // Temporal's worker metrics and the orchestrator's own (operations, seller calls, circuit breakers), one endpoint.
      ...(runtime.metricsAddress
        ? {
            metrics: {
              prometheus: {
                bindAddress: runtime.metricsAddress,
                countersTotalSuffix: true,
                // Histograms named by their unit, as Prometheus expects: `temporal_*_latency_seconds`, and ours from
                // the unit the workflow declares (`adcp_operation_duration_seconds`).
                useSecondsForDurations: true,
                unitSuffix: true,
                histogramBucketOverrides: WORKER_HISTOGRAM_BUCKETS,
              },
            },
          }
        : {}),
    },
  });
  if (runtime.metricsAddress)
    logger.info({ metricsUrl: `http://${runtime.metricsAddress}/metrics` }, 'Prometheus metrics endpoint');
  if (tracing) {
    logger.info(
      {
        workflowSpans:
          bundle.source === 'built at start' ? 'bundled' : 'only if the prebuilt bundle was built with tracing',
      },
      'Traces exported over OTLP/HTTP',
    );
  }
  const { connection, namespace } = await connectWorker();
  const client = await connectClient();
  const worker = await createOperationWorker({
    connection,
    namespace,
    taskQueue: runtime.taskQueue,
    activities: {
      sellers: sellerRegistry,
      publicBaseUrl: runtime.publicBaseUrl,
      callTimeoutMs: runtime.callTimeoutMs,
      circuitBreaker: runtime.circuitBreaker,
      retryBackoff: { ...DEFAULT_RETRY_BACKOFF, ...runtime.retryBackoff },
      // Signs notifications to the buyers' systems (ADCP_NOTIFICATION_KEY_FILE; unset: none are sent).
      ...(process.env.ADCP_NOTIFICATION_KEY_FILE ? { notificationKey: notificationKeyFromEnv()! } : {}),
    },
    client,
    workflowBundle: { codePath: bundle.codePath },
    maxCachedWorkflows: tuning.maxCachedWorkflows,
    ...(tracing ? { tracing } : {}),
    ...(deployment ? { deployment } : {}),
  }).finally(() => bundle.dispose()); // Worker.create has read the code
  if (runtime.reconcileEveryMs !== undefined) {
    const schedules = await ensureReconciliationSchedules({
      client,
      sellers: sellerRegistry,
      taskQueue: runtime.taskQueue,
      intervalMs: runtime.reconcileEveryMs,
      orphanChunksPerRun: runtime.reconcileOrphanChunks,
    });
    logger.info({ everySeconds: runtime.reconcileEveryMs / 1000, schedules }, 'Seller reconciliation scheduled');
  }
  console.log(
    `worker: task queue "${runtime.taskQueue}" on ${temporalSettings().connectionOptions.address} (namespace ${namespace}), ${sellerRegistry.sellers.length} seller(s) from ${sellerRegistry.source}, ${deployment ? `build ${describeVersion(deployment)}` : 'unversioned'}`,
  );
  const running = worker.run();
  const stopping = new AbortController();
  // New workflows start on the deployment's current build: make this one current once it polls (docs/upgrades.md).
  if (deployment && versioning.enabled && versioning.promote !== 'never') {
    const mode = versioning.promote;
    void keepTrying(() => promoteBuild({ client, namespace, version: deployment, mode, signal: stopping.signal }), {
      what: `Making build ${describeVersion(deployment)} current`,
      logger,
      signal: stopping.signal,
    }).then((promotion) => {
      if (!promotion) return;
      if (promotion.outcome === 'left')
        logger.warn(
          { build: describeVersion(deployment), current: describeVersion(promotion.current), reason: promotion.reason },
          'Build not made current: new workflows start on the current build (temporal worker deployment set-current-version)',
        );
      else logger.info({ build: describeVersion(deployment), outcome: promotion.outcome }, 'Build is current');
    });
  } else if (deployment) {
    logger.info(
      { build: describeVersion(deployment) },
      'Build not made current (ADCP_WORKER_PROMOTE=never): temporal worker deployment set-current-version',
    );
  }
  // One capabilities workflow per seller (#14): started if it is not running, left alone if it is. Beside polling,
  // not before it: nothing waits on them (a seller not asked yet is allowed every task), so a slow Temporal delays
  // only this, and a failure is logged and tried again until the worker stops.
  const capabilities = new SellerCapabilitiesClient({ client, taskQueue: runtime.taskQueue, sellers: sellerRegistry });
  void keepTrying(() => capabilities.ensureAll(), {
    what: "Starting the sellers' capabilities workflows",
    logger,
    signal: stopping.signal,
  }).then((sellers) => {
    if (sellers) logger.info({ sellers }, 'Seller capabilities kept');
  });
  try {
    await running;
  } finally {
    stopping.abort();
    // Flush the last spans first: closing connections below may fail and end the process.
    await tracing?.shutdown().catch(() => undefined);
    // @adcp/sdk's root module costs about 20 MiB of RSS the worker never needs while it runs (bench/README.md, run G):
    // loaded only here, to close the SDK's own cached MCP connections, if any call made one.
    await import('@adcp/sdk').then((sdk) => sdk.closeMCPConnections()).catch(() => undefined);
    closeIdleMcpConnections();
    await client.connection.close();
    await connection.close();
  }
}

main().catch((error) => {
  console.error(`worker: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
