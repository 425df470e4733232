/**
 * The gateway as it runs, with its request log around everything (requests that authentication refuses included):
 * every answer carries an X-Request-Id and leaves one log line. The metrics and GET /metrics are createGateway's
 * own (api/app.ts, observability/gateway-metrics.ts).
 */
import express from 'express';
import type { Logger } from './logger';
import { requestLogging } from './request-logging';

export function observeGateway(app: express.Express, options: { logger: Logger }): express.Express {
  const outer = express();
  outer.disable('x-powered-by');
  outer.set('trust proxy', app.get('trust proxy'));
  outer.use(requestLogging(options.logger));
  outer.use(app);
  return outer;
}
