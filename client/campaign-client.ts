/**
 * Typed clients for discoveries and campaigns. Both check the sellers before anything starts: an unknown seller is
 * a request error, and a seller whose capabilities say it has no get_products is left out and reported `skipped`
 * (no call is made to it). Selections, approvals and changes are Updates: the campaign's validators refuse what
 * its phase or budget guard does not allow before it enters history, and an idempotency key is the update ID.
 *
 *   const campaigns = new CampaignClient({ client, taskQueue, sellers });
 *   const { campaignId } = await campaigns.create({ campaignKey: 'spring-26', brief, totalBudget: 50_000, flight, sellerIds, timeBudgetMs: 10_000, requestedBy: 'planner@buyer' });
 *   await campaigns.select(campaignId, { lines, selectedBy: 'planner@buyer' });
 *   // or accept a seller's proposal (mixing is fine: other sellers by lines):
 *   await campaigns.select(campaignId, { lines: [], proposals: [{ sellerId, proposalId, budget }], selectedBy });
 *   await campaigns.approve(campaignId, { approvedBy: 'cfo@buyer' });
 */
import {
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { SA_CAMPAIGN, SA_PRINCIPAL, SA_TENANT } from '../config/search-attributes';
import { CALLER_KEY_PATTERN } from '../protocol';
import type { RankingPreferences } from '../protocol/catalogue';
import { type CallerIdentity, TENANT_RULE, isTenantName, tenantScopedKey } from '../protocol/tenancy';
import type { adcpCampaign } from '../workflows/campaign/workflow';
import {
  type AllocationPolicy,
  CAMPAIGN_ID_PATTERN,
  CAMPAIGN_WORKFLOW_TYPE,
  type ApprovalRequest,
  type CampaignChangeAnswer,
  type CampaignChangeRequest,
  type CampaignCreative,
  type CampaignInput,
  type CreativeLibraryRequest,
  type MonitoringSettings,
  type CampaignState,
  type Flight,
  type SelectionRequest,
  approveCampaignUpdate,
  campaignStateQuery,
  campaignWorkflowId,
  changeCampaignUpdate,
  decideBudgetMovesUpdate,
  setBudgetAllocationUpdate,
  type BudgetAllocationAnswer,
  type BudgetAllocationPolicyInput,
  type BudgetAllocationRequest,
  type BudgetMovesDecision,
  type BudgetMovesDecisionAnswer,
  selectProductsUpdate,
  setCampaignCreativesUpdate,
} from '../contract/campaign';
import { validateAllocationPolicy } from '../workflows/campaign/allocation';
import { validateCreativeList } from '../workflows/campaign/machine';
import type { adcpDiscovery } from '../workflows/discovery/workflow';
import {
  DISCOVERY_ID_PATTERN,
  DISCOVERY_WORKFLOW_TYPE,
  type DiscoveryInput,
  type DiscoveryState,
  discoveryStateQuery,
  discoveryWorkflowId,
} from '../contract/discovery';
import type { CampaignGovernance } from '../contract/governance';
import { type MediaBuyState, mediaBuyStateQuery } from '../contract/media-buy';
import type { SellerCapabilitiesClient } from './seller-capabilities-client';

export interface CampaignClientOptions {
  client: Client;
  taskQueue: string;
  /** Checks sellers before start (configured, offering get_products); without it every id is taken as given. */
  sellers?: SellerCapabilitiesClient;
  /** false on servers without the AdCP search attributes. */
  searchAttributes?: boolean;
  /** The gateway's public base URL: each buy registers its reporting webhook there (see CampaignInput). */
  reportingBaseUrl?: string;
  /** The tenant that owns campaigns and discoveries recorded without one (as OrchestratorClientOptions.untenantedTenant). */
  untenantedTenant?: string;
}

export class CampaignRequestError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'CampaignRequestError';
  }
}

export class CampaignNotFoundError extends Error {
  constructor(readonly id: string) {
    super(`No campaign or discovery ${id}.`);
    this.name = 'CampaignNotFoundError';
  }
}

/** The campaign refused a selection, approval or change (its validators): `code` is INVALID_STATE, BUDGET_EXCEEDED ... */
export class CampaignRefusedError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'CampaignRefusedError';
  }
}

function refusal(error: unknown): CampaignRefusedError | undefined {
  if (!(error instanceof WorkflowUpdateFailedError)) return undefined;
  const message = error.cause instanceof Error ? error.cause.message : error.message;
  const match = /^([A-Z_]+): (.*)$/s.exec(message);
  return new CampaignRefusedError(match?.[1] ?? 'REFUSED', match?.[2] ?? message);
}

