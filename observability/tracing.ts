/**
 * OpenTelemetry traces: client → workflow → activity → the seller's HTTP call, through
 * @temporalio/interceptors-opentelemetry (client, activity and workflow interceptors, and the sink that exports
 * the spans workflows make in their sandbox) plus one span of our own around each @adcp/sdk call
 * (activities/seller-spans.ts). Exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; otherwise nothing is installed: no provider, no interceptors, and the
 * seller span is the OpenTelemetry API's no-op.
 */
import type { WorkflowClientInterceptor } from '@temporalio/client';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
  type OpenTelemetryWorkflowExporter,
  makeWorkflowExporter,
} from '@temporalio/interceptors-opentelemetry';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { z } from 'zod';
import { ConfigError } from '../config/errors';
import { formatZodIssues } from '../config/zod-format';
import { OTEL_WORKFLOW_INTERCEPTORS, tracingConfigured } from './workflow-modules';

export interface Tracing {
  provider: NodeTracerProvider;
  resource: Resource;
  spanProcessor: SpanProcessor;
  /** Flushes and stops exporting (on shutdown). */
  shutdown(): Promise<void>;
}

const endpointSchema = z.object({
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
});

/** Installs a tracer provider with `spanProcessor` as the process's global one (tests pass an in-memory exporter). */
export function startTracing(options: { serviceName: string; spanProcessor: SpanProcessor }): Tracing {
  const resource = new Resource({ 'service.name': options.serviceName });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [options.spanProcessor] });
  provider.register();
  return { provider, resource, spanProcessor: options.spanProcessor, shutdown: () => provider.shutdown() };
}

/**
 * Tracing as the environment configures it: OTLP/HTTP export (the exporter reads the OTEL_EXPORTER_OTLP_* variables
 * itself: endpoint, headers, timeout) when an endpoint is set; undefined, and nothing installed, when none is.
 */
export function tracingFromEnvironment(defaultServiceName: string, env: NodeJS.ProcessEnv = process.env) {
  const parsed = endpointSchema.safeParse(env);
  if (!parsed.success) throw new ConfigError(`Invalid environment: ${formatZodIssues(parsed.error.issues)}`);
  const { OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_SERVICE_NAME } = parsed.data;
  if (!tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT })) return undefined;
  return startTracing({
    serviceName: OTEL_SERVICE_NAME ?? defaultServiceName,
    spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter()),
  });
}

/** Client interceptors that open a span per start/signal/update/query and pass its context to the workflow. */
export function tracingClientInterceptors(tracing: Tracing | undefined): WorkflowClientInterceptor[] {
  return tracing ? [new OpenTelemetryWorkflowClientInterceptor()] : [];
}

/** The worker's share: activity interceptors, the workflow interceptor module and the workflow span sink. */
export function tracingWorkerOptions(tracing: Tracing): {
  activity: ActivityInterceptorsFactory[];
  workflowModules: string[];
  sinks: InjectedSinks<{ exporter: OpenTelemetryWorkflowExporter }>;
} {
  return {
    activity: [
      (context) => ({
        inbound: new OpenTelemetryActivityInboundInterceptor(context),
        outbound: new OpenTelemetryActivityOutboundInterceptor(context),
      }),
    ],
    workflowModules: [OTEL_WORKFLOW_INTERCEPTORS],
    sinks: { exporter: makeWorkflowExporter(tracing.spanProcessor, tracing.resource) },
  };
}
