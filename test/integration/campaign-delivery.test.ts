/**
 * Delivery and pacing across a campaign's sellers on the real dev server: two media-buy fixture sellers on loopback,
 * a flight that began two days ago, the library synced so both buys go active. Each buy gets its daily delivery
 * reports by signal, as the gateway's reporting route delivers them (verified webhooks); one seller delivers on
 * plan, the other a tenth of it. The campaign sums the buys' numbers, computes pacing against the linear plan per
 * seller and in total, raises an under-delivery alert for the slow seller (threshold 0.8, no grace) and none for
 * the other, and clears it once the slow seller catches up. A seller whose capabilities workflow finds it unreachable
 * raises a seller_unavailable alert, cleared once it answers again.
 */
import { createGateway } from '../../api/app';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createCampaignRouter } from '../../api/campaigns';
import { CampaignClient } from '../../client/campaign-client';
import { SellerCapabilitiesClient } from '../../client/seller-capabilities-client';
import { parseReportingWebhook } from '../../protocol/media-buy';
import { mediaBuyStateQuery, reportReceivedSignal } from '../../contract/media-buy';
import { type BuyingSellers, startBuyingSellers } from '../fixtures/campaign-sellers';
import { type TestStack, eventually, registry, startTestStack } from '../harness/temporal';

type Row = Record<string, any>;
const DAY = 86_400_000;
const AGENTS = ['steady', 'sluggish'];
const FLIGHT_DAYS = 10;
const BUDGET = 1000;

let sellers: BuyingSellers;
let stack: TestStack;
let campaigns: CampaignClient;
let capabilities: SellerCapabilitiesClient;
let server: Server;
let base: string;

beforeAll(async () => {
  sellers = await startBuyingSellers([{ name: 'steady' }, { name: 'sluggish' }]);
  const sellerRegistry = registry(sellers.agents);
  stack = await startTestStack({ sellers: sellerRegistry, activities: { env: sellers.env } });
  capabilities = new SellerCapabilitiesClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    sellers: sellerRegistry,
  });
  // Buys register a daily reporting webhook there; the test delivers the reports itself, as the gateway would.
  campaigns = new CampaignClient({
    client: stack.client,
    taskQueue: stack.taskQueue,
    reportingBaseUrl: 'http://127.0.0.1:9',
  });
  const app = express();
  app.use(createGateway({ orchestrator: stack.orchestrator, campaignRouters: [createCampaignRouter({ campaigns })] }));
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 300_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  for (const agent of AGENTS)
    await stack?.client.workflow
      .getHandle(capabilities.workflowId(agent))
      .terminate('test over')
      .catch(() => undefined);
  await stack?.close();
  await sellers?.close();
});

async function view(id: string): Promise<Row> {
  const response = await fetch(`${base}/v1/campaigns/${id}`);
  return (await response.json()) as Row;
}

/** One daily report for the buy with the given numbers, signalled to the buy's workflow as the gateway does. */
async function report(
  sellerId: string,
  workflowId: string,
  sequenceNumber: number,
  periodStartMs: number,
  numbers: { impressions: number; spend: number },
  notificationType = 'scheduled',
): Promise<void> {
  const handle = stack.client.workflow.getHandle(workflowId);
  const mediaBuyId = (await handle.query(mediaBuyStateQuery)).mediaBuyId!;
  const envelope = sellers.sellers[sellerId].reportEnvelope(mediaBuyId, {
    sequenceNumber,
    periodStartMs,
    periodMs: DAY,
    notificationType,
    idempotencyKey: `whk_${randomUUID()}`,
  }) as Row;
  const delivery = envelope.result.media_buy_deliveries[0];
  delivery.totals = numbers;
  delivery.by_package = [{ package_id: delivery.by_package[0].package_id, ...numbers }];
  const parsed = parseReportingWebhook(envelope);
  await handle.signal(reportReceivedSignal, {
    eventKey: parsed.eventKey!,
    notification: parsed.notifications[0],
    receivedAt: new Date().toISOString(),
    verifiedBy: 'test',
  });
}

