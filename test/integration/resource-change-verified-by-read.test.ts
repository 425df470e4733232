/**
 * "Applied" only when the seller's buy shows it (issue 24, item 7). A change is verified by a read of the buy where
 * the seller offers one: `applied` when the read shows the change, a change the seller answered but did not make
 * ends `*_NOT_APPLIED` (as a cancel answered with a live buy does), and the buy's view follows the seller after every
 * change. Delivery is checked against the buy too: a package the buy does not have is an anomaly, and the lifetime
 * pull at the end of the flight counts as a pull.
 *
 * Sellers: one that answers pause and package pause with success and applies neither, answering as 3.0 sellers do
 * (`affected_packages`, no status); one that applies a packages change (budget, creative_assignments) and answers
 * the same way; one whose delivery carries a package id the buy does not have.
 */
import { type ResourceGateway, type View, startResourceGateway } from '../harness/resource-gateway';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    mediaBuySellers: {
      'ignores-pause': { ignores: ['paused', 'packages.paused'], updateAnswer: 'affected-packages' },
      'terse-answers': { updateAnswer: 'affected-packages' },
      'stray-package': { deliveryExtraPackage: 'pkg_not_in_this_buy' },
    },
    webhooks: false,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

function buyParams(account: string, endMs = Date.now() + 30 * DAY): Record<string, unknown> {
  return {
    account: { account_id: account },
    brand: { domain: 'acme.example' },
    start_time: new Date(Date.now() - HOUR).toISOString(),
    end_time: new Date(endMs).toISOString(),
    packages: [{ product_id: 'display_a', pricing_option_id: 'cpm', budget: 10_000 }],
  };
}

/** A buy delivering at `sellerId`: created, a creative assigned, active by the seller's clock and in our view. */
async function activeBuy(sellerId: string): Promise<{ id: string; mediaBuyId: string; packageId: string }> {
  const id = await gateway.mediaBuys.create(sellerId, buyParams(`acct_${sellerId}`));
  const pending = await gateway.mediaBuys.waitFor(id, (view) => view.status === 'pending_creatives');
  const packageId = String(pending.packages[0].package_id);
  const attached = await gateway.http('POST', `/v1/media-buys/${id}/creatives`, {
    creatives: [{ creative_id: 'cr_first' }],
    assignments: { cr_first: [packageId] },
    requested_by: 'trafficker@buyer',
  });
  expect(attached.status).toBe(200);
  await gateway.mediaBuys.waitFor(id, (view) => view.status === 'active', 20_000);
  return { id, mediaBuyId: String(pending.media_buy_id), packageId };
}

describe('a change the seller answered but did not make', () => {
  test('pause: not applied (PAUSE_NOT_APPLIED), and the view says what the seller says: active', async () => {
    const seller = gateway.mediaBuySellers['ignores-pause'];
    const { id, mediaBuyId } = await activeBuy('ignores-pause');
    const answer = await gateway.mediaBuys.change(id, { kind: 'pause', reason: 'creative review' });
    expect(seller.buy(mediaBuyId)!.updates.at(-1)?.args.paused).toBe(true);
    expect(seller.statusOf(mediaBuyId)).toBe('active');

    expect(answer.body.outcome).not.toBe('applied');
    expect(answer.status).toBe(409);
    expect(answer.body.error?.code).toBe('PAUSE_NOT_APPLIED');
    expect((await gateway.mediaBuys.view(id)).status).toBe('active');
  }, 90_000);

  test('package pause: not applied (*_NOT_APPLIED), and the package is not shown paused', async () => {
    const seller = gateway.mediaBuySellers['ignores-pause'];
    const { id, mediaBuyId, packageId } = await activeBuy('ignores-pause');
    const answer = await gateway.mediaBuys.change(id, {
      kind: 'packages',
      packages: [{ package_id: packageId, paused: true }],
    });
    expect(seller.buy(mediaBuyId)!.updates.at(-1)?.outcome).toBe('applied');

    expect(answer.body.outcome).not.toBe('applied');
    expect(answer.body.error?.code).toMatch(/_NOT_APPLIED$/);
    const view = await gateway.mediaBuys.view(id);
    expect((view.packages as View[]).find((pkg) => pkg.package_id === packageId)?.paused).not.toBe(true);
  }, 90_000);
});

test('a packages change the seller applied: the view shows its budget and creatives as the seller has them', async () => {
  const seller = gateway.mediaBuySellers['terse-answers'];
  const { id, mediaBuyId, packageId } = await activeBuy('terse-answers');
  const answer = await gateway.mediaBuys.change(id, {
    kind: 'packages',
    packages: [{ package_id: packageId, budget: 12_345, creative_assignments: [{ creative_id: 'cr_second' }] }],
  });
  expect(seller.buy(mediaBuyId)!.updates.at(-1)?.outcome).toBe('applied');
  expect(answer.status).toBe(200);

  const view = await gateway.mediaBuys.view(id);
  const pkg = (view.packages as View[]).find((entry) => entry.package_id === packageId);
  expect(pkg?.budget).toBe(12_345);
  expect(pkg?.creative_ids).toEqual(['cr_second']);
}, 90_000);

describe('delivery at the end of a flight', () => {
  let ended: Promise<View> | undefined;
  /** A buy whose flight ends seconds from now; after its end a refresh reads it completed, and it settles. */
  function endedBuy(): Promise<View> {
    ended ??= (async () => {
      const endMs = Date.now() + 4_000;
      const id = await gateway.mediaBuys.create('stray-package', buyParams('acct_stray', endMs));
      await gateway.mediaBuys.waitFor(id, (view) => view.status === 'pending_creatives');
      await new Promise((resolve) => setTimeout(resolve, Math.max(endMs - Date.now(), 0) + 1_000));
      expect((await gateway.mediaBuys.refresh(id)).status).toBe(202);
      return gateway.mediaBuys.waitFor(id, (view) => view.done === true, 30_000);
    })();
    return ended;
  }

  test('the lifetime pull counts as a pull', async () => {
    const view = await endedBuy();
    expect(view.delivery.reconciliation).not.toBeNull();
    expect(view.delivery.pulls.total).toBeGreaterThanOrEqual(1);
  }, 90_000);

  test('a by_package row for a package the buy does not have is an anomaly', async () => {
    const view = await endedBuy();
    expect(view.delivery.reconciliation).not.toBeNull();
    const notes = (view.anomalies as View[]).map((anomaly) => String(anomaly.note)).join('\n');
    expect(notes).toContain('pkg_not_in_this_buy');
  }, 90_000);
});
