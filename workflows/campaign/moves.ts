/**
 * The campaign's budget moves, pure (no Temporal, no I/O): the allocation policy and its changes, the view of the
 * campaign the decision is made on (allocation.ts's planAllocation), the proposals a person approves, and the saga
 * that applies a plan. CampaignMachine owns one and asks it for the next step; every fact is kept in the campaign's
 * state, so a continued run or a replay takes the saga up where it was.
 *
 * The saga, one plan at a time, each seller changed at most once per plan:
 * 1. decrease at each source (its buy's change Update, one update ID per plan and seller), then a read of the buy
 *    confirms the new budget; the money freed is reserved for the moves' targets (the guard counts it there);
 * 2. money from the pool is reserved the same way, as far as the pool holds it;
 * 3. increase at each target (a change Update, governed as any raise: check_governance before the seller hears of
 *    it); a failed increase returns the money to the pool and raises an alert;
 * 4. a governed campaign reports what moved with report_plan_outcome.
 * Before each step the move is checked again against the campaign as it is now (the buy still open, the action still
 * allowed, the spend floor, the freeze window, the target reachable); a move that no longer holds is skipped. A
 * decrease nobody could confirm keeps counting the old budget until a read shows the new one. A campaign cancel ends
 * every move where it is: money taken and not yet given stays in the pool, so nothing is committed twice.
 */
import type {
  AllocationEndpoint,
  BudgetAllocationPolicy,
  BudgetAllocationRequest,
  BudgetAllocationState,
  BudgetMoveRecord,
  BudgetMoveStatus,
  BudgetMoveStep,
  BudgetMovesDecision,
  CampaignAlertKind,
  CampaignBuy,
  CampaignInput,
  CampaignState,
} from '../../contract/campaign';
import { cents } from '../../contract/campaign';
import {
  type AllocationBuy,
  type AllocationPlan,
  type AllocationState,
  budgetActions,
  planAllocation,
  spendFloor,
  validateAllocationPolicy,
  DEFAULT_ALLOCATION_POLICY,
} from './allocation';
import { type Verdict, guardedTotal } from './rules';
import type { OutcomeReport } from '../governance/machine';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const MAX_MOVES_KEPT = 50;
const MAX_POLICY_CHANGES = 20;
/** Money below half a cent is rounding, not money. */
const EPSILON = 0.005;
/** The reporting period of each AdCP reporting frequency (reporting_frequency). */
const PERIOD_MS: Readonly<Record<string, number>> = { hourly: HOUR, daily: DAY, monthly: 30 * DAY };
const UPDATABLE: ReadonlySet<string> = new Set(['active', 'paused', 'pending_start', 'pending_creatives']);
const IN_FLIGHT: ReadonlySet<BudgetMoveStatus> = new Set(['approved', 'decreasing', 'confirming', 'increasing']);
const FINAL: ReadonlySet<BudgetMoveStatus> = new Set([
  'applied',
  'returned',
  'failed',
  'rejected',
  'expired',
  'skipped',
  'canceled',
]);

export interface MoveHooks {
  now(): number;
  alert(kind: CampaignAlertKind, sellerId: string, note: string): void;
  clearAlert(kind: CampaignAlertKind, sellerId: string, note: string): void;
  log(level: 'info' | 'warn', message: string, fields: Record<string, unknown>): void;
}

/** One step of the saga the workflow runs (an activity, or a report), and the moves it is for. */
export interface BudgetChangeStep {
  kind: 'decrease' | 'increase';
  plan: number;
  sellerId: string;
  workflowId: string;
  budgetBefore: number;
  budget: number;
  updateId: string;
  reason: string;
  moves: string[];
}

export type MoveStep =
  | BudgetChangeStep
  | { kind: 'confirm'; plan: number; sellerId: string; workflowId: string; expected: number; moves: string[] }
  | { kind: 'report'; plan: number; workflowId: string; moves: string[] };

export type MoveStepResult =
  | { kind: 'change'; outcome: { outcome: string; status?: string; error?: { code: string; message: string } } }
  | { kind: 'read'; budget: number }
  | { kind: 'unread'; error: { code: string; message: string } }
  | { kind: 'reported'; operationId?: string }
  /** The campaign was canceled while the step ran: its effect at the seller is unknown. */
  | { kind: 'interrupted' };

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function endpointName(endpoint: AllocationEndpoint): string {
  return endpoint.kind === 'pool' ? 'the pool' : endpoint.sellerId;
}

function sumOf(values: number[]): number {
  return cents(values.reduce((total, value) => total + value, 0));
}

