/**
 * The campaign's state machine: every phase transition, the change queue and the budget guard's reservations, the
 * buys' lives as the campaign follows them, the poll cadence, the alerts, what wakes the loop and when the campaign
 * continues as new. Deterministic and free of Temporal and I/O: the workflow (workflow.ts) hands it facts (an
 * Update, a discovery's result, a buy's digest, an activity's answer) and does what `nextStep()` asks; unit tests
 * drive it with made-up facts and a fake clock.
 *
 * Phases: discovering → selecting → awaiting_approval → buying → live ⇄ paused → ended, or canceled from any phase.
 * Handlers record and validate; the loop acts, one change at a time, in the order the changes were accepted. A
 * budget raise is reserved when it is accepted (before its validator's next caller looks), so concurrent changes
 * are checked one after another against what is already reserved: the sum of committed budgets never exceeds the
 * campaign's.
 */
import {
  type ApprovalRequest,
  type BuyDigest,
  type CampaignAlertKind,
  type CampaignBuy,
  type CampaignBuyProposal,
  type CampaignCarried,
  type CampaignChangeAnswer,
  type CampaignChangeRecord,
  type CampaignChangeRequest,
  type CampaignCreative,
  type CampaignInput,
  type CampaignState,
  type CreativeLibraryRequest,
  type SelectionRequest,
  type BuyOutcome,
  campaignBuyKey,
  cents,
  digestOf,
} from '../../contract/campaign';
import { type DiscoveryInput, type DiscoveryState, discoveryWorkflowId } from '../../contract/discovery';
import type { GovernancePlanSync } from '../../contract/governance';
import {
  type MediaBuyInput,
  type MediaBuyState,
  type ReportingFrequency,
  mediaBuyWorkflowId,
} from '../../contract/media-buy';
import { buyGovernanceOf } from '../governance/machine';
import { BudgetMoves, type MoveStep, type MoveStepResult } from './moves';
import {
  MAX_REQUOTES,
  type ProposalIndex,
  buyProposalOf,
  indexProposals,
  proposalCreatesSettling,
  proposalsOfSelection,
  selectionTotal,
  validateSelectionWithProposals,
} from './proposal-rules';
import {
  type ProductIndex,
  type Verdict,
  assignmentsFor,
  buyParamsFor,
  coverageFor,
  guardedTotal,
  indexCatalogue,
  linesBySeller,
  mergeLibrary,
  pacingOf,
  plannedSpend,
  policySelection,
  productKey,
  sumBudgets,
  sumDelivery,
  validateCampaignChange,
  validateCreatives,
} from './rules';

// The API and the client check creation input with the same rules.
export { MAX_LIBRARY_CREATIVES, validateCreativeList } from './rules';

const MAX_CHANGES = 50;
const MAX_ALERTS = 50;
const HOUR = 3_600_000;
/** The first poll of the buys after a change; the wait doubles while nothing changes, up to the interval. */
export const FIRST_POLL_MS = 2_000;
const DEFAULT_POLL_INTERVAL_MS = HOUR;
const DEFAULT_UNDER_DELIVERY_THRESHOLD = 0.8;
const DEFAULT_UNDER_DELIVERY_GRACE_MS = 24 * HOUR;
/** Continue as new well before Temporal's suggestion: a 90-day campaign stays a chain of bounded runs. */
export const DEFAULT_HISTORY_EVENT_LIMIT = 2_000;
const MAX_SYNC_ATTEMPTS = 3;
const ENDED_BUY_STATUSES = new Set(['completed', 'rejected', 'canceled', 'create_failed']);

export type CampaignLog = (level: 'info' | 'warn', message: string, fields: Record<string, unknown>) => void;

export interface CampaignMachineOptions {
  now(): number;
  log?: CampaignLog;
}

export interface QueuedChange {
  record: CampaignChangeRecord;
  request: CampaignChangeRequest;
}

/** What the loop does next (in this order of priority). */
export type CampaignStep =
  | { kind: 'change'; change: QueuedChange }
  | { kind: 'poll' }
  /** The next step of the budget moves' saga (moves.ts). */
  | { kind: 'move'; step: MoveStep }
  | { kind: 'continue_as_new' }
  /** Wait until `untilMs` (or for ever), or until `wakeKey()` changes. */
  | { kind: 'wait'; untilMs?: number }
  | { kind: 'close' };

/** A buy's answer to one fanned-out change (what the activity returned, or why it failed). */
export interface BuyChangeOutcome {
  outcome: BuyOutcome;
  status?: string;
  error?: { code: string; message: string };
}

/** One buy that should get the library now, and the Update that sends it. */
export interface LibrarySync {
  sellerId: string;
  workflowId: string;
  version: number;
  attempts: number;
  creatives: CampaignCreative[];
  assignments: Record<string, string[]>;
  updateId: string;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function throwIfRefused(verdict: Verdict): void {
  if (!verdict.ok) throw new Error(`${verdict.code}: ${verdict.message}`);
}

export class CampaignMachine {
  readonly state: CampaignState;
  private readonly now: () => number;
  private readonly log: CampaignLog;
  /** The catalogue's formats of the chosen products (what coverage needs of the catalogue; carried across runs). */
  private readonly productFormats: Map<string, string[]>;
  /** Each buy's packages as last read (for creative assignments). */
  private readonly packagesOf = new Map<string, BuyDigest['packages']>();
  private products: ProductIndex = new Map();
  private proposals: ProposalIndex = new Map();
  /** Sellers whose buy by proposal this run follows until it settles (not carried: a continued run has no follower). */
  readonly followedProposals = new Set<string>();
  private readonly queue: QueuedChange[] = [];
  private readonly finished = new Map<number, CampaignChangeAnswer>();
  private changeSequence: number;
  private cancelRecord?: CampaignChangeRecord;
  private readonly pollIntervalMs: number;
  private pollDelayMs = FIRST_POLL_MS;
  private nextPollAtMs: number;
  private lastMemo = '';
  /** The budget allocation: the policy, its decisions and the moves' saga. */
  readonly moves: BudgetMoves;

