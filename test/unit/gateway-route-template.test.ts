/**
 * The route template of a request answered before routing (401/403/429 from the protections): known /v1 words
 * only, so invented paths cannot grow the metric's series.
 */
import { templateOfPath } from '../../observability/gateway-metrics';

test.each([
  ['/v1/operations', '/v1/operations'],
  ['/v1/operations?status=pending', '/v1/operations'],
  ['/v1/operations/adcp-get_products-acme:key-1', '/v1/operations/:id'],
  ['/v1/operations/op-1/', '/v1/operations/:id'],
  ['/v1/operations/op-1/cancel', '/v1/operations/:id/cancel'],
  ['/V1/Media-Buys/mb-1/Changes', '/v1/media-buys/:id/changes'],
  ['/v1/campaigns/c-1/approval', '/v1/campaigns/:id/approval'],
  ['/v1/sellers/demo/capabilities-changed', '/v1/sellers/:id/capabilities-changed'],
])('%s is counted as %s', (path, template) => {
  expect(templateOfPath(path)).toBe(template);
});

test.each([
  '/',
  '/v1',
  '/v1/anything-else',
  '/v1/operations/op-1/invented',
  '/v1/operations/op-1/cancel/extra',
  '/v2/operations',
  '/webhooks/adcp/op-1',
])('%s stays unmatched', (path) => {
  expect(templateOfPath(path)).toBe('unmatched');
});
