/**
 * One notification to the buyer's systems (#12 item 6), as its own small workflow: the operation starts it as an
 * abandoned child and goes on, so a slow or failing receiver never holds the operation back, and a notification
 * started just before the operation ends is still delivered (a pending activity of a closed workflow would not be).
 * The child's workflow ID is the notification's idempotency key, so each event is started (and sent) once, across
 * retries, replays and continue-as-new; the receiver dedupes redeliveries by the same key.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { OperationActivities } from '../activities';

export const NOTIFICATION_WORKFLOW_TYPE = 'adcpNotification';

export type NotificationEvent = 'input_required' | 'completed' | 'failed' | 'rejected' | 'timed_out';

/** What the buyer is told. No secrets; the seller's full result stays in the operation (read it by operation_id). */
export interface BuyerNotification {
  idempotency_key: string;
  event: NotificationEvent;
  operation_id: string;
  tenant: string;
  task: string;
  agent_id: string;
  status: string;
  occurred_at: string;
  /** completed: the resource the operation made or acted on. */
  resource?: { media_buy_id: string };
  /** input_required: the seller's question and until when it waits. */
  input_request?: { reason?: string; message?: string; round: number; deadline: string };
  /** failed, rejected, timed_out: why. */
  failure?: { reason?: string; message: string };
}

export interface NotificationOutcome {
  delivered: boolean;
  /** The receiver's HTTP status, when it answered. */
  status?: number;
  note: string;
}

const delivery = proxyActivities<OperationActivities>({
  startToCloseTimeout: '30s',
  // A receiver that is down for a while still gets the notification; after a day it is given up.
  scheduleToCloseTimeout: '24h',
  retry: {
    initialInterval: '2s',
    backoffCoefficient: 2,
    maximumInterval: '10m',
    nonRetryableErrorTypes: ['NotificationRefused', 'ConfigError'],
  },
});

export async function adcpNotification(notification: BuyerNotification): Promise<NotificationOutcome> {
  return delivery.deliverNotification(notification);
}