  constructor(
    readonly input: CampaignInput,
    options: CampaignMachineOptions,
  ) {
    this.now = options.now;
    this.log = options.log ?? (() => undefined);
    const carried = input.carried;
    const at = iso(this.now());
    this.state = carried?.state ?? {
      campaignKey: input.campaignKey,
      brief: input.brief,
      totalBudget: input.totalBudget,
      ...(input.currency ? { currency: input.currency } : {}),
      flight: input.flight,
      phase: 'discovering',
      requestedBy: input.requestedBy,
      discoveryId: discoveryWorkflowId(input.campaignKey),
      buys: {},
      committedBudget: 0,
      changes: [],
      changeCount: 0,
      alerts: [],
      startedAt: at,
      updatedAt: at,
      // Tenancy: only campaigns created with a tenant carry these fields.
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
      ...(input.creatives && input.creatives.length > 0
        ? { library: { version: 1, creatives: input.creatives, updatedAt: at, updatedBy: input.requestedBy } }
        : {}),
    };
    if (carried) this.state.run = (this.state.run ?? 1) + 1;
    this.productFormats = new Map(carried?.productFormats ?? []);
    this.changeSequence = carried?.changeSequence ?? 0;
    this.pollIntervalMs = Math.max(input.monitoring?.intervalMs ?? DEFAULT_POLL_INTERVAL_MS, FIRST_POLL_MS);
    if (carried?.pollDelayMs !== undefined)
      this.pollDelayMs = Math.min(Math.max(carried.pollDelayMs, FIRST_POLL_MS), this.pollIntervalMs);
    // A continued campaign polls at once: the run before it may have ended just before its poll was due.
    this.nextPollAtMs = this.now() + (carried ? 0 : FIRST_POLL_MS);
    this.moves = new BudgetMoves(this.state, input, {
      now: this.now,
      alert: (kind, sellerId, note) => this.alert(kind, sellerId, note),
      clearAlert: (kind, sellerId, note) => this.clearAlert(kind, sellerId, note),
      log: this.log,
    });
  }

  /** A continued campaign holds its buys: discovery, selection and buying happened in an earlier run. */
  get continued(): boolean {
    return this.input.carried !== undefined;
  }

  /** A cancel was accepted (it may not have run yet): nothing more is bought. */
  get cancelRequested(): boolean {
    return this.cancelRecord !== undefined;
  }

  // ---- the view: memo, details --------------------------------------------------------------------------------------

  /** Bookkeeping before anything is published: the time, and the guard's sum. */
  touch(): void {
    this.state.updatedAt = iso(this.now());
    this.state.committedBudget = guardedTotal(this.state.buys);
    if (this.state.budgetAllocation) this.state.budgetAllocation.pool = this.moves.pool(this.state.committedBudget);
  }

  memo(): { phase: string; committedBudget: number; totalBudget: number; buys: string[] } {
    return {
      phase: this.state.phase,
      committedBudget: this.state.committedBudget,
      totalBudget: this.state.totalBudget,
      buys: Object.keys(this.state.buys),
    };
  }

  /** The memo to write, or undefined when it has not changed since the last one written (a quiet poll adds none). */
  memoToWrite(force: boolean): ReturnType<CampaignMachine['memo']> | undefined {
    this.touch();
    const memo = this.memo();
    const text = JSON.stringify(memo);
    if (!force && text === this.lastMemo) return undefined;
    this.lastMemo = text;
    return memo;
  }

  details(): string {
    const state = this.state;
    const ended = Object.values(state.buys).filter((buy) => buy.finalStatus).length;
    const open = state.alerts.filter((entry) => !entry.clearedAt).length;
    const pacing = state.delivery?.pacing;
    return (
      `campaign ${state.campaignKey}: ${state.phase} · ${Object.keys(state.buys).length} buys (${ended} ended) · committed ${state.committedBudget}/${state.totalBudget}` +
      (state.delivery ? ` · spend ${state.delivery.spend}${pacing != null ? ` (pacing ${pacing})` : ''}` : '') +
      (open > 0 ? ` · ${open} open alerts` : '') +
      this.movesDetails()
    );
  }

  private movesDetails(): string {
    const book = this.state.budgetAllocation;
    if (!book || (book.policy.mode === 'off' && book.totals.moves === 0)) return '';
    const waiting = book.proposal ? ` · plan ${book.proposal.plan} waits for approval` : '';
    return ` · budget moves ${book.policy.mode}: ${book.totals.applied} applied, ${book.totals.moved} moved${waiting}`;
  }

  // ---- alerts ----------------------------------------------------------------------------------------------------

  /** Raise an alert once per key (kind, seller, creative) until it is cleared: kept in state, and a log line. */
  alert(kind: CampaignAlertKind, sellerId: string, note: string, creativeId?: string): void {
    const key = [kind, sellerId, ...(creativeId ? [creativeId] : [])].join(':');
    const alerts = this.state.alerts;
    if (alerts.some((entry) => (entry.key ?? `${entry.kind}:${entry.sellerId}`) === key && !entry.clearedAt)) return;
    alerts.push({ at: iso(this.now()), kind, sellerId, note, key, ...(creativeId ? { creativeId } : {}) });
    if (alerts.length > MAX_ALERTS) {
      const oldestCleared = alerts.findIndex((entry) => entry.clearedAt);
      alerts.splice(oldestCleared >= 0 ? oldestCleared : 0, 1);
    }
    this.log('warn', `Campaign alert raised: ${kind}`, {
      campaignKey: this.state.campaignKey,
      sellerId,
      creativeId,
      note,
    });
  }