/** The allocation state of a campaign that has none yet: the input's policy (off by default). */
export function newAllocationState(input: CampaignInput, nowMs: number): BudgetAllocationState {
  const verdict = validateAllocationPolicy(input.budgetAllocation);
  return {
    // An invalid policy never reaches a campaign through the client; one that does is off, and says why.
    policy: verdict.ok ? verdict.policy : { ...DEFAULT_ALLOCATION_POLICY },
    policyChanges: [
      {
        at: iso(nowMs),
        by: input.requestedBy,
        mode: verdict.ok ? verdict.policy.mode : 'off',
        ...(verdict.ok ? {} : { reason: verdict.message }),
      },
    ],
    pool: input.totalBudget,
    plans: 0,
    moves: [],
    totals: { moves: 0, applied: 0, returned: 0, failed: 0, moved: 0 },
    lastMoveAt: {},
  };
}

export class BudgetMoves {
  /** Moves that ended since the workflow last asked (for its metrics). */
  private ended: BudgetMoveRecord[] = [];

  constructor(
    private readonly state: CampaignState,
    private readonly input: CampaignInput,
    private readonly hooks: MoveHooks,
  ) {
    state.budgetAllocation ??= newAllocationState(input, hooks.now());
  }

  private get book(): BudgetAllocationState {
    return this.state.budgetAllocation!;
  }

  get policy(): BudgetAllocationPolicy {
    return this.book.policy;
  }

  // ---- the policy and a person's decisions ----------------------------------------------------------------------

  validatePolicy(request: BudgetAllocationRequest | undefined): Verdict {
    if (!request || typeof request !== 'object')
      return { ok: false, code: 'INVALID_REQUEST', message: 'A policy change has policy and requestedBy.' };
    if (
      typeof request.requestedBy !== 'string' ||
      request.requestedBy.trim() === '' ||
      request.requestedBy.length > 200
    )
      return {
        ok: false,
        code: 'INVALID_REQUEST',
        message: 'requestedBy must say who changes the policy (1-200 characters).',
      };
    const verdict = validateAllocationPolicy(request.policy);
    if (!verdict.ok) return { ok: false, code: 'INVALID_REQUEST', message: verdict.message };
    if (this.state.phase === 'canceled' || this.state.phase === 'ended')
      return {
        ok: false,
        code: 'INVALID_STATE',
        message: `The campaign is ${this.state.phase}; its policy no longer changes.`,
      };
    return { ok: true };
  }

  /**
   * A new policy, recorded with who set it. A proposal made under the old one is withdrawn (it answered another
   * policy); a plan being applied finishes (a move stopped halfway would leave money taken and not given).
   */
  setPolicy(request: BudgetAllocationRequest): { policy: BudgetAllocationPolicy; withdrawn?: number } {
    const verdict = validateAllocationPolicy(request.policy);
    if (!verdict.ok) throw new Error(verdict.message);
    const book = this.book;
    book.policy = verdict.policy;
    book.policyChanges.push({
      at: iso(this.hooks.now()),
      by: request.requestedBy,
      mode: verdict.policy.mode,
      ...(request.reason ? { reason: request.reason } : {}),
    });
    if (book.policyChanges.length > MAX_POLICY_CHANGES) book.policyChanges.shift();
    delete book.quietUntil;
    const withdrawn = book.proposal?.plan;
    if (book.proposal) this.closeProposal('rejected', request.requestedBy, 'withdrawn: the allocation policy changed');
    return { policy: verdict.policy, ...(withdrawn !== undefined ? { withdrawn } : {}) };
  }

  validateDecision(request: BudgetMovesDecision | undefined): Verdict {
    const refuse = (code: string, message: string): Verdict => ({ ok: false, code, message });
    if (!request || (request.decision !== 'approve' && request.decision !== 'reject'))
      return refuse('INVALID_REQUEST', 'decision must be "approve" or "reject".');
    if (typeof request.decidedBy !== 'string' || request.decidedBy.trim() === '' || request.decidedBy.length > 200)
      return refuse('INVALID_REQUEST', 'decidedBy must say who decides (1-200 characters).');
    const proposal = this.book.proposal;
    if (!proposal) return refuse('INVALID_STATE', 'No plan of budget moves waits for a decision.');
    if (request.plan !== proposal.plan)
      return refuse('INVALID_STATE', `Plan ${request.plan} is not the one waiting; plan ${proposal.plan} is.`);
    return { ok: true };
  }

  /** Approved: its moves are applied (each checked again first). Rejected: none is, and no new plan for a period. */
  decide(request: BudgetMovesDecision): { plan: number; decision: 'approve' | 'reject'; moves: string[] } {
    const proposal = this.book.proposal!;
    this.closeProposal(request.decision === 'approve' ? 'approved' : 'rejected', request.decidedBy, request.note);
    return { plan: proposal.plan, decision: request.decision, moves: proposal.moves };
  }

