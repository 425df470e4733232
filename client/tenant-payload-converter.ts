/**
 * The payload converter of every orchestrator Worker, Client and workflow bundle: Temporal's default converter, plus
 * the owning tenant recorded in each payload's metadata (`adcp-tenant`) when the value is an object whose top-level
 * `tenant` is a tenant name. Operation, media-buy, campaign and discovery inputs, their states (queries, results,
 * memos) and the activity inputs that act for a tenant all carry it. The encryption codec (encryption-codec.ts)
 * encrypts such a payload with that tenant's data key and the codec server decodes it only for that tenant's
 * operators; a payload without a tenant is encrypted with the shared key, which only admins decode.
 *
 * A payload converter, not a codec, because a codec sees bytes and no context; the converter sees the value. It runs
 * inside the workflow sandbox too (bundled through `payloadConverterPath`): no Node built-ins here.
 */
import {
  type ConverterHint,
  DefaultPayloadConverter,
  type Payload,
  type PayloadConverter,
  type SerializationContext,
} from '@temporalio/common';
import { isTenantName } from '../protocol/tenancy';

/** The metadata key of a payload's tenant (UTF-8), set by this converter before any codec runs. */
export const METADATA_TENANT = 'adcp-tenant';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The tenant a value belongs to: its top-level `tenant`, when that is a tenant name. */
export function tenantOfValue(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const tenant = (value as { tenant?: unknown }).tenant;
  return isTenantName(tenant) ? tenant : undefined;
}

/** The tenant a payload records (METADATA_TENANT), if any. */
export function tenantOfPayload(payload: Payload): string | undefined {
  const bytes = payload.metadata?.[METADATA_TENANT];
  if (!bytes) return undefined;
  const tenant = decoder.decode(bytes);
  return isTenantName(tenant) ? tenant : undefined;
}

export class TenantPayloadConverter implements PayloadConverter {
  private readonly inner = new DefaultPayloadConverter();

  toPayload<T>(value: T, context?: SerializationContext, hint?: ConverterHint<T>): Payload {
    const payload = this.inner.toPayload(value, context, hint);
    const tenant = tenantOfValue(value);
    if (tenant === undefined) return payload;
    return { ...payload, metadata: { ...payload.metadata, [METADATA_TENANT]: encoder.encode(tenant) } };
  }

  fromPayload<T>(payload: Payload, context?: SerializationContext, hint?: ConverterHint<T>): T {
    return this.inner.fromPayload<T>(payload, context, hint);
  }
}

/** What Temporal loads from `payloadConverterPath`. */
export const payloadConverter = new TenantPayloadConverter();