  clearAlert(kind: CampaignAlertKind, sellerId: string, note: string, creativeId?: string): void {
    const key = [kind, sellerId, ...(creativeId ? [creativeId] : [])].join(':');
    const open = this.state.alerts.find((entry) => entry.key === key && !entry.clearedAt);
    if (!open) return;
    open.clearedAt = iso(this.now());
    this.log('info', `Campaign alert cleared: ${kind}`, {
      campaignKey: this.state.campaignKey,
      sellerId,
      creativeId,
      note,
    });
  }

  // ---- Updates: validators and what they record ------------------------------------------------------------------

  validateSelection(request: SelectionRequest | undefined): void {
    throwIfRefused(
      // Without proposals exactly validateSelection (proposal-rules.ts).
      validateSelectionWithProposals(
        this.state.phase,
        this.state.totalBudget,
        this.products,
        this.proposals,
        request,
        this.now(),
      ),
    );
  }

  select(request: SelectionRequest): { accepted: true; committedBudget: number } {
    this.state.selection = { ...request, at: iso(this.now()) };
    delete this.state.approval; // a new selection needs a new approval
    this.state.phase = 'awaiting_approval';
    return { accepted: true, committedBudget: selectionTotal(request) };
  }

  validateApproval(request: ApprovalRequest | undefined): void {
    if (!request || typeof request.approvedBy !== 'string' || request.approvedBy.trim() === '')
      throw new Error('INVALID_REQUEST: approvedBy must say who approves the spend.');
    if (this.state.phase !== 'awaiting_approval' || !this.state.selection)
      throw new Error(
        `INVALID_STATE: The campaign is ${this.state.phase}; approval comes after a selection and before buying.`,
      );
    if (this.state.approval) throw new Error(`INVALID_STATE: Already approved by ${this.state.approval.approvedBy}.`);
  }

  approve(request: ApprovalRequest): { accepted: true; buys: string[] } {
    this.state.approval = { ...request, at: iso(this.now()) };
    return {
      accepted: true,
      buys: [
        ...linesBySeller(this.state.selection!.lines).keys(),
        ...proposalsOfSelection(this.state.selection).map((accepted) => accepted.sellerId),
      ],
    };
  }

  /** The approval gate's wake rule: an approval, or a cancel before it. */
  approvedOrCanceled(): boolean {
    return this.state.approval !== undefined || this.cancelRequested;
  }

  validateChange(request: CampaignChangeRequest | undefined): void {
    throwIfRefused(validateCampaignChange(this.state, request));
  }

  /**
   * Records a change and queues it for the loop; its answer comes once the loop has run it (`changeAnswer`). Checked
   * again here, before any await: the validator of a later Update sees this reservation. A change refused here is
   * recorded as failed and answered at once.
   */
  requestChange(request: CampaignChangeRequest): { sequence: number; answer?: CampaignChangeAnswer } {
    const verdict = validateCampaignChange(this.state, request);
    const sequence = ++this.changeSequence;
    const record: CampaignChangeRecord = {
      sequence,
      kind: request.kind,
      requestedBy: request.requestedBy,
      ...(request.reason ? { reason: request.reason } : {}),
      ...(request.sellerId ? { sellerId: request.sellerId } : {}),
      ...(request.budget !== undefined ? { budget: request.budget } : {}),
      requestedAt: iso(this.now()),
      outcome: 'queued',
      buys: {},
    };
    this.state.changes.push(record);
    this.state.changeCount += 1;
    if (this.state.changes.length > MAX_CHANGES) this.state.changes.shift();
    if (!verdict.ok) {
      record.outcome = 'failed';
      record.finishedAt = record.requestedAt;
      return {
        sequence,
        answer: { sequence, outcome: record.outcome, committedBudget: this.state.committedBudget, buys: {} },
      };
    }
    if (request.kind === 'budget') {
      const buy = this.state.buys[request.sellerId!];
      if (request.budget! > buy.committedBudget) buy.pendingBudget = Math.max(buy.pendingBudget ?? 0, request.budget!);
      this.touch();
    }
    if (request.kind === 'cancel') this.cancelRecord ??= record;
    this.queue.push({ record, request });
    return { sequence };
  }

  changeAnswer(sequence: number): CampaignChangeAnswer | undefined {
    return this.finished.get(sequence);
  }

  validateLibrary(request: CreativeLibraryRequest | undefined): void {
    throwIfRefused(validateCreatives(request));
    if (this.state.phase === 'canceled' || this.state.phase === 'ended')
      throw new Error(`INVALID_STATE: The campaign is ${this.state.phase}; its library no longer changes.`);
  }

  setLibrary(request: CreativeLibraryRequest): { version: number; creatives: number } {
    const creatives = mergeLibrary(this.state.library?.creatives ?? [], request);
    this.state.library = {
      version: (this.state.library?.version ?? 0) + 1,
      creatives,
      updatedAt: iso(this.now()),
      updatedBy: request.requestedBy,
    };
    this.log('info', 'Campaign creative library changed', {
      campaignKey: this.state.campaignKey,
      version: this.state.library.version,
      creatives: creatives.length,
    });
    return { version: this.state.library.version, creatives: creatives.length };
  }