  private closeProposal(status: 'approved' | 'rejected' | 'expired', by: string | undefined, note?: string): void {
    const book = this.book;
    const proposal = book.proposal!;
    for (const move of this.movesOf(proposal.moves)) {
      if (by) move.decidedBy = by;
      if (status !== 'approved' && note) move.error = { code: status.toUpperCase(), message: note };
      this.setStatus(move, status);
    }
    delete book.proposal;
    this.hooks.clearAlert('allocation_proposal', '*', `plan ${proposal.plan} ${status}${by ? ` by ${by}` : ''}`);
    // A plan nobody took is not proposed again at once: the next one comes a reporting period later.
    if (status !== 'approved') book.quietUntil = iso(this.hooks.now() + this.reportingPeriodMs());
  }

  /** The proposal's deadline, while one waits. */
  proposalDeadline(): number | undefined {
    return this.book.proposal ? Date.parse(this.book.proposal.deadline) : undefined;
  }

  /** A proposal past its deadline lapses: the state it was computed from has aged. */
  expireIfDue(): void {
    const deadline = this.proposalDeadline();
    if (deadline !== undefined && this.hooks.now() >= deadline)
      this.closeProposal('expired', undefined, 'nobody decided before the deadline');
  }

  /** What the loop's wait wakes on here: a decision, a policy change. */
  wakeKey(): string {
    return `${this.book.proposal?.plan ?? '-'}:${this.book.policyChanges.length}:${this.inFlight()}`;
  }

  // ---- the decision ---------------------------------------------------------------------------------------------

  /**
   * The reporting period the allocation counts in: the policy's, else the coarsest reporting frequency among the open
   * buys (a seller's report shows the effect of a move only one period later), daily when no buy says.
   */
  reportingPeriodMs(): number {
    if (this.book.policy.reportingPeriodMs !== undefined) return this.book.policy.reportingPeriodMs;
    const periods = Object.values(this.state.buys)
      .filter((buy) => !buy.finalStatus)
      .map((buy) => PERIOD_MS[buy.reportingFrequency ?? ''])
      .filter((period): period is number => period !== undefined);
    return periods.length > 0 ? Math.max(...periods) : DAY;
  }

  /** One buy as the decision sees it. */
  private viewOf(buy: CampaignBuy, nowMs: number): AllocationBuy {
    const flight = this.state.flight;
    const down = this.state.alerts.find(
      (alert) => alert.kind === 'seller_unavailable' && alert.sellerId === buy.sellerId && !alert.clearedAt,
    );
    const status = buy.finalStatus ?? buy.status ?? 'creating';
    const lastMove = this.book.lastMoveAt[buy.sellerId];
    return {
      sellerId: buy.sellerId,
      status,
      budget: buy.committedBudget,
      spend: buy.delivery?.spend ?? 0,
      pacing: nowMs >= Date.parse(buy.startTime ?? flight.startTime) ? (buy.delivery?.pacing ?? null) : null,
      startMs: Date.parse(buy.startTime ?? flight.startTime),
      endMs: Date.parse(buy.endTime ?? flight.endTime),
      ...(buy.availableActions ? { allowedActions: buy.availableActions } : {}),
      // Down since the seller_unavailable alert was raised (a seller down before the buy existed counts from then).
      ...(down ? { downSinceMs: Date.parse(down.at) } : {}),
      ...(status === 'rejected' || status === 'create_failed' ? { rejected: true } : {}),
      ...(buy.pendingBudget !== undefined || buy.moveReserve !== undefined || buy.unconfirmedDecrease !== undefined
        ? { changeInFlight: true }
        : {}),
      ...(lastMove ? { lastMoveAtMs: Date.parse(lastMove) } : {}),
      // Delivery against a units plan is not known to the campaign (it plans budgets, not impressions).
    };
  }

  /** The campaign as planAllocation sees it: its buys, the pool (the budget on no buy), the flight, the period. */
  view(nowMs: number = this.hooks.now()): AllocationState {
    const buys = Object.values(this.state.buys).map((buy) => this.viewOf(buy, nowMs));
    return {
      totalBudget: this.state.totalBudget,
      pool: cents(this.state.totalBudget - sumOf(buys.map((buy) => buy.budget))),
      flight: { startMs: Date.parse(this.state.flight.startTime), endMs: Date.parse(this.state.flight.endTime) },
      reportingPeriodMs: this.reportingPeriodMs(),
      buys,
    };
  }

