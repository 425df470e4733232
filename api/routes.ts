/**
 * Every route the gateway serves, once: its method and path, who may call it, the zod schemas it validates with and
 * the answers it gives. The OpenAPI document is generated from this table (api/openapi.ts, `npm run openapi`), the
 * gateway answers 405 (with `Allow`) from it for a known path called with another method, and a test checks that
 * the table and the routes express serves are the same set.
 */
import { z } from 'zod';
import { operationListQuerySchema } from '../client/operation-list';
import * as schemas from './schemas';

/** Who may call: `bearer` needs credentials (a role per access-control.ts), `webhook` carries its own verification. */
export type RouteAuth = 'bearer' | 'none' | 'webhook';

export interface RouteAnswer {
  description: string;
  /** A JSON body (application/json); absent for answers without one we describe. */
  schema?: z.ZodType;
  /** Another media type than application/json (text/plain for /metrics, application/jwk-set+json). */
  contentType?: string;
  headers?: Record<string, string>;
}

export interface RouteSpec {
  method: 'get' | 'post';
  /** Express form: `/v1/operations/:operationId`. */
  path: string;
  summary: string;
  description?: string;
  auth: RouteAuth;
  /** The listener that serves it when webhooks have their own (ADCP_WEBHOOK_PORT); both serve /healthz and JWKS. */
  listener: 'api' | 'webhooks' | 'both';
  body?: z.ZodType;
  query?: z.ZodType;
  /** Success answers by status. */
  answers: Record<number, RouteAnswer>;
  /** Refusals beyond the ones every route of its kind gives (see commonRefusals). */
  refusals?: Partial<Record<number, string>>;
}

// ---- answers -------------------------------------------------------------------------------------------------------

const links = z.looseObject({ self: z.string().optional(), web_ui: z.string().optional() });
const view = (what: string) => z.looseObject({}).describe(what);

const startedOperation = z.looseObject({
  operation_id: z.string(),
  created: z.boolean(),
  status: z.string(),
  links,
});
const startedWorkflow = z.looseObject({ id: z.string(), created: z.boolean() });
const accepted = z.looseObject({ status: z.literal('accepted') });
const changeAnswer = z.looseObject({
  sequence: z.number().int(),
  outcome: z.string(),
  status: z.string().optional(),
  operation_id: z.string().nullable().optional(),
});
const webhookAnswer = z.looseObject({ status: z.enum(['accepted', 'ignored']), message: z.string() });
const operationList = z.looseObject({
  operations: z.array(
    z.looseObject({
      operation_id: z.string(),
      task: z.string().nullable(),
      agent_id: z.string().nullable(),
      status: z.string().nullable(),
      waiting: z.boolean(),
      state_unreadable: z.literal(true).optional(),
    }),
  ),
  next_cursor: z.string().nullable(),
});
const health = z.looseObject({
  status: z.enum(['ok', 'degraded']),
  temporal: z.literal('reachable'),
  workers: z.enum(['polling', 'none', 'unknown']),
  task_queue: z.string(),
  pollers: z.number().int().optional(),
  message: z.string().optional(),
  warnings: z.array(z.string()).optional(),
});

// ---- routes --------------------------------------------------------------------------------------------------------

