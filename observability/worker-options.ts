/**
 * What observability adds to a worker: the correlation-field interceptors (always) and, when tracing is on, the
 * OpenTelemetry interceptors and their workflow span sink. Workflow interceptor modules go into the workflow
 * bundle: a worker that bundles at start gets them here; a prebuilt bundle must be built with
 * workflowInterceptorModules() (Temporal ignores interceptor modules next to a prebuilt bundle).
 */
import type { WorkerOptions } from '@temporalio/worker';
import { activityLogInterceptors } from './log-attributes';
import { type Tracing, tracingWorkerOptions } from './tracing';
import { workflowInterceptorModules } from './workflow-modules';

export function observabilityWorkerOptions(options: {
  tracing?: Tracing;
  /** A prebuilt bundle carries its workflow interceptors already. */
  prebuiltBundle: boolean;
}): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  const tracing = options.tracing ? tracingWorkerOptions(options.tracing) : undefined;
  return {
    interceptors: {
      activity: [activityLogInterceptors, ...(tracing?.activity ?? [])],
      ...(options.prebuiltBundle ? {} : { workflowModules: workflowInterceptorModules(options.tracing !== undefined) }),
    },
    ...(tracing ? { sinks: tracing.sinks } : {}),
  };
}