  validateBudgetAllocation(request: Parameters<BudgetMoves['validatePolicy']>[0]): void {
    throwIfRefused(this.moves.validatePolicy(request));
  }

  setBudgetAllocation(request: Parameters<BudgetMoves['setPolicy']>[0]): ReturnType<BudgetMoves['setPolicy']> {
    const answer = this.moves.setPolicy(request);
    this.log('info', 'Campaign budget allocation policy changed', {
      campaignKey: this.state.campaignKey,
      mode: answer.policy.mode,
      by: request.requestedBy,
    });
    return answer;
  }

  validateMovesDecision(request: Parameters<BudgetMoves['validateDecision']>[0]): void {
    throwIfRefused(this.moves.validateDecision(request));
  }

  decideMoves(request: Parameters<BudgetMoves['decide']>[0]): ReturnType<BudgetMoves['decide']> {
    return this.moves.decide(request);
  }

  // ---- planning: governance, discovery, selection --------------------------------------------------------------------

  planSynced(sync: GovernancePlanSync): void {
    this.state.governance = sync;
  }

  /** The discovery's result: the catalogue the selection may name, its summary, alerts for sellers that did not answer. */
  discovered(discovery: DiscoveryState): void {
    this.products = indexCatalogue(discovery.catalogue);
    this.proposals = indexProposals(discovery.proposals ?? []);
    this.state.discovery = {
      status: discovery.status,
      partial: discovery.partial,
      sellers: discovery.sellers,
      incomplete: discovery.incomplete,
      products: discovery.catalogue.length,
    };
    for (const seller of Object.values(discovery.sellers)) {
      if (seller.status === 'failed' || seller.status === 'timed_out')
        this.alert(
          'seller_unavailable',
          seller.sellerId,
          `discovery: ${seller.status} (${seller.error?.message ?? ''})`,
        );
    }
    // The selection: by the input's product policy if it has one (a person still approves), else a person's Update.
    const policy = this.input.allocation;
    const lines =
      policy && !this.cancelRequested ? policySelection(discovery.catalogue, this.input.totalBudget, policy) : [];
    if (policy && lines.length > 0) {
      this.state.selection = { lines, selectedBy: `policy:${policy.kind}`, at: iso(this.now()), byPolicy: true };
      this.state.phase = 'awaiting_approval';
    } else this.state.phase = 'selecting';
  }

  /** The discovery's input: the campaign's brief to its sellers, within its time budget, for its tenant. */
  discoveryInput(indexed: boolean): DiscoveryInput {
    const input = this.input;
    return {
      discoveryKey: input.campaignKey,
      brief: input.brief,
      sellerIds: input.sellerIds,
      ...(input.skipped ? { skipped: input.skipped } : {}),
      timeBudgetMs: input.timeBudgetMs,
      ...(input.discoveryParams ? { params: input.discoveryParams } : {}),
      ...(input.preferences ? { preferences: input.preferences } : {}),
      requestedBy: input.requestedBy,
      indexed,
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
    };
  }

  // ---- buying ----------------------------------------------------------------------------------------------------

  /**
   * After the approval (and no cancel): one buy record per chosen seller, under a key from the campaign and the
   * seller (a retried start finds the same buy and never buys twice); a buy by proposal commits the proposal's budget.
   * Returns the buys to start, or undefined when a cancel came first.
   */
  startBuying(): CampaignBuy[] | undefined {
    if (this.cancelRequested) return undefined;
    const state = this.state;
    state.phase = 'buying';
    for (const line of state.selection!.lines) {
      const key = productKey(line.sellerId, line.productId);
      this.productFormats.set(key, this.products.get(key)?.formats ?? []);
    }
    for (const [sellerId, lines] of linesBySeller(state.selection!.lines)) {
      const buyKey = campaignBuyKey(this.input.campaignKey, sellerId);
      state.buys[sellerId] = {
        sellerId,
        buyKey,
        workflowId: mediaBuyWorkflowId(buyKey),
        lines,
        committedBudget: sumBudgets(lines),
      };
    }
    for (const accepted of proposalsOfSelection(state.selection)) {
      const buyKey = campaignBuyKey(this.input.campaignKey, accepted.sellerId);
      state.buys[accepted.sellerId] = {
        sellerId: accepted.sellerId,
        buyKey,
        workflowId: mediaBuyWorkflowId(buyKey),
        lines: [],
        committedBudget: cents(accepted.budget),
        proposal: buyProposalOf(accepted, this.proposals.get(productKey(accepted.sellerId, accepted.proposalId))),
      };
    }
    return Object.values(state.buys);
  }

  /** Every buy has been started (or handed to its proposal follower). */
  buyingStarted(): void {
    this.state.phase = 'live';
  }

  /** The buy's workflow exists (started now, or found under its key after a reset). */
  buyStarted(sellerId: string): void {
    this.state.buys[sellerId].startedAt = iso(this.now());
  }

