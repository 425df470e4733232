import { createMediaBuyParams } from '../test/harness/demo-requests';
import { SellerTasks } from './seller-tasks';
import { SELLER_ID, type BenchStack, type BenchWorker } from './stack';

/**
 * Resets the seller so that every create_media_buy answers `submitted` and stays there until the bench calls
 * `advanceTask()`: no timer, and no number of polls a run reaches. Returns a fresh task finder.
 */
export async function sellerKeepsMediaBuysSubmitted(stack: BenchStack): Promise<SellerTasks> {
  await stack.seller.reset();
  stack.seller.setDefaultScript('create_media_buy', [
    { status: 'submitted' },
    { status: 'completed', afterPolls: 1_000_000 },
  ]);
  return new SellerTasks(stack.seller);
}

/** Starts a create_media_buy operation on `worker` and records it as running (stack.close() ends leftovers). */
export async function startMediaBuy(
  stack: BenchStack,
  worker: BenchWorker,
  idempotencyKey: string,
  params = createMediaBuyParams(),
): Promise<string> {
  const { operationId } = await worker.orchestrator.start({
    sellerId: SELLER_ID,
    task: 'create_media_buy',
    params,
    idempotencyKey,
  });
  stack.running.add(operationId);
  return operationId;
}
