/**
 * A client span around every @adcp/sdk call to a seller, with the seller, task and protocol as attributes: the
 * leaf of an operation's trace (client → workflow → activity → seller). Without a registered tracer provider the
 * OpenTelemetry API hands out no-op spans, so this costs nothing when tracing is off.
 */
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { CallContext, SellerClient } from './seller-client';

const tracer = trace.getTracer('adcp-orchestrator');

export const SELLER_SPAN_ATTRIBUTES = {
  seller: 'adcp.seller',
  task: 'adcp.task',
  protocol: 'adcp.protocol',
  method: 'adcp.method',
  taskId: 'adcp.task_id',
} as const;

/** Host and port only: a seller URL's path or query may carry something not meant for a trace store. */
function serverAddress(url: string): Record<string, string> {
  try {
    return { 'server.address': new URL(url).host };
  } catch {
    return {};
  }
}

function inSpan<T>(
  name: string,
  context: CallContext,
  attributes: Record<string, string | undefined>,
  work: () => Promise<T>,
): Promise<T> {
  const defined: Record<string, string> = {
    [SELLER_SPAN_ATTRIBUTES.seller]: context.agent.id,
    [SELLER_SPAN_ATTRIBUTES.protocol]: context.agent.protocol,
    ...serverAddress(context.agent.url),
  };
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) defined[key] = value;
  return tracer.startActiveSpan(name, { kind: SpanKind.CLIENT, attributes: defined }, async (span) => {
    try {
      return await work();
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The same seller client, each call in its own span named `adcp <task>` (or the read/list/cancel it makes). */
export function tracedSellerClient(seller: SellerClient): SellerClient {
  const { task: taskKey, method, taskId } = SELLER_SPAN_ATTRIBUTES;
  return {
    callTask: (request) =>
      inSpan(`adcp ${request.task}`, request, { [taskKey]: request.task, [method]: 'call' }, () =>
        seller.callTask(request),
      ),
    getTask: (request) =>
      inSpan('adcp tasks/get', request, { [method]: 'tasks/get', [taskId]: request.taskId }, () =>
        seller.getTask(request),
      ),
    cancelTask: (request) =>
      inSpan('adcp tasks/cancel', request, { [method]: 'tasks/cancel', [taskId]: request.taskId }, () =>
        seller.cancelTask(request),
      ),
    listTasks: (request) =>
      inSpan('adcp tasks/list', request, { [method]: 'tasks/list' }, () => seller.listTasks(request)),
    describe: (request) => inSpan('adcp describe', request, { [method]: 'describe' }, () => seller.describe(request)),
    readTask: (request) =>
      inSpan(
        `adcp ${request.method}`,
        request,
        { [taskKey]: request.task, [method]: request.method, [taskId]: request.taskId },
        () => seller.readTask(request),
      ),
  };
}
