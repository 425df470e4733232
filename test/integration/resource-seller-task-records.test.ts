/**
 * A seller that keeps its own task records (issue 24, item 1): its `get_task` answers in its own words (`pending`,
 * `requires_approval`, `approved`), with the result under `response_data` and the buy it made named in
 * `associated_objects`; a person decides in the seller's admin flow or through its `complete_task` tool. The operation
 * reads that record in AdCP's terms: the seller's own review is not "unknown", and an approval the seller records
 * completes the operation with the buy the seller holds, at the next look.
 *
 * The scripted seller plays that seller (profile `seller-task-records`), no webhooks: only reads can tell.
 */
import { randomUUID } from 'node:crypto';
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, type View, eventually, startResourceGateway } from '../harness/resource-gateway';

const SELLER = 'records';
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    sellers: { [SELLER]: { profile: 'seller-task-records' } },
    webhooks: false,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

const seller = () => gateway.sellers[SELLER];
const getTaskReads = () => seller().callsTo('get_task');

/** A create in the seller's review: the operation holds its task and has read the record saying requires_approval. */
async function inReview(): Promise<{ operationId: string; taskId: string }> {
  const operationId = await gateway.operations.start(SELLER, 'create_media_buy', createMediaBuyParams());
  const bound = await gateway.operations.waitFor(operationId, (view) => typeof view.task_id === 'string');
  const taskId = String(bound.task_id);
  await eventually(
    async () =>
      seller().task(taskId)?.recordStatus === 'requires_approval' &&
      getTaskReads().some((call) => call.args.task_id === taskId)
        ? true
        : undefined,
    30_000,
  );
  return { operationId, taskId };
}

test("the seller's own review (requires_approval) is read as submitted, its word kept, and is no anomaly", async () => {
  const { operationId, taskId } = await inReview();
  // The read that saw requires_approval has been applied.
  const view = await gateway.operations.waitFor(operationId, (candidate) => candidate.poll_count >= 1);

  expect(view.status).toBe('submitted');
  expect(view.seller_status).toBe('requires_approval');
  expect((view.anomalies as View[]).map((anomaly) => anomaly.note).join('\n')).not.toMatch(/unrecognised status/);
  expect(seller().task(taskId)?.recordStatus).toBe('requires_approval');
}, 90_000);

test("approved in the seller's admin flow: completed with the buy its record names, at the next look", async () => {
  const { operationId, taskId } = await inReview();
  const readsBefore = getTaskReads().length;
  const mediaBuyId = seller().approveInAdmin(taskId);
  expect(mediaBuyId).toBeDefined();

  const view = await gateway.operations.settled(operationId, 45_000);
  expect(view.status).toBe('completed');
  expect(view.result?.media_buy_id).toBe(mediaBuyId);
  expect(view.resource?.media_buy_id).toBe(mediaBuyId);
  expect(view.outcome).toBe('success');
  // One look after the approval was enough.
  const readsAfter = getTaskReads()
    .slice(readsBefore)
    .filter((call) => call.args.task_id === taskId);
  expect(readsAfter).toHaveLength(1);
}, 90_000);

test("approved through the seller's complete_task with response_data.media_buy_id: completed with that buy", async () => {
  const { operationId, taskId } = await inReview();
  const mediaBuyId = `mb_complete_${randomUUID().slice(0, 8)}`;
  await gateway.callSellerTool(SELLER, 'complete_task', {
    task_id: taskId,
    status: 'completed',
    response_data: { media_buy_id: mediaBuyId },
  });
  expect(
    seller()
      .mediaBuys()
      .map((buy) => buy.mediaBuyId),
  ).toContain(mediaBuyId);

  const view = await gateway.operations.settled(operationId, 45_000);
  expect(view.status).toBe('completed');
  expect(view.result?.media_buy_id).toBe(mediaBuyId);
  expect(view.outcome).toBe('success');
  expect(view.resource?.media_buy_id).toBe(mediaBuyId);
}, 90_000);

test('a media buy created through POST /v1/media-buys gets the media_buy_id the seller recorded, not create_failed', async () => {
  const before = new Set(
    seller()
      .tasks()
      .map((task) => task.taskId),
  );
  const buyId = await gateway.mediaBuys.create(SELLER, createMediaBuyParams());
  // The buy's create operation is in the seller's review.
  const task = await eventually(async () => {
    const created = seller()
      .tasks()
      .find((candidate) => !before.has(candidate.taskId) && candidate.tool === 'create_media_buy');
    return created?.recordStatus === 'requires_approval' ? created : undefined;
  }, 30_000);
  const mediaBuyId = `mb_complete_${randomUUID().slice(0, 8)}`;
  await gateway.callSellerTool(SELLER, 'complete_task', {
    task_id: task.taskId,
    status: 'completed',
    response_data: { media_buy_id: mediaBuyId },
  });

  const view = await gateway.mediaBuys
    .waitFor(buyId, (candidate) => candidate.status !== 'creating', 45_000)
    .catch(() => gateway.mediaBuys.view(buyId));
  expect(view.status).not.toBe('create_failed');
  expect(view.failure).toBeNull();
  expect(view.media_buy_id).toBe(mediaBuyId);
}, 90_000);
