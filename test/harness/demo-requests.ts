import { DEMO_ACCOUNT, DEMO_BRAND } from '../../scripts/lib/demo-seller';

export const getProductsParams = {
  buying_mode: 'brief',
  brief: 'Outdoor billboards for a spring campaign',
  account: DEMO_ACCOUNT,
  brand: DEMO_BRAND,
};

/**
 * A budget no other test uses: the mock ad server is shared by test files running in parallel, so a test
 * counts "its" media buys by their budget.
 */
export function uniqueBudget(): number {
  return 20_000 + Math.floor(Math.random() * 1_000_000);
}

/** A create_media_buy the demo seller accepts: its one guaranteed product at its fixed CPM option. */
export function createMediaBuyParams(budget = uniqueBudget()): Record<string, unknown> {
  const day = 86_400_000;
  const start = new Date(Date.UTC(2027, 2, 1));
  return {
    account: DEMO_ACCOUNT,
    brand: DEMO_BRAND,
    start_time: start.toISOString(),
    end_time: new Date(start.getTime() + 30 * day).toISOString(),
    packages: [{ product_id: 'acme_dooh_billboards_q2', pricing_option_id: 'cpm_guaranteed_fixed', budget }],
  };
}
