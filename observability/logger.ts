/**
 * Structured logs for the gateway, the worker and the activities: pino JSON lines on stdout (pretty through
 * pino-pretty when stdout is a terminal), at the level ADCP_LOG_LEVEL names. Temporal's own loggers (the runtime,
 * workflow `log`, activity `log`) are routed into the same pino logger by TemporalPinoLogger, so one stream
 * carries every line, each with the operation's correlation fields (see observability/log-attributes.ts).
 */
import type { LogLevel, LogMetadata, Logger as TemporalLogger } from '@temporalio/common';
import pino, { type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';
import { z } from 'zod';
import { ConfigError } from '../config/errors';
import { formatZodIssues } from '../config/zod-format';

export type { Logger } from 'pino';

const loggingSchema = z.object({
  ADCP_LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  /** `pretty` or `json`; unset: pretty when stdout is a terminal, JSON otherwise. */
  ADCP_LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
});

export interface LoggerOptions {
  /** The process's role (`gateway`, `worker`): the `service` field of every line. */
  service: string;
  env?: NodeJS.ProcessEnv;
  /** Where lines go (tests capture them); default stdout. */
  destination?: DestinationStream;
  /**
   * JSON lines to stdout written synchronously (default) or buffered and written asynchronously. The gateway writes a
   * line per request: asynchronous, the lines of requests answered together go out in one write instead of one each.
   * Lines still buffered when the process exits are flushed on exit (pino registers that for its destinations).
   */
  sync?: boolean;
}

export function createLogger(options: LoggerOptions): Logger {
  const parsed = loggingSchema.safeParse(options.env ?? process.env);
  if (!parsed.success) throw new ConfigError(`Invalid environment: ${formatZodIssues(parsed.error.issues)}`);
  const format = parsed.data.ADCP_LOG_FORMAT ?? (process.stdout.isTTY && !options.destination ? 'pretty' : 'json');
  const destination =
    format === 'pretty'
      ? pretty({
          colorize: process.stdout.isTTY === true,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname',
          destination: options.destination ?? 1,
        })
      : (options.destination ?? pino.destination({ dest: 1, sync: options.sync ?? true }));
  return pino(
    {
      level: parsed.data.ADCP_LOG_LEVEL,
      base: { service: options.service },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Level names ("info") instead of numbers in JSON: readable in any log store without a mapping.
      ...(format === 'json' ? { formatters: { level: (label: string) => ({ level: label }) } } : {}),
    },
    destination,
  );
}

/** Workflows whose seller and task the Temporal logger remembers (see TemporalPinoLogger.correlate). */
const KNOWN_WORKFLOWS = 10_000;

const LEVELS = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const;

/**
 * Temporal's Logger interface over pino, for `Runtime.install({ logger })`: the worker's, the workflows' and the
 * activities' lines. Temporal names the activity's run `workflowRunId`; it is logged as `runId` like the
 * workflow's, and every line about a workflow carries `operationId` (the workflow ID).
 */
export class TemporalPinoLogger implements TemporalLogger {
  /** Seller and task last seen per workflow, most recent last (bounded). */
  private readonly known = new Map<string, { seller: string; task: string }>();

  constructor(private readonly logger: Logger) {}

  log(level: LogLevel, message: string, meta: LogMetadata = {}): void {
    if (!this.logger.isLevelEnabled(LEVELS[level])) {
      // Temporal's trace and debug lines (every activation and activity) cost nothing more at the usual levels; the
      // seller and task they carry are still remembered for the lines that are written.
      if (typeof meta.workflowId === 'string')
        this.correlate(meta.workflowId, { seller: meta.seller, task: meta.task });
      return;
    }
    const fields: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(meta)) {
      // The task token is an opaque credential-like blob; the timestamp symbol is not enumerable as a string key.
      if (key === 'taskToken' || value === undefined) continue;
      // Temporal passes failures as `error`: pino would write an Error as {} (its fields are not enumerable).
      fields[key === 'workflowRunId' ? 'runId' : key] = value instanceof Error ? pino.stdSerializers.err(value) : value;
    }
    const workflowId = fields.workflowId;
    if (typeof workflowId === 'string') {
      if (fields.operationId === undefined) fields.operationId = workflowId;
      this.correlate(workflowId, fields);
    }
    this.logger[LEVELS[level]](fields, message);
  }

  /**
   * Temporal writes a few lines before any interceptor has seen the activity's input ("Activity started"): those take
   * the seller and task that the workflow's own lines (observability/workflow-log-attributes.ts) carried.
   */
  private correlate(workflowId: string, fields: Record<string, unknown>): void {
    const { seller, task } = fields;
    if (typeof seller === 'string' && typeof task === 'string') {
      if (!this.known.has(workflowId) && this.known.size >= KNOWN_WORKFLOWS)
        this.known.delete(this.known.keys().next().value!);
      this.known.set(workflowId, { seller, task });
      return;
    }
    const known = this.known.get(workflowId);
    if (!known) return;
    if (seller === undefined) fields.seller = known.seller;
    if (task === undefined) fields.task = known.task;
  }

  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}

/** An error as log fields (pino's `err` serializer keeps type, message and stack). */
export function errorFields(error: unknown): { err: unknown } {
  return { err: error instanceof Error ? error : new Error(String(error)) };
}
