/**
 * The media-buy API (mounted by the gateway): create a buy, read it and its delivery, change it, attach creatives.
 * It validates and forwards; the buy's workflow holds the state and decides (see GET /openapi.json).
 *
 *   POST /v1/media-buys                      {buy_key, agent_id, params, reporting?, creative_alert_lead_hours?, requested_by?}
 *   GET  /v1/media-buys/:id                  state, status history, creatives, changes, delivery totals, gaps, anomalies
 *   GET  /v1/media-buys/:id/delivery         totals by package, sequence tracking, gaps, adjustments, reconciliation
 *   POST /v1/media-buys/:id/changes          {kind, requested_by, reason?, budgets?, start_time?, end_time?, packages?, idempotency_key?}
 *   POST /v1/media-buys/:id/creatives        {creatives, assignments?, requested_by, idempotency_key?}
 *   POST /v1/media-buys/:id/refresh          {requested_by}
 *   POST /v1/media-buys/:id/governance/decision {decision: approve|decline, decided_by, note?, values?, idempotency_key?}
 */
import express, { type Response } from 'express';
import type { MediaBuyClient } from '../client/media-buy-client';
import type { ChangeRequest, MediaBuyState } from '../contract/media-buy';
import { callerOf } from './app';
import { snakeCased } from './snake-case';
import {
  createMediaBuySchema,
  governanceDecisionSchema,
  mediaBuyChangeSchema,
  mediaBuyCreativesSchema,
  mediaBuyRefreshSchema,
  parseRequest,
} from './schemas';

export interface MediaBuyRouterOptions {
  mediaBuys: MediaBuyClient;
  webUiUrl?: string;
  namespace?: string;
}

/** The delivery part of the view: aggregates, not every report. */
export function deliveryView(state: MediaBuyState): Record<string, unknown> {
  const reporting = state.reporting;
  return {
    media_buy_id: state.mediaBuyId ?? null,
    frequency: reporting.frequency ?? null,
    registered: snakeCased(reporting.registered ?? null),
    totals: reporting.totals,
    by_package: reporting.byPackage,
    periods_counted: reporting.periodsCounted,
    final_periods: reporting.finalPeriods,
    final_report: snakeCased(reporting.finalReport ?? null),
    sequence: {
      highest: reporting.highestSequence,
      contiguous_through: reporting.contiguousThrough,
      missing: reporting.missingSequences,
      gaps: reporting.sequenceGaps,
      duplicates: reporting.duplicates,
      reordered: reporting.reordered,
    },
    gaps: {
      detected: reporting.periodGapsDetected,
      filled: reporting.periodGapsFilled,
      missing_now: Object.keys(reporting.missingPeriods).sort(),
      unfilled: reporting.unfilledPeriods,
    },
    reports: {
      received: reporting.reportsReceived,
      applied: reporting.reportsApplied,
      delayed_notices: reporting.delayedNotices,
      // Verified reports of another seller, and rows about another buy, that the buy did not take (newest last).
      refused: reporting.reportsRefused ?? 0,
      refusals: (reporting.refusedReports ?? []).map((refusal) => snakeCased(refusal)),
      last_at: reporting.lastReportAt ?? null,
      next_expected_at: reporting.nextExpectedAt ?? null,
    },
    pulls: {
      total: reporting.pulls,
      late: reporting.latePulls,
      // How a missing period is filled at this seller: windowed pulls, one date range a period, or not at all (why).
      fills_by: reporting.noFills ? 'none' : reporting.rangeFill ? 'date_ranges' : 'windows',
      no_fills_reason: reporting.noFills ?? null,
    },
    adjustments: {
      count: reporting.adjustmentCount,
      recent: snakeCased(reporting.adjustments),
      on_sealed_periods: reporting.sealedAdjustments,
    },
    reconciliation: snakeCased(reporting.reconciliation ?? null),
  };
}

/** The buy's governance, without the signed governance_context itself (it is for the seller, not for readers). */
export function governanceView(state: MediaBuyState): Record<string, unknown> | null {
  if (!state.governance) return null;
  const { governanceContext, ...rest } = state.governance;
  return { ...(snakeCased(rest) as Record<string, unknown>), has_governance_context: governanceContext !== undefined };
}

/** The buy as HTTP readers see it: snake_case throughout (api/snake-case.ts), the seller's own objects as they came. */
export function mediaBuyView(
  id: string,
  running: boolean,
  state: MediaBuyState,
  links: { webUi?: string },
): Record<string, unknown> {
  return {
    id,
    buy_key: state.buyKey,
    agent_id: state.sellerId,
    media_buy_id: state.mediaBuyId ?? null,
    status: state.status,
    running,
    done: state.done,
    revision: state.revision ?? null,
    available_actions: state.availableActions ?? null,
    health: state.health ?? null,
    impairments: state.impairments ?? [],
    flight: { start_time: state.startTime ?? null, end_time: state.endTime ?? null },
    creative_deadline: state.creativeDeadline ?? null,
    packages: snakeCased(Object.values(state.packages)),
    status_history: snakeCased(state.statusHistory),
    status_changes: state.statusChangeCount,
    changes: snakeCased(state.changes),
    creatives: snakeCased(Object.values(state.creatives)),
    creative_alerts: snakeCased(state.creativeAlerts),
    delivery: deliveryView(state),
    anomalies: snakeCased(state.anomalies),
    ...(state.requestShaping?.length ? { request_shaping: snakeCased(state.requestShaping) } : {}),
    anomaly_count: state.anomalyCount,
    failure: snakeCased(state.failure ?? null),
    governance: governanceView(state),
    create_operation_id: state.createOperationId,
    reads: state.reads,
    last_read_at: state.lastReadAt ?? null,
    run: state.run,
    started_at: state.startedAt,
    updated_at: state.updatedAt,
    ...(links.webUi ? { links: { web_ui: links.webUi } } : {}),
  };
}