test('delivery is summed across sellers, pacing is computed per seller and in total, under-delivery and a seller down raise and clear alerts', async () => {
  const today = Math.floor(Date.now() / DAY) * DAY;
  const start = today - 2 * DAY;
  const { campaignId } = await campaigns.create({
    campaignKey: `delivery-${randomUUID()}`,
    brief: 'Display, already in flight',
    totalBudget: 2 * BUDGET,
    flight: { startTime: new Date(start).toISOString(), endTime: new Date(start + FLIGHT_DAYS * DAY).toISOString() },
    sellerIds: AGENTS,
    timeBudgetMs: 8_000,
    requestedBy: 'planner@buyer',
    creatives: [
      {
        creative_id: 'cr_display',
        format_id: { agent_url: 'https://creative.adcontextprotocol.org', id: 'display_300x250' },
      },
    ],
    monitoring: { intervalMs: 2_000, underDeliveryThreshold: 0.8, underDeliveryGraceMs: 0 },
  });
  await eventually(async () => ((await campaigns.state(campaignId)).phase === 'selecting' ? true : undefined), 60_000);
  await campaigns.select(campaignId, {
    selectedBy: 'planner@buyer',
    lines: AGENTS.map((sellerId) => ({ sellerId, productId: `${sellerId}_display`, budget: BUDGET })),
  });
  await campaigns.approve(campaignId, { approvedBy: 'cfo@buyer' });
  const live = await eventually(async () => {
    const body = await view(campaignId);
    return body.buys.length === 2 && body.buys.every((buy: Row) => buy.status === 'active') ? body : undefined;
  }, 120_000);

  // Two full days reported: steady above plan (130/day against 100/day of 1000 over 10 days), sluggish at a tenth of
  // it. The plan to date runs from 200 (just after midnight UTC) to 300 (just before), so steady's pacing stays
  // between 0.87 and 1.3, and sluggish's under 0.11, whatever the time of day the test runs.
  const ids = Object.fromEntries(live.buys.map((buy: Row) => [buy.agent_id, buy.id]));
  for (const day of [0, 1]) {
    await report('steady', ids.steady, day + 1, start + day * DAY, { impressions: 10_000, spend: 130 });
    await report('sluggish', ids.sluggish, day + 1, start + day * DAY, { impressions: 1_000, spend: 11 });
  }
  const paced = await eventually(async () => {
    const body = await view(campaignId);
    return body.delivery?.spend === 282 ? body : undefined;
  }, 120_000);
  const steady = paced.buys.find((buy: Row) => buy.agent_id === 'steady');
  const sluggish = paced.buys.find((buy: Row) => buy.agent_id === 'sluggish');
  expect(steady.delivery).toMatchObject({ impressions: 20_000, spend: 260 });
  expect(sluggish.delivery).toMatchObject({ impressions: 2_000, spend: 22 });
  expect(paced.delivery).toMatchObject({ impressions: 22_000, spend: 282 });
  // The linear plan: two days and part of the third of a ten-day flight of 1000 each.
  for (const buy of [steady, sluggish]) {
    expect(buy.delivery.planned_spend).toBeGreaterThanOrEqual(200);
    expect(buy.delivery.planned_spend).toBeLessThanOrEqual(300);
    expect(buy.delivery.pacing).toBeCloseTo(buy.delivery.spend / buy.delivery.planned_spend, 2);
  }
  expect(paced.delivery.planned_spend).toBeCloseTo(steady.delivery.planned_spend + sluggish.delivery.planned_spend, 1);
  expect(paced.delivery.pacing).toBeCloseTo(282 / paced.delivery.planned_spend, 2);
  expect(steady.delivery.pacing).toBeGreaterThanOrEqual(0.8);
  expect(sluggish.delivery.pacing).toBeLessThan(0.2);
  // Open now: sluggish's alone. (steady may have had one for the moment between a day's end and its report, which
  // time-skipping makes long or short: it is cleared by the report.)
  const underDelivery = paced.alerts.filter((alert: Row) => alert.kind === 'under_delivery' && alert.open);
  expect(underDelivery).toEqual([expect.objectContaining({ agent_id: 'sluggish', open: true, cleared_at: null })]);
  for (const alert of paced.alerts.filter((entry: Row) => entry.kind === 'under_delivery' && !entry.open))
    expect(alert).toMatchObject({ agent_id: 'steady', cleared_at: expect.any(String) });

  // sluggish catches up (an adjusted report for the first day): the alert clears, with its time.
  await report('sluggish', ids.sluggish, 3, start, { impressions: 30_000, spend: 300 }, 'adjusted');
  const cleared = await eventually(async () => {
    const body = await view(campaignId);
    const alert = body.alerts.find((entry: Row) => entry.kind === 'under_delivery' && entry.agent_id === 'sluggish');
    return alert && !alert.open ? body : undefined;
  }, 120_000);
  expect(cleared.buys.find((buy: Row) => buy.agent_id === 'sluggish').delivery.pacing).toBeGreaterThanOrEqual(0.8);
  expect(cleared.alerts.filter((alert: Row) => alert.kind === 'under_delivery' && alert.open)).toEqual([]);

  // The seller stops answering get_adcp_capabilities: its capabilities workflow finds it unreachable, the campaign
  // raises seller_unavailable on its next poll; once it answers again the alert clears.
  const steadySeller = sellers.sellers.steady.scripted;
  steadySeller.chaos('get_adcp_capabilities', { rate: 1, faults: [{ kind: 'http-status', status: 503 }] });
  await capabilities.capabilitiesChanged('steady', 'test', 'seller outage');
  const down = await eventually(async () => {
    const body = await view(campaignId);
    return body.alerts.find((entry: Row) => entry.kind === 'seller_unavailable' && entry.agent_id === 'steady')
      ? body
      : undefined;
  }, 120_000);
  expect(down.alerts.find((entry: Row) => entry.kind === 'seller_unavailable')).toMatchObject({
    agent_id: 'steady',
    open: true,
  });
  steadySeller.chaos('get_adcp_capabilities', undefined);
  await capabilities.capabilitiesChanged('steady', 'test', 'seller back');
  await eventually(async () => {
    const body = await view(campaignId);
    const alert = body.alerts.find((entry: Row) => entry.kind === 'seller_unavailable' && entry.agent_id === 'steady');
    return alert && !alert.open && alert.cleared_at ? true : undefined;
  }, 120_000);

  await campaigns.change(campaignId, { kind: 'cancel', requestedBy: 'planner@buyer' });
}, 600_000);