  /** The media-buy input of one buy: its key, its products' create arguments, reporting, tenant, governance. */
  mediaBuyInputOf(buy: CampaignBuy, indexed: boolean): MediaBuyInput {
    const input = this.input;
    const productFrequencies = buy.lines
      .map((line) => this.products.get(productKey(line.sellerId, line.productId))?.reportingFrequencies ?? [])
      .filter((frequencies) => frequencies.length > 0) as ReportingFrequency[][];
    return {
      buyKey: buy.buyKey,
      sellerId: buy.sellerId,
      params: buyParamsFor(input, buy.lines),
      requestedBy: this.state.approval!.approvedBy,
      indexed,
      // The campaign's buys are its tenant's: their AdcpTenant, their seller credentials, their reads.
      ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
      ...(input.principal !== undefined ? { principal: input.principal } : {}),
      ...(input.governance ? { governance: buyGovernanceOf(input.campaignKey, input.governance) } : {}),
      ...(input.reportingBaseUrl
        ? {
            reporting: {
              url: `${input.reportingBaseUrl}/webhooks/adcp-reporting/${encodeURIComponent(buy.workflowId)}`,
              ...(productFrequencies.length > 0 ? { productFrequencies } : {}),
            },
          }
        : {}),
    };
  }

  /** A buy's workflow ended: its last word for the view, and the guard's release for a buy that bought nothing. */
  buyEnded(sellerId: string, ended: MediaBuyState): void {
    const buy = this.state.buys[sellerId];
    this.fold(buy, digestOf(buy.sellerId, buy.workflowId, ended));
    buy.finalStatus = ended.status;
    if (ended.failure?.message) buy.finalMessage = ended.failure.message;
    if (ended.status === 'rejected') this.alert('buy_rejected', buy.sellerId, 'the seller rejected the buy');
    if (ended.status === 'create_failed')
      this.alert('buy_failed', buy.sellerId, ended.failure?.message ?? 'create_media_buy failed');
    if (ended.status === 'rejected' || ended.status === 'create_failed') buy.committedBudget = 0;
    delete buy.pendingBudget;
  }

  /** A buy's workflow failed (not the buy at the seller: the workflow itself). */
  buyFailed(sellerId: string, message: string): void {
    const buy = this.state.buys[sellerId];
    buy.finalStatus = 'workflow_failed';
    buy.finalMessage = message;
    this.alert('buy_failed', buy.sellerId, message);
  }

  // ---- buys by proposal (proposals.ts follows them; every state change is here) ----------------------------------

  /** The currency of the accepted proposal's budget guidance (when the campaign names none). */
  proposalCurrency(sellerId: string): string | undefined {
    const accepted = this.state.buys[sellerId]?.proposal?.proposalId;
    return accepted ? this.proposals.get(productKey(sellerId, accepted))?.budgetGuidance?.currency : undefined;
  }

  proposalOf(sellerId: string): CampaignBuyProposal {
    return this.state.buys[sellerId].proposal!;
  }

  /** A finalize of `from` is about to run as operation `operationId`: recorded, so the view shows it in flight. */
  finalizeStarted(sellerId: string, from: string, operationId: string): void {
    this.proposalOf(sellerId).finalized.push({ from, operationId, at: iso(this.now()) });
  }

  /** What the finalize answered: the committed proposal (and its hold's expiry), or why there is none. */
  finalizeEnded(sellerId: string, answer: { proposalId: string; expiresAt?: string } | { error: string }): void {
    const proposal = this.proposalOf(sellerId);
    const record = proposal.finalized[proposal.finalized.length - 1];
    if ('error' in answer) record.error = answer.error;
    else {
      record.to = answer.proposalId;
      if (answer.expiresAt) proposal.expiresAt = answer.expiresAt;
    }
  }

  /**
   * The buy of `proposalId` is about to start (attempt 0, or a requote): after a requote it has the next key,
   * `<buy key>.requote-<n>`, and what the campaign read was the refused attempt's.
   */
  proposalBuyStarting(sellerId: string, proposalId: string, attempt: number, baseKey: string): CampaignBuy {
    const buy = this.state.buys[sellerId];
    buy.proposal!.boughtProposalId = proposalId;
    if (attempt > 0) {
      buy.buyKey = `${baseKey}.requote-${attempt}`;
      buy.workflowId = mediaBuyWorkflowId(buy.buyKey);
      delete buy.status;
      delete buy.mediaBuyId;
    }
    return buy;
  }

  /** The seller refused the create by proposal (REQUOTE_REQUIRED and kin): quote again, or a person decides. */
  proposalRequoted(sellerId: string, proposalId: string, code: string, message: string): 'requote' | 'give_up' {
    const buy = this.state.buys[sellerId];
    const proposal = buy.proposal!;
    proposal.requotes.push({ proposalId, code, message, buyWorkflowId: buy.workflowId, at: iso(this.now()) });
    if (proposal.requotes.length > MAX_REQUOTES) {
      this.proposalGiveUp(
        sellerId,
        'requote_required',
        `${sellerId} refused proposal ${proposalId} again (${code}); a person must choose new terms.`,
      );
      return 'give_up';
    }
    this.alert('proposal_requote', sellerId, `${code} for proposal ${proposalId}: quoting again`);
    return 'requote';
  }

  /** Give up on this seller's buy: nothing was bought, so nothing is committed; a person takes it from here. */
  proposalGiveUp(sellerId: string, status: string, message: string): void {
    const buy = this.state.buys[sellerId];
    buy.finalStatus = status;
    buy.finalMessage = message;
    buy.committedBudget = 0;
    delete buy.pendingBudget;
    buy.proposal!.needsPerson = message;
    this.alert('proposal_requote', sellerId, message);
  }

  /** The campaign was canceled before this seller's buy existed: nothing was bought, so nothing is committed. */
  stopForCancel(sellerId: string): void {
    const buy = this.state.buys[sellerId];
    buy.finalStatus = 'canceled';
    buy.finalMessage = `The campaign was canceled before the buy at ${sellerId} was created; nothing was bought.`;
    buy.committedBudget = 0;
    delete buy.pendingBudget;
  }

  // ---- the loop: what runs next, and what wakes it -----------------------------------------------------------------

