/**
 * Reads and listings sent the way each seller takes them (protocol/request-shaping.ts): a call refused because it
 * carried an optional field the seller does not take (`UNSUPPORTED_FEATURE` "Omit account") is sent again at once
 * without that field, in the same attempt, and the outcome says what was left out and why, so the workflow records it
 * and sends later reads without it. A per-process memory by (seller, tool) spares other workflows the refused round
 * trip; the durable record is the workflow's. Free of Temporal so it is tested with a fake SellerClient.
 */
import {
  type RequestShaping,
  type ShapingRecord,
  refusedField,
  shapeRequest,
  withShaping,
} from '../protocol/request-shaping';
import type { CallContext, SellerAnswer, SellerClient } from './seller-client';

/** What this process learned per seller: the refusals seen, by tool. Bounded; an evicted seller is relearned. */
export class ShapingMemory {
  private readonly bySeller = new Map<string, ShapingRecord[]>();
  constructor(private readonly capacity = 1_024) {}

  /** The refusals learned for this seller (each field once per tool). */
  get(sellerId: string): readonly ShapingRecord[] {
    return this.bySeller.get(sellerId) ?? [];
  }

  learn(sellerId: string, records: readonly ShapingRecord[]): void {
    if (records.length === 0) return;
    const known = this.bySeller.get(sellerId) ?? [];
    const next = [...known];
    for (const record of records)
      if (!next.some((entry) => entry.tool === record.tool && entry.omitted === record.omitted)) next.push(record);
    this.bySeller.delete(sellerId);
    this.bySeller.set(sellerId, next);
    if (this.bySeller.size > this.capacity) this.bySeller.delete(this.bySeller.keys().next().value as string);
  }
}

export interface ShapedCall {
  tool: string;
  args: Record<string, unknown>;
  /** What this seller's requests leave out already (the workflow's record). */
  shaping?: RequestShaping;
  /** When a refusal is recorded (ISO 8601 of now). */
  at: () => string;
}

export interface ShapedAnswer {
  answer: SellerAnswer;
  /** The arguments the answer came for (without every field left out). */
  sent: Record<string, unknown>;
  /**
   * Fields left out of this call that the workflow's shaping did not name: refused by the seller in this call, or
   * learned by this process from an earlier refusal (its record). Empty when nothing new was learned.
   */
  shaping: ShapingRecord[];
}

/** At most this many fields are dropped in one call: a seller that refuses field after field is not chased. */
const MAX_DROPS_PER_CALL = 3;

/**
 * One read (or listing) of `tool`, sent without the fields the seller's shaping leaves out; a refusal naming another
 * droppable field that the request carried is answered by sending it again without that field.
 */
export async function callShaped(
  seller: SellerClient,
  context: CallContext,
  call: ShapedCall,
  memory?: ShapingMemory,
): Promise<ShapedAnswer> {
  // What this process learned that the workflow has not recorded yet: applied, and told, so it is recorded too.
  const learned: ShapingRecord[] = (memory?.get(context.agent.id) ?? []).filter(
    (record) =>
      record.tool === call.tool &&
      call.args[record.omitted] !== undefined &&
      !(call.shaping?.[call.tool] ?? []).includes(record.omitted),
  );
  let sent = shapeRequest(call.tool, call.args, withShaping(call.shaping, learned));
  for (let drop = 0; ; drop++) {
    const answer = await seller.callTask({ ...context, task: call.tool, args: sent });
    const error = answer.callError ? answer.snapshot.errors?.[0] : undefined;
    const refused = error && drop < MAX_DROPS_PER_CALL ? refusedField(error, call.tool, sent) : undefined;
    if (!refused) {
      memory?.learn(context.agent.id, learned);
      return { answer, sent, shaping: learned };
    }
    learned.push({ tool: call.tool, omitted: refused.field, because: refused.because, at: call.at() });
    const { [refused.field]: _dropped, ...rest } = sent;
    sent = rest;
  }
}
