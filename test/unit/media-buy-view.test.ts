/**
 * The media buy as HTTP readers see it (api/media-buys.ts mediaBuyView): snake_case throughout, as the operations API
 * and the README promise, with package IDs, metric names and what the seller wrote kept as they are.
 */
import { mediaBuyView } from '../../api/media-buys';
import type { MediaBuyState } from '../../contract/media-buy';
import { newMediaBuyState } from '../../workflows/media-buy/machine';

function buy(): MediaBuyState {
  const state = newMediaBuyState({
    buyKey: 'po-1',
    workflowId: 'adcp-media-buy-po-1',
    sellerId: 'seller',
    createOperationId: 'adcp-create_media_buy-po-1',
    nowMs: Date.parse('2026-11-30T08:00:00Z'),
    params: { start_time: '2026-12-01T00:00:00Z', end_time: '2026-12-31T00:00:00Z' },
  });
  state.mediaBuyId = 'mb_1';
  state.status = 'active';
  state.health = { deliveryState: 'ok' };
  state.packages = {
    pkgA: {
      packageId: 'pkgA',
      productId: 'display',
      budget: 5000,
      creativeDeadline: '2026-11-30T12:00:00Z',
      creativeIds: ['cr1'],
    },
  };
  state.changes = [
    {
      sequence: 1,
      kind: 'budget',
      requestedBy: 'ops@buyer',
      requestedAt: '2026-11-30T09:00:00Z',
      operationId: 'adcp-update_media_buy-po-1.change-1',
      outcome: 'failed',
      taskStatus: 'failed',
      error: {
        code: 'BUDGET_TOO_LOW',
        message: 'no',
        recovery: 'correctable',
        retryAfterSeconds: 5,
        details: { minBudget: 100 },
      },
      finishedAt: '2026-11-30T09:01:00Z',
      statusAfter: 'active',
    },
  ];
  state.creatives = {
    cr1: {
      creativeId: 'cr1',
      action: 'created',
      status: 'approved',
      packageIds: ['pkgA'],
      syncedAt: '2026-11-30T09:02:00Z',
    },
  };
  state.creativeAlerts = [
    {
      kind: 'deadline_approaching',
      at: '2026-11-30T10:00:00Z',
      deadline: '2026-11-30T12:00:00Z',
      packagesLacking: ['pkgA'],
    },
  ];
  state.reporting.byPackage = { pkgA: { impressions: 100, spend: 2.5 } };
  state.reporting.reconciliation = {
    at: '2026-12-31T01:00:00Z',
    seller: { totals: { impressions: 100 }, byPackage: { pkgA: { impressions: 100 } } },
    ours: { impressions: 100 },
    impressionsVariance: 0,
    spendVariance: 0,
    outcome: 'reconciled',
    replaced: false,
  };
  return state;
}

test("every key the orchestrator names is snake_case; IDs, metric names and the seller's own objects are kept", () => {
  const view = mediaBuyView('adcp-media-buy-po-1', true, buy(), {}) as Record<string, any>;
  expect(view.packages).toEqual([
    {
      package_id: 'pkgA',
      product_id: 'display',
      budget: 5000,
      creative_deadline: '2026-11-30T12:00:00Z',
      creative_ids: ['cr1'],
    },
  ]);
  expect(view.changes[0]).toMatchObject({
    requested_by: 'ops@buyer',
    requested_at: '2026-11-30T09:00:00Z',
    operation_id: 'adcp-update_media_buy-po-1.change-1',
    task_status: 'failed',
    finished_at: '2026-11-30T09:01:00Z',
    status_after: 'active',
    error: { code: 'BUDGET_TOO_LOW', retry_after: 5, details: { minBudget: 100 } },
  });
  expect(view.creatives[0]).toMatchObject({
    creative_id: 'cr1',
    package_ids: ['pkgA'],
    synced_at: '2026-11-30T09:02:00Z',
  });
  expect(view.creative_alerts[0].packages_lacking).toEqual(['pkgA']);
  expect(view.delivery.by_package).toEqual({ pkgA: { impressions: 100, spend: 2.5 } });
  expect(view.delivery.reconciliation).toMatchObject({
    seller: { by_package: { pkgA: { impressions: 100 } } },
    impressions_variance: 0,
    spend_variance: 0,
  });
  // The seller's health object is as the seller wrote it.
  expect(view.health).toEqual({ deliveryState: 'ok' });

  const camel: string[] = [];
  const walk = (value: unknown, path: string) => {
    if (Array.isArray(value)) value.forEach((item, index) => walk(item, `${path}[${index}]`));
    else if (value && typeof value === 'object')
      for (const [key, item] of Object.entries(value)) {
        const at = `${path}.${key}`;
        // Kept as they are: the seller's objects, and maps keyed by package ID.
        if (/^\.(health|impairments)$|\.details$|\.by_package$/.test(at)) continue;
        if (/[A-Z]/.test(key)) camel.push(at);
        walk(item, at);
      }
  };
  walk(view, '');
  expect(camel).toEqual([]);
});
