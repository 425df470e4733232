/**
 * TemporalPinoLogger: Temporal's lines in pino. Lines below the level cost no field building, yet the seller and task
 * they carry still reach the lines that are written about the same workflow.
 */
import { TemporalPinoLogger, createLogger } from '../../observability/logger';

function capture(level: string): { logger: TemporalPinoLogger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const pinoLogger = createLogger({
    service: 'worker',
    env: { ADCP_LOG_LEVEL: level, ADCP_LOG_FORMAT: 'json' },
    destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  return { logger: new TemporalPinoLogger(pinoLogger), lines };
}

test('a line below the level is not written, and its seller and task still correlate later lines', () => {
  const { logger, lines } = capture('info');
  logger.debug('Workflow activation', { workflowId: 'op-1', seller: 'acme', task: 'get_products', taskToken: 'x' });
  expect(lines).toHaveLength(0);
  logger.info('Activity started', { workflowId: 'op-1', activityType: 'sendCall' });
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({
    operationId: 'op-1',
    seller: 'acme',
    task: 'get_products',
    msg: 'Activity started',
  });
});

test('at debug the same line is written with its fields, the task token left out and workflowRunId named runId', () => {
  const { logger, lines } = capture('debug');
  logger.debug('Workflow activation', { workflowId: 'op-2', workflowRunId: 'run-9', taskToken: 'secret' });
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({ operationId: 'op-2', runId: 'run-9', level: expect.anything() });
  expect(lines[0]).not.toHaveProperty('taskToken');
});
