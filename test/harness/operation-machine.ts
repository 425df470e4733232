/**
 * Driving the operation machine (workflows/operation/machine.ts) without a server: an input, a clock the test moves,
 * a switch for "history is long", and the answers activities would give. Shared by the machine's unit tests.
 */
import type { CallPlan, CallTimeouts, PlanCallInput, ReadTaskOutcome } from '../../contract/activities';
import type { OperationInput, WebhookDelivery } from '../../contract/operation';
import type { TaskSnapshot } from '../../protocol';
import { OperationMachine, type Step, type StepResult } from '../../workflows/operation/machine';

export const OPERATION = 'adcp-create_media_buy-k1';
export const DAY = 86_400_000;
export const TIMEOUTS: CallTimeouts = { callMs: 30_000, readMs: 10_000 };
export const BUY = { media_buy_id: 'mb_1', status: 'pending_creatives' };

export function operationInput(overrides: Partial<OperationInput> = {}): OperationInput {
  return {
    sellerId: 'seller',
    task: 'create_media_buy',
    params: { account: { account_id: 'acc_1' }, packages: [{ product_id: 'p1', budget: 1_000 }] },
    budgetMs: DAY,
    ...overrides,
  };
}

export interface Driven {
  machine: OperationMachine;
  clock: { now: number };
  history: { long: boolean };
  /** Continues as new: a machine built from what this one carries, on the same clock and history switch. */
  continued(): Driven;
}

export function drive(
  input: OperationInput = operationInput(),
  clock = { now: 1_000 },
  history = { long: false },
): Driven {
  const machine = new OperationMachine(input, {
    operationId: OPERATION,
    now: () => clock.now,
    historyIsLong: () => history.long,
  });
  return {
    machine,
    clock,
    history,
    continued: () => drive({ ...input, carried: machine.carried() }, clock, history),
  };
}

/** The plan planCall would record for `input`. */
export function planFor(input: PlanCallInput): CallPlan {
  return {
    operationId: input.operationId,
    sellerId: input.sellerId,
    task: input.task,
    step: input.step,
    protocol: 'mcp',
    args: { ...input.params, idempotency_key: `${input.operationId}:${input.step}` },
    timeouts: TIMEOUTS,
  };
}

let keys = 0;
export function webhook(snapshot: TaskSnapshot, extra: Partial<WebhookDelivery> = {}): WebhookDelivery {
  keys += 1;
  return { eventKey: `k${keys}`, snapshot, receivedAt: new Date(0).toISOString(), ...extra };
}

export const answered = (snapshot: TaskSnapshot, webhookRegistered = false): StepResult => ({
  kind: 'answered',
  answer: { snapshot, webhookRegistered },
});
export const read = (snapshot?: TaskSnapshot): StepResult => {
  const outcome: ReadTaskOutcome = snapshot
    ? { snapshot, readMethod: 'tasks/get' }
    : { readMethod: 'none', unreadable: { code: 'REFERENCE_NOT_FOUND', message: 'not now', recovery: 'transient' } };
  return { kind: 'read', outcome };
};
export const moved = (snapshot: TaskSnapshot, polls = 1): StepResult => ({
  kind: 'moved',
  outcome: { snapshot, readMethod: 'tasks/get', polls },
});

/** The seller cannot list its tasks: the watcher's answer to a registration, unless a test answers otherwise. */
export const NOT_WATCHED: StepResult = {
  kind: 'watchAnswered',
  outcome: { watching: false, reason: 'seller offers no list_tasks or tasks/list' },
};

/**
 * Takes the next step, expecting its kind. A registration with the task watcher the test does not expect is
 * answered "not watched" (a seller that cannot list its tasks), so the step after it is taken instead.
 */
export function expectStep<Kind extends Step['kind']>(
  machine: OperationMachine,
  kind: Kind,
): Extract<Step, { kind: Kind }> {
  let step = machine.next();
  if (step.kind === 'registerWithWatcher' && kind !== 'registerWithWatcher') {
    machine.resolve(NOT_WATCHED);
    step = machine.next();
  }
  if (step.kind !== kind) throw new Error(`expected a ${kind} step, got ${JSON.stringify(step)}`);
  return step as Extract<Step, { kind: Kind }>;
}

/** Plans and makes the call the machine asks for next (a mutation's planCall first), answering with `result`. */
export function callWith(machine: OperationMachine, result: StepResult): Extract<Step, { kind: 'call' }> {
  let step = machine.next();
  if (step.kind === 'registerWithWatcher') {
    machine.resolve(NOT_WATCHED);
    step = machine.next();
  }
  if (step.kind === 'planCall') {
    machine.resolve({ kind: 'planned', plan: planFor(step.input) });
    step = machine.next();
  }
  if (step.kind !== 'call') throw new Error(`expected a call step, got ${JSON.stringify(step)}`);
  machine.resolve(result);
  return step;
}
