/**
 * A notification to the buyer's systems: what the operation workflow starts the adcpNotification child with, and
 * what the delivery activity answers. Imported by the workflows and the notification activity.
 */

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
