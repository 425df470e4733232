/**
 * Per-task operation defaults chosen by the operator, from the file named by ADCP_TASKS_FILE (optional): how long an
 * operation of a task may take, how its calls are retried, how long a question may wait. They are applied where
 * operations start (OrchestratorClient), so workflows stay deterministic and every operation records the values it
 * ran with in its input. A caller's own values win over these; these win over the built-in catalog
 * (protocol/tasks.ts).
 *
 *   { "tasks": { "create_media_buy": { "budget_seconds": 172800, "retry": { "max_attempts": 5 } } } }
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { TASK_NAME_PATTERN } from '../protocol';
import {
  durationSecondsSchema,
  interactionPolicySchema,
  retryPolicySchema,
  retrySettingsFrom,
} from '../protocol/requests';
import { ConfigError } from './errors';
import { formatZodIssues } from './zod-format';

// The same rules as a start request's own values (protocol/requests.ts).
const taskSettingsSchema = z
  .object({
    budget_seconds: durationSecondsSchema.optional(),
    retry: retryPolicySchema.optional(),
    interaction: interactionPolicySchema.optional(),
    auth_deadline_seconds: durationSecondsSchema.optional(),
  })
  .strict();

export const tasksFileSchema = z
  .object({
    tasks: z.record(
      z.string().regex(TASK_NAME_PATTERN, 'must be an AdCP task name such as "create_media_buy"'),
      taskSettingsSchema,
    ),
  })
  .strict();

/** The defaults for one task, in the units OrchestratorClient takes. */
export interface TaskDefaults {
  budgetMs?: number;
  retry?: { maximumAttempts?: number; initialIntervalMs?: number; maximumIntervalMs?: number };
  interaction?: { deadlineMs?: number; maxRounds?: number };
  authDeadlineMs?: number;
}

export type TaskDefaultsByTask = Readonly<Record<string, TaskDefaults>>;

const seconds = (value: number | undefined) => (value === undefined ? undefined : value * 1000);

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}

export function parseTasksFile(content: string, source: string): TaskDefaultsByTask {
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch (error) {
    throw new ConfigError(`${source} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = tasksFileSchema.safeParse(json);
  if (!parsed.success) throw new ConfigError(`${source} is invalid: ${formatZodIssues(parsed.error.issues)}`);
  const out: Record<string, TaskDefaults> = {};
  for (const [task, settings] of Object.entries(parsed.data.tasks)) {
    out[task] = withoutUndefined({
      budgetMs: seconds(settings.budget_seconds),
      retry: settings.retry ? retrySettingsFrom(settings.retry) : undefined,
      interaction: settings.interaction
        ? withoutUndefined({
            deadlineMs: seconds(settings.interaction.deadline_seconds),
            maxRounds: settings.interaction.max_rounds,
          })
        : undefined,
      authDeadlineMs: seconds(settings.auth_deadline_seconds),
    });
  }
  return out;
}

/** The operator's task defaults, or none when ADCP_TASKS_FILE is not set. */
export function loadTaskDefaults(env: NodeJS.ProcessEnv = process.env): TaskDefaultsByTask {
  const file = env.ADCP_TASKS_FILE;
  if (!file) return {};
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`ADCP_TASKS_FILE names ${file}, which cannot be read: ${(error as Error).message}`);
  }
  return parseTasksFile(content, file);
}
