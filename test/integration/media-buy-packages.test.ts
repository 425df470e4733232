/**
 * The `packages` change end to end: `POST /v1/media-buys/:id/changes` with `kind: "packages"` runs one
 * update_media_buy whose `packages[]` the fixture seller receives as sent (one package paused, another's budget
 * changed), and the buy's state takes the seller's answer (that package paused, the buy still active, the new
 * budget); resuming the package comes back the same way. A package change naming a package the buy does not have is
 * refused before it enters history, and nothing reaches the seller.
 */
import { createGateway } from '../../api/app';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import express from 'express';
import { createMediaBuyRouter } from '../../api/media-buys';
import { MediaBuyClient } from '../../client/media-buy-client';
import { type MediaBuySeller, startMediaBuySeller } from '../fixtures/media-buy-seller';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let seller: MediaBuySeller;
let stack: TestStack;
let server: Server;
let base: string;

beforeAll(async () => {
  seller = await startMediaBuySeller();
  server = await new Promise<Server>((resolve) => {
    const listening = createServer().listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const sellers = registry([{ id: 'life-pkg', url: seller.url, protocol: 'mcp', token_env: 'LIFE_TOKEN' }]);
  stack = await startTestStack({ sellers, activities: { env: { LIFE_TOKEN: seller.authToken } } });
  const mediaBuys = new MediaBuyClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    knownSeller: (id) => sellers.has(id),
  });
  const app = express();
  app.use(createGateway({ orchestrator: stack.orchestrator, mediaBuyRouter: createMediaBuyRouter({ mediaBuys }) }));
  server.on('request', app);
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await stack?.close();
  await seller?.close();
});

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${base}${path}`, {
    method,
    ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

interface PackageView {
  package_id: string;
  budget?: number;
  paused?: boolean;
}

test('a packages change reaches the seller as packages[] and its answer becomes the buy state', async () => {
  const now = Date.now();
  const buyKey = `pkg-${randomUUID()}`;
  const created = await call('POST', '/v1/media-buys', {
    buy_key: buyKey,
    agent_id: 'life-pkg',
    params: {
      account: { account_id: 'acct_pkg' },
      brand: { domain: 'acme.example' },
      start_time: new Date(now - 2 * HOUR).toISOString(),
      end_time: new Date(now + 30 * DAY).toISOString(),
      packages: [
        { product_id: 'display_a', pricing_option_id: 'cpm', budget: 10_000 },
        { product_id: 'display_b', pricing_option_id: 'cpm', budget: 5_000 },
      ],
    },
    requested_by: 'planner@buyer',
  });
  expect(created.status).toBe(202);
  const id = created.body.id as string;
  const pending = await eventually(async () => {
    const view = await call('GET', `/v1/media-buys/${id}`);
    return view.body.status === 'pending_creatives' ? view.body : undefined;
  }, 30_000);
  const mediaBuyId = pending.media_buy_id as string;
  const [first, second] = (pending.packages as PackageView[]).map((pkg) => pkg.package_id).sort();
  const attached = await call('POST', `/v1/media-buys/${id}/creatives`, {
    creatives: [{ creative_id: 'cr_pkg', name: 'Banner' }],
    assignments: { cr_pkg: [first, second] },
    requested_by: 'trafficker@buyer',
  });
  expect(attached.body).toMatchObject({ outcome: 'applied' });
  await eventually(
    async () => ((await call('GET', `/v1/media-buys/${id}`)).body.status === 'active' ? true : undefined),
    20_000,
  );

  // Pause one package and change the other's budget in one update_media_buy.
  const packages = [
    { package_id: second, paused: true },
    { package_id: first, budget: 12_500 },
  ];
  const changed = await call('POST', `/v1/media-buys/${id}/changes`, {
    kind: 'packages',
    requested_by: 'optimizer@buyer',
    reason: 'second line under-delivers',
    packages,
    idempotency_key: `${buyKey}-pkg-1`,
  });
  expect(changed.status).toBe(200);
  expect(changed.body).toMatchObject({ outcome: 'applied', status: 'active' });
  const updates = seller.buy(mediaBuyId)!.updates;
  expect(updates).toHaveLength(1);
  expect(updates[0]).toMatchObject({ outcome: 'applied', args: { media_buy_id: mediaBuyId, packages } });
  expect(updates[0].args.paused).toBeUndefined(); // the buy itself was not paused
  let view = (await call('GET', `/v1/media-buys/${id}`)).body;
  const byId = (list: PackageView[]) => Object.fromEntries(list.map((pkg) => [pkg.package_id, pkg]));
  expect(view.status).toBe('active');
  expect(byId(view.packages)[second]).toMatchObject({ paused: true, budget: 5_000 });
  expect(byId(view.packages)[first]).toMatchObject({ paused: false, budget: 12_500 });
  expect(view.revision).toBe(seller.buy(mediaBuyId)!.revision);
  expect(view.changes.at(-1)).toMatchObject({
    kind: 'packages',
    outcome: 'applied',
    requested_by: 'optimizer@buyer',
    status_after: 'active',
  });

  // Resume the package: the same way back.
  const resumed = await call('POST', `/v1/media-buys/${id}/changes`, {
    kind: 'packages',
    requested_by: 'optimizer@buyer',
    packages: [{ package_id: second, paused: false }],
  });
  expect(resumed.body).toMatchObject({ outcome: 'applied', status: 'active' });
  view = (await call('GET', `/v1/media-buys/${id}`)).body;
  expect(byId(view.packages)[second]).toMatchObject({ paused: false });
  expect(seller.buy(mediaBuyId)!.updates).toHaveLength(2);

  // A package this buy does not have: refused before history, nothing sent.
  const unknown = await call('POST', `/v1/media-buys/${id}/changes`, {
    kind: 'packages',
    requested_by: 'optimizer@buyer',
    packages: [{ package_id: 'pkg_nope', paused: true }],
  });
  expect(unknown.status).toBe(409);
  expect(unknown.body.error).toMatchObject({ code: 'INVALID_REQUEST' });
  expect(seller.buy(mediaBuyId)!.updates).toHaveLength(2);
  expect((await call('GET', `/v1/media-buys/${id}`)).body.changes).toHaveLength(2);
});
