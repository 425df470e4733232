/**
 * The typed client for media buys: start a buy's workflow (one per buyer key), read its state and delivery, change
 * it (pause, resume, budget, dates, packages, cancel) and attach creatives. Changes are Temporal Updates: the
 * workflow's validator refuses a change the buy's state does not allow before it enters history, and the caller's
 * idempotency key is the update ID, so a retried change runs once.
 *
 *   const buys = new MediaBuyClient({ client, taskQueue: 'adcp-operations', reportingBaseUrl: 'https://gw.example' });
 *   const { mediaBuyWorkflowId } = await buys.create({ buyKey: 'po-4711', sellerId: 'seller', params, reporting: { frequency: 'daily' } });
 *   await buys.change(mediaBuyWorkflowId, { kind: 'pause', requestedBy: 'ops@buyer' }, { idempotencyKey: 'pause-1' });
 */
import {
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { SA_SELLER, SA_MEDIA_BUY_STATUS, SA_PRINCIPAL, SA_TENANT } from '../config/search-attributes';
import { CALLER_KEY_PATTERN } from '../protocol';
import { checkMediaBuyParams } from '../protocol/requests';
import { type CallerIdentity, TENANT_RULE, isTenantName, tenantScopedKey } from '../protocol/tenancy';
import {
  type GovernanceDecisionAnswer,
  type GovernanceDecisionRequest,
  type GovernanceSettings,
  decideGovernanceUpdate,
} from '../contract/governance';
import type { adcpMediaBuy } from '../workflows/media-buy/workflow';
import {
  CONTINUING_REFUSAL,
  type ChangeAnswer,
  type ChangeRequest,
  type CreativeAttachment,
  MEDIA_BUY_ID_PATTERN,
  MEDIA_BUY_WORKFLOW_TYPE,
  type MediaBuyInput,
  type MediaBuyState,
  type ReportingSettings,
  attachCreativesUpdate,
  changeMediaBuyUpdate,
  checkChangeShape,
  mediaBuyStateQuery,
  mediaBuyWorkflowId,
  refreshMediaBuySignal,
  sendAgainWhileContinuing,
} from '../contract/media-buy';

export interface MediaBuyClientOptions {
  client: Client;
  taskQueue: string;
  /** The gateway's public base URL: reports are registered at <base>/webhooks/adcp-reporting/<buy workflow id>. */
  reportingBaseUrl?: string;
  /** false on servers without the AdCP search attributes (the time-skipping test server). */
  searchAttributes?: boolean;
  knownSeller?: (sellerId: string) => boolean;
  /** The tenant that owns buys recorded without one (as OrchestratorClientOptions.untenantedTenant). */
  untenantedTenant?: string;
}

export interface CreateMediaBuyRequest {
  /** The buyer's key for the buy (PO number, plan line id): the workflow ID comes from it. */
  buyKey: string;
  sellerId: string;
  /** create_media_buy arguments (packages, start_time, end_time, account, brand, ...). */
  params: Record<string, unknown>;
  reporting?: Omit<ReportingSettings, 'url'>;
  creativeAlertLeadMs?: number;
  requestedBy?: string;
  /**
   * A governance agent (an agents.json id) and the plan the buy is checked against: check_governance before the
   * create and before every budget raise, report_plan_outcome after (#14 item 6).
   */
  governance?: GovernanceSettings;
}

export class MediaBuyRequestError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'MediaBuyRequestError';
  }
}

/** The params break a rule no seller should be asked to judge (checkMediaBuyParams): HTTP 422 INVALID_PARAMS. */
export class MediaBuyParamsError extends MediaBuyRequestError {}

export class MediaBuyNotFoundError extends Error {
  constructor(readonly mediaBuyWorkflowId: string) {
    super(`No media buy ${mediaBuyWorkflowId}.`);
    this.name = 'MediaBuyNotFoundError';
  }
}

/** The workflow refused the change or attachment (validator): `code` is INVALID_STATE, NOT_CANCELLABLE, ... */
export class MediaBuyChangeRefusedError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'MediaBuyChangeRefusedError';
  }
}

export interface MediaBuyView {
  mediaBuyWorkflowId: string;
  running: boolean;
  state: MediaBuyState;
}

const RESERVED = [
  'idempotency_key',
  'push_notification_config',
  'reporting_webhook',
  'context_id',
  'governance_context',
];

const isContinuing = (error: unknown) =>
  error instanceof MediaBuyChangeRefusedError && error.code === CONTINUING_REFUSAL;

function refusal(error: unknown): MediaBuyChangeRefusedError | undefined {
  if (!(error instanceof WorkflowUpdateFailedError)) return undefined;
  const message = error.cause instanceof Error ? error.cause.message : error.message;
  const match = /^([A-Z_]+): (.*)$/s.exec(message);
  return new MediaBuyChangeRefusedError(match?.[1] ?? 'REFUSED', match?.[2] ?? message);
}

