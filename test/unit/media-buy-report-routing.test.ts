/**
 * The media-buy machine alone judges whether a verified report is its own: the gateway signals whatever buy the URL
 * names, with the seller whose verification the report passed. A report of another seller is refused (before its
 * event key is remembered), a row about another buy is refused once the buy's media_buy_id is known, both recorded in
 * the reporting state; a fire of several buys is one signal whose own row is taken. Also: the reporting URL the
 * create registers names the seller when the workflow asks for it (behind its patch), and only when it is ours.
 */
import type { OperationState } from '../../contract/operation';
import type { MediaBuyInput, ReportDelivery } from '../../contract/media-buy';
import type { ReportingNotification } from '../../protocol/media-buy';
import { mediaBuyIdOfReportingUrl } from '../../activities/reporting-credentials';
import { MediaBuyMachine } from '../../workflows/media-buy/machine';

const HOUR = 3_600_000;
const NOW = Date.UTC(2027, 2, 1);
const iso = (ms: number) => new Date(ms).toISOString();
const WORKFLOW_ID = 'adcp-media-buy-routing';
const REPORTING_URL = `https://gateway.example/webhooks/adcp-reporting/${WORKFLOW_ID}`;

function input(url = REPORTING_URL): MediaBuyInput {
  return {
    buyKey: 'routing',
    sellerId: 'seller-a',
    params: {
      start_time: iso(NOW - HOUR),
      end_time: iso(NOW + 48 * HOUR),
      packages: [{ product_id: 'prod_p1', budget: 1_000 }],
    },
    reporting: { url, frequency: 'hourly' },
  };
}

function created(): MediaBuyMachine {
  const machine = MediaBuyMachine.start(input(), { workflowId: WORKFLOW_ID, nowMs: NOW }, { now: () => NOW });
  expect(machine.next(NOW, { length: 10, continueAsNewSuggested: false })).toEqual({ kind: 'create' });
  machine.createParams(undefined, { sellerInReportingUrl: WORKFLOW_ID });
  machine.applyCreate({
    operation: {
      operationId: 'op',
      sellerId: 'seller-a',
      task: 'create_media_buy',
      status: 'completed',
      inputRounds: 0,
      result: { media_buy_id: 'mb_mine', status: 'active', packages: [{ package_id: 'p1', product_id: 'prod_p1' }] },
    } as unknown as OperationState,
  });
  expect(machine.state.mediaBuyId).toBe('mb_mine');
  return machine;
}

function row(mediaBuyId: string, sequenceNumber = 1): ReportingNotification {
  return {
    notificationType: 'scheduled',
    sequenceNumber,
    mediaBuyId,
    period: {
      start: iso(NOW - HOUR),
      end: iso(NOW - 1_000),
      totals: { impressions: 10 },
      byPackage: { p1: { impressions: 10 } },
    },
  };
}

function fire(eventKey: string, rows: ReportingNotification[], sellerId?: string): ReportDelivery {
  return {
    eventKey,
    notification: rows[0]!,
    ...(rows.length > 1 ? { notifications: rows } : {}),
    receivedAt: iso(NOW),
    verifiedBy: 'rfc9421',
    ...(sellerId !== undefined ? { sellerId } : {}),
  };
}

/** Lets the machine drain its inbox, as the workflow's loop does before each step. */
function drain(machine: MediaBuyMachine): void {
  machine.next(NOW, { length: 10, continueAsNewSuggested: false });
}

test("a report verified as another seller is refused and recorded; it does not shadow the seller's own event key", () => {
  const machine = created();
  machine.recordReport(fire('fire-1', [row('mb_mine')], 'seller-b'));
  drain(machine);
  const reporting = machine.state.reporting;
  expect(reporting.reportsReceived).toBe(0);
  expect(reporting.reportsRefused).toBe(1);
  expect(reporting.refusedReports).toEqual([
    expect.objectContaining({ reason: 'seller_mismatch', mediaBuyId: 'mb_mine', sellerId: 'seller-b' }),
  ]);
  // The buy's own seller sends the same key afterwards: taken, not counted as a duplicate.
  machine.recordReport(fire('fire-1', [row('mb_mine')], 'seller-a'));
  drain(machine);
  expect(reporting.reportsReceived).toBe(1);
  expect(reporting.duplicates).toBe(0);
});

