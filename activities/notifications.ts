/**
 * Delivers a notification to the tenant's notification URL (agents.json `tenants[].notification_url`), signed with our
 * own RFC 9421 key (the AdCP webhook profile, through @adcp/sdk's signer) and carrying its idempotency key, so the
 * receiver can verify it against our `/.well-known/jwks.json` and see each event once. The URL is resolved here, at
 * delivery time, from the tenant: nothing about it is in the operation's input or history.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { signWebhook } from '@adcp/sdk/signing/client';
import type { SellerRegistry } from '../config/sellers';
import type { NotificationSigningKey } from '../config/notification-key';
import type { BuyerNotification, NotificationOutcome } from '../contract/notification';
import { deadlineSignal } from './linked-signal';

export interface NotificationDependencies {
  sellers: SellerRegistry;
  /** Our signing key (config/notification-key.ts); without it notifications are not sent (and say so). */
  notificationKey?: NotificationSigningKey;
  fetch?: typeof fetch;
  /** Per attempt. */
  notificationTimeoutMs?: number;
}

/** Statuses a retry can fix: the receiver is busy, rate-limits or timed out. Other 4xx are refusals. */
const RETRYABLE_4XX = new Set([408, 425, 429]);

export function createNotificationActivities(deps: NotificationDependencies) {
  const send = deps.fetch ?? fetch;
  return {
    async deliverNotification(notification: BuyerNotification): Promise<NotificationOutcome> {
      const url = deps.sellers.tenant(notification.tenant)?.notification_url;
      if (!url) return { delivered: false, note: `tenant "${notification.tenant}" has no notification_url` };
      if (!deps.notificationKey) {
        return {
          delivered: false,
          note: 'no notification signing key is configured (ADCP_NOTIFICATION_KEY_FILE): nothing was sent',
        };
      }
      const body = JSON.stringify(notification);
      const headers = { 'content-type': 'application/json', 'idempotency-key': notification.idempotency_key };
      const signed = signWebhook({ method: 'POST', url, headers, body }, deps.notificationKey.signerKey);
      const deadline = deadlineSignal(Context.current().cancellationSignal, deps.notificationTimeoutMs ?? 20_000);
      let response: Response;
      try {
        response = await send(url, {
          method: 'POST',
          headers: { ...headers, ...signed.headers },
          body,
          signal: deadline.signal,
        });
        await response.arrayBuffer().catch(() => undefined);
      } finally {
        deadline.dispose();
      }
      if (response.ok) return { delivered: true, status: response.status, note: `delivered to ${new URL(url).host}` };
      const message = `The notification receiver at ${new URL(url).host} answered ${response.status}.`;
      if (response.status >= 400 && response.status < 500 && !RETRYABLE_4XX.has(response.status))
        throw ApplicationFailure.create({ type: 'NotificationRefused', message, nonRetryable: true });
      const retryAfter = Number(response.headers.get('retry-after'));
      throw ApplicationFailure.create({
        type: 'NotificationNotDelivered',
        message,
        ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { nextRetryDelay: retryAfter * 1000 } : {}),
      });
    },
  };
}
export type NotificationActivities = ReturnType<typeof createNotificationActivities>;
