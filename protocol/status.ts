/**
 * AdCP task status: the nine values of the 3.x `task-status` enum, plus the spellings real sellers send.
 * Source: adcp-protocol.md §1.1. Terminal follows A2A semantics (completed, failed, canceled, rejected).
 */
export const TASK_STATUSES = [
  'submitted',
  'working',
  'input-required',
  'completed',
  'failed',
  'canceled',
  'rejected',
  'auth-required',
  'unknown',
] as const;

export type TaskStatus = (typeof TASK_STATUSES)[number];

export const TERMINAL_STATUSES: ReadonlySet<TaskStatus> = new Set(['completed', 'failed', 'canceled', 'rejected']);

/** Statuses in which the seller waits for someone on our side; polling them would only burn calls. */
export const INTERRUPTED_STATUSES: ReadonlySet<TaskStatus> = new Set(['input-required', 'auth-required']);

export function isTerminal(status: TaskStatus): boolean {
  return TERMINAL_STATUSES.has(status);
}

const ALIASES: Readonly<Record<string, TaskStatus>> = {
  input_required: 'input-required',
  auth_required: 'auth-required',
  // MBS "Human-in-the-loop" returns pending_approval as if it were a status: it means the seller queued the task.
  pending_approval: 'submitted',
  cancelled: 'canceled',
};

/**
 * Maps what a seller sent to a task status, or undefined when the value is not a status at all.
 * Case and surrounding whitespace are forgiven; unknown strings are not guessed at.
 */
export function normaliseStatus(raw: unknown): TaskStatus | undefined {
  if (typeof raw !== 'string') return undefined;
  const value = raw.trim().toLowerCase();
  if ((TASK_STATUSES as readonly string[]).includes(value)) return value as TaskStatus;
  return ALIASES[value];
}
