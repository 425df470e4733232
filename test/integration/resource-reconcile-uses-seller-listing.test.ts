/**
 * Reconciliation uses the listing the seller has (issue 24, item 8): a 3.1 seller lists its tasks with `list_tasks`
 * (the 3.1 name; it has no `tasks/list`), and its stored capabilities name that read method. A reconciliation run of
 * that seller must ask it, not report `seller_lists_tasks: false`, and hand a task whose call answer never came back
 * to the operation that made it.
 */
import { createMediaBuyParams } from '../harness/demo-requests';
import { type ResourceGateway, type View, eventually, startResourceGateway } from '../harness/resource-gateway';

const SELLER = 'lists-3-1';
/** Far enough away that the task only ends when the test says so. */
const MANUAL = 600_000;
let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    sellers: { [SELLER]: { profile: { 'no-tasks-get': { offer: ['get_task_status', 'list_tasks'] } } } },
    webhooks: false,
    // The call stays in flight for the whole test: the operation knows no task until reconciliation hands it one.
    callTimeoutMs: 60_000,
  });
  const stored = await gateway.storeCapabilities(SELLER);
  expect(stored.capabilities.read_methods).toContain('list_tasks');
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

test("a reconciliation run reads the seller's list_tasks and adopts the task a lost answer left behind", async () => {
  const seller = gateway.sellers[SELLER];
  seller.script('create_media_buy', [{ status: 'submitted' }, { status: 'completed', afterMs: MANUAL }]);
  // The seller makes the task and never answers the call.
  seller.hangSockets({ tool: 'create_media_buy', times: 1, process: true });
  const operationId = await gateway.operations.start(SELLER, 'create_media_buy', createMediaBuyParams());
  await eventually(async () => (seller.tasks().length === 1 ? true : undefined), 30_000);
  // Visibility is eventually consistent: wait until the running operation is listed at its seller.
  await eventually(async () => {
    const listed = await gateway.http('GET', `/v1/operations?agent_id=${SELLER}`);
    return (listed.body.operations as View[]).some(
      (row) => row.operation_id === operationId && row.execution_status === 'RUNNING',
    )
      ? true
      : undefined;
  }, 30_000);
  expect((await gateway.operations.view(operationId)).task_id).toBeNull();

  const report = await gateway.http('POST', `/v1/sellers/${SELLER}/reconcile`, { requested_by: 'ops@buyer' });
  expect(report.status).toBe(200);
  expect(report.body.seller_lists_tasks).toBe(true);
  expect(report.body.adopted).toEqual([{ operation_id: operationId, task_id: seller.tasks()[0].taskId }]);
  const adopted = await gateway.operations.waitFor(operationId, (view) => view.task_id !== null, 20_000);
  expect(adopted.task_id).toBe(seller.tasks()[0].taskId);
}, 120_000);
