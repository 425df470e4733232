/**
 * Campaign governance as the orchestrator needs it (governance/campaign/tasks: sync_plans, check_governance,
 * report_plan_outcome; experimental in AdCP 3.x): reading a check's verdict from an operation's result, and applying
 * machine-actionable conditions (a `required_value` at a `field`) to the payload of the governed call. I/O-free and
 * free of zod, so workflows, activities and the API import it alike.
 */

export type GovernanceVerdict = 'approved' | 'denied' | 'conditions';

export interface GovernanceCondition {
  /** Where the adjustment applies, e.g. `payload.packages[0].budget` (intent checks name payload fields). */
  field: string;
  /** Present when the condition is machine-actionable: the value the field must take. */
  requiredValue?: unknown;
  reason?: string;
}

export interface GovernanceFinding {
  categoryId?: string;
  severity?: string;
  explanation: string;
}

/** A check_governance answer, normalised (3.1 `verdict`; a pre-3.1 agent's `status: approved|denied|conditions`). */
export interface GovernanceCheckAnswer {
  checkId?: string;
  verdict: GovernanceVerdict;
  explanation: string;
  governanceContext?: string;
  expiresAt?: string;
  conditions: GovernanceCondition[];
  findings: GovernanceFinding[];
  mode?: string;
}

const VERDICTS: readonly string[] = ['approved', 'denied', 'conditions'];

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

function record(value: unknown): Record<string, unknown> | undefined {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/**
 * The verdict of a completed check_governance, or an explanation of why the answer has none (then the caller treats
 * the gate as closed: "when the gate is unreachable, the default is halt").
 */
export function parseGovernanceCheck(
  result: Record<string, unknown> | undefined,
): { ok: true; answer: GovernanceCheckAnswer } | { ok: false; message: string } {
  if (!result) return { ok: false, message: 'check_governance completed without a result.' };
  const verdict =
    text(result.verdict) ?? (VERDICTS.includes(String(result.status)) ? String(result.status) : undefined);
  if (!verdict || !VERDICTS.includes(verdict))
    return {
      ok: false,
      message: `check_governance answered no verdict (approved, denied or conditions); got ${JSON.stringify(result.verdict ?? result.status ?? null)}.`,
    };
  const conditions: GovernanceCondition[] = [];
  for (const entry of Array.isArray(result.conditions) ? result.conditions : []) {
    const condition = record(entry);
    const field = text(condition?.field);
    if (!condition || !field) continue;
    conditions.push({
      field,
      ...('required_value' in condition ? { requiredValue: condition.required_value } : {}),
      ...(text(condition.reason) ? { reason: text(condition.reason) } : {}),
    });
  }
  const findings: GovernanceFinding[] = [];
  for (const entry of Array.isArray(result.findings) ? result.findings : []) {
    const finding = record(entry);
    if (!finding) continue;
    findings.push({
      explanation: text(finding.explanation) ?? '',
      ...(text(finding.category_id) ? { categoryId: text(finding.category_id) } : {}),
      ...(text(finding.severity) ? { severity: text(finding.severity) } : {}),
    });
  }
  return {
    ok: true,
    answer: {
      verdict: verdict as GovernanceVerdict,
      explanation: text(result.explanation) ?? findings.map((finding) => finding.explanation).join(' '),
      conditions,
      findings,
      ...(text(result.check_id) ? { checkId: text(result.check_id) } : {}),
      ...(text(result.governance_context) ? { governanceContext: text(result.governance_context) } : {}),
      ...(text(result.expires_at) ? { expiresAt: text(result.expires_at) } : {}),
      ...(text(result.mode) ? { mode: text(result.mode) } : {}),
    },
  };
}

/** Fields a condition may never set: the orchestrator owns them (idempotency, webhooks, the governance token). */
const RESERVED_FIELDS = new Set(['idempotency_key', 'push_notification_config', 'governance_context', 'context_id']);

type PathStep = string | number;

/** `payload.packages[0].budget` → ['packages', 0, 'budget'] (the leading `payload.` of an intent check dropped). */
export function conditionPath(field: string): PathStep[] | undefined {
  const trimmed = field.startsWith('payload.') ? field.slice('payload.'.length) : field;
  const steps: PathStep[] = [];
  for (const part of trimmed.split('.')) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$/.exec(part);
    if (!match) return undefined;
    steps.push(match[1]);
    for (const index of match[2].match(/\d+/g) ?? []) steps.push(Number(index));
  }
  if (steps.length === 0 || RESERVED_FIELDS.has(String(steps[0]))) return undefined;
  return steps;
}

/** Whether every condition carries a value the orchestrator can set itself (at a path it can reach). */
export function conditionsMachineApplicable(conditions: readonly GovernanceCondition[]): boolean {
  return (
    conditions.length > 0 &&
    conditions.every((condition) => 'requiredValue' in condition && conditionPath(condition.field) !== undefined)
  );
}

/**
 * A copy of `payload` with each condition's value set at its field. Objects on the way are created; an array index
 * must exist (a condition on a package the payload does not have is not applicable). Throws on a path it cannot set.
 */
export function applyConditions(
  payload: Record<string, unknown>,
  conditions: readonly GovernanceCondition[],
  values: Record<string, unknown> = {},
): Record<string, unknown> {
  const copy = JSON.parse(JSON.stringify(payload)) as Record<string, unknown>;
  for (const condition of conditions) {
    const value = condition.field in values ? values[condition.field] : condition.requiredValue;
    if (value === undefined) continue;
    const path = conditionPath(condition.field);
    if (!path) throw new Error(`The condition on ${condition.field} names no field the orchestrator may set.`);
    let target: unknown = copy;
    for (let index = 0; index < path.length - 1; index += 1) {
      const step = path[index];
      const container = target as Record<string | number, unknown>;
      if (typeof step === 'number') {
        if (!Array.isArray(container) || step >= container.length)
          throw new Error(`The condition on ${condition.field} names an element the payload does not have.`);
      } else if (container[step] === undefined) {
        container[step] = typeof path[index + 1] === 'number' ? [] : {};
      }
      target = container[step];
      if (!target || typeof target !== 'object')
        throw new Error(`The condition on ${condition.field} goes through a value that is not an object.`);
    }
    (target as Record<string | number, unknown>)[path[path.length - 1]] = value;
  }
  return copy;
}