  /** The money on no buy and not reserved for one. */
  pool(guarded: number): number {
    return cents(this.state.totalBudget - guarded);
  }

  /**
   * After a poll of a live campaign: plan, unless the policy is off, a plan is being applied or waits for a person,
   * a proposal was just turned down, or a change is in flight (a person's change queued: budgets are about to move).
   * Auto applies the plan; propose records it and waits for a decision until its deadline.
   */
  afterPoll(changesQueued: boolean): void {
    const book = this.book;
    const nowMs = this.hooks.now();
    if (this.state.phase !== 'live' || book.policy.mode === 'off') return;
    if (this.inFlight() || book.proposal || changesQueued) return;
    if (book.quietUntil && nowMs < Date.parse(book.quietUntil)) return;
    const plan = planAllocation(this.view(nowMs), book.policy, nowMs);
    this.record(plan, nowMs);
  }

  private record(plan: AllocationPlan, nowMs: number): void {
    const book = this.book;
    if (plan.outcome === 'none') {
      book.lastDecision = { at: iso(nowMs), outcome: 'none', why: plan.why, message: plan.message, notes: plan.notes };
      return;
    }
    const number = ++book.plans;
    const mode = book.policy.mode === 'auto' ? 'auto' : 'propose';
    const ids: string[] = [];
    for (const [index, move] of plan.moves.entries()) {
      // A rejected buy's release moves nothing at a seller: its budget is already on no buy.
      if (move.release) continue;
      const id = `${number}.${index + 1}`;
      ids.push(id);
      book.moves.push({
        id,
        plan: number,
        from: move.from,
        to: move.to,
        amount: move.amount,
        why: move.reasons.map((reason) => reason.note).join('; '),
        reasons: move.reasons,
        status: mode === 'auto' ? 'approved' : 'proposed',
        mode,
        createdAt: iso(nowMs),
        updatedAt: iso(nowMs),
        steps: [],
      });
      book.totals.moves += 1;
    }
    this.trim();
    book.lastDecision = {
      at: iso(nowMs),
      plan: number,
      outcome: 'moves',
      message: `${ids.length} moves, ${plan.moved} in all`,
      notes: plan.notes,
    };
    this.hooks.log('info', 'Campaign budget plan', {
      campaignKey: this.state.campaignKey,
      plan: number,
      mode,
      moves: ids,
    });
    if (mode === 'propose' && ids.length > 0) {
      book.proposal = {
        plan: number,
        moves: ids,
        since: iso(nowMs),
        deadline: iso(nowMs + book.policy.approvalTimeoutMs),
      };
      const summary = this.movesOf(ids)
        .map((move) => `${move.amount} ${endpointName(move.from)} → ${endpointName(move.to)}`)
        .join(', ');
      this.hooks.alert(
        'allocation_proposal',
        '*',
        `plan ${number} waits for a decision until ${book.proposal.deadline}: ${summary}`,
      );
    }
  }

  // ---- the saga -------------------------------------------------------------------------------------------------

  /** A plan is being applied (its moves are past approval and not yet ended). */
  inFlight(): boolean {
    return this.book.moves.some((move) => IN_FLIGHT.has(move.status));
  }

  private movesOf(ids: readonly string[]): BudgetMoveRecord[] {
    return this.book.moves.filter((move) => ids.includes(move.id));
  }

  private setStatus(move: BudgetMoveRecord, status: BudgetMoveStatus): void {
    move.status = status;
    move.updatedAt = iso(this.hooks.now());
    if (FINAL.has(status)) {
      move.finishedAt = move.updatedAt;
      const totals = this.book.totals;
      if (status === 'applied') {
        totals.applied += 1;
        totals.moved = cents(totals.moved + (move.moved ?? 0));
      }
      if (status === 'returned') totals.returned += 1;
      if (status === 'failed') totals.failed += 1;
      this.ended.push(move);
    }
  }

  private end(moves: BudgetMoveRecord[], status: BudgetMoveStatus, error?: { code: string; message: string }): void {
    for (const move of moves) {
      if (error) move.error = error;
      this.setStatus(move, status);
    }
  }

  /** Moves that ended since the last call (each once). */
  drainEnded(): BudgetMoveRecord[] {
    const ended = this.ended;
    this.ended = [];
    return ended;
  }

  private activeMoves(): BudgetMoveRecord[] {
    return this.book.moves.filter((move) => IN_FLIGHT.has(move.status));
  }

