/** History events of real workflow runs, read back from the server (B3). */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { median } from './stats';

export interface HistoryCount {
  workflowId: string;
  events: number;
  /** Events by type ("ActivityTaskScheduled": 2, ...), to show where a history's length comes from. */
  byType: Record<string, number>;
}

const EventType = temporal.api.enums.v1.EventType;

export async function historyOf(client: Client, workflowId: string): Promise<HistoryCount> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const byType: Record<string, number> = {};
  for (const event of history.events ?? []) {
    const name = (EventType[event.eventType ?? 0] ?? String(event.eventType))
      .replace(/^EVENT_TYPE_/, '')
      .toLowerCase()
      .replace(/(^|_)([a-z])/g, (_, __, letter: string) => letter.toUpperCase());
    byType[name] = (byType[name] ?? 0) + 1;
  }
  return { workflowId, events: history.events?.length ?? 0, byType };
}

export async function historiesOf(
  client: Client,
  workflowIds: readonly string[],
): Promise<{ medianEvents: number; maxEvents: number; sample: HistoryCount }> {
  const counts = await Promise.all(workflowIds.map((id) => historyOf(client, id)));
  const events = counts.map((count) => count.events);
  const medianEvents = median(events);
  const sample = counts.find((count) => count.events === Math.max(...events)) ?? counts[0];
  return { medianEvents, maxEvents: Math.max(...events), sample };
}

/** "WorkflowTaskScheduled 3, ActivityTaskScheduled 1, ..." */
export function describeTypes(byType: Record<string, number>): string {
  return Object.entries(byType)
    .sort((a, b) => b[1] - a[1])
    .map(([name, count]) => `${name} ${count}`)
    .join(', ');
}