  private allBuysEnded(): boolean {
    return Object.values(this.state.buys).every((buy) => buy.finalStatus !== undefined);
  }

  /**
   * The loop's next step: a queued change first (one at a time, in order), the end once the campaign is canceled or
   * every buy has ended, a poll when it is due (or a buy lacks the library), continue-as-new past the history limit
   * (not while a buy by proposal may still be quoted again: its follower does not carry over), else a wait.
   */
  nextStep(history: { length: number; continueAsNewSuggested: boolean }): CampaignStep {
    if (this.state.phase === 'canceled') return { kind: 'close' };
    if (this.queue.length > 0) return { kind: 'change', change: this.queue[0] };
    if (Object.keys(this.state.buys).length === 0 || this.allBuysEnded()) return { kind: 'close' };
    this.moves.expireIfDue();
    const move = this.moves.nextStep();
    if (move) return { kind: 'move', step: move };
    if (this.now() >= this.nextPollAtMs || this.libraryWaiting()) return { kind: 'poll' };
    if (this.shouldContinueAsNew(history)) return { kind: 'continue_as_new' };
    const deadline = this.moves.proposalDeadline();
    return {
      kind: 'wait',
      untilMs: deadline !== undefined ? Math.min(deadline, this.nextPollAtMs) : this.nextPollAtMs,
    };
  }

  /** What the loop's wait wakes on: a change queued, a buy ending, a new library version. */
  wakeKey(): string {
    const ended = Object.values(this.state.buys).filter((buy) => buy.finalStatus !== undefined).length;
    return `${this.queue.length}:${ended}:${this.state.library?.version ?? 0}:${this.moves.wakeKey()}`;
  }

  private shouldContinueAsNew(history: { length: number; continueAsNewSuggested: boolean }): boolean {
    const limit = this.input.historyEventLimit ?? DEFAULT_HISTORY_EVENT_LIMIT;
    return (
      (history.length >= limit || history.continueAsNewSuggested) &&
      !proposalCreatesSettling(this.state.buys, this.followedProposals) &&
      // A plan being applied finishes in this run (its steps are in state, but one run per plan keeps it simple).
      !this.moves.inFlight()
    );
  }

  // ---- budget moves ----------------------------------------------------------------------------------------------

  moveStepStarted(step: MoveStep): void {
    this.moves.stepStarted(step);
  }

  moveStepDone(step: MoveStep, result: MoveStepResult): void {
    this.moves.stepDone(step, result);
    this.touch();
  }

  /** After the handlers have finished: nothing was queued meanwhile, so the next run can take over. */
  readyToContinueAsNew(): boolean {
    return this.queue.length === 0;
  }

  /** What the next run carries: the state, the change sequence, the chosen products' formats, the poll cadence. */
  carried(): CampaignCarried {
    return {
      state: this.state,
      changeSequence: this.changeSequence,
      productFormats: [...this.productFormats],
      pollDelayMs: this.pollDelayMs,
    };
  }

  // ---- changes ---------------------------------------------------------------------------------------------------

  changeStarted(change: QueuedChange): void {
    change.record.outcome = 'running';
  }

  /** The sellers a change goes to: one buy for a budget change, every buy otherwise. */
  changeTargets(change: QueuedChange): string[] {
    return change.request.kind === 'budget' ? [change.request.sellerId!] : Object.keys(this.state.buys);
  }

  /** A buy that needs no call for this change (it has ended; a budget change is sent anyway, and refused there). */
  settledWithoutCall(change: QueuedChange, sellerId: string): BuyChangeOutcome | undefined {
    const buy = this.state.buys[sellerId];
    if (buy.finalStatus && change.request.kind !== 'budget') return { outcome: 'not_needed', status: buy.finalStatus };
    return undefined;
  }

  /** What the fan-out activity sends one buy: the update ID is the change's sequence and the seller (a retry is the same Update). */
  buyChangeInput(change: QueuedChange, sellerId: string) {
    const { record, request } = change;
    return {
      workflowId: this.state.buys[sellerId].workflowId,
      kind: request.kind,
      requestedBy: request.requestedBy,
      ...(request.reason ? { reason: request.reason } : {}),
      ...(request.budget !== undefined ? { budget: request.budget } : {}),
      updateId: `${this.input.campaignKey}.change-${record.sequence}.${sellerId}`,
    };
  }

  /** Every buy answered the change: outcomes, the budget applied or released, the phase it leads to. */
  changeFinished(change: QueuedChange, outcomes: Record<string, BuyChangeOutcome>): void {
    const { record, request } = change;
    for (const [sellerId, outcome] of Object.entries(outcomes)) record.buys[sellerId] = outcome;
    if (request.kind === 'budget') {
      const buy = this.state.buys[request.sellerId!];
      // A buy that ended meanwhile keeps what it had: its budget was released (or settled) when it ended.
      const applied = record.buys[buy.sellerId]?.outcome === 'applied' && !buy.finalStatus;
      if (applied) buy.committedBudget = cents(request.budget!);
      // The raise in flight is released either way; a later one still queued keeps its own reservation.
      const highest = Math.max(
        0,
        ...this.queue
          .filter(
            (other) => other !== change && other.request.kind === 'budget' && other.request.sellerId === buy.sellerId,
          )
          .map((other) => other.request.budget!),
      );
      if (highest > buy.committedBudget) buy.pendingBudget = highest;
      else delete buy.pendingBudget;
      record.outcome = applied ? 'applied' : 'failed';
    } else {
      const all = Object.values(record.buys).map((buy) => buy.outcome);
      const good = all.filter((outcome) => outcome === 'applied' || outcome === 'not_needed').length;
      record.outcome = good === all.length ? 'applied' : good > 0 ? 'partial' : 'failed';
      if (request.kind === 'pause' && good > 0) this.state.phase = 'paused';
      if (request.kind === 'resume' && good > 0) this.state.phase = 'live';
      if (request.kind === 'cancel') {
        this.state.phase = 'canceled';
        this.moves.stop('the campaign was canceled');
      }
    }
    record.finishedAt = iso(this.now());
    this.touch();
    this.queue.splice(this.queue.indexOf(change), 1);
    this.answer(record, record.buys);
  }