export const ROUTES: RouteSpec[] = [
  {
    method: 'get',
    path: '/healthz',
    summary: 'Whether Temporal is reachable, and whether a worker polls the operations task queue',
    description:
      '`status` is `ok` when a worker polls the task queue, `degraded` when none does (starts and webhooks are taken durably, but operations do not move and reads answer from the state each operation last published) or when that could not be asked. `warnings` lists configuration the gateway runs with but should not (a seller whose webhook secret variable is unset: its webhooks are all refused).',
    auth: 'none',
    listener: 'both',
    answers: { 200: { description: 'Temporal answered', schema: health } },
    refusals: { 503: 'Temporal did not answer within 2 s' },
  },
  {
    method: 'get',
    path: '/metrics',
    summary: "The gateway's Prometheus metrics (text exposition format)",
    description:
      'Requests by route template, method and status code (refusals included), their latency, webhook verification failures by receiver and reason, and the running operations by task and status. Unauthenticated, like /healthz: expose it only where Prometheus scrapes it.',
    auth: 'none',
    listener: 'api',
    answers: { 200: { description: 'The exposition text', contentType: 'text/plain', schema: z.string() } },
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This document',
    auth: 'none',
    listener: 'api',
    answers: { 200: { description: 'The OpenAPI 3.1 description of the gateway', schema: view('OpenAPI document') } },
  },
  {
    method: 'get',
    path: '/.well-known/jwks.json',
    summary: 'The public keys our notifications to buyers are signed with (RFC 9421, AdCP webhook profile)',
    auth: 'none',
    listener: 'both',
    answers: {
      200: {
        description: 'A JWK set (public members only); during a key rotation it lists the old and the new key',
        contentType: 'application/jwk-set+json',
        schema: z.looseObject({ keys: z.array(z.looseObject({ kid: z.string().optional(), kty: z.string() })) }),
      },
    },
    refusals: { 404: 'NOT_FOUND: this gateway signs no notifications (ADCP_NOTIFICATION_KEY_FILE is unset)' },
  },
  {
    method: 'get',
    path: '/v1/operations',
    summary: 'List operations (Temporal visibility), filtered and paged with an opaque cursor',
    auth: 'bearer',
    listener: 'api',
    query: operationListQuerySchema,
    answers: {
      200: { description: 'One page of operations, and next_cursor when there are more', schema: operationList },
    },
    refusals: { 431: 'The request line and headers are over 16 KiB' },
  },
  {
    method: 'post',
    path: '/v1/operations',
    summary: 'Start an operation, or get the existing one for the same idempotency key',
    auth: 'bearer',
    listener: 'api',
    body: schemas.startOperationSchema,
    answers: {
      202: { description: 'Started. `Location` names the operation.', schema: startedOperation },
      200: {
        description: 'The idempotency key names an existing operation (running or finished); no new call was made.',
        schema: startedOperation,
      },
    },
    refusals: {
      409: 'IDEMPOTENCY_CONFLICT: the key names an operation started with a different request',
      422: "INVALID_PARAMS: params no seller should get (end_time before start_time, a negative budget); UNSUPPORTED_TASK: the seller's capabilities say it does not offer this task. No call was made.",
      503: "TEMPORAL_UNAVAILABLE; or SELLER_CAPABILITIES_UNKNOWN: a task outside AdCP's catalog at a seller that has never told its capabilities (unreachable so far); retry after `Retry-After`",
    },
  },
  {
    method: 'get',
    path: '/v1/operations/:operationId',
    summary: "The operation's status, and its result once it has ended",
    description:
      "While the operation runs, its live state comes from the workflow's `status` query, which needs a worker. If no worker answers within about 3 s, the answer is the state the operation last published (its memo): `live: false`, `state_source: memo`, and `state_message` saying why.",
    auth: 'bearer',
    listener: 'api',
    answers: { 200: { description: 'The operation', schema: view('Operation') } },
  },
  {
    method: 'post',
    path: '/v1/operations/:operationId/input',
    summary: 'Answer an input-required question; the operation resumes the task on the same context',
    auth: 'bearer',
    listener: 'api',
    body: schemas.provideInputSchema,
    answers: {
      200: {
        description: 'Accepted',
        schema: z.looseObject({ accepted: z.literal(true), round: z.number().int() }),
      },
    },
    refusals: { 409: 'OPERATION_ENDED or REJECTED_BY_OPERATION (not waiting for input)' },
  },
  {
    method: 'post',
    path: '/v1/operations/:operationId/cancel',
    summary: 'Cancel the operation; the in-flight call is aborted and the seller told where the protocol allows',
    auth: 'bearer',
    listener: 'api',
    body: schemas.cancelSchema,
    answers: {
      202: {
        description: 'Accepted',
        schema: z.looseObject({ accepted: z.literal(true), status_when_requested: z.string() }),
      },
    },
    refusals: { 409: 'OPERATION_ENDED: the operation has ended (its final `status` in the error)' },
  },
  {
    method: 'post',
    path: '/v1/operations/:operationId/credentials-refreshed',
    summary: "Resume an auth-required operation after the seller's credentials were refreshed",
    auth: 'bearer',
    listener: 'api',
    body: schemas.credentialsRefreshedSchema,
    answers: { 200: { description: 'Accepted', schema: view('Credentials refresh answer') } },
    refusals: { 409: 'OPERATION_ENDED or REJECTED_BY_OPERATION (not auth-required)' },
  },
  {
    method: 'post',
    path: '/v1/operations/:operationId/reconcile',
    summary: "Read the seller's media buys now and adopt the buy this create operation made",
    description:
      "For a create_media_buy whose answer was lost and that cannot know yet whether the seller holds the buy (status `unknown`, `resource.state: unknown`): reads the seller's media buys (every status, every page), matches them by what the create sent and adopts the buy it finds. A create that ended `failed` (`call_failed` or `outcome_unknown`) after reading the seller's media buys without finding its buy is reopened: its workflow is reset to just before that read, reads them again and, finding the buy, ends `completed` with it (`reopened_from_run_id` names the run that failed); finding none, it ends as it did. Read-only at the seller, except that a reopened create whose listing still holds nothing may send its call again with the same idempotency key. Answers `found`, `media_buy_id`, `matched_by`, `candidates`, the operation's `status` after the read and a `note`.",
    auth: 'bearer',
    listener: 'api',
    body: schemas.reconcileSchema,
    answers: {
      200: {
        description: 'What the read found',
        schema: z.looseObject({ found: z.boolean(), status: z.string(), note: z.string() }),
      },
    },
    refusals: {
      409: "OPERATION_ENDED (completed, canceled, rejected, or failed without a read of the seller's buys to go back to: POST /v1/sellers/{sellerId}/reconcile then lists the seller's buys) or REJECTED_BY_OPERATION (not a create_media_buy)",
    },
  },
  {
    method: 'post',
    path: '/v1/sellers/:sellerId/reconcile',
    summary: "Reconcile one seller now for the caller's tenant (what its Temporal Schedule does for every tenant)",
    description:
      "Lists the seller's open tasks and the caller's tenant's open operations and media buys with that seller, hands a lost task back to the operation whose call created it, reports tasks nobody claims, makes every open operation look at the seller now and every open buy read get_media_buys now. Read-only at the seller.",
    auth: 'bearer',
    listener: 'api',
    body: schemas.reconcileSchema,
    answers: { 200: { description: 'The reconciliation report', schema: view('ReconciliationReport') } },
  },
  {
    method: 'post',
    path: '/webhooks/adcp/:sellerId/:operationId',
    summary: 'Seller push notification (MCP webhook payload, or A2A Task / TaskStatusUpdateEvent)',
    description:
      "Verified with the path seller's configuration (RFC 9421 AdCP webhook profile, legacy HMAC-SHA256, or Bearer) over the raw body before Temporal is asked anything: an unauthenticated request answers 401 whether or not the operation exists. A verified webhook is signalled to the operation's workflow (one Temporal call), which refuses it if it is another seller's, operation's or task's (shown in the operation's refused_webhooks). 200 means Temporal has the event; 404 (after verification) that no operation of this seller has this ID.",
    auth: 'webhook',
    listener: 'webhooks',
    body: z.looseObject({}),
    answers: { 200: { description: 'Recorded, or ignored (the operation has ended)', schema: webhookAnswer } },
  },
  {
    method: 'post',
    path: '/webhooks/adcp/:operationId',
    summary: 'Seller push notification at a URL issued before the seller was put in the path',
    description:
      'The same as `/webhooks/adcp/{sellerId}/{operationId}`, for push URLs handed out by earlier versions: the operation is looked up to learn whose signature to expect (a second Temporal call), and an unauthenticated request answers the same 401 whether or not it exists.',
    auth: 'webhook',
    listener: 'webhooks',
    body: z.looseObject({}),
    answers: { 200: { description: 'Recorded, or ignored (the operation has ended)', schema: webhookAnswer } },
  },
  {
    method: 'post',
    path: '/webhooks/adcp-reporting/:sellerId/:id',
    summary: 'Where sellers post delivery reports for a buy (its registered reporting_webhook.url)',
    description:
      "Authenticated as the path seller before Temporal is asked anything: the buy's own credential (derived from ADCP_REPORTING_WEBHOOK_SECRET and the buy ID) or an RFC 9421 signature by that seller; an unauthenticated request answers 401 whether or not the buy exists. A verified report is signalled to the buy's workflow whole (one Temporal call), which refuses it if it is another seller's, and each row about another buy (shown in the delivery's reports.refused). 200 means Temporal has the report; 404 (after verification) that no buy of this seller has this ID.",
    auth: 'webhook',
    listener: 'webhooks',
    body: z.looseObject({}),
    answers: { 200: { description: 'Recorded, or ignored (the buy is no longer followed)', schema: webhookAnswer } },
  },
  {
    method: 'post',
    path: '/webhooks/adcp-reporting/:id',
    summary: 'Delivery reports at a reporting URL registered before the seller was put in the path',
    description:
      'The same as `/webhooks/adcp-reporting/{sellerId}/{id}`, for buys created by earlier versions: the buy is looked up to learn whose verification to expect (a second Temporal call), and an unauthenticated request answers the same 401 whether or not it exists.',
    auth: 'webhook',
    listener: 'webhooks',
    body: z.looseObject({}),
    answers: { 200: { description: 'Recorded, or ignored (the buy is no longer followed)', schema: webhookAnswer } },
  },
  {
    method: 'post',
    path: '/v1/media-buys',
    summary: 'Create a media buy, or get the existing one for the same buy key',
    auth: 'bearer',
    listener: 'api',
    body: schemas.createMediaBuySchema,
    answers: {
      202: { description: 'Started', schema: startedWorkflow },
      200: { description: 'The buy key names an existing buy', schema: startedWorkflow },
    },
    refusals: { 422: 'INVALID_PARAMS: end_time before start_time, or a negative budget' },
  },
  {
    method: 'get',
    path: '/v1/media-buys/:id',
    summary: "The buy's state, status history, changes, creatives, delivery totals, gaps and anomalies",
    auth: 'bearer',
    listener: 'api',
    answers: { 200: { description: 'The buy (snake_case)', schema: view('MediaBuy') } },
  },
  {
    method: 'get',
    path: '/v1/media-buys/:id/delivery',
    summary: 'Delivery aggregates (totals by package, sequence tracking, gaps, adjustments, reconciliation)',
    auth: 'bearer',
    listener: 'api',
    answers: { 200: { description: 'The delivery view', schema: view('Delivery') } },
  },
  {
    method: 'post',
    path: '/v1/media-buys/:id/changes',
    summary: 'Pause, resume, change budgets, dates or packages, or cancel (an update_media_buy operation)',
    description:
      "Validated against the media-buy state machine before it enters the workflow's history: a finished buy accepts no change (INVALID_STATE; a second cancel NOT_CANCELLABLE), only a paused buy can be resumed, and the seller's `available_actions` have the last word (ACTION_NOT_ALLOWED).",
    auth: 'bearer',
    listener: 'api',
    body: schemas.mediaBuyChangeSchema,
    answers: { 200: { description: 'Applied', schema: changeAnswer } },
    refusals: {
      409: 'The buy or the seller refused the change (outcome refused or failed, with its code)',
      422: 'INVALID_PARAMS: end_time before start_time, or a negative budget',
      503: 'SERVICE_UNAVAILABLE: the buy is continuing as new and takes the change in its next run (sent again for 20 s first); send it again after `Retry-After`. Or TEMPORAL_UNAVAILABLE, as on every route',
    },
  },
  {
    method: 'post',
    path: '/v1/media-buys/:id/creatives',
    summary: 'Sync creatives (a sync_creatives operation) and assign them to packages',
    auth: 'bearer',
    listener: 'api',
    body: schemas.mediaBuyCreativesSchema,
    answers: { 200: { description: 'Applied', schema: changeAnswer } },
    refusals: {
      409: 'The buy or the seller refused the creatives',
      503: 'SERVICE_UNAVAILABLE: the buy is continuing as new and takes the creatives in its next run (sent again for 20 s first); send them again after `Retry-After`. Or TEMPORAL_UNAVAILABLE, as on every route',
    },
  },
  {
    method: 'post',
    path: '/v1/media-buys/:id/refresh',
    summary: 'Read the buy at the seller now (get_media_buys)',
    auth: 'bearer',
    listener: 'api',
    body: schemas.mediaBuyRefreshSchema,
    answers: { 202: { description: 'Asked', schema: accepted } },
  },
  {
    method: 'post',
    path: '/v1/media-buys/:id/governance/decision',
    summary: "A person's decision on governance conditions the orchestrator could not apply itself",
    description:
      "Answers the conditions a check_governance set (the buy's `governance.pending`). `approve` applies `values` (condition field → value) to the payload and checks again; `decline` ends the spend refused (GOVERNANCE_DECLINED).",
    auth: 'bearer',
    listener: 'api',
    body: schemas.governanceDecisionSchema,
    answers: { 200: { description: 'Recorded', schema: view('Governance decision answer') } },
    refusals: { 409: 'The buy is not waiting for a decision' },
  },
  {
    method: 'get',
    path: '/v1/sellers',
    summary: 'Every configured seller with its capabilities, reachability and circuit state',
    auth: 'bearer',
    listener: 'api',
    answers: { 200: { description: 'The sellers', schema: z.looseObject({ sellers: z.array(view('Seller')) }) } },
  },
  {
    method: 'get',
    path: '/v1/sellers/:sellerId',
    summary: 'One seller with what its capabilities workflow keeps',
    auth: 'bearer',
    listener: 'api',
    answers: { 200: { description: 'The seller', schema: view('Seller') } },
  },
  {
    method: 'post',
    path: '/v1/sellers/:sellerId/capabilities-changed',
    summary: "The seller's capabilities may have changed: refresh them now",
    auth: 'bearer',
    listener: 'api',
    body: schemas.capabilitiesChangedSchema,
    answers: { 202: { description: 'Asked', schema: accepted } },
  },
  {
    method: 'post',
    path: '/v1/discoveries',
    summary: 'One brief as get_products to many sellers in parallel, within a time budget, as one ranked catalogue',
    auth: 'bearer',
    listener: 'api',
    body: schemas.createDiscoverySchema,
    answers: {
      202: { description: 'Started', schema: startedWorkflow },
      200: { description: 'The key names an existing discovery', schema: startedWorkflow },
    },
  },
  {
    method: 'get',
    path: '/v1/discoveries/:id',
    summary: "The discovery: each seller's outcome, the ranked catalogue, proposals, incomplete[]",
    auth: 'bearer',
    listener: 'api',
    answers: { 200: { description: 'The discovery', schema: view('Discovery') } },
  },
  {
    method: 'post',
    path: '/v1/campaigns',
    summary: 'Start a campaign: discovery, selection, approval gate, one media buy per chosen seller',
    auth: 'bearer',
    listener: 'api',
    body: schemas.createCampaignSchema,
    answers: {
      202: { description: 'Started', schema: startedWorkflow },
      200: { description: 'The key names an existing campaign', schema: startedWorkflow },
    },
  },
  {
    method: 'get',
    path: '/v1/campaigns/:id',
    summary: "The campaign: phase, discovery, selection, approval, each buy's live status, creatives, delivery",
    auth: 'bearer',
    listener: 'api',
    answers: { 200: { description: 'The campaign', schema: view('Campaign') } },
  },
  {
    method: 'post',
    path: '/v1/campaigns/:id/selection',
    summary: "Choose the products (or accept sellers' proposals) after discovery",
    auth: 'bearer',
    listener: 'api',
    body: schemas.campaignSelectionSchema,
    answers: { 200: { description: 'Recorded', schema: view('Selection answer') } },
    refusals: { 409: 'The campaign refused the selection (its phase, the budget)' },
  },
  {
    method: 'post',
    path: '/v1/campaigns/:id/approval',
    summary: 'The approval gate: nothing is spent before it; records who approved',
    auth: 'bearer',
    listener: 'api',
    body: schemas.campaignApprovalSchema,
    answers: { 200: { description: 'Recorded', schema: view('Approval answer') } },
    refusals: { 409: 'The campaign is not waiting for approval' },
  },
  {
    method: 'post',
    path: '/v1/campaigns/:id/budget-allocation',
    summary:
      "Change the campaign's budget allocation policy: validated, recorded with who; a waiting plan is withdrawn",
    auth: 'bearer',
    listener: 'api',
    body: schemas.budgetAllocationChangeSchema,
    answers: { 200: { description: 'The policy now in force', schema: view('Budget allocation answer') } },
    refusals: { 409: 'The campaign ended: its policy no longer changes' },
  },
  {
    method: 'post',
    path: '/v1/campaigns/:id/budget-moves/decision',
    summary: 'Approve or reject the plan of budget moves that waits for a person (propose mode)',
    auth: 'bearer',
    listener: 'api',
    body: schemas.budgetMovesDecisionSchema,
    answers: { 200: { description: 'Decided', schema: view('Budget moves decision') } },
    refusals: { 409: 'No plan waits, or another plan than this one does' },
  },
  {
    method: 'post',
    path: '/v1/campaigns/:id/changes',
    summary: "Pause, resume or cancel every buy of the campaign, or change one buy's budget under the budget guard",
    auth: 'bearer',
    listener: 'api',
    body: schemas.campaignChangeSchema,
    answers: { 200: { description: 'Applied', schema: view('Change answer') } },
    refusals: { 409: 'The campaign refused the change, or it failed' },
  },
  {
    method: 'get',
    path: '/v1/campaigns/:id/creatives',
    summary: "The campaign's creative library, and per seller the version synced, each creative's review and coverage",
    auth: 'bearer',
    listener: 'api',
    answers: { 200: { description: 'The library', schema: view('Creative library') } },
  },
  {
    method: 'post',
    path: '/v1/campaigns/:id/creatives',
    summary: 'Add creatives to the library (same creative_id replaces) or replace it; every buy gets the new version',
    auth: 'bearer',
    listener: 'api',
    body: schemas.campaignCreativesSchema,
    answers: { 200: { description: 'Recorded', schema: view('Library answer') } },
    refusals: { 409: 'The campaign refused the library' },
  },
  {
    method: 'post',
    path: '/codec/decode',
    summary: 'Temporal codec server: decrypt (and decompress) payloads, for the Web UI and `temporal --codec-endpoint`',
    description:
      "Temporal's remote codec protocol. Needs the operator role. A payload of another tenant (or of none, for a non-admin) comes back still encoded. Browsers may call it from the Web UI origins in ADCP_CODEC_CORS_ORIGINS. `X-Namespace`, when sent, must be the gateway's namespace.",
    auth: 'bearer',
    listener: 'api',
    body: schemas.codecPayloadsSchema,
    answers: { 200: { description: 'The payloads', schema: schemas.codecPayloadsSchema } },
    refusals: { 422: 'DECODE_FAILED: a payload could not be decrypted' },
  },
  {
    method: 'post',
    path: '/codec/encode',
    summary: 'Temporal codec server: compress and encrypt payloads with the current key (operator role)',
    auth: 'bearer',
    listener: 'api',
    body: schemas.codecPayloadsSchema,
    answers: { 200: { description: 'The payloads', schema: schemas.codecPayloadsSchema } },
    refusals: { 422: 'ENCODE_FAILED' },
  },
];

