/**
 * One notification to the buyer's systems, as its own small workflow: the operation starts it as an
 * abandoned child and goes on, so a slow or failing receiver never holds the operation back, and a notification
 * started just before the operation ends is still delivered (a pending activity of a closed workflow would not be).
 * The child's workflow ID is the notification's idempotency key, so each event is started (and sent) once, across
 * retries, replays and continue-as-new; the receiver dedupes redeliveries by the same key.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { OperationActivities } from '../../activities';
import type { BuyerNotification, NotificationOutcome } from '../../contract/notification';

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