  private answer(record: CampaignChangeRecord, buys: CampaignChangeRecord['buys']): void {
    this.finished.set(record.sequence, {
      sequence: record.sequence,
      outcome: record.outcome,
      committedBudget: this.state.committedBudget,
      buys,
    });
  }

  /**
   * The loop ended (canceled, or every buy ended): a cancel that never ran (no buy to fan out to) is applied, the
   * changes still queued are answered failed (the campaign has ended), and the phase is final.
   */
  close(): void {
    const cancel = this.cancelRecord;
    if (cancel && !this.finished.has(cancel.sequence)) {
      this.state.phase = 'canceled';
      cancel.outcome = 'applied';
      cancel.finishedAt = iso(this.now());
    }
    for (const queued of this.queue.splice(0)) {
      if (queued.record !== cancel) queued.record.outcome = 'failed';
      this.answer(queued.record, {});
    }
    if (this.state.phase !== 'canceled') this.state.phase = 'ended';
    this.moves.stop(`the campaign ${this.state.phase}`);
    this.touch();
  }

  // ---- following the buys: creatives, delivery and pacing, alerts ------------------------------------------------

  /** The buys to read on a poll: those the campaign has not seen end. */
  pollTargets(): { sellerId: string; workflowId: string }[] {
    return Object.values(this.state.buys)
      .filter((buy) => !buy.finalStatus)
      .map((buy) => ({ sellerId: buy.sellerId, workflowId: buy.workflowId }));
  }

  /** Whether a buy should get the library now (it exists at the seller, has not ended, lacks this version). */
  private needsSync(buy: CampaignBuy, version: number, retry: boolean): boolean {
    if (buy.finalStatus || !buy.mediaBuyId || ENDED_BUY_STATUSES.has(buy.status ?? '')) return false;
    const sync = buy.creativeSync;
    if (!sync || sync.version < version) return true;
    return retry && sync.version === version && sync.outcome === 'failed' && (sync.attempts ?? 1) < MAX_SYNC_ATTEMPTS;
  }

  private libraryWaiting(): boolean {
    const library = this.state.library;
    if (!library || library.creatives.length === 0) return false;
    return Object.values(this.state.buys).some((buy) => this.needsSync(buy, library.version, false));
  }

  private formatsOf = (key: string): string[] | undefined =>
    this.productFormats.get(key) ?? this.products.get(key)?.formats;

  /** The buys that get the library on this poll, each with its Update (a retry of a failed sync is the next attempt). */
  librarySyncs(): LibrarySync[] {
    const library = this.state.library;
    if (!library || library.creatives.length === 0) return [];
    return Object.values(this.state.buys)
      .filter((buy) => this.needsSync(buy, library.version, true))
      .map((buy) => {
        const attempts = buy.creativeSync?.version === library.version ? (buy.creativeSync.attempts ?? 1) + 1 : 1;
        return {
          sellerId: buy.sellerId,
          workflowId: buy.workflowId,
          version: library.version,
          attempts,
          creatives: library.creatives,
          assignments: assignmentsFor(
            this.packagesOf.get(buy.sellerId) ?? [],
            buy.lines,
            this.formatsOf,
            library.creatives,
          ),
          // The campaign, the version, the seller and the attempt: a retried activity is the same Update.
          updateId: `${this.input.campaignKey}.creatives-v${library.version}.${buy.sellerId}.${attempts}`,
        };
      });
  }

  librarySynced(sync: LibrarySync, outcome: BuyChangeOutcome): void {
    const buy = this.state.buys[sync.sellerId];
    const result = outcome.outcome === 'applied' ? 'applied' : outcome.outcome === 'refused' ? 'refused' : 'failed';
    buy.creativeSync = {
      version: sync.version,
      outcome: result,
      at: iso(this.now()),
      attempts: sync.attempts,
      ...(outcome.error ? { error: `${outcome.error.code}: ${outcome.error.message}` } : {}),
    };
    if (result !== 'applied')
      this.log('warn', 'Campaign creative sync did not apply', {
        campaignKey: this.state.campaignKey,
        sellerId: buy.sellerId,
        version: sync.version,
        outcome: result,
        error: buy.creativeSync.error,
      });
  }

  /** What a poll read of each buy; true when something that calls for a sooner poll changed. */
  read(digests: BuyDigest[]): boolean {
    let changed = false;
    for (const digest of digests) {
      const buy = this.state.buys[digest.sellerId];
      if (buy) changed = this.fold(buy, digest) || changed;
    }
    return changed;
  }