/**
 * A change's or a creatives attachment's answer: 200 when applied, 202 when sent and not confirmed yet, 409 when the
 * buy or the seller refused it, or the seller's buy shows it did not take effect.
 */
function sendChangeAnswer(res: Response, answer: Awaited<ReturnType<MediaBuyClient['change']>>): void {
  res.status(answer.outcome === 'applied' ? 200 : answer.outcome === 'sent' ? 202 : 409).json({
    sequence: answer.sequence,
    outcome: answer.outcome,
    status: answer.status,
    operation_id: answer.operationId ?? null,
    ...(answer.error ? { error: snakeCased(answer.error) } : {}),
  });
}

export function createMediaBuyRouter(options: MediaBuyRouterOptions): express.Router {
  const { mediaBuys } = options;
  const router = express.Router();
  const webUi = (id: string) =>
    options.webUiUrl
      ? `${options.webUiUrl}/namespaces/${encodeURIComponent(options.namespace ?? 'default')}/workflows/${encodeURIComponent(id)}`
      : undefined;

  router.post('/v1/media-buys', async (req, res) => {
    const body = parseRequest(createMediaBuySchema, req.body);
    const created = await mediaBuys.create(
      {
        buyKey: body.buy_key,
        sellerId: body.agent_id,
        params: body.params,
        ...(body.reporting
          ? {
              reporting: {
                ...(body.reporting.frequency ? { frequency: body.reporting.frequency } : {}),
                ...(body.reporting.product_frequencies
                  ? { productFrequencies: body.reporting.product_frequencies }
                  : {}),
                ...(body.reporting.requested_metrics ? { requestedMetrics: body.reporting.requested_metrics } : {}),
                ...(body.reporting.expected_delay_minutes !== undefined
                  ? { expectedDelayMinutes: body.reporting.expected_delay_minutes }
                  : {}),
              },
            }
          : {}),
        ...(body.creative_alert_lead_hours !== undefined
          ? { creativeAlertLeadMs: body.creative_alert_lead_hours * 3_600_000 }
          : {}),
        ...(body.requested_by ? { requestedBy: body.requested_by } : {}),
        ...(body.governance
          ? {
              governance: {
                sellerId: body.governance.agent_id,
                planId: body.governance.plan_id,
                ...(body.governance.caller ? { caller: body.governance.caller } : {}),
                ...(body.governance.decision_timeout_hours !== undefined
                  ? { decisionTimeoutMs: body.governance.decision_timeout_hours * 3_600_000 }
                  : {}),
              },
            }
          : {}),
      },
      callerOf(req),
    );
    const link = webUi(created.mediaBuyWorkflowId);
    res.status(created.created ? 202 : 200).json({
      id: created.mediaBuyWorkflowId,
      created: created.created,
      ...(link ? { links: { web_ui: link } } : {}),
    });
  });

  router.get('/v1/media-buys/:id', async (req, res) => {
    const id = String(req.params.id);
    const view = await mediaBuys.view(id, callerOf(req));
    const link = webUi(id);
    res.json(mediaBuyView(id, view.running, view.state, link ? { webUi: link } : {}));
  });

  router.get('/v1/media-buys/:id/delivery', async (req, res) => {
    res.json(deliveryView(await mediaBuys.state(String(req.params.id), callerOf(req))));
  });

  router.post('/v1/media-buys/:id/changes', async (req, res) => {
    const body = parseRequest(mediaBuyChangeSchema, req.body);
    const request: ChangeRequest = {
      kind: body.kind,
      requestedBy: body.requested_by,
      ...(body.reason ? { reason: body.reason } : {}),
      ...(body.budgets ? { budgets: body.budgets } : {}),
      ...(body.start_time ? { startTime: body.start_time } : {}),
      ...(body.end_time ? { endTime: body.end_time } : {}),
      ...(body.packages ? { packages: body.packages } : {}),
    };
    const answer = await mediaBuys.change(
      String(req.params.id),
      request,
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    sendChangeAnswer(res, answer);
  });

  router.post('/v1/media-buys/:id/creatives', async (req, res) => {
    const body = parseRequest(mediaBuyCreativesSchema, req.body);
    const answer = await mediaBuys.attachCreatives(
      String(req.params.id),
      {
        creatives: body.creatives,
        ...(body.assignments ? { assignments: body.assignments } : {}),
        requestedBy: body.requested_by,
      },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    sendChangeAnswer(res, answer);
  });

  router.post('/v1/media-buys/:id/refresh', async (req, res) => {
    const body = parseRequest(mediaBuyRefreshSchema, req.body);
    await mediaBuys.refresh(String(req.params.id), body.requested_by);
    res.status(202).json({ status: 'accepted' });
  });

  router.post('/v1/media-buys/:id/governance/decision', async (req, res) => {
    const body = parseRequest(governanceDecisionSchema, req.body);
    const answer = await mediaBuys.decideGovernance(
      String(req.params.id),
      {
        decision: body.decision,
        decidedBy: body.decided_by,
        ...(body.note ? { note: body.note } : {}),
        ...(body.values ? { values: body.values } : {}),
      },
      body.idempotency_key ? { idempotencyKey: body.idempotency_key } : {},
      callerOf(req),
    );
    res.json({ accepted: answer.accepted, action: answer.action, decision: answer.decision });
  });

  return router;
}