  private sellerMoves(status: BudgetMoveStatus, side: 'from' | 'to'): Map<string, BudgetMoveRecord[]> {
    const grouped = new Map<string, BudgetMoveRecord[]>();
    for (const move of this.activeMoves()) {
      const endpoint = move[side];
      if (move.status !== status || endpoint.kind !== 'seller') continue;
      grouped.set(endpoint.sellerId, [...(grouped.get(endpoint.sellerId) ?? []), move]);
    }
    return grouped;
  }

  private updateIdOf(plan: number, sellerId: string, kind: 'decrease' | 'increase'): string {
    return `${this.input.campaignKey}.move-${plan}.${sellerId}.${kind}`;
  }

  /** Why a buy cannot take this change now, or undefined. */
  private blocked(buy: CampaignBuy | undefined, kind: 'decrease' | 'increase', nowMs: number): string | undefined {
    if (!buy) return 'the campaign has no buy there';
    const status = buy.finalStatus ?? buy.status ?? 'creating';
    if (buy.finalStatus || !UPDATABLE.has(status)) return `the buy is ${status}`;
    const allowed = budgetActions(buy.availableActions);
    if (kind === 'decrease' && !allowed.decrease) return 'the seller does not allow decrease_budget on the buy now';
    if (kind === 'increase' && !allowed.increase) return 'the seller does not allow increase_budget on the buy now';
    if (kind === 'increase' && this.viewOf(buy, nowMs).downSinceMs !== undefined) return 'the seller is unreachable';
    if (nowMs >= Date.parse(this.state.flight.endTime) - this.book.policy.freezeBeforeEndMs)
      return 'the flight is in its freeze window';
    return undefined;
  }

  /**
   * The saga's next step, in order: each source's decrease, then its confirming read; then the pool's moves; then
   * each target's increase; then the report. Checks that fail skip (or return) their moves on the way.
   */
  nextStep(): MoveStep | undefined {
    const nowMs = this.hooks.now();
    const reason = (moves: BudgetMoveRecord[]) => `budget move ${moves.map((move) => move.id).join(', ')}`;
    for (const [sellerId, moves] of this.sellerMoves('approved', 'from')) {
      const buy = this.state.buys[sellerId];
      const amount = sumOf(moves.map((move) => move.amount));
      let why = this.blocked(buy, 'decrease', nowMs);
      const budget = buy ? cents(buy.committedBudget - amount) : 0;
      if (!why && buy) {
        const floor = spendFloor(this.viewOf(buy, nowMs), this.reportingPeriodMs(), nowMs);
        if (budget < floor - EPSILON) why = `a budget of ${budget} would be below what it spends by now (${floor})`;
      }
      if (why || !buy) {
        this.end(moves, 'skipped', { code: 'MOVE_NO_LONGER_HOLDS', message: `${sellerId}: ${why}` });
        continue;
      }
      return {
        kind: 'decrease',
        plan: moves[0].plan,
        sellerId,
        workflowId: buy.workflowId,
        budgetBefore: buy.committedBudget,
        budget,
        updateId: this.updateIdOf(moves[0].plan, sellerId, 'decrease'),
        reason: reason(moves),
        moves: moves.map((move) => move.id),
      };
    }
    for (const [sellerId, moves] of this.sellerMoves('confirming', 'from')) {
      const buy = this.state.buys[sellerId];
      const expected = cents(buy.committedBudget - sumOf(moves.map((move) => move.amount)));
      return {
        kind: 'confirm',
        plan: moves[0].plan,
        sellerId,
        workflowId: buy.workflowId,
        expected,
        moves: moves.map((move) => move.id),
      };
    }
    this.takeFromPool();
    // Increases wait until no decrease of the plan is still running: the money they give is confirmed first.
    for (const [sellerId, moves] of this.sellerMoves('increasing', 'to')) {
      const buy = this.state.buys[sellerId];
      const why = this.blocked(buy, 'increase', nowMs);
      const amount = sumOf(moves.map((move) => move.moved ?? 0));
      if (why || !buy) {
        this.returnToPool(moves, why ?? 'no buy');
        continue;
      }
      return {
        kind: 'increase',
        plan: moves[0].plan,
        sellerId,
        workflowId: buy.workflowId,
        budgetBefore: buy.committedBudget,
        budget: cents(buy.committedBudget + amount),
        updateId: this.updateIdOf(moves[0].plan, sellerId, 'increase'),
        reason: reason(moves),
        moves: moves.map((move) => move.id),
      };
    }
    return this.reportStep();
  }

