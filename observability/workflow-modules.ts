/**
 * The workflow interceptor modules that go into the workflow bundle (workers/workflow-bundle.ts), decided from the
 * environment the bundle is built in: the correlation-field module always, OpenTelemetry's when an OTLP endpoint
 * is configured. Light on purpose (no OpenTelemetry import): the bundling child process loads it.
 */

export const WORKFLOW_LOG_INTERCEPTORS = require.resolve('./workflow-log-attributes');

/** Opens workflow spans and carries the trace context to activities. */
export const OTEL_WORKFLOW_INTERCEPTORS =
  require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/** Whether the environment asks for traces (an OTLP endpoint for traces is set). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

export function workflowInterceptorModules(tracing: boolean): string[] {
  return [WORKFLOW_LOG_INTERCEPTORS, ...(tracing ? [OTEL_WORKFLOW_INTERCEPTORS] : [])];
}