export class MediaBuyClient {
  constructor(private readonly options: MediaBuyClientOptions) {}

  /**
   * Tenancy (#12): with a caller, a buy that is not the caller's tenant's answers exactly like one that does not exist.
   * The owner is the buy's AdcpTenant search attribute, else the tenant its starter put in the memo.
   */
  private async ensureVisible(id: string, caller: CallerIdentity | undefined): Promise<void> {
    if (!caller) return;
    let owner: string | undefined;
    try {
      const description = await this.handle(id).describe();
      const memo = description.memo?.tenant;
      owner =
        description.typedSearchAttributes.get(SA_TENANT) ??
        (typeof memo === 'string' ? memo : undefined) ??
        this.options.untenantedTenant;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new MediaBuyNotFoundError(id);
      throw error;
    }
    if (owner !== caller.tenant) throw new MediaBuyNotFoundError(id);
  }

  private handle(id: string) {
    if (!MEDIA_BUY_ID_PATTERN.test(id)) throw new MediaBuyNotFoundError(id);
    return this.options.client.workflow.getHandle<typeof adcpMediaBuy>(id);
  }

  /** Starts the buy's workflow, or finds the one already running or finished for the same key. */
  async create(
    request: CreateMediaBuyRequest,
    caller?: CallerIdentity,
  ): Promise<{ mediaBuyWorkflowId: string; created: boolean }> {
    if (caller && !isTenantName(caller.tenant))
      throw new MediaBuyRequestError('tenant', `The caller's tenant cannot own media buys: ${TENANT_RULE}.`);
    if (!CALLER_KEY_PATTERN.test(request.buyKey)) {
      throw new MediaBuyRequestError(
        'buy_key',
        'buy_key must be 1-200 characters of letters, digits, "_", ".", ":" or "-".',
      );
    }
    if (this.options.knownSeller && !this.options.knownSeller(request.sellerId))
      throw new MediaBuyRequestError('agent_id', `No seller "${request.sellerId}" is configured.`);
    for (const reserved of RESERVED) {
      if (reserved in request.params)
        throw new MediaBuyRequestError(
          `params.${reserved}`,
          `params must not set ${reserved}: the orchestrator owns it.`,
        );
    }
    const broken = checkMediaBuyParams('create_media_buy', request.params, Date.now());
    if (broken) throw new MediaBuyParamsError(broken.field, broken.message);
    if (request.governance) {
      if (this.options.knownSeller && !this.options.knownSeller(request.governance.sellerId))
        throw new MediaBuyRequestError(
          'governance.agent_id',
          `No governance agent "${request.governance.sellerId}" is configured.`,
        );
      if (!CALLER_KEY_PATTERN.test(request.governance.planId))
        throw new MediaBuyRequestError(
          'governance.plan_id',
          'governance.plan_id must be 1-200 characters of letters, digits, "_", ".", ":" or "-".',
        );
    }
    if (request.reporting?.authentication) {
      throw new MediaBuyRequestError(
        'reporting.authentication',
        'reporting.authentication would put the webhook credential into the workflow history in clear: leave it out. ' +
          'For sellers on HMAC or Bearer webhooks the worker derives a per-buy credential at the call ' +
          '(ADCP_REPORTING_WEBHOOK_SECRET).',
      );
    }
    if (!Array.isArray(request.params.packages) || request.params.packages.length === 0) {
      throw new MediaBuyRequestError('params.packages', 'params.packages must list at least one package.');
    }
    if (typeof request.params.end_time !== 'string' || Number.isNaN(Date.parse(request.params.end_time))) {
      throw new MediaBuyRequestError('params.end_time', 'params.end_time must be an ISO 8601 time.');
    }
    // Two tenants' equal buy keys name two buys (and two create operations): the key is scoped by the tenant.
    const buyKey = tenantScopedKey(caller?.tenant, request.buyKey);
    if (buyKey === undefined)
      throw new MediaBuyRequestError('buy_key', `buy_key is too long for tenant "${caller?.tenant}".`);
    const workflowId = mediaBuyWorkflowId(buyKey);
    const indexed = this.options.searchAttributes !== false;
    const input: MediaBuyInput = {
      buyKey,
      sellerId: request.sellerId,
      params: request.params,
      indexed,
      ...(request.reporting || this.options.reportingBaseUrl
        ? {
            reporting: {
              ...request.reporting,
              ...(this.options.reportingBaseUrl
                ? { url: `${this.options.reportingBaseUrl}/webhooks/adcp-reporting/${encodeURIComponent(workflowId)}` }
                : {}),
            },
          }
        : {}),
      ...(request.creativeAlertLeadMs !== undefined ? { creativeAlertLeadMs: request.creativeAlertLeadMs } : {}),
      ...(request.requestedBy ? { requestedBy: request.requestedBy } : {}),
      ...(caller ? { tenant: caller.tenant, principal: caller.principal } : {}),
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
    };
    try {
      await this.options.client.workflow.start<typeof adcpMediaBuy>(MEDIA_BUY_WORKFLOW_TYPE, {
        workflowId,
        taskQueue: this.options.taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        staticSummary: `media buy ${request.buyKey} at ${request.sellerId}`,
        ...(caller ? { memo: { tenant: caller.tenant } } : {}),
        ...(indexed
          ? {
              typedSearchAttributes: [
                { key: SA_SELLER, value: request.sellerId },
                { key: SA_MEDIA_BUY_STATUS, value: 'creating' },
                ...(caller
                  ? [
                      { key: SA_TENANT, value: caller.tenant },
                      { key: SA_PRINCIPAL, value: caller.principal },
                    ]
                  : []),
              ],
            }
          : {}),
      });
      return { mediaBuyWorkflowId: workflowId, created: true };
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        await this.ensureVisible(workflowId, caller);
        return { mediaBuyWorkflowId: workflowId, created: false };
      }
      throw error;
    }
  }

  /** The buy's state: live while the workflow runs, its result once it has finished. */
  async view(id: string, caller?: CallerIdentity): Promise<MediaBuyView> {
    await this.ensureVisible(id, caller);
    const handle = this.handle(id);
    try {
      const description = await handle.describe();
      if (description.status.name === 'RUNNING')
        return { mediaBuyWorkflowId: id, running: true, state: await handle.query(mediaBuyStateQuery) };
      if (description.status.name === 'COMPLETED')
        return { mediaBuyWorkflowId: id, running: false, state: await handle.result() };
      return { mediaBuyWorkflowId: id, running: false, state: await handle.query(mediaBuyStateQuery) };
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new MediaBuyNotFoundError(id);
      throw error;
    }
  }

  async state(id: string, caller?: CallerIdentity): Promise<MediaBuyState> {
    return (await this.view(id, caller)).state;
  }

  /** Waits for the workflow to finish following the buy (after the flight, the final report and reconciliation). */
  async result(id: string, caller?: CallerIdentity): Promise<MediaBuyState> {
    await this.ensureVisible(id, caller);
    return this.handle(id).result();
  }

  async change(
    id: string,
    change: ChangeRequest,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ): Promise<ChangeAnswer> {
    // The audit trail names the authenticated caller; requestedBy stays the caller's note.
    const request: ChangeRequest = caller ? { ...change, principal: caller.principal } : change;
    const shape = checkChangeShape(request);
    if (!shape.ok) throw new MediaBuyRequestError('change', shape.message);
    await this.ensureVisible(id, caller);
    return sendAgainWhileContinuing(isContinuing, async () => {
      try {
        return await this.handle(id).executeUpdate(changeMediaBuyUpdate, {
          args: [request],
          ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
        });
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) throw new MediaBuyNotFoundError(id);
        throw refusal(error) ?? error;
      }
    });
  }

  async attachCreatives(
    id: string,
    creatives: CreativeAttachment,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ): Promise<ChangeAnswer> {
    const attachment: CreativeAttachment = caller ? { ...creatives, principal: caller.principal } : creatives;
    await this.ensureVisible(id, caller);
    return sendAgainWhileContinuing(isContinuing, async () => {
      try {
        return await this.handle(id).executeUpdate(attachCreativesUpdate, {
          args: [attachment],
          ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
        });
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) throw new MediaBuyNotFoundError(id);
        throw refusal(error) ?? error;
      }
    });
  }

  /**
   * A person's decision on governance conditions the orchestrator could not apply itself (approve, with values for
   * the conditions' fields if any, or decline). Refused (MediaBuyChangeRefusedError INVALID_STATE) when nothing waits.
   */
  async decideGovernance(
    id: string,
    decision: GovernanceDecisionRequest,
    options: { idempotencyKey?: string } = {},
    caller?: CallerIdentity,
  ): Promise<GovernanceDecisionAnswer> {
    const request: GovernanceDecisionRequest = caller ? { ...decision, principal: caller.principal } : decision;
    const state = await this.state(id, caller);
    if (!state.governance)
      throw new MediaBuyChangeRefusedError('INVALID_STATE', 'This media buy names no governance agent.');
    try {
      return await this.handle(id).executeUpdate(decideGovernanceUpdate, {
        args: [request],
        ...(options.idempotencyKey ? { updateId: options.idempotencyKey } : {}),
      });
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw new MediaBuyNotFoundError(id);
      throw refusal(error) ?? error;
    }
  }

  /** Ask the buy to read the seller now (get_media_buys). */
  async refresh(id: string, requestedBy: string): Promise<void> {
    await this.handle(id).signal(refreshMediaBuySignal, { requestedBy });
  }
}
