/**
 * Drift is visible (issue 24, item 11): seller answers are checked against the official AdCP schemas of the version
 * the seller declares (its stored capabilities: 3.0.6 as @adcp/sdk bundles it, 3.1.19 from the project's copy), in
 * warn mode. A drifting answer still completes the operation when everything the orchestrator needs is there; the
 * outcome is `partial` and `schema_warnings` says where the answer left the schema.
 */
import { type ResourceGateway, startResourceGateway } from '../harness/resource-gateway';
import { createMediaBuyParams } from '../harness/demo-requests';

let gateway: ResourceGateway;

beforeAll(async () => {
  gateway = await startResourceGateway({
    sellers: {
      'declares-3-0': {},
      'declares-3-1': { profile: 'adcp-3.1', supportedVersions: ['3.0', '3.1'] },
    },
    webhooks: false,
  });
  const v31 = await gateway.storeCapabilities('declares-3-1');
  expect(v31.capabilities.wire_version).toBe('3.1');
  const v30 = await gateway.storeCapabilities('declares-3-0');
  expect(v30.capabilities.wire_version).not.toBe('3.1');
}, 120_000);

afterAll(async () => {
  await gateway?.close();
}, 60_000);

test('3.1: a create answer without the revision 3.1 requires completes partial, with a schema warning naming it', async () => {
  // The fixture's create answer carries media_buy_id, media_buy_status, confirmed_at and packages, but no revision.
  gateway.sellers['declares-3-1'].script('create_media_buy', [{ status: 'completed' }]);
  const operationId = await gateway.operations.start('declares-3-1', 'create_media_buy', createMediaBuyParams());
  const view = await gateway.operations.settled(operationId, 30_000);

  expect(view.status).toBe('completed');
  expect(view.result?.media_buy_id).toBeDefined();
  expect(view.outcome).toBe('partial');
  expect(JSON.stringify(view.schema_warnings ?? [])).toContain('revision');
}, 60_000);

test('3.0: a create answer whose package budget is a string completes partial, with a schema warning naming it', async () => {
  gateway.sellers['declares-3-0'].script('create_media_buy', [
    { status: 'completed', payload: { packages: [{ package_id: 'pkg_drift', budget: '500' }] } },
  ]);
  const operationId = await gateway.operations.start('declares-3-0', 'create_media_buy', createMediaBuyParams());
  const view = await gateway.operations.settled(operationId, 30_000);

  expect(view.status).toBe('completed');
  expect(view.outcome).toBe('partial');
  expect(JSON.stringify(view.schema_warnings ?? [])).toContain('budget');
}, 60_000);

test('the version the seller declares is the one checked: the same answer is valid 3.0 (guard)', async () => {
  gateway.sellers['declares-3-0'].script('create_media_buy', [{ status: 'completed' }]);
  const operationId = await gateway.operations.start('declares-3-0', 'create_media_buy', createMediaBuyParams());
  const view = await gateway.operations.settled(operationId, 30_000);

  expect(view.status).toBe('completed');
  expect(view.outcome).toBe('success');
  expect(view.schema_warnings ?? []).toEqual([]);
}, 60_000);
