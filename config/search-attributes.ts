/**
 * The custom search attributes every AdCP operation workflow carries, so an operator can find operations
 * in the Web UI and with `temporal workflow list --query`. One list feeds the embedded dev server
 * (config/dev-server.ts), external servers (ensureSearchAttributes) and temporal-dev.yml (a unit test keeps
 * that file in step). Workflows import the typed keys, so this module imports nothing but @temporalio/common.
 * No secrets or PII go in search attributes: they are visible to anyone who can list workflows.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Type names as the Temporal CLI and server spell them (`--search-attribute NAME=TYPE`). */
export type SearchAttributeTypeName = 'Text' | 'Keyword' | 'Int' | 'Double' | 'Bool' | 'Datetime' | 'KeywordList';

export interface SearchAttributeDefinition {
  readonly name: string;
  readonly type: SearchAttributeTypeName;
}

export const SEARCH_ATTRIBUTES = [
  { name: 'AdcpTask', type: 'Keyword' },
  { name: 'AdcpAgent', type: 'Keyword' },
  { name: 'AdcpStatus', type: 'Keyword' },
  { name: 'AdcpTaskId', type: 'Keyword' },
  { name: 'AdcpInputReason', type: 'Keyword' },
  { name: 'AdcpMediaBuyId', type: 'Keyword' },
  { name: 'AdcpMediaBuyStatus', type: 'Keyword' },
  { name: 'AdcpFlightEnd', type: 'Datetime' },
  { name: 'AdcpCreativeDeadline', type: 'Datetime' },
  { name: 'AdcpCreativesMissing', type: 'Bool' },
  { name: 'AdcpTenant', type: 'Keyword' },
  { name: 'AdcpPrincipal', type: 'Keyword' },
  { name: 'AdcpCampaign', type: 'Keyword' },
] as const satisfies readonly SearchAttributeDefinition[];

export type SearchAttributeName = (typeof SEARCH_ATTRIBUTES)[number]['name'];

/** The SDK's type constant for each CLI type name. */
export const SDK_SEARCH_ATTRIBUTE_TYPES = {
  Text: SearchAttributeType.TEXT,
  Keyword: SearchAttributeType.KEYWORD,
  Int: SearchAttributeType.INT,
  Double: SearchAttributeType.DOUBLE,
  Bool: SearchAttributeType.BOOL,
  Datetime: SearchAttributeType.DATETIME,
  KeywordList: SearchAttributeType.KEYWORD_LIST,
} as const satisfies Record<SearchAttributeTypeName, SearchAttributeType>;

// The `name` parameter is typed so a key cannot name an attribute the list does not register.
const keyword = (name: SearchAttributeName) => defineSearchAttributeKey(name, SearchAttributeType.KEYWORD);

/** The AdCP task the operation runs (`create_media_buy`, `sync_creatives`, ...). */
export const SA_TASK = keyword('AdcpTask');
/** The seller agent the operation talks to. */
export const SA_SELLER = keyword('AdcpAgent');
/** The operation's AdCP task status (`submitted`, `working`, `input-required`, `completed`, ...). */
export const SA_STATUS = keyword('AdcpStatus');
/** The seller's task ID, once the seller has assigned one. */
export const SA_TASK_ID = keyword('AdcpTaskId');
/** Why the operation waits for input, while its status is `input-required`. */
export const SA_INPUT_REASON = keyword('AdcpInputReason');

// The media-buy workflow's attributes: "every active buy at seller X" is
// `AdcpAgent = "X" AND AdcpMediaBuyStatus = "active"`; "every buy whose creatives are late" is
// `AdcpCreativesMissing = true AND AdcpCreativeDeadline < "<now>"`.
/** The seller's media_buy_id, once the create has answered. */
export const SA_MEDIA_BUY_ID = keyword('AdcpMediaBuyId');
/** The buy's lifecycle status (`creating`, `pending_creatives`, `pending_start`, `active`, `paused`, `completed`, ...). */
export const SA_MEDIA_BUY_STATUS = keyword('AdcpMediaBuyStatus');
/** The flight's end time. */
export const SA_FLIGHT_END = defineSearchAttributeKey(
  'AdcpFlightEnd' satisfies SearchAttributeName,
  SearchAttributeType.DATETIME,
);
/** The buy's creative_deadline. */
export const SA_CREATIVE_DEADLINE = defineSearchAttributeKey(
  'AdcpCreativeDeadline' satisfies SearchAttributeName,
  SearchAttributeType.DATETIME,
);
/** Whether some package of the buy still has no creative assigned. */
export const SA_CREATIVES_MISSING = defineSearchAttributeKey(
  'AdcpCreativesMissing' satisfies SearchAttributeName,
  SearchAttributeType.BOOL,
);

// Tenancy (#12): "every operation of tenant X" is `AdcpTenant = "X"`; the typed client and the API filter by it.
/** The tenant that started the operation or media buy (absent in single-tenant/dev mode). */
export const SA_TENANT = keyword('AdcpTenant');
/** The principal id (an API key's principal, a JWT's subject) that started it: an id, never a secret. */
export const SA_PRINCIPAL = keyword('AdcpPrincipal');

// Campaigns (#14): "the whole campaign" (its discovery, its buys) is `AdcpCampaign = "<campaign key>"`.
/** The campaign key a campaign workflow, its discovery and its buys carry. */
export const SA_CAMPAIGN = keyword('AdcpCampaign');