  /** The pool's moves take what the pool holds now (reserved for their targets at once). */
  private takeFromPool(): void {
    const pooled = this.activeMoves().filter((move) => move.status === 'approved' && move.from.kind === 'pool');
    if (pooled.length === 0) return;
    // Not before every source has been decreased: the plan's pool moves were computed after them.
    if (
      this.activeMoves().some((move) => move.from.kind === 'seller' && ['approved', 'confirming'].includes(move.status))
    )
      return;
    let available = this.pool(guardedTotal(this.state.buys));
    for (const move of pooled) {
      const taken = Math.min(move.amount, Math.max(0, available));
      if (move.to.kind !== 'seller' || taken < Math.min(move.amount, this.book.policy.minMoveAmount) - EPSILON) {
        this.end([move], 'skipped', { code: 'POOL_EMPTY', message: `the pool holds ${available}, not ${move.amount}` });
        continue;
      }
      available = cents(available - taken);
      this.reserve(move, taken);
    }
  }

  private reserve(move: BudgetMoveRecord, amount: number): void {
    move.moved = amount;
    if (move.to.kind === 'seller') {
      const target = this.state.buys[move.to.sellerId];
      target.moveReserve = cents((target.moveReserve ?? 0) + amount);
      this.setStatus(move, 'increasing');
    } else this.setStatus(move, 'applied');
  }

  private returnToPool(moves: BudgetMoveRecord[], why: string): void {
    for (const move of moves) {
      if (move.to.kind !== 'seller') continue;
      const target = this.state.buys[move.to.sellerId];
      if (target) this.release(target, move.moved ?? 0);
      this.hooks.alert(
        'allocation_move_failed',
        move.to.sellerId,
        `move ${move.id}: ${move.moved ?? 0} from ${endpointName(move.from)} did not reach ${move.to.sellerId} (${why}); it is in the pool`,
      );
    }
    this.end(moves, 'returned', { code: 'INCREASE_NOT_APPLIED', message: why });
  }

  private release(buy: CampaignBuy, amount: number): void {
    const left = cents((buy.moveReserve ?? 0) - amount);
    if (left > EPSILON) buy.moveReserve = left;
    else delete buy.moveReserve;
  }

  private reportStep(): MoveStep | undefined {
    if (!this.input.governance) return undefined;
    const plans = new Set(
      this.book.moves
        .filter((move) => FINAL.has(move.status) && !move.steps.some((step) => step.step === 'report'))
        .filter((move) => (move.status === 'applied' || move.status === 'returned') && (move.moved ?? 0) > 0)
        .map((move) => move.plan),
    );
    for (const plan of plans) {
      const moves = this.book.moves.filter((move) => move.plan === plan);
      if (moves.some((move) => !FINAL.has(move.status))) continue;
      const reported = moves.filter(
        (move) => (move.status === 'applied' || move.status === 'returned') && (move.moved ?? 0) > 0,
      );
      // Reported against the buy that took money (its governed increase), else the first source.
      const anchor =
        reported.find((move) => move.status === 'applied' && move.to.kind === 'seller')?.to ?? reported[0].from;
      const buy = anchor.kind === 'seller' ? this.state.buys[anchor.sellerId] : undefined;
      if (!buy) continue;
      return { kind: 'report', plan, workflowId: buy.workflowId, moves: reported.map((move) => move.id) };
    }
    return undefined;
  }

  /**
   * report_plan_outcome for a plan's moves, against the buy that took money (its governed increase's check) or, for
   * money that only left a seller, against that seller's buy: what moved, from where to where and why, as an
   * extension, and the campaign's committed total as the plan's committed budget.
   */
  moveReport(
    step: Extract<MoveStep, { kind: 'report' }>,
    evidence: { governanceContext?: string; checkId?: string; mediaBuyId?: string },
  ): OutcomeReport {
    const moves = this.movesOf(step.moves);
    const arrived = moves.some((move) => move.status === 'applied');
    return {
      action: `budget-moves-${step.plan}`,
      outcome: arrived ? 'completed' : 'failed',
      ...(evidence.checkId ? { checkId: evidence.checkId } : {}),
      ...(evidence.governanceContext ? { governanceContext: evidence.governanceContext } : {}),
      sellerResponse: {
        ...(evidence.mediaBuyId ? { seller_reference: evidence.mediaBuyId } : {}),
        committed_budget: this.state.committedBudget,
      },
      ...(arrived ? {} : { error: { code: 'BUDGET_MOVES_RETURNED', message: 'the money moved returned to the pool' } }),
      ext: {
        adcp_orchestrator: {
          budget_moves: moves.map((move) => ({
            id: move.id,
            from: endpointName(move.from),
            to: endpointName(move.to),
            amount: move.moved ?? 0,
            status: move.status,
            why: move.why,
          })),
        },
      },
    };
  }

  /** The workflow starts a step: the view shows where the moves are. */
  stepStarted(step: MoveStep): void {
    for (const move of this.movesOf(step.moves))
      if (step.kind === 'decrease' && move.status === 'approved') this.setStatus(move, 'decreasing');
  }