test("rows about another buy are refused and recorded; the buy's own row of the same fire is taken once", () => {
  const machine = created();
  machine.recordReport(fire('fire-2', [row('mb_other'), row('mb_mine'), row('mb_third')], 'seller-a'));
  drain(machine);
  const reporting = machine.state.reporting;
  expect(reporting.reportsReceived).toBe(1);
  expect(reporting.reportsRefused).toBe(2);
  expect(reporting.refusedReports?.map((refusal) => [refusal.reason, refusal.mediaBuyId])).toEqual([
    ['media_buy_mismatch', 'mb_other'],
    ['media_buy_mismatch', 'mb_third'],
  ]);
  expect(reporting.refusedReports?.[0]?.sellerId).toBeUndefined();
  // A redelivery of the fire is a duplicate row by row.
  machine.recordReport(fire('fire-2', [row('mb_other'), row('mb_mine'), row('mb_third')], 'seller-a'));
  drain(machine);
  expect(reporting.reportsReceived).toBe(1);
  expect(reporting.duplicates).toBe(3);
  // A single-row fire about another buy is refused too.
  machine.recordReport(fire('fire-3', [row('mb_other', 2)], 'seller-a'));
  drain(machine);
  expect(reporting.reportsRefused).toBe(3);
});

test('a report signalled without a seller (not through the gateway) is judged by its rows only', () => {
  const machine = created();
  machine.recordReport(fire('fire-4', [row('mb_mine')]));
  drain(machine);
  expect(machine.state.reporting.reportsReceived).toBe(1);
  expect(machine.state.reporting.reportsRefused).toBeUndefined();
});

test('the reporting URL the create registers names the seller when asked, and only when it is ours', () => {
  const start = (url?: string) =>
    MediaBuyMachine.start(input(url), { workflowId: WORKFLOW_ID, nowMs: NOW }, { now: () => NOW });
  const registered = (params: Record<string, unknown>) => (params.reporting_webhook as { url: string }).url;
  expect(registered(start().createParams(undefined, { sellerInReportingUrl: WORKFLOW_ID }))).toBe(
    `https://gateway.example/webhooks/adcp-reporting/seller-a/${WORKFLOW_ID}`,
  );
  // Not asked (a history recorded before the patch): the URL as the input has it.
  expect(registered(start().createParams())).toBe(REPORTING_URL);
  // A caller's own receiver, or a URL naming another buy, is left alone.
  const own = 'https://buyer.example/reports/incoming';
  expect(registered(start(own).createParams(undefined, { sellerInReportingUrl: WORKFLOW_ID }))).toBe(own);
  const another = 'https://gateway.example/webhooks/adcp-reporting/adcp-media-buy-else';
  expect(registered(start(another).createParams(undefined, { sellerInReportingUrl: WORKFLOW_ID }))).toBe(another);
  const machine = start();
  machine.createParams(undefined, { sellerInReportingUrl: WORKFLOW_ID });
  expect(machine.state.reporting.registered?.url).toBe(
    `https://gateway.example/webhooks/adcp-reporting/seller-a/${WORKFLOW_ID}`,
  );
});

test('the worker finds the buy in either form of our reporting URL (the credential is derived from it)', () => {
  expect(mediaBuyIdOfReportingUrl(`https://gateway.example/webhooks/adcp-reporting/seller-a/${WORKFLOW_ID}`)).toBe(
    WORKFLOW_ID,
  );
  expect(mediaBuyIdOfReportingUrl(REPORTING_URL)).toBe(WORKFLOW_ID);
  expect(mediaBuyIdOfReportingUrl('https://gateway.example/webhooks/adcp-reporting/a/b/c')).toBeUndefined();
  expect(mediaBuyIdOfReportingUrl('https://gateway.example/webhooks/adcp-reporting/')).toBeUndefined();
  expect(mediaBuyIdOfReportingUrl('https://buyer.example/reports/incoming')).toBeUndefined();
});
