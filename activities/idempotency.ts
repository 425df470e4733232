import { createHash } from 'node:crypto';

/** A fixed namespace so keys are stable across processes and releases (changing it re-keys every operation). */
const NAMESPACE = Buffer.from('6f1d2c9e8b7a4d3c9e1f2a3b4c5d6e7f', 'hex');

/**
 * The idempotency_key for one step of one operation: a name-based UUID (RFC 9562 v5 layout) of
 * `<operation id>/<step>`. The same operation and step always give the same key, so a retried activity, a
 * worker that crashed after the request left, or a replay re-sends the key and the seller replays its answer.
 * It fits the 3.x pattern ^[A-Za-z0-9_.:-]{16,255}$ and sellers that expect a UUID.
 */
export function idempotencyKeyFor(operationId: string, step: string): string {
  const digest = createHash('sha1').update(NAMESPACE).update(`${operationId}/${step}`, 'utf8').digest();
  const bytes = Buffer.from(digest.subarray(0, 16));
  bytes[6] = (bytes[6] & 0x0f) | 0x50;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The rc.2 `buyer_ref` of an operation's media buy (and `<ref>-pkg<n>` for its packages): derived from the operation
 * ID, so every retry and every new key of the same operation names the same intended buy.
 */
export function buyerRefFor(operationId: string): string {
  return `adcp_${createHash('sha1').update(NAMESPACE).update(`${operationId}/buyer_ref`, 'utf8').digest('hex').slice(0, 24)}`;
}

/** create_media_buy arguments with buyer refs filled in where the caller gave none. */
export function withBuyerRefs(args: Record<string, unknown>, operationId: string): Record<string, unknown> {
  const buyerRef =
    typeof args.buyer_ref === 'string' && args.buyer_ref !== '' ? args.buyer_ref : buyerRefFor(operationId);
  const packages = Array.isArray(args.packages)
    ? args.packages.map((entry: unknown, index) =>
        entry && typeof entry === 'object' && !Array.isArray(entry) && !(entry as Record<string, unknown>).buyer_ref
          ? { ...(entry as Record<string, unknown>), buyer_ref: `${buyerRef}-pkg${index + 1}` }
          : entry,
      )
    : args.packages;
  return { ...args, buyer_ref: buyerRef, ...(packages !== undefined ? { packages } : {}) };
}