  /** What a step did: the moves go forward, or end, and the budgets and reservations follow. */
  stepDone(step: MoveStep, result: MoveStepResult): void {
    const nowMs = this.hooks.now();
    const moves = this.movesOf(step.moves);
    const record = (entry: Omit<BudgetMoveStep, 'at'>) => {
      for (const move of moves) move.steps.push({ ...entry, at: iso(nowMs) });
    };
    if (step.kind === 'report') {
      const operationId = result.kind === 'reported' ? result.operationId : undefined;
      record(
        operationId
          ? { step: 'report', outcome: 'reported', operationId }
          : {
              step: 'report',
              outcome: 'failed',
              error: { code: 'NOT_REPORTED', message: 'no governance_context to report the moves against' },
            },
      );
      return;
    }
    const buy = this.state.buys[step.sellerId];
    if (step.kind === 'decrease') this.decreased(step, result, buy, moves, record);
    else if (step.kind === 'confirm') this.confirmed(step, result, buy, moves, record);
    else this.increased(step, result, buy, moves, record);
  }

  private decreased(
    step: BudgetChangeStep,
    result: MoveStepResult,
    buy: CampaignBuy,
    moves: BudgetMoveRecord[],
    record: (entry: Omit<BudgetMoveStep, 'at'>) => void,
  ): void {
    const base = changeStepBase('decrease', step);
    if (result.kind === 'interrupted') {
      // The seller may have applied it: the guard counts the old budget until a read says.
      buy.unconfirmedDecrease = { moveId: moves[0].id, budget: step.budget };
      record({ ...base, outcome: 'failed', error: CANCELED_MEANWHILE });
      this.end(moves, 'canceled');
      return;
    }
    const outcome = result.kind === 'change' ? result.outcome : { outcome: 'failed' };
    if (outcome.outcome !== 'applied') {
      const error = changeError(outcome, 'DECREASE_FAILED', 'decrease');
      record({ ...base, outcome: outcome.outcome === 'refused' ? 'refused' : 'failed', error });
      this.hooks.alert(
        'allocation_move_failed',
        step.sellerId,
        `moves ${step.moves.join(', ')}: the decrease at ${step.sellerId} ${outcome.outcome} (${error.code}: ${error.message}); nothing moved`,
      );
      this.end(moves, 'failed', error);
      return;
    }
    record({ ...base, outcome: 'applied' });
    this.book.lastMoveAt[step.sellerId] = iso(this.hooks.now());
    for (const move of moves) this.setStatus(move, 'confirming');
  }

  private confirmed(
    step: Extract<MoveStep, { kind: 'confirm' }>,
    result: MoveStepResult,
    buy: CampaignBuy,
    moves: BudgetMoveRecord[],
    record: (entry: Omit<BudgetMoveStep, 'at'>) => void,
  ): void {
    const before = buy.committedBudget;
    if (result.kind !== 'read') {
      // Nobody could confirm it: the old budget stays counted (nothing is given away) until a read shows the new one.
      buy.unconfirmedDecrease = { moveId: moves[0].id, budget: step.expected };
      const error =
        result.kind === 'unread'
          ? result.error
          : { code: 'CANCELED', message: 'the campaign was canceled before the decrease was confirmed' };
      record({
        step: 'confirm',
        sellerId: step.sellerId,
        budgetBefore: before,
        budgetAfter: step.expected,
        outcome: 'unconfirmed',
        error,
      });
      if (result.kind === 'interrupted') this.end(moves, 'canceled');
      else {
        this.hooks.alert(
          'allocation_move_failed',
          step.sellerId,
          `moves ${step.moves.join(', ')}: the decrease at ${step.sellerId} could not be confirmed (${error.message}); its budget counts as ${before} until a read shows ${step.expected}`,
        );
        this.end(moves, 'failed', error);
      }
      return;
    }
    const read = cents(result.budget);
    record({
      step: 'confirm',
      sellerId: step.sellerId,
      budgetBefore: before,
      budgetAfter: read,
      outcome: read < before - EPSILON ? 'confirmed' : 'unconfirmed',
    });
    if (read >= before - EPSILON) {
      const error = {
        code: 'DECREASE_NOT_SEEN',
        message: `a read of ${step.sellerId} shows its budget at ${read}, not ${step.expected}`,
      };
      this.hooks.alert(
        'allocation_move_failed',
        step.sellerId,
        `moves ${step.moves.join(', ')}: ${error.message}; nothing moved`,
      );
      this.end(moves, 'failed', error);
      return;
    }
    // What the seller freed is what moves: a seller that kept more than asked (its own floor) gives less.
    buy.committedBudget = read;
    delete buy.unconfirmedDecrease;
    let freed = cents(before - read);
    for (const move of moves) {
      const taken = Math.min(move.amount, freed);
      freed = cents(freed - taken);
      if (taken <= EPSILON) {
        this.end([move], 'failed', { code: 'DECREASE_SHORT', message: `${step.sellerId} freed less than planned` });
        continue;
      }
      this.reserve(move, cents(taken));
    }
    this.hooks.clearAlert('allocation_move_failed', step.sellerId, `decrease confirmed at ${read}`);
  }

