/**
 * Reconciliation of one seller (adcp-protocol.md §1.7), run by a Temporal Schedule and on demand: compare the
 * seller's open tasks with the open operations, hand a lost task back to the operation whose call created it (found
 * by that call's idempotency key), report what cannot be attributed, make every open operation poll now, and make
 * every media buy followed at that seller read get_media_buys now (refreshMediaBuy).
 * Then the orphan pass: every buy the seller lists is compared with the buys the orchestrator's workflows know
 * (AdcpMediaBuyId); a buy no workflow knows is offered to the open creates that could not know theirs (their own
 * reconcile update, limited to the orphans), and what none adopts is reported as an orphan (the report, the
 * `adcp_reconciliation_orphan_buys` metric, a warning per buy); a buy two workflows know is reported too.
 * It changes nothing at the seller: it only reads there, and only signals and asks operations here. One run per
 * seller (its own Schedule): a slow seller delays only its own run, and each run's history is a handful of events.
 */
import { ActivityFailure, log, metricMeter, proxyActivities } from '@temporalio/workflow';
import type { OperationActivities } from '../../activities';
import type { OpenOperation, ReconciliationActivities } from '../../activities/reconciliation';
import type { ReconciliationInput, ReconciliationReport } from '../../contract/reconciliation';
import { OrphanPass } from './machine';

const reading = proxyActivities<ReconciliationActivities>({
  startToCloseTimeout: '5m',
  heartbeatTimeout: '60s',
  retry: { initialInterval: '2s', maximumInterval: '30s', maximumAttempts: 3, nonRetryableErrorTypes: ['ConfigError'] },
});

/** Offers wait on operations' reconcile updates (each bounded in the activity): longer, one attempt more. */
const offering = proxyActivities<ReconciliationActivities>({
  startToCloseTimeout: '10m',
  heartbeatTimeout: '60s',
  retry: { initialInterval: '2s', maximumInterval: '30s', maximumAttempts: 2, nonRetryableErrorTypes: ['ConfigError'] },
});

const finding = proxyActivities<OperationActivities>({
  startToCloseTimeout: '60s',
  heartbeatTimeout: '20s',
  retry: {
    initialInterval: '1s',
    maximumInterval: '10s',
    maximumAttempts: 2,
    nonRetryableErrorTypes: ['ConfigError', 'ProtocolViolation'],
  },
});

/** The orphan pass's bounds: buys named in the report, listing pages per chunk, operations asked per chunk, and each
 * one's answer time (chunks per run: ./machine.ts). Five pages of 100 keep a chunk's orphans within one reconcile's
 * `among`. */
const MAX_ORPHANS_REPORTED = 50;
const ORPHAN_CHUNK_PAGES = 5;
const MAX_OPERATIONS_OFFERED = 20;
const OFFER_TIMEOUT_MS = 20_000;

/**
 * The orphan pass (see the module comment), a chunk of the seller's listing at a time, each chunk's orphans offered
 * before the next is read; an unreadable seller is a finding, never a failed reconciliation.
 */
async function orphanPass(
  scope: { sellerId: string; tenant?: string; alsoUntenanted?: boolean },
  requestedBy: string,
  input: ReconciliationInput,
): Promise<OrphanPass> {
  const pass = OrphanPass.forRun(input, MAX_ORPHANS_REPORTED);
  for (let next = pass.next(); next; next = pass.next()) {
    try {
      pass.addChunk(
        await offering.orphanPassChunk({
          ...scope,
          ...next,
          maxPages: ORPHAN_CHUNK_PAGES,
          requestedBy,
          maxOperations: MAX_OPERATIONS_OFFERED,
          updateTimeoutMs: OFFER_TIMEOUT_MS,
        }),
      );
    } catch (failure) {
      pass.failed(failure instanceof ActivityFailure && failure.cause ? failure.cause.message : String(failure));
    }
  }
  return pass;
}

