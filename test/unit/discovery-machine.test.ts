/**
 * The discovery machine (workflows/discovery/machine.ts): sellers end in any order, some answer, some fail, some time
 * out, a late cancellation after an answer changes nothing; the catalogue is the same whatever the order, and the
 * discovery is partial exactly when a seller failed, timed out or said its answer is incomplete.
 */
import { DiscoveryMachine, getProductsParams } from '../../workflows/discovery/machine';
import type { OperationState } from '../../contract/operation';
import type { DiscoveryInput } from '../../contract/discovery';

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SELLERS = ['s1', 's2', 's3', 's4', 's5'];
const input: DiscoveryInput = {
  discoveryKey: 'd',
  brief: 'display',
  sellerIds: SELLERS,
  skipped: [{ sellerId: 'nope', reason: 'no get_products' }],
  timeBudgetMs: 5_000,
};

function products(sellerId: string, incomplete: boolean): OperationState {
  return {
    operationId: `op-${sellerId}`,
    status: 'completed',
    result: {
      products: [
        {
          product_id: `${sellerId}_p`,
          name: sellerId,
          delivery_type: 'guaranteed',
          format_ids: [{ id: 'display_300x250' }],
          pricing_options: [{ pricing_option_id: 'cpm', pricing_model: 'cpm', fixed_price: 10, currency: 'USD' }],
        },
      ],
      ...(incomplete ? { incomplete: [{ scope: 'products', description: 'more later' }] } : {}),
    },
  } as unknown as OperationState;
}

type End = 'answered' | 'incomplete' | 'failed' | 'timed_out' | 'operation_timed_out';

function run(ends: Record<string, End>, order: string[], now = { t: 1_000 }) {
  const machine = new DiscoveryMachine(input, () => now.t);
  for (const sellerId of SELLERS) machine.asking(sellerId, `op-${sellerId}`);
  for (const sellerId of order) {
    now.t += 100;
    const end = ends[sellerId];
    if (end === 'answered' || end === 'incomplete')
      machine.operationEnded(sellerId, products(sellerId, end === 'incomplete'));
    else if (end === 'failed') machine.failed(sellerId, { code: 'FAILED', message: 'boom' });
    else if (end === 'timed_out') machine.timedOut(sellerId);
    else
      machine.operationEnded(sellerId, {
        operationId: 'x',
        status: 'failed',
        failure: { reason: 'timed_out', message: 'deadline' },
      } as unknown as OperationState);
    // A cancellation that arrives after the seller's end changes nothing.
    machine.timedOut(sellerId);
  }
  return machine;
}

test('the deadline is the time budget plus the grace; the brief and budget go to every seller', () => {
  const machine = new DiscoveryMachine({ ...input, graceMs: 500 }, () => 10_000);
  expect(machine.deadlineMs).toBe(15_500);
  expect(machine.state.sellers.nope).toMatchObject({ status: 'skipped' });
  expect(getProductsParams(input)).toMatchObject({ brief: 'display', time_budget: { interval: 5, unit: 'seconds' } });
});

test.each(Array.from({ length: 200 }, (_, index) => index + 1))('seed %i: any order, one end per seller', (seed) => {
  const random = mulberry32(seed);
  const kinds: End[] = ['answered', 'answered', 'incomplete', 'failed', 'timed_out', 'operation_timed_out'];
  const ends = Object.fromEntries(SELLERS.map((id) => [id, kinds[Math.floor(random() * kinds.length)]]));
  const order = [...SELLERS].sort(() => random() - 0.5);
  const machine = run(ends, order);
  expect(machine.done()).toBe(true);
  const state = machine.finish();
  const again = run(ends, [...SELLERS]).finish();
  // The catalogue does not depend on which seller answered first.
  expect(state.catalogue.map((entry) => entry.productId)).toEqual(again.catalogue.map((entry) => entry.productId));
  for (const sellerId of SELLERS) {
    const expected = {
      answered: 'answered',
      incomplete: 'answered',
      failed: 'failed',
      timed_out: 'timed_out',
      operation_timed_out: 'timed_out',
    }[ends[sellerId]];
    expect(state.sellers[sellerId].status).toBe(expected);
  }
  const answered = SELLERS.filter((id) => ends[id] === 'answered' || ends[id] === 'incomplete');
  expect(state.catalogue).toHaveLength(answered.length);
  expect(state.partial).toBe(SELLERS.some((id) => ends[id] !== 'answered'));
  expect(state.status).toBe('completed');
});