  /** Record what a buy's workflow says; true when something that calls for a sooner poll changed. */
  private fold(buy: CampaignBuy, digest: BuyDigest): boolean {
    if (!digest.found) return false;
    const before = JSON.stringify([buy.status, buy.mediaBuyId, buy.creatives]);
    if (digest.status) buy.status = digest.status;
    if (digest.mediaBuyId) buy.mediaBuyId = digest.mediaBuyId;
    if (digest.startTime) buy.startTime = digest.startTime;
    if (digest.endTime) buy.endTime = digest.endTime;
    buy.creatives = digest.creatives;
    this.packagesOf.set(buy.sellerId, digest.packages);
    if (digest.availableActions) buy.availableActions = digest.availableActions;
    if (digest.reportingFrequency) buy.reportingFrequency = digest.reportingFrequency;
    // A decrease nobody confirmed is settled by what the buy's packages say now.
    const budgets = digest.packages.map((pkg) => pkg.budget);
    if (budgets.length > 0 && budgets.every((budget) => budget !== undefined))
      this.moves.reconcile(buy, cents(budgets.reduce((sum, budget) => sum! + budget!, 0)!));
    if (digest.mediaBuyId)
      buy.delivery = {
        impressions: digest.totals?.impressions ?? 0,
        spend: digest.totals?.spend ?? 0,
        ...(digest.totals?.clicks !== undefined ? { clicks: digest.totals.clicks } : {}),
        plannedSpend: buy.delivery?.plannedSpend ?? 0,
        pacing: buy.delivery?.pacing ?? null,
        at: iso(this.now()),
      };
    if (digest.status === 'rejected')
      this.alert('buy_rejected', buy.sellerId, digest.failure ?? 'the seller rejected the buy');
    // A buy by proposal being followed (proposals.ts) ends when its follower says: a refused create may be quoted
    // again under the next key.
    const followed = this.followedProposals.has(buy.sellerId);
    if (digest.status === 'create_failed' && !followed)
      this.alert('buy_failed', buy.sellerId, digest.failure ?? 'create_media_buy failed');
    // A buy that has settled ends for the campaign too (in a continued run there is no child handle to say so).
    if (digest.done && !buy.finalStatus && !followed) {
      buy.finalStatus = digest.status;
      if (digest.failure) buy.finalMessage = digest.failure;
      if (digest.status === 'rejected' || digest.status === 'create_failed') buy.committedBudget = 0;
      delete buy.pendingBudget;
    }
    if (digest.seller) {
      const down = digest.seller.reachable === false || digest.seller.circuit === 'open';
      const note = digest.seller.error ?? `circuit ${digest.seller.circuit ?? 'unknown'}`;
      if (down) this.alert('seller_unavailable', buy.sellerId, `seller down: ${note}`);
      else if (digest.seller.reachable === true)
        this.clearAlert('seller_unavailable', buy.sellerId, 'seller reachable again');
    }
    return JSON.stringify([buy.status, buy.mediaBuyId, buy.creatives]) !== before;
  }

  /** Coverage, delivery and pacing per buy and in total, and the alerts they raise or clear. */
  evaluate(): void {
    const nowMs = this.now();
    const threshold = this.input.monitoring?.underDeliveryThreshold ?? DEFAULT_UNDER_DELIVERY_THRESHOLD;
    const graceMs = this.input.monitoring?.underDeliveryGraceMs ?? DEFAULT_UNDER_DELIVERY_GRACE_MS;
    const library = this.state.library?.creatives ?? [];
    const deliveries = [];
    for (const buy of Object.values(this.state.buys)) {
      buy.coverage = coverageFor(buy.lines, this.formatsOf, library);
      for (const [creativeId, review] of Object.entries(buy.creatives ?? {})) {
        const rejected = review.status === 'rejected' || review.action === 'failed';
        if (rejected)
          this.alert(
            'creative_rejected',
            buy.sellerId,
            `${creativeId}: ${review.error ?? review.status ?? review.action}`,
            creativeId,
          );
        else if (review.status === 'approved')
          this.clearAlert('creative_rejected', buy.sellerId, 'approved', creativeId);
      }
      if (!buy.delivery || buy.status === 'rejected' || buy.status === 'create_failed') continue;
      const startMs = Date.parse(buy.startTime ?? this.state.flight.startTime);
      const endMs = Date.parse(buy.endTime ?? this.state.flight.endTime);
      const planned = plannedSpend(buy.committedBudget, startMs, endMs, nowMs);
      buy.delivery.plannedSpend = planned;
      buy.delivery.pacing = nowMs >= startMs ? pacingOf(buy.delivery.spend, planned) : null;
      deliveries.push(buy.delivery);
      const pacing = buy.delivery.pacing;
      if (buy.status === 'active' && nowMs >= startMs + graceMs && pacing !== null && pacing < threshold)
        this.alert(
          'under_delivery',
          buy.sellerId,
          `pacing ${pacing}: spend ${buy.delivery.spend} of ${planned} planned by now (threshold ${threshold})`,
        );
      else if (pacing !== null && pacing >= threshold)
        this.clearAlert('under_delivery', buy.sellerId, `pacing ${pacing} (threshold ${threshold})`);
    }
    if (deliveries.length > 0) this.state.delivery = sumDelivery(deliveries, iso(nowMs));
  }

  /**
   * A poll is done: counted, and the next one scheduled. Right after something changed the polls come sooner; the
   * wait doubles while nothing changes, up to the monitoring interval.
   */
  polled(changed: boolean): void {
    const nowMs = this.now();
    this.state.monitoring = { polls: (this.state.monitoring?.polls ?? 0) + 1, lastPollAt: iso(nowMs) };
    this.pollDelayMs = changed ? FIRST_POLL_MS : Math.min(this.pollDelayMs * 2, this.pollIntervalMs);
    this.nextPollAtMs = nowMs + this.pollDelayMs;
    // Fresh delivery: the allocation policy decides (it moves nothing while a change is queued).
    this.moves.afterPoll(this.queue.length > 0);
    this.touch();
  }
}