export interface DiscoveryRequest {
  discoveryKey: string;
  brief: string;
  /** Default: every configured seller. */
  sellerIds?: string[];
  timeBudgetMs: number;
  graceMs?: number;
  params?: Record<string, unknown>;
  preferences?: RankingPreferences;
  requestedBy?: string;
}

export interface CampaignRequest {
  campaignKey: string;
  brief: string;
  totalBudget: number;
  currency?: string;
  flight: Flight;
  sellerIds?: string[];
  timeBudgetMs: number;
  discoveryParams?: Record<string, unknown>;
  preferences?: RankingPreferences;
  allocation?: AllocationPolicy;
  buyParams?: Record<string, unknown>;
  requestedBy: string;
  /** The creative library the campaign starts with (synced to every buy once it exists at its seller). */
  creatives?: CampaignCreative[];
  monitoring?: MonitoringSettings;
  /** Continue as new past this many history events (tests set it low). */
  historyEventLimit?: number;
  /** A governance agent: sync_plans at creation, check_governance before each buy's spend (#14 item 6). */
  governance?: CampaignGovernance;
  /** How the campaign moves budget across its sellers once live (off unless set); see docs/campaigns.md. */
  budgetAllocation?: BudgetAllocationPolicyInput;
}

export interface BuySummary {
  sellerId: string;
  workflowId: string;
  status?: string;
  mediaBuyId?: string;
  committedBudget: number;
  packages?: number;
  failure?: string;
  error?: string;
  /** The buy's governance status, and the conditions waiting for a person (decided at the buy's decision endpoint). */
  governance?: { status: string; pending?: { action: string; explanation: string; deadline: string } };
}

export interface CampaignView {
  campaignId: string;
  running: boolean;
  state: CampaignState;
  /** Each buy as its own workflow says now (its status, media_buy_id). */
  buys: BuySummary[];
}

const RESERVED_BUY_PARAMS = [
  'packages',
  'start_time',
  'end_time',
  'idempotency_key',
  'push_notification_config',
  // A buy by proposal gets them from the selection (workflows/campaign/proposal-rules.ts).
  'proposal_id',
  'total_budget',
];

export class CampaignClient {
  constructor(private readonly options: CampaignClientOptions) {}

  /** Known sellers, and those whose capabilities say they have no get_products (left out, not called). */
  private async checkSellers(
    sellerIds: string[] | undefined,
  ): Promise<{ ask: string[]; skipped: { sellerId: string; reason: string }[] }> {
    const sellers = this.options.sellers;
    const ids = sellerIds ?? sellers?.registry.sellers.map((agent) => agent.id) ?? [];
    if (ids.length === 0) throw new CampaignRequestError('agent_ids', 'agent_ids must name at least one seller.');
    if (new Set(ids).size !== ids.length) throw new CampaignRequestError('agent_ids', 'agent_ids repeats a seller.');
    if (!sellers) return { ask: ids, skipped: [] };
    const unknown = ids.filter((id) => !sellers.registry.has(id));
    if (unknown.length > 0)
      throw new CampaignRequestError(
        'agent_ids',
        `No seller ${unknown.map((id) => `"${id}"`).join(', ')} is configured.`,
      );
    const verdicts = await Promise.all(
      ids.map(
        async (id) => [id, await sellers.supports(id, 'get_products').catch(() => ({ supported: true }))] as const,
      ),
    );
    const ask: string[] = [];
    const skipped: { sellerId: string; reason: string }[] = [];
    for (const [id, verdict] of verdicts) {
      if (verdict.supported) ask.push(id);
      else skipped.push({ sellerId: id, reason: (verdict as { reason: string }).reason });
    }
    return { ask, skipped };
  }

  private indexed(): boolean {
    return this.options.searchAttributes !== false;
  }

  /**
   * Tenancy (#12): with a caller, a campaign or discovery that is not the caller's tenant's answers exactly like one
   * that does not exist. The owner is the workflow's AdcpTenant search attribute, else the tenant its starter put in
   * the memo, else (recorded without a tenant) `untenantedTenant`.
   */
  private async ensureVisible(id: string, caller: CallerIdentity | undefined): Promise<void> {
    if (!caller) return;
    let owner: string | undefined;
    try {
      const description = await this.options.client.workflow.getHandle(id).describe();
      const memo = description.memo?.tenant;
      owner =
        description.typedSearchAttributes.get(SA_TENANT) ??
        (typeof memo === 'string' ? memo : undefined) ??
        this.options.untenantedTenant;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new CampaignNotFoundError(id);
      throw error;
    }
    if (owner !== caller.tenant) throw new CampaignNotFoundError(id);
  }

