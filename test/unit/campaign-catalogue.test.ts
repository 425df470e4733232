/** The pure parts of campaigns: capabilities parsing and task support, catalogue normalisation and ranking, the campaign's rules. */
import { parseCapabilities, supportsTask } from '../../protocol/capabilities';
import { type CatalogueEntry, defaultScorer, normaliseProducts, rankCatalogue } from '../../protocol/catalogue';
import { splitBudget } from '../../activities/campaign';
import {
  guardedTotal,
  indexCatalogue,
  policySelection,
  validateCampaignChange,
  validateSelection,
} from '../../workflows/campaign/rules';
import type { CampaignBuy } from '../../contract/campaign';

describe('capabilities', () => {
  const answer = {
    adcp: {
      major_versions: [3],
      supported_versions: ['3.0', '3.1'],
      idempotency: { supported: true, replay_ttl_seconds: 600 },
    },
    supported_protocols: ['media_buy'],
    account: { supported_billing: ['operator'], require_operator_auth: false },
    media_buy: { reporting_delivery_methods: ['webhook'], supports_proposals: true, supported_pricing_models: ['cpm'] },
  };

  test('versions, idempotency window, account model and reporting come from the answer', () => {
    const parsed = parseCapabilities(answer, { tools: ['get_products', 'create_media_buy', 'get_task_status'] });
    expect(parsed).toMatchObject({
      adcpVersions: ['3.0', '3.1'],
      wireVersion: '3.1',
      idempotency: { supported: true, replayTtlSeconds: 600 },
      account: { supportedBilling: ['operator'], requireOperatorAuth: false },
      reporting: { webhooks: true, deliveryMethods: ['webhook'] },
      supportsProposals: true,
      tasksSource: 'tools',
      readMethods: ['get_task_status'],
    });
  });

  test('a tool list decides which tasks are offered; without one the protocols do', () => {
    const fromTools = parseCapabilities(answer, { tools: ['get_products'] });
    expect(supportsTask(fromTools, 'get_products')).toEqual({ supported: true });
    expect(supportsTask(fromTools, 'create_media_buy')).toMatchObject({ supported: false });
    const fromProtocols = parseCapabilities(answer);
    expect(supportsTask(fromProtocols, 'create_media_buy')).toEqual({ supported: true });
    expect(supportsTask(fromProtocols, 'get_signals')).toMatchObject({
      supported: false,
      reason: expect.stringMatching(/media_buy/),
    });
  });

  test('unknown capabilities refuse nothing; rc.2 sellers are rc.2 on the wire', () => {
    expect(supportsTask(undefined, 'anything')).toEqual({ supported: true });
    expect(parseCapabilities({}, { configuredVersion: 'rc.2' }).wireVersion).toBe('rc.2');
  });
});

describe('catalogue', () => {
  const answer = {
    products: [
      {
        product_id: 'p1',
        name: 'P1',
        delivery_type: 'non_guaranteed',
        channels: ['display'],
        format_ids: [{ id: 'display_300x250' }],
        pricing_options: [{ pricing_option_id: 'cpm1', pricing_model: 'cpm', floor_price: 4, currency: 'USD' }],
      },
      {
        product_id: 'p2',
        delivery_type: 'guaranteed',
        pricing_options: [{ pricing_model: 'cpm', fixed_price: 20 }],
        forecast: { impressions: 1 },
      },
      { name: 'no id' },
    ],
    proposals: [{ proposal_id: 'prop1', name: 'Plan', proposal_status: 'draft', allocations: [{ product_id: 'p1' }] }],
    incomplete: [{ scope: 'products', reason: 'time_budget' }],
  };

  test('normalises products, keeps proposals and incomplete[] as offered, drops products without an id', () => {
    const catalogue = normaliseProducts('s1', answer);
    expect(catalogue.entries.map((entry) => entry.productId)).toEqual(['p1', 'p2']);
    expect(catalogue.entries[0]).toMatchObject({
      sellerId: 's1',
      formats: ['display_300x250'],
      pricingOptions: [{ pricingOptionId: 'cpm1', price: 4, fixed: false }],
    });
    expect(catalogue.proposals).toEqual([expect.objectContaining({ proposalId: 'prop1', status: 'draft' })]);
    expect(catalogue.incomplete).toEqual([{ sellerId: 's1', entries: [{ scope: 'products', reason: 'time_budget' }] }]);
  });

  test('ranking is deterministic, follows the preferences, and the scorer is replaceable', () => {
    const entries = normaliseProducts('s1', answer).entries;
    const ranked = rankCatalogue(entries, { preferredDeliveryTypes: ['guaranteed'] });
    expect(ranked.map((entry) => entry.productId)).toEqual(['p2', 'p1']);
    expect(rankCatalogue([...entries].reverse(), { preferredDeliveryTypes: ['guaranteed'] })).toEqual(ranked);
    expect(rankCatalogue(entries, { maxCpm: 10 })[0].productId).toBe('p1');
    const byName = rankCatalogue(entries, {}, (entry: CatalogueEntry) => ({ score: entry.name ? 1 : 0, reasons: [] }));
    expect(byName[0].productId).toBe('p1');
    expect(defaultScorer(entries[1], { maxCpm: 10 }).score).toBeLessThan(0);
  });
});