export async function reconcileSeller(input: ReconciliationInput): Promise<ReconciliationReport> {
  const requestedBy = `reconciliation (${input.requestedBy})`;
  // An operator's run reaches only its tenant's operations and buys; the Schedule's (no tenant) every tenant's.
  const scope = {
    sellerId: input.sellerId,
    ...(input.tenant !== undefined ? { tenant: input.tenant, alsoUntenanted: input.alsoUntenanted ?? false } : {}),
  };
  const open = await reading.listOpenOperations(scope);
  let seller: Awaited<ReturnType<typeof reading.listSellerTasks>>;
  let sellerError: string | undefined;
  try {
    seller = await reading.listSellerTasks(scope);
  } catch (failure) {
    // An unreachable seller is a finding, not a failed reconciliation: the operations still poll now.
    sellerError = failure instanceof ActivityFailure && failure.cause ? failure.cause.message : String(failure);
    seller = { supported: false, tasks: [], truncated: false };
  }

  const trackedTaskIds = new Set(open.flatMap((operation) => (operation.taskId ? [operation.taskId] : [])));
  // A list read with a credential every tenant shares holds other tenants' tasks: one tenant's run keeps only its own.
  if (seller.shared) seller = { ...seller, tasks: seller.tasks.filter((task) => trackedTaskIds.has(task.taskId)) };
  const sellerTaskIds = new Set(seller.tasks.map((task) => task.taskId));
  const untracked = new Map(
    seller.tasks.filter((task) => !trackedTaskIds.has(task.taskId)).map((task) => [task.taskId, task]),
  );

  // Operations that never learned their task ID (the call's answer was lost): ask the seller by the call's key.
  const adopted: ReconciliationReport['adopted'] = [];
  if (seller.supported) {
    const lost = open.filter(
      (operation): operation is OpenOperation & { task: string } => !operation.taskId && !!operation.task,
    );
    for (const operation of lost) {
      try {
        const found = await finding.findLostTask({
          operationId: operation.operationId,
          sellerId: input.sellerId,
          task: operation.task,
          step: 'call',
          // The lost task was made with the tenant's own credential, where it has one: list with the same.
          ...(operation.tenant !== undefined ? { tenant: operation.tenant } : {}),
        });
        const taskId = found.snapshot?.taskId;
        if (taskId && !trackedTaskIds.has(taskId)) {
          adopted.push({ operationId: operation.operationId, taskId });
          trackedTaskIds.add(taskId);
          untracked.delete(taskId);
        }
      } catch (failure) {
        log.warn('Reconciliation could not look up a lost task', {
          operationId: operation.operationId,
          error: String(failure),
        });
      }
    }
  }

  const adoptedIds = new Set(adopted.map((entry) => entry.operationId));
  const signals = [
    ...adopted.map((entry) => ({
      operationId: entry.operationId,
      kind: 'adoptTask' as const,
      taskId: entry.taskId,
      requestedBy,
    })),
    ...open
      .filter((operation) => !adoptedIds.has(operation.operationId))
      .map((operation) => ({ operationId: operation.operationId, kind: 'pollNow' as const, requestedBy })),
  ];
  // Media buys at this seller read get_media_buys now: a status changed at the seller without a webhook converges.
  const buys = await reading.listOpenMediaBuys(scope);
  const refreshes = buys.map((buy) => ({
    operationId: buy.workflowId,
    kind: 'refreshMediaBuy' as const,
    requestedBy,
  }));
  const all = [...signals, ...refreshes];
  const sent = all.length > 0 ? await reading.signalOperations({ signals: all }) : { sent: 0, skipped: [] };

  const pass = await orphanPass(scope, requestedBy, input);
  // The Schedule's next run takes the listing up where this one stopped, or from the start.
  const handOver = pass.handOver(input);
  if (handOver) {
    try {
      await reading.handOverOrphanCursor({
        scheduleId: handOver.scheduleId,
        ...(handOver.resumeCursor !== null ? { resumeCursor: handOver.resumeCursor } : {}),
      });
    } catch (failure) {
      log.warn('Reconciliation could not hand its orphan cursor to the next run', { error: String(failure) });
    }
  }
  const orphanReport = pass.report();
  const counters = pass.counters();

  const report: ReconciliationReport = {
    sellerId: input.sellerId,
    requestedBy: input.requestedBy,
    at: new Date(Date.now()).toISOString(),
    openOperations: open.length,
    sellerListsTasks: seller.supported,
    ...(sellerError ? { sellerError } : {}),
    sellerOpenTasks: seller.tasks.length,
    sellerListTruncated: seller.truncated,
    adopted,
    unattributed: [...untracked.values()].map((task) => ({
      taskId: task.taskId,
      status: task.status,
      ...(task.taskType ? { taskType: task.taskType } : {}),
    })),
    missingFromSeller: seller.supported
      ? open
          .filter((operation) => operation.taskId && !sellerTaskIds.has(operation.taskId))
          .map((operation) => operation.operationId)
      : [],
    pollRequested: signals.filter((signal) => signal.kind === 'pollNow' && !sent.skipped.includes(signal.operationId))
      .length,
    openMediaBuys: buys.length,
    mediaBuyRefreshRequested: refreshes.filter((signal) => !sent.skipped.includes(signal.operationId)).length,
    buys: orphanReport,
  };
  metricMeter
    .createCounter('adcp_reconciliation_orphan_buys', 'buys', 'Buys a seller holds that no operation knows, per pass')
    .add(counters.orphanBuys, { agent: input.sellerId });
  metricMeter
    .createCounter('adcp_reconciliation_buys_claimed_twice', 'buys', 'Buys two workflows claim, per pass')
    .add(counters.buysClaimedTwice, { agent: input.sellerId });
  for (const orphan of orphanReport.orphans)
    log.warn('Orphan media buy: the seller holds a buy no operation knows', {
      sellerId: input.sellerId,
      mediaBuyId: orphan.mediaBuyId,
      ...(orphan.status ? { status: orphan.status } : {}),
      ...(orphan.operationId
        ? { namedOperation: orphan.operationId, namedOperationStatus: orphan.operationStatus }
        : {}),
    });
  for (const claim of orphanReport.claimedTwice)
    log.warn('Media buy claimed by two workflows', {
      sellerId: input.sellerId,
      mediaBuyId: claim.mediaBuyId,
      owners: claim.owners,
    });
  log.info('Seller reconciled', {
    sellerId: report.sellerId,
    openOperations: report.openOperations,
    sellerOpenTasks: report.sellerOpenTasks,
    adopted: report.adopted.length,
    unattributed: report.unattributed.length,
    missingFromSeller: report.missingFromSeller.length,
    mediaBuyRefreshRequested: report.mediaBuyRefreshRequested,
    sellerBuys: orphanReport.count,
    orphansAdopted: orphanReport.adopted.length,
    orphanBuys: orphanReport.orphanCount,
    buysClaimedTwice: orphanReport.claimedTwiceCount ?? orphanReport.claimedTwice.length,
  });
  return report;
}