  /** The caller's key scoped by its tenant (protocol/tenancy.ts), or the key as is without a caller. */
  private scopedKey(field: string, key: string, caller: CallerIdentity | undefined): string {
    if (caller && !isTenantName(caller.tenant))
      throw new CampaignRequestError(
        'tenant',
        `The caller's tenant cannot own ${field.split('_')[0]}s: ${TENANT_RULE}.`,
      );
    const scoped = tenantScopedKey(caller?.tenant, key);
    if (scoped === undefined)
      throw new CampaignRequestError(field, `${field} is too long for tenant "${caller?.tenant}".`);
    return scoped;
  }

  /** Start options that record the caller: memo and (indexed) AdcpTenant/AdcpPrincipal. */
  private tenantRecord(caller: CallerIdentity | undefined) {
    return {
      memo: caller ? { tenant: caller.tenant } : undefined,
      attributes: caller
        ? [
            { key: SA_TENANT, value: caller.tenant },
            { key: SA_PRINCIPAL, value: caller.principal },
          ]
        : [],
    };
  }

  // ---- discoveries -----------------------------------------------------------------------------------------------

  async discover(
    request: DiscoveryRequest,
    caller?: CallerIdentity,
  ): Promise<{ discoveryId: string; created: boolean }> {
    if (!CALLER_KEY_PATTERN.test(request.discoveryKey))
      throw new CampaignRequestError(
        'discovery_key',
        'discovery_key must be 1-200 characters of letters, digits, "_", ".", ":" or "-".',
      );
    // Two tenants' equal discovery keys name two discoveries: the key is scoped by the tenant.
    const discoveryKey = this.scopedKey('discovery_key', request.discoveryKey, caller);
    const { ask, skipped } = await this.checkSellers(request.sellerIds);
    const workflowId = discoveryWorkflowId(discoveryKey);
    const record = this.tenantRecord(caller);
    const input: DiscoveryInput = {
      discoveryKey,
      brief: request.brief,
      sellerIds: ask,
      skipped,
      timeBudgetMs: request.timeBudgetMs,
      ...(request.graceMs !== undefined ? { graceMs: request.graceMs } : {}),
      ...(request.params ? { params: request.params } : {}),
      ...(request.preferences ? { preferences: request.preferences } : {}),
      ...(request.requestedBy ? { requestedBy: request.requestedBy } : {}),
      indexed: this.indexed(),
      ...(caller ? { tenant: caller.tenant, principal: caller.principal } : {}),
    };
    try {
      await this.options.client.workflow.start<typeof adcpDiscovery>(DISCOVERY_WORKFLOW_TYPE, {
        workflowId,
        taskQueue: this.options.taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        staticSummary: `discovery ${request.discoveryKey} across ${ask.length} sellers`,
        ...(record.memo ? { memo: record.memo } : {}),
        ...(this.indexed() && caller ? { typedSearchAttributes: record.attributes } : {}),
      });
      return { discoveryId: workflowId, created: true };
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        await this.ensureVisible(workflowId, caller);
        return { discoveryId: workflowId, created: false };
      }
      throw error;
    }
  }

  async discovery(id: string, caller?: CallerIdentity): Promise<{ running: boolean; state: DiscoveryState }> {
    if (!DISCOVERY_ID_PATTERN.test(id)) throw new CampaignNotFoundError(id);
    await this.ensureVisible(id, caller);
    const handle = this.options.client.workflow.getHandle<typeof adcpDiscovery>(id);
    try {
      const description = await handle.describe();
      if (description.status.name === 'COMPLETED') return { running: false, state: await handle.result() };
      return { running: description.status.name === 'RUNNING', state: await handle.query(discoveryStateQuery) };
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new CampaignNotFoundError(id);
      throw error;
    }
  }

  async discoveryResult(id: string, caller?: CallerIdentity): Promise<DiscoveryState> {
    if (!DISCOVERY_ID_PATTERN.test(id)) throw new CampaignNotFoundError(id);
    await this.ensureVisible(id, caller);
    return this.options.client.workflow.getHandle<typeof adcpDiscovery>(id).result();
  }

  // ---- campaigns -------------------------------------------------------------------------------------------------

  async create(request: CampaignRequest, caller?: CallerIdentity): Promise<{ campaignId: string; created: boolean }> {
    if (!CALLER_KEY_PATTERN.test(request.campaignKey))
      throw new CampaignRequestError(
        'campaign_key',
        'campaign_key must be 1-200 characters of letters, digits, "_", ".", ":" or "-".',
      );
    if (!(request.totalBudget > 0)) throw new CampaignRequestError('total_budget', 'total_budget must be positive.');
    const start = Date.parse(request.flight.startTime);
    const end = Date.parse(request.flight.endTime);
    if (Number.isNaN(start) || Number.isNaN(end) || start >= end)
      throw new CampaignRequestError('flight', 'flight needs ISO 8601 start_time before end_time.');
    for (const reserved of RESERVED_BUY_PARAMS) {
      if (request.buyParams && reserved in request.buyParams)
        throw new CampaignRequestError(
          `buy_params.${reserved}`,
          `buy_params must not set ${reserved}: the campaign owns it.`,
        );
    }
    if (request.budgetAllocation !== undefined) {
      const verdict = validateAllocationPolicy(request.budgetAllocation);
      if (!verdict.ok)
        throw new CampaignRequestError(
          `budget_allocation.${verdict.errors[0]?.field ?? 'mode'}`,
          `budget_allocation: ${verdict.message}`,
        );
    }
    // Two tenants' equal campaign keys name two campaigns (and two discoveries, two sets of buys).
    if (request.creatives) {
      const verdict = validateCreativeList(request.creatives, 0);
      if (!verdict.ok) throw new CampaignRequestError('creatives', verdict.message);
    }
    const campaignKey = this.scopedKey('campaign_key', request.campaignKey, caller);
    if (request.governance) {
      const known = this.options.sellers?.registry;
      if (known && !known.has(request.governance.sellerId))
        throw new CampaignRequestError(
          'governance.agent_id',
          `No governance agent "${request.governance.sellerId}" is configured.`,
        );
      if (request.governance.planId !== undefined && !CALLER_KEY_PATTERN.test(request.governance.planId))
        throw new CampaignRequestError(
          'governance.plan_id',
          'governance.plan_id must be 1-200 characters of letters, digits, "_", ".", ":" or "-".',
        );
    }
    // Without agent_ids every configured agent is asked, except the governance agent (it sells nothing).
    const governanceSeller = request.governance?.sellerId;
    const { ask, skipped } = await this.checkSellers(
      request.sellerIds ??
        (governanceSeller && this.options.sellers
          ? this.options.sellers.registry.sellers.map((agent) => agent.id).filter((id) => id !== governanceSeller)
          : undefined),
    );
    const workflowId = campaignWorkflowId(campaignKey);
    const record = this.tenantRecord(caller);
    const input: CampaignInput = {
      campaignKey,
      brief: request.brief,
      totalBudget: request.totalBudget,
      ...(request.currency ? { currency: request.currency } : {}),
      flight: request.flight,
      sellerIds: ask,
      skipped,
      timeBudgetMs: request.timeBudgetMs,
      ...(request.discoveryParams ? { discoveryParams: request.discoveryParams } : {}),
      ...(request.preferences ? { preferences: request.preferences } : {}),
      ...(request.allocation ? { allocation: request.allocation } : {}),
      ...(request.buyParams ? { buyParams: request.buyParams } : {}),
      requestedBy: request.requestedBy,
      ...(request.creatives && request.creatives.length > 0 ? { creatives: request.creatives } : {}),
      ...(request.monitoring ? { monitoring: request.monitoring } : {}),
      ...(request.historyEventLimit !== undefined ? { historyEventLimit: request.historyEventLimit } : {}),
      ...(request.budgetAllocation ? { budgetAllocation: request.budgetAllocation } : {}),
      // check_governance names us as `caller`: our public URL when the gateway has one.
      ...(request.governance
        ? {
            governance: {
              ...request.governance,
              ...(!request.governance.caller && this.options.reportingBaseUrl
                ? { caller: this.options.reportingBaseUrl }
                : {}),
            },
          }
        : {}),
      ...(this.options.reportingBaseUrl ? { reportingBaseUrl: this.options.reportingBaseUrl } : {}),
      indexed: this.indexed(),
      ...(caller ? { tenant: caller.tenant, principal: caller.principal } : {}),
    };
    try {
      await this.options.client.workflow.start<typeof adcpCampaign>(CAMPAIGN_WORKFLOW_TYPE, {
        workflowId,
        taskQueue: this.options.taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        staticSummary: `campaign ${request.campaignKey}: ${request.totalBudget}${request.currency ? ` ${request.currency}` : ''} across ${ask.length} sellers`,
        ...(record.memo ? { memo: record.memo } : {}),
        ...(this.indexed()
          ? { typedSearchAttributes: [{ key: SA_CAMPAIGN, value: campaignKey }, ...record.attributes] }
          : {}),
      });
      return { campaignId: workflowId, created: true };
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        await this.ensureVisible(workflowId, caller);
        return { campaignId: workflowId, created: false };
      }
      throw error;
    }
  }

  private handle(id: string) {
    if (!CAMPAIGN_ID_PATTERN.test(id)) throw new CampaignNotFoundError(id);
    return this.options.client.workflow.getHandle<typeof adcpCampaign>(id);
  }

  async state(id: string, caller?: CallerIdentity): Promise<CampaignState> {
    const handle = this.handle(id);
    await this.ensureVisible(id, caller);
    try {
      return await handle.query(campaignStateQuery);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new CampaignNotFoundError(id);
      throw error;
    }
  }

  /** The campaign and each of its buys as the buy's own workflow says now. */
  async view(id: string, caller?: CallerIdentity): Promise<CampaignView> {
    const handle = this.handle(id);
    await this.ensureVisible(id, caller);
    let running: boolean;
    try {
      running = (await handle.describe()).status.name === 'RUNNING';
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new CampaignNotFoundError(id);
      throw error;
    }
    const state = await handle.query(campaignStateQuery);
    const buys = await Promise.all(
      Object.values(state.buys).map(async (buy): Promise<BuySummary> => {
        const summary: BuySummary = {
          sellerId: buy.sellerId,
          workflowId: buy.workflowId,
          committedBudget: buy.committedBudget,
        };
        try {
          const buyState: MediaBuyState = await this.options.client.workflow
            .getHandle(buy.workflowId)
            .query(mediaBuyStateQuery);
          summary.status = buyState.status;
          if (buyState.mediaBuyId) summary.mediaBuyId = buyState.mediaBuyId;
          summary.packages = Object.keys(buyState.packages).length;
          if (buyState.failure) summary.failure = buyState.failure.message;
          if (buyState.governance) {
            const pending = buyState.governance.pending;
            summary.governance = {
              status: buyState.governance.status,
              ...(pending
                ? { pending: { action: pending.action, explanation: pending.explanation, deadline: pending.deadline } }
                : {}),
            };
          }
        } catch (error) {
          summary.status = buy.finalStatus;
          summary.error = error instanceof Error ? error.message : String(error);
        }
        return summary;
      }),
    );
    return { campaignId: id, running, state, buys };
  }

  async result(id: string, caller?: CallerIdentity): Promise<CampaignState> {
    const handle = this.handle(id);
    await this.ensureVisible(id, caller);
    return handle.result();
  }

  private async update<R>(
    id: string,
    caller: CallerIdentity | undefined,
    run: (handle: ReturnType<CampaignClient['handle']>) => Promise<R>,
  ): Promise<R> {
    const handle = this.handle(id);
    await this.ensureVisible(id, caller);
    try {
      return await run(handle);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new CampaignNotFoundError(id);
      throw refusal(error) ?? error;
    }
  }

  async select(
    id: string,
    request: SelectionRequest,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ) {
    return this.update(id, caller, (handle) =>
      handle.executeUpdate(selectProductsUpdate, {
        args: [request],
        ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
      }),
    );
  }

  async approve(
    id: string,
    request: ApprovalRequest,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ) {
    return this.update(id, caller, (handle) =>
      handle.executeUpdate(approveCampaignUpdate, {
        args: [request],
        ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
      }),
    );
  }

  /** Add creatives to the library (same creative_id replaces) or replace it: every buy gets the new version. */
  async setCreatives(
    id: string,
    request: CreativeLibraryRequest,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ): Promise<{ version: number; creatives: number }> {
    return this.update(id, caller, (handle) =>
      handle.executeUpdate(setCampaignCreativesUpdate, {
        args: [request],
        ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
      }),
    );
  }

  async change(
    id: string,
    request: CampaignChangeRequest,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ): Promise<CampaignChangeAnswer> {
    return this.update(id, caller, (handle) =>
      handle.executeUpdate(changeCampaignUpdate, {
        args: [request],
        ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
      }),
    );
  }

  /** A new budget allocation policy (validated by the campaign before it enters history; recorded with who). */
  async setBudgetAllocation(
    id: string,
    request: BudgetAllocationRequest,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ): Promise<BudgetAllocationAnswer> {
    return this.update(id, caller, (handle) =>
      handle.executeUpdate(setBudgetAllocationUpdate, {
        args: [request],
        ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
      }),
    );
  }

  /** Approve or reject the plan of budget moves that waits (propose mode). */
  async decideBudgetMoves(
    id: string,
    request: BudgetMovesDecision,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ): Promise<BudgetMovesDecisionAnswer> {
    return this.update(id, caller, (handle) =>
      handle.executeUpdate(decideBudgetMovesUpdate, {
        args: [request],
        ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
      }),
    );
  }
}
