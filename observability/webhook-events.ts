/**
 * Webhook verification failures, published where the receivers decide them (api/webhooks.ts,
 * api/reporting-webhooks.ts) and counted by
 * whichever gateway metrics subscribe (observability/gateway-metrics.ts). A diagnostics channel keeps the receivers
 * free of any metrics wiring, and publishing with no subscriber costs nothing.
 */
import diagnostics from 'node:diagnostics_channel';

export interface WebhookVerificationFailure {
  /** Which receiver refused: task status webhooks or reporting webhooks. */
  webhook: 'task' | 'reporting';
  /** The stable reason (api/webhook-verification/result.ts), or `webhooks_not_configured`. */
  reason: string;
}

export const webhookVerificationFailures = diagnostics.channel('adcp.webhook.verification_failure');

export function publishWebhookVerificationFailure(failure: WebhookVerificationFailure): void {
  if (webhookVerificationFailures.hasSubscribers) webhookVerificationFailures.publish(failure);
}