/** The refusals every route of a kind can give, besides its own. */
export function commonRefusals(route: RouteSpec): Record<number, string> {
  const refusals: Record<number, string> = {};
  if (route.auth === 'bearer') {
    refusals[401] = 'UNAUTHENTICATED: no credentials, or credentials refused (`WWW-Authenticate` says why)';
    refusals[403] = 'FORBIDDEN: the principal lacks the role this route needs (`required_roles`)';
    refusals[429] = 'RATE_LIMITED: too many requests from this principal or address; retry after `Retry-After`';
  }
  if (route.auth === 'webhook') refusals[401] = 'WEBHOOK_REJECTED: the request did not verify';
  if (route.path.includes(':') || route.query)
    refusals[400] = 'INVALID_REQUEST or MALFORMED_PATH: a bad filter, or a path that does not decode';
  if (/:(operationId|id|sellerId)/.test(route.path))
    refusals[404] =
      "Not found (OPERATION_NOT_FOUND, MEDIA_BUY_NOT_FOUND, SELLER_NOT_FOUND, NOT_FOUND), also for another tenant's";
  if (route.body) {
    refusals[400] =
      'INVALID_REQUEST (`field` names what is wrong; also a missing body, or JSON that is not an object), MALFORMED_JSON, NESTING_TOO_DEEP, NUMBER_OUT_OF_RANGE, MALFORMED_BODY';
    refusals[413] = 'PAYLOAD_TOO_LARGE: the body is over the limit (after decompression)';
    refusals[415] = 'UNSUPPORTED_MEDIA_TYPE, UNSUPPORTED_CHARSET or UNSUPPORTED_CONTENT_ENCODING';
  }
  if (route.path !== '/metrics' && route.path !== '/openapi.json' && route.path !== '/.well-known/jwks.json')
    refusals[503] =
      'TEMPORAL_UNAVAILABLE (Temporal or a worker did not answer in time) or SERVICE_UNAVAILABLE; retry after `Retry-After`';
  return refusals;
}

/** `/v1/operations/:id` as a regular expression over a request path (case-insensitive, as express matches). */
export function routePattern(path: string): RegExp {
  const source = path.replace(/[.]/g, '\\.').replace(/:[A-Za-z]+/g, '[^/]+');
  return new RegExp(`^${source}/?$`, 'i');
}

const PATTERNS = ROUTES.map((route) => ({ route, pattern: routePattern(route.path) }));

/** The methods served on a path (upper case), empty when no route has that path. */
export function methodsServedAt(path: string): string[] {
  return [
    ...new Set(PATTERNS.filter((entry) => entry.pattern.test(path)).map((entry) => entry.route.method.toUpperCase())),
  ];
}

/** Whether POST is served on this path: elsewhere a POST answers 405 (or 404), not a complaint about its body. */
export function servesPost(path: string): boolean {
  return methodsServedAt(path).includes('POST');
}