describe('campaign rules', () => {
  const entries = [
    ...normaliseProducts('a', { products: [{ product_id: 'a1', pricing_options: [{ pricing_option_id: 'x' }] }] })
      .entries,
    ...normaliseProducts('b', { products: [{ product_id: 'b1' }, { product_id: 'b2' }] }).entries,
  ];
  const products = indexCatalogue(entries);

  test('a selection names discovered products within the budget, before approval', () => {
    const lines = [
      { sellerId: 'a', productId: 'a1', budget: 600 },
      { sellerId: 'b', productId: 'b1', budget: 400 },
    ];
    expect(validateSelection('selecting', 1000, products, { lines, selectedBy: 'p' })).toEqual({ ok: true });
    expect(validateSelection('selecting', 999, products, { lines, selectedBy: 'p' })).toMatchObject({
      code: 'BUDGET_EXCEEDED',
    });
    expect(
      validateSelection('selecting', 1000, products, {
        lines: [{ sellerId: 'a', productId: 'zz', budget: 1 }],
        selectedBy: 'p',
      }),
    ).toMatchObject({ code: 'PRODUCT_NOT_FOUND' });
    expect(
      validateSelection('selecting', 1000, products, {
        lines: [{ sellerId: 'a', productId: 'a1', pricingOptionId: 'nope', budget: 1 }],
        selectedBy: 'p',
      }),
    ).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(validateSelection('live', 1000, products, { lines, selectedBy: 'p' })).toMatchObject({
      code: 'INVALID_STATE',
    });
  });

  test("the top_ranked policy takes each seller's best product and splits the budget to the cent", () => {
    const ranked = rankCatalogue(entries);
    const lines = policySelection(ranked, 100, { kind: 'top_ranked' });
    expect(lines.map((line) => line.sellerId).sort()).toEqual(['a', 'b']);
    expect(lines.reduce((sum, line) => sum + line.budget, 0)).toBe(100);
    expect(policySelection(ranked, 100, { kind: 'top_ranked', maxSellers: 1 })).toHaveLength(1);
    expect(policySelection(rankCatalogue(entries), 10, { kind: 'top_ranked' }).map((line) => line.budget)).toEqual([
      5, 5,
    ]);
  });

  test('the budget guard counts raises in flight and refuses what would exceed the budget', () => {
    const buy = (committedBudget: number, pendingBudget?: number): CampaignBuy => ({
      sellerId: 'x',
      buyKey: 'k',
      workflowId: 'w',
      lines: [],
      committedBudget,
      ...(pendingBudget !== undefined ? { pendingBudget } : {}),
    });
    const state = { phase: 'live' as const, totalBudget: 1000, buys: { a: buy(400, 550), b: buy(400) } };
    expect(guardedTotal(state.buys)).toBe(950);
    expect(validateCampaignChange(state, { kind: 'budget', requestedBy: 'p', sellerId: 'b', budget: 450 })).toEqual({
      ok: true,
    });
    expect(
      validateCampaignChange(state, { kind: 'budget', requestedBy: 'p', sellerId: 'b', budget: 451 }),
    ).toMatchObject({
      code: 'BUDGET_EXCEEDED',
    });
    // Lowering never needs room; an unknown seller or a finished campaign is refused.
    expect(validateCampaignChange(state, { kind: 'budget', requestedBy: 'p', sellerId: 'a', budget: 10 })).toEqual({
      ok: true,
    });
    expect(
      validateCampaignChange(state, { kind: 'budget', requestedBy: 'p', sellerId: 'zz', budget: 10 }),
    ).toMatchObject({
      // A conflict with the campaign's state (HTTP 409), as the media-buy routes answer a change they cannot apply.
      code: 'INVALID_STATE',
    });
    expect(validateCampaignChange({ ...state, phase: 'canceled' }, { kind: 'cancel', requestedBy: 'p' })).toMatchObject(
      {
        code: 'INVALID_STATE',
      },
    );
    expect(validateCampaignChange({ ...state, phase: 'selecting' }, { kind: 'pause', requestedBy: 'p' })).toMatchObject(
      {
        code: 'INVALID_STATE',
      },
    );
  });

  test('a buy budget is split over its packages in proportion, to the cent', () => {
    const packages = {
      p1: { packageId: 'p1', budget: 300, creativeIds: [] },
      p2: { packageId: 'p2', budget: 100, creativeIds: [] },
    };
    expect(splitBudget(packages, 1000)).toEqual({ p1: 750, p2: 250 });
    const odd = splitBudget(packages, 100.01);
    expect(odd.p1 + odd.p2).toBeCloseTo(100.01, 2);
  });
});