  private increased(
    step: BudgetChangeStep,
    result: MoveStepResult,
    buy: CampaignBuy,
    moves: BudgetMoveRecord[],
    record: (entry: Omit<BudgetMoveStep, 'at'>) => void,
  ): void {
    const base = changeStepBase('increase', step);
    const amount = sumOf(moves.map((move) => move.moved ?? 0));
    if (result.kind === 'interrupted') {
      // It may have been applied: counted as a raise in flight, never as money free for another buy.
      this.release(buy, amount);
      buy.pendingBudget = Math.max(buy.pendingBudget ?? 0, step.budget);
      record({ ...base, outcome: 'failed', error: CANCELED_MEANWHILE });
      this.end(moves, 'canceled');
      return;
    }
    const outcome = result.kind === 'change' ? result.outcome : { outcome: 'failed' };
    if (outcome.outcome !== 'applied') {
      const error = changeError(outcome, 'INCREASE_FAILED', 'increase');
      record({ ...base, outcome: outcome.outcome === 'refused' ? 'refused' : 'failed', error });
      this.returnToPool(moves, `${error.code}: ${error.message}`);
      return;
    }
    record({ ...base, outcome: 'applied' });
    this.release(buy, amount);
    buy.committedBudget = cents(buy.committedBudget + amount);
    this.book.lastMoveAt[step.sellerId] = iso(this.hooks.now());
    this.hooks.clearAlert('allocation_move_failed', step.sellerId, `increase applied (${step.budget})`);
    this.end(moves, 'applied');
  }

  /**
   * A read of a buy whose decrease nobody confirmed: the lower budget seen means it happened (the money is free), the
   * old one that it did not.
   */
  reconcile(buy: CampaignBuy, readBudget: number | undefined): void {
    const pending = buy.unconfirmedDecrease;
    if (!pending || readBudget === undefined) return;
    if (readBudget <= pending.budget + EPSILON) {
      buy.committedBudget = cents(readBudget);
      delete buy.unconfirmedDecrease;
      this.hooks.clearAlert('allocation_move_failed', buy.sellerId, `a read shows the decrease (${readBudget})`);
    } else if (readBudget >= buy.committedBudget - EPSILON) delete buy.unconfirmedDecrease;
  }

  /**
   * The campaign was canceled, or closes: every move ends where it is. Money taken and not given stays in the pool
   * (reservations released); a proposal is withdrawn.
   */
  stop(why: string): void {
    if (this.book.proposal) this.closeProposal('rejected', undefined, why);
    for (const move of this.activeMoves()) {
      if (move.status === 'increasing' && move.to.kind === 'seller') {
        const target = this.state.buys[move.to.sellerId];
        if (target) this.release(target, move.moved ?? 0);
      }
      move.error = { code: 'CAMPAIGN_ENDED', message: why };
      this.setStatus(move, 'canceled');
    }
  }

  /** Bounded: the oldest ended moves go first (the totals keep counting them). */
  private trim(): void {
    const moves = this.book.moves;
    while (moves.length > MAX_MOVES_KEPT) {
      const index = moves.findIndex((move) => FINAL.has(move.status));
      moves.splice(index >= 0 ? index : 0, 1);
    }
  }
}

/** What a decrease or increase step records of itself, whatever its outcome. */
function changeStepBase(step: 'decrease' | 'increase', change: BudgetChangeStep) {
  return {
    step,
    sellerId: change.sellerId,
    budgetBefore: change.budgetBefore,
    budgetAfter: change.budget,
    updateId: change.updateId,
  };
}

const CANCELED_MEANWHILE = { code: 'CANCELED', message: 'the campaign was canceled meanwhile' };

/** The error a change that was not applied ends with: the seller's, or one naming what became of the change. */
function changeError(
  outcome: { outcome: string; error?: { code: string; message: string } },
  code: string,
  verb: 'decrease' | 'increase',
): { code: string; message: string } {
  return outcome.error ?? { code, message: `the ${verb} ${outcome.outcome}` };
}
