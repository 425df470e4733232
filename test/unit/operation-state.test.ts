/**
 * The operation state machine, without a server: every route a result can take (call answer, webhooks, reads,
 * reconciliation, cancel) feeds one truth (workflows/operation/observations.ts), and the operation machine
 * (workflows/operation/machine.ts) decides every step from it. The last blocks drive both with thousands of seeded
 * random interleavings: of observations, and of facts and step results through the machine's step API.
 */
import type { AdcpError, TaskSnapshot, TaskStatus } from '../../protocol';
import type { OperationState, WebhookDelivery } from '../../contract/operation';
import { OperationMachine, type Step, type StepResult } from '../../workflows/operation/machine';
import { Observations, canonicalJson, unwrapNestedEnvelope } from '../../workflows/operation/observations';
import { DAY, type Driven, drive, operationInput, planFor } from '../harness/operation-machine';

const OPERATION = 'adcp-create_media_buy-k1';
const WATCHER = 'task-watcher:adcp:seller-a:0';

function freshState(task = 'create_media_buy'): OperationState {
  return {
    operationId: OPERATION,
    sellerId: 'seller',
    task,
    status: 'pending',
    inputRounds: 0,
    webhookRegistered: true,
    pollCount: 0,
    webhooksApplied: 0,
    transitions: [],
    transitionCount: 0,
    anomalies: [],
    startedAt: new Date(0).toISOString(),
    updatedAt: new Date(0).toISOString(),
    deadline: new Date(86_400_000).toISOString(),
  };
}

function machineFor(task = 'create_media_buy', clock = { now: 1_000 }): Observations {
  return new Observations(freshState(task), {
    task,
    deadlineMs: 86_400_000,
    interactionDeadlineMs: 3_600_000,
    authDeadlineMs: 3_600_000,
    now: () => clock.now,
  });
}

let keyCounter = 0;
function webhook(snapshot: TaskSnapshot, extra: Partial<WebhookDelivery> = {}): WebhookDelivery {
  keyCounter += 1;
  return { eventKey: `k${keyCounter}`, snapshot, receivedAt: new Date(0).toISOString(), ...extra };
}

const BUY = { media_buy_id: 'mb_1', status: 'pending_creatives' };

describe('operation state machine: convergence rules', () => {
  it('holds a final webhook that beats the call answer, then applies it once the answer binds the task', () => {
    const machine = machineFor();
    expect(machine.receiveWebhook(webhook({ status: 'completed', taskId: 't1', result: BUY }))).toBe('held');
    expect(machine.state.status).toBe('pending');
    machine.applyCallAnswer({ status: 'submitted', taskId: 't1' });
    expect(machine.state.status).toBe('completed');
    expect(machine.state.result).toEqual(BUY);
    expect(machine.state.webhooksApplied).toBe(1);
    expect(machine.state.heldWebhooks).toBe(0);
  });

  it('applies a webhook bound by its 3.1 operation_id at once, even before the task is known', () => {
    const machine = machineFor();
    expect(
      machine.receiveWebhook(webhook({ status: 'completed', taskId: 't1', result: BUY }, { operationId: OPERATION })),
    ).toBe('applied');
    expect(machine.terminal).toBe(true);
    // The call's late non-terminal answer is stale and reopens nothing.
    expect(machine.applyCallAnswer({ status: 'submitted', taskId: 't1' })).toBe('stale');
    expect(machine.state.status).toBe('completed');
  });

  it('refuses a webhook naming another operation_id, and one naming another task once the task is bound', () => {
    const machine = machineFor();
    expect(
      machine.receiveWebhook(
        webhook({ status: 'completed', taskId: 't1', result: BUY }, { operationId: 'adcp-create_media_buy-other' }),
      ),
    ).toBe('refused');
    machine.applyCallAnswer({ status: 'submitted', taskId: 't1' });
    expect(
      machine.receiveWebhook(webhook({ status: 'completed', taskId: 't2', result: { media_buy_id: 'mb_B' } })),
    ).toBe('refused');
    expect(machine.state.status).toBe('submitted');
    expect(machine.state.webhooksRefused).toBe(2);
    expect(machine.state.refusedWebhooks?.map((entry) => entry.reason)).toEqual([
      'operation_id_mismatch',
      'task_id_mismatch',
    ]);
  });

  it('refuses a webhook verified as another seller before its event key is remembered', () => {
    const machine = new OperationMachine(operationInput(), {
      operationId: OPERATION,
      now: () => 0,
      historyIsLong: () => false,
    });
    const forged = webhook(
      { status: 'completed', taskId: 't1', result: { media_buy_id: 'mb_B' } },
      { operationId: OPERATION, sellerId: 'another-seller', eventKey: 'idem:shared' },
    );
    expect(machine.receiveWebhook(forged)).toBe('refused');
    expect(machine.state.refusedWebhooks).toEqual([
      expect.objectContaining({ reason: 'seller_mismatch', sellerId: 'another-seller', operationId: OPERATION }),
    ]);
    // The operation's own seller sends an event under the same key: not taken for a duplicate.
    const own = webhook(
      { status: 'completed', taskId: 't1', result: BUY },
      { operationId: OPERATION, sellerId: machine.state.sellerId, eventKey: 'idem:shared' },
    );
    expect(machine.receiveWebhook(own)).not.toBe('duplicate');
    expect(machine.state.webhooksRefused).toBe(1);
  });

  it('refuses held webhooks of another task when the call answer binds its own', () => {
    const machine = machineFor();
    machine.receiveWebhook(webhook({ status: 'completed', taskId: 'someone-else', result: { media_buy_id: 'mb_B' } }));
    machine.applyCallAnswer({ status: 'submitted', taskId: 't1' });
    expect(machine.state.status).toBe('submitted');
    expect(machine.state.result).toBeUndefined();
    expect(machine.state.refusedWebhooks?.[0]?.taskId).toBe('someone-else');
  });

  it('keeps the first terminal result; a different later one is a visible conflict, an identical one a duplicate', () => {
    const machine = machineFor();
    machine.applyCallAnswer({ status: 'submitted', taskId: 't1' });
    machine.receiveWebhook(webhook({ status: 'completed', taskId: 't1', result: BUY }));
    expect(machine.applyRead({ status: 'completed', taskId: 't1', result: { ...BUY } })).toBe('duplicate');
    expect(machine.applyRead({ status: 'failed', taskId: 't1' })).toBe('conflict');
    expect(machine.state.status).toBe('completed');
    expect(machine.state.result).toEqual(BUY);
    expect(machine.state.conflicts).toHaveLength(1);
  });

  it('reads a completed envelope around a submitted task as submitted (no media_buy_id, no success)', () => {
    const wrapped: TaskSnapshot = { status: 'completed', result: { status: 'submitted', task_id: 't9' } };
    expect(unwrapNestedEnvelope(wrapped).snapshot).toMatchObject({ status: 'submitted', taskId: 't9' });
    const machine = machineFor();
    machine.applyCallAnswer({ status: 'submitted', taskId: 't9' });
    machine.receiveWebhook(webhook(wrapped));
    expect(machine.state.status).toBe('submitted');
    expect(machine.state.outcome).toBeUndefined();
  });

  it('does not take a create that completes without media_buy_id as success until a read confirms the buy', () => {
    const machine = machineFor();
    machine.applyCallAnswer({ status: 'submitted', taskId: 't1' });
    expect(machine.receiveWebhook(webhook({ status: 'completed', taskId: 't1', result: { note: 'done' } }))).toBe(
      'needs-confirmation',
    );
    expect(machine.terminal).toBe(false);
    expect(machine.state.provisional?.reason).toMatch(/media_buy_id/);
    machine.applyRead({ status: 'completed', taskId: 't1', result: BUY });
    expect(machine.state.status).toBe('completed');
    expect(machine.state.result).toEqual(BUY);
    expect(machine.state.outcomeNotes?.join(' ')).toMatch(/a read confirmed it/);
  });

  it('settles an unconfirmable completion as partial, saying why', () => {
    const machine = machineFor();
    machine.applyCallAnswer({ status: 'completed', result: { note: 'done' } });
    machine.settleProvisional('the seller named no task to read');
    expect(machine.state.status).toBe('completed');
    expect(machine.state.outcome).toBe('partial');
  });

  it('marks schema drift in the outcome without losing the data', () => {
    const machine = machineFor('get_media_buy_delivery');
    machine.applyCallAnswer(
      { status: 'completed', result: { media_buy_deliveries: [{ media_buy_id: 'mb_1' }] } },
      { schemaWarnings: ['delivery row lacks pricing_model'] },
    );
    expect(machine.state.outcome).toBe('partial');
    expect(machine.state.result).toEqual({ media_buy_deliveries: [{ media_buy_id: 'mb_1' }] });
  });

  it('after a lost answer: confirms held webhooks, follows a bound task, reconciles a lost mutation, fails a refused read', () => {
    const lost: AdcpError = { code: 'TIMEOUT', message: 'no answer', recovery: 'transient' };
    const held = machineFor();
    held.receiveWebhook(webhook({ status: 'completed', taskId: 't1', result: BUY }));
    expect(held.decideAfterCallFailure(lost, true, true)).toEqual({ action: 'confirm-held' });
    held.acceptHeldUnconfirmed('no read');
    expect(held.state.status).toBe('completed');
    expect(held.state.result).toEqual(BUY);

    expect(machineFor().decideAfterCallFailure(lost, true, true)).toEqual({ action: 'reconcile' });
    const read = machineFor('get_products');
    expect(read.decideAfterCallFailure(lost, false, true).action).toBe('fail');
  });

  it('uses a new key only after IDEMPOTENCY_* and a reconciliation that found nothing, once', () => {
    const machine = machineFor();
    const conflict: AdcpError = { code: 'IDEMPOTENCY_CONFLICT', message: 'x', recovery: 'correctable' };
    const timeout: AdcpError = { code: 'TIMEOUT', message: 'x', recovery: 'transient' };
    expect(machine.decideAfterReconciliation(conflict, 'not_found', 0)).toEqual({ action: 'rekey' });
    expect(machine.decideAfterReconciliation(conflict, 'not_found', 1).action).toBe('fail');
    expect(machine.decideAfterReconciliation(conflict, 'unsupported', 0).action).toBe('fail');
    expect(machine.decideAfterReconciliation(conflict, 'adopted', 0).action).toBe('adopted');
    // A lost create no task route found: the seller may hold the buy, so its media buys are read, never "failed".
    expect(machine.decideAfterReconciliation(timeout, 'not_found', 0).action).toBe('find-resource');
    expect(machine.decideAfterReconciliation(timeout, 'unsupported', 0).action).toBe('find-resource');
    expect(machineFor('sync_creatives').decideAfterReconciliation(timeout, 'not_found', 0).action).toBe('fail');
    // A refusal the seller answered says it did not act: nothing to look for.
    const limited: AdcpError = { code: 'RATE_LIMITED', message: 'x', recovery: 'transient' };
    expect(machine.decideAfterReconciliation(limited, 'unsupported', 0).action).toBe('fail');
  });

  it('a cancel accepted before the result ends canceled, keeping the buy the call in flight made', () => {
    const machine = machineFor();
    machine.beginCancel({ requestedBy: 'ops', reason: 'pulled' });
    machine.applyCallAnswer({ status: 'completed', result: BUY });
    expect(machine.terminal).toBe(false);
    expect(machine.state.resource).toEqual({ mediaBuyId: 'mb_1' });
    machine.cancel(
      { requestedBy: 'ops', reason: 'pulled' },
      { notified: true, note: 'canceled at the seller', resource: { mediaBuyId: 'mb_1', state: 'canceled' } },
    );
    expect(machine.state.status).toBe('canceled');
    expect(machine.state.result).toEqual(BUY);
    expect(machine.state.cancellation?.resource?.state).toBe('canceled');
  });

  it('a cancel after the end changes no status and records what became of the buy', () => {
    const machine = machineFor();
    machine.applyCallAnswer({ status: 'completed', result: BUY });
    machine.cancel(
      { requestedBy: 'ops', reason: 'test' },
      { notified: true, note: 'canceled at seller', resource: { mediaBuyId: 'mb_1', state: 'canceled' } },
    );
    expect(machine.state.status).toBe('completed');
    expect(machine.state.cancellation?.resource).toEqual({ mediaBuyId: 'mb_1', state: 'canceled' });
  });

  it('canonical JSON ignores key order', () => {
    expect(canonicalJson({ b: 1, a: [{ y: 2, x: 1 }] })).toBe(canonicalJson({ a: [{ x: 1, y: 2 }], b: 1 }));
  });
});

// ---- randomized interleavings --------------------------------------------------------------------------------

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FINALS: TaskStatus[] = ['completed', 'failed', 'rejected', 'canceled'];
const PROGRESS: TaskStatus[] = ['submitted', 'working', 'input-required', 'unknown'];

interface World {
  taskId: string;
  final: TaskStatus;
  result: Record<string, unknown>;
}

/** One random event from the routes an operation's results take, true to the world or hostile to it. */
function randomEvent(random: () => number, world: World): { apply: (machine: Observations) => void; label: string } {
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  const truth = (): TaskSnapshot =>
    random() < 0.5
      ? { status: world.final, taskId: world.taskId, ...(world.final === 'completed' ? { result: world.result } : {}) }
      : { status: pick(PROGRESS), taskId: world.taskId };
  const hostile = (): TaskSnapshot => ({
    status: 'completed',
    taskId: `other-${Math.floor(random() * 3)}`,
    result: { media_buy_id: 'mb_stolen' },
  });
  const roll = random();
  if (roll < 0.15)
    return {
      label: 'call answer',
      apply: (machine) =>
        machine.applyCallAnswer(random() < 0.7 ? { status: 'submitted', taskId: world.taskId } : truth()),
    };
  if (roll < 0.45)
    return {
      label: 'webhook',
      apply: (machine) => machine.receiveWebhook(webhook(truth(), random() < 0.3 ? { operationId: OPERATION } : {})),
    };
  // A misroute can be told apart only by a fact: a 3.1 operation_id, or the task this operation is bound to. Before
  // either exists (no answer, no read, no operation_id) an authenticated webhook to our URL cannot be refuted.
  if (roll < 0.55) {
    return {
      label: 'misrouted webhook',
      apply: (machine) =>
        machine.receiveWebhook(
          webhook(
            hostile(),
            machine.state.taskId && random() < 0.5 ? {} : { operationId: 'adcp-create_media_buy-other' },
          ),
        ),
    };
  }
  if (roll < 0.75) return { label: 'read', apply: (machine) => machine.applyRead(truth()) };
  if (roll < 0.8) return { label: 'unconfirmed held', apply: (machine) => machine.acceptHeldUnconfirmed('no read') };
  if (roll < 0.85) return { label: 'settle provisional', apply: (machine) => machine.settleProvisional('no read') };
  if (roll < 0.88) return { label: 'adopt', apply: (machine) => machine.adopt(world.taskId, 'reconciliation') };
  if (roll < 0.9)
    return {
      label: 'cancel requested',
      apply: (machine) => machine.beginCancel({ requestedBy: 'ops', reason: 'r' }),
    };
  if (roll < 0.95)
    return {
      label: 'cancel',
      apply: (machine) => machine.cancel({ requestedBy: 'ops', reason: 'r' }, { notified: false, note: 'n' }),
    };
  return { label: 'timeout', apply: (machine) => machine.fail('timed_out', 'deadline') };
}

describe('operation state machine: randomized interleavings', () => {
  const RUNS = 3_000;

  it(`keeps its invariants over ${RUNS} seeded random interleavings of answers, webhooks, reads and cancels`, () => {
    for (let seed = 1; seed <= RUNS; seed += 1) {
      const random = mulberry32(seed);
      const world: World = {
        taskId: `t-${seed}`,
        final: FINALS[seed % FINALS.length]!,
        result: { media_buy_id: `mb-${seed}`, packages: [{ package_id: 'p1' }] },
      };
      const clock = { now: 1_000 };
      const machine = machineFor('create_media_buy', clock);
      let settled: { status: string; result: string } | undefined;
      const trail: string[] = [];
      const steps = 5 + Math.floor(random() * 25);
      for (let step = 0; step < steps; step += 1) {
        const event = randomEvent(random, world);
        trail.push(event.label);
        clock.now += 1 + Math.floor(random() * 1_000);
        event.apply(machine);
        const state = machine.state;
        const context = `seed ${seed}: ${trail.join(' → ')}`;
        // At most one terminal status, and it is never left.
        const terminalTransitions = state.transitions.filter(
          (t) => ['completed', 'failed', 'rejected', 'canceled'].includes(t.to) && t.from !== t.to,
        );
        if (terminalTransitions.length > 1) throw new Error(`two terminal transitions: ${context}`);
        if (settled) {
          if (state.status !== settled.status)
            throw new Error(`left terminal ${settled.status} for ${state.status}: ${context}`);
          if (canonicalJson(state.result ?? null) !== settled.result)
            throw new Error(`accepted terminal result changed: ${context}`);
        } else if (machine.terminal) {
          settled = { status: state.status, result: canonicalJson(state.result ?? null) };
        }
        // Nothing from another task or operation is ever applied.
        if (state.taskId !== undefined && state.taskId.startsWith('other-'))
          throw new Error(`bound a misrouted task: ${context}`);
        if (state.result?.media_buy_id === 'mb_stolen') throw new Error(`applied a misrouted result: ${context}`);
        // A completion of a create carries its buy, or says it is unconfirmed.
        if (state.status === 'completed' && state.result?.media_buy_id === undefined && state.outcome !== 'partial') {
          throw new Error(`completed create without media_buy_id marked ${state.outcome}: ${context}`);
        }
      }
    }
  });

  it('never chooses a new idempotency key unless the seller said IDEMPOTENCY_* and reconciliation found nothing', () => {
    const random = mulberry32(42);
    const codes = [
      'IDEMPOTENCY_CONFLICT',
      'IDEMPOTENCY_EXPIRED',
      'IDEMPOTENCY_IN_FLIGHT',
      'TIMEOUT',
      'SERVICE_UNAVAILABLE',
      'INVALID_REQUEST',
    ];
    const found = ['adopted', 'not_found', 'unsupported'] as const;
    for (let run = 0; run < 2_000; run += 1) {
      const machine = machineFor();
      if (random() < 0.3) machine.applyCallAnswer({ status: 'submitted', taskId: 't' });
      const error: AdcpError = {
        code: codes[Math.floor(random() * codes.length)]!,
        message: 'x',
        recovery: random() < 0.5 ? 'transient' : 'correctable',
      };
      const outcome = found[Math.floor(random() * found.length)]!;
      const generation = random() < 0.5 ? 0 : 1;
      const decision = machine.decideAfterReconciliation(error, outcome, generation);
      if (decision.action === 'rekey') {
        expect(['IDEMPOTENCY_CONFLICT', 'IDEMPOTENCY_EXPIRED']).toContain(error.code);
        expect(outcome).toBe('not_found');
        expect(generation).toBe(0);
        expect(machine.state.taskId).toBeUndefined();
      }
    }
  });
});

// ---- randomized interleavings through the step API ---------------------------------------------------------------

const ERRORS: AdcpError[] = [
  { code: 'TIMEOUT', message: 'no answer', recovery: 'transient' },
  { code: 'SERVICE_UNAVAILABLE', message: 'down', recovery: 'transient' },
  { code: 'IDEMPOTENCY_CONFLICT', message: 'key reused', recovery: 'correctable' },
  { code: 'IDEMPOTENCY_EXPIRED', message: 'key expired', recovery: 'correctable' },
  { code: 'INVALID_REQUEST', message: 'bad field', recovery: 'correctable' },
  { code: 'ANSWER_TOO_LARGE', message: '9 MB', recovery: 'terminal' },
];

/** What the invariants remember over one operation's runs (continue-as-new included). */
interface Watch {
  context: string;
  settled?: { status: string; result: string };
  cancelAsked: boolean;
  temporalCancelAsked: boolean;
  cancelsAtSeller: number;
  notified: Set<string>;
  planned: Set<string>;
  answeredRounds: Set<number>;
  pollCount: number;
  /** Reconcile requests (reconcileOperation) not answered yet. */
  reconcileTickets?: number[];
}

function fail(watch: Watch, what: string): never {
  throw new Error(`${what}: ${watch.context}`);
}

/** The facts a handler may record between steps: webhooks true or hostile, answers, refreshes, cancels, requests. */
function randomFacts(random: () => number, driven: Driven, world: World, watch: Watch, trail: string[]): void {
  const machine = driven.machine;
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  const truth = (): TaskSnapshot =>
    random() < 0.35
      ? { status: world.final, taskId: world.taskId, ...(world.final === 'completed' ? { result: world.result } : {}) }
      : { status: pick(PROGRESS), taskId: world.taskId, ...(random() < 0.3 ? { progress: { percentage: 10 } } : {}) };
  const count = random() < 0.6 ? 0 : random() < 0.7 ? 1 : 2;
  for (let index = 0; index < count; index += 1) {
    const roll = random();
    if (roll < 0.35) {
      trail.push('webhook');
      machine.receiveWebhook(webhook(truth(), random() < 0.2 ? { operationId: OPERATION } : {}));
    } else if (roll < 0.42) {
      trail.push('misrouted webhook');
      const hostile: TaskSnapshot = { status: 'completed', taskId: 'other-1', result: { media_buy_id: 'mb_stolen' } };
      machine.receiveWebhook(
        webhook(hostile, machine.state.taskId && random() < 0.5 ? {} : { operationId: 'adcp-create_media_buy-other' }),
      );
    } else if (roll < 0.55) {
      try {
        machine.validateInput({ input: { approved: true } });
      } catch {
        continue;
      }
      trail.push('answer');
      watch.answeredRounds.add(machine.provideInput({ input: { approved: true }, providedBy: 'ops' }).round);
    } else if (roll < 0.65) {
      try {
        machine.validateCredentialsRefresh({ refreshedBy: 'ops' });
      } catch {
        continue;
      }
      trail.push('credentials');
      machine.refreshCredentials({ refreshedBy: 'ops' });
    } else if (roll < 0.7) {
      try {
        machine.validateCancel({ requestedBy: 'ops', reason: 'pulled' });
      } catch {
        continue;
      }
      trail.push('cancel');
      machine.requestCancel({ requestedBy: 'ops', reason: 'pulled' });
      watch.cancelAsked = true;
    } else if (roll < 0.74) {
      trail.push('adopt');
      machine.requestAdoption({ taskId: world.taskId, requestedBy: 'reconciliation' });
    } else if (roll < 0.82) {
      trail.push('poll now');
      machine.requestPoll();
    } else if (roll < 0.84) {
      trail.push('temporal cancel');
      if (!machine.terminal) watch.cancelAsked = true;
      watch.temporalCancelAsked = true;
      machine.cancelledThroughTemporal();
    } else if (roll < 0.86) {
      trail.push('webhook verified as another seller');
      // The operation's own task and operation_id with another result: only the verifying seller tells it apart.
      const forged: TaskSnapshot = { status: 'completed', taskId: world.taskId, result: { media_buy_id: 'mb_stolen' } };
      machine.receiveWebhook(webhook(forged, { operationId: OPERATION, sellerId: 'another-seller' }));
    } else if (roll < 0.9) {
      trail.push('history long');
      driven.history.long = true;
    } else if (roll < 0.92) {
      let valid = true;
      try {
        machine.validateReconcile({ requestedBy: 'ops@buyer' });
      } catch {
        valid = false;
      }
      if (valid) {
        trail.push('reconcile requested');
        (watch.reconcileTickets ??= []).push(machine.requestReconcile({ requestedBy: 'ops@buyer' }));
      }
    } else if (roll < 0.97) {
      // The seller's task watcher: a move as its listing showed it (the operation reads it itself), or a hand-back.
      const kind = random();
      trail.push(kind < 0.8 ? 'watcher: moved' : 'watcher: released');
      const listed = truth();
      const base = { taskId: world.taskId, observedAt: new Date(0).toISOString(), watcherId: WATCHER };
      machine.receiveTaskNotice(
        kind < 0.8
          ? {
              ...base,
              kind: 'moved',
              eventKey: `watch:${listed.status}:${index}:${Math.floor(random() * 4)}`,
              listed: { status: listed.status },
            }
          : { ...base, kind: 'released', reason: 'the seller stopped listing it' },
      );
    }
  }
}

/** A random answer from the world for the step the machine asked for. */
function randomResult(
  random: () => number,
  driven: Driven,
  step: Step,
  world: World,
  watch: Watch,
  trail: string[],
): StepResult {
  const { machine, clock } = driven;
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  const snapshot = (): TaskSnapshot => {
    const roll = random();
    if (roll < 0.3)
      return {
        status: world.final,
        taskId: world.taskId,
        ...(world.final === 'completed' ? { result: world.result } : {}),
      };
    if (roll < 0.4) return { status: 'completed', taskId: world.taskId, result: { note: 'no buy named' } };
    // The seller's own records: its review, then an approval in its admin flow naming the buy it made.
    if (roll < 0.45) return { status: 'submitted', rawStatus: 'requires_approval', taskId: world.taskId };
    if (roll < 0.5 && typeof world.result.media_buy_id === 'string')
      return {
        status: 'completed',
        rawStatus: 'approved',
        taskId: world.taskId,
        objects: [{ type: 'media_buy', id: world.result.media_buy_id }],
      };
    return { status: pick([...PROGRESS, 'auth-required'] as const), taskId: world.taskId };
  };
  const error = () => pick(ERRORS);
  const temporalCancelNow = (): boolean => {
    if (step.shielded || random() > 0.02) return false;
    trail.push('temporal cancel (interrupts)');
    if (!machine.terminal) watch.cancelAsked = true;
    watch.temporalCancelAsked = true;
    return true;
  };
  switch (step.kind) {
    case 'planCall':
      return { kind: 'planned', plan: planFor(step.input) };
    case 'call': {
      randomFacts(random, driven, world, watch, trail);
      if (machine.wakes() && machine.woken() && random() < 0.8) return { kind: 'stopped' };
      // A final webhook held during the call: the machine may ask for a read beside it, which answers now or never.
      const beside = machine.besideCall();
      if (beside) {
        trail.push('read beside the call');
        const roll = random();
        if (roll < 0.5)
          machine.resolveBesideCall({ kind: 'read', outcome: { snapshot: snapshot(), readMethod: 'tasks/get' } });
        else if (roll < 0.7) machine.resolveBesideCall({ kind: 'failed', error: error() });
        if (machine.wakes() && machine.woken()) return { kind: 'stopped' };
      }
      if (random() < 0.25) return { kind: 'failed', error: error() };
      const answer = random() < 0.6 ? { status: 'submitted' as const, taskId: world.taskId } : snapshot();
      return { kind: 'answered', answer: { snapshot: answer, webhookRegistered: random() < 0.5 } };
    }
    case 'poll': {
      if (temporalCancelNow()) return { kind: 'interrupted' };
      const roll = random();
      if (roll < 0.6) return { kind: 'read', outcome: { snapshot: snapshot(), readMethod: 'tasks/get' } };
      if (roll < 0.8)
        return {
          kind: 'read',
          outcome: { readMethod: 'none', unreadable: { code: 'NOT_FOUND', message: 'not now', recovery: 'transient' } },
        };
      return { kind: 'failed', error: error() };
    }
    case 'pollOnCadence': {
      if (temporalCancelNow()) return { kind: 'interrupted' };
      randomFacts(random, driven, world, watch, trail);
      if (machine.wakes() && machine.woken()) return { kind: 'stopped' };
      const roll = random();
      if (roll < 0.5) {
        clock.now += Math.floor(random() * Math.min(step.budgetMs, 600_000));
        return { kind: 'moved', outcome: { snapshot: snapshot(), readMethod: 'tasks/get', polls: 1 } };
      }
      if (roll < 0.8) {
        clock.now += step.budgetMs - Math.floor(random() * 2) * Math.min(step.budgetMs, 30_000);
        return { kind: 'budgetRanOut', polls: 2 };
      }
      return { kind: 'failed', error: error() };
    }
    case 'wait': {
      if (temporalCancelNow()) return { kind: 'interrupted' };
      randomFacts(random, driven, world, watch, trail);
      if (machine.wakes()) return { kind: 'woke' };
      clock.now = Math.max(clock.now, step.untilMs);
      return { kind: 'timedOut' };
    }
    case 'reconcile': {
      const roll = random();
      if (roll < 0.3) return { kind: 'found', outcome: { supported: true, snapshot: snapshot(), note: 'found' } };
      if (roll < 0.6) return { kind: 'found', outcome: { supported: true, note: 'no task from that key' } };
      if (roll < 0.8) return { kind: 'found', outcome: { supported: false, note: 'no listing' } };
      return { kind: 'failed', error: error() };
    }
    case 'readResource': {
      if (temporalCancelNow()) return { kind: 'interrupted' };
      const roll = random();
      const mediaBuyId = String(world.result.media_buy_id ?? 'mb-none');
      if (roll < 0.4)
        return {
          kind: 'resource',
          outcome: {
            found: true,
            mediaBuyId,
            row: { media_buy_id: mediaBuyId, status: 'active', created_at: 'x' },
            ...(step.input.mediaBuyId ? {} : { matchedBy: pick(['context', 'po_number'] as const) }),
            shaping: [],
            note: 'found',
          },
        };
      if (roll < 0.55) return { kind: 'resource', outcome: { found: false, absent: true, shaping: [], note: 'none' } };
      if (roll < 0.65)
        return {
          kind: 'resource',
          outcome: { found: false, candidates: ['mb-a', 'mb-b'], shaping: [], note: 'two fit' },
        };
      if (roll < 0.8)
        return {
          kind: 'resource',
          outcome: {
            found: false,
            unreadable: { code: 'SERVICE_UNAVAILABLE', message: 'down', recovery: 'transient' },
            shaping: [],
            note: 'down',
          },
        };
      return { kind: 'failed', error: error() };
    }
    case 'cancelAtSeller':
      return random() < 0.7
        ? { kind: 'toldSeller', outcome: { notified: true, note: 'told' } }
        : { kind: 'failed', error: error() };
    case 'notify':
      return { kind: 'notified' };
    case 'registerWithWatcher':
      if (random() < 0.15) return { kind: 'failed', error: error() };
      return {
        kind: 'watchAnswered',
        outcome:
          random() < 0.7
            ? { watching: true, watcherId: WATCHER, safetyPollMs: 30 * 60_000 }
            : { watching: false, reason: 'no list_tasks' },
      };
    case 'unregisterFromWatcher':
      return { kind: 'watchLeft' };
    case 'continueAsNew':
    case 'end':
      throw new Error(`no result for ${step.kind}`);
  }
}

/** What must hold of every step the machine asks for. */
function checkStep(driven: Driven, step: Step, watch: Watch, terminalBefore: boolean): void {
  const { machine, clock } = driven;
  const state = machine.state;
  const deadline = Date.parse(state.deadline);
  if (terminalBefore && !['notify', 'end', 'cancelAtSeller', 'unregisterFromWatcher'].includes(step.kind))
    fail(watch, `a ${step.kind} step after the operation ended ${state.status}`);
  if (step.kind === 'cancelAtSeller') {
    watch.cancelsAtSeller += 1;
    if (!watch.cancelAsked) fail(watch, 'told the seller to cancel without a cancel');
    if (watch.cancelsAtSeller > 1) fail(watch, 'told the seller to cancel twice');
    if (terminalBefore && !state.resource?.mediaBuyId)
      fail(watch, 'a cancel at the seller after the end, no buy to cancel');
  }
  if ((step.kind === 'call' || step.kind === 'planCall') && watch.cancelAsked)
    fail(watch, `a ${step.kind} after a cancel`);
  if (watch.temporalCancelAsked && step.kind !== 'end' && !step.shielded && !terminalBefore && step.kind !== 'notify')
    fail(watch, `an unshielded ${step.kind} while the workflow is being canceled`);
  if (step.kind === 'wait' && !(Number.isFinite(step.untilMs) && step.untilMs <= deadline))
    fail(watch, `a wait until ${step.untilMs} past the deadline ${deadline}`);
  if (step.kind === 'pollOnCadence' && !(step.budgetMs > 0 && step.budgetMs <= deadline - clock.now))
    fail(watch, `polls with a budget of ${step.budgetMs} ms, ${deadline - clock.now} ms before the deadline`);
  if (step.kind === 'notify') {
    const key = step.notification.idempotency_key;
    if (watch.notified.has(key)) fail(watch, `notified ${key} twice`);
    watch.notified.add(key);
  }
  if (step.kind === 'planCall') {
    if (watch.planned.has(step.input.step)) fail(watch, `planned ${step.input.step} twice`);
    watch.planned.add(step.input.step);
  }
  if (step.kind === 'call') {
    const round = /^input-(\d+)/.exec(step.step)?.[1];
    if (round !== undefined && !watch.answeredRounds.has(Number(round)))
      fail(watch, `sent an answer to round ${round} nobody gave`);
  }
  if (step.kind === 'end') {
    if (!machine.terminal) fail(watch, `ended ${state.status}`);
    const failed = state.status === 'failed' || state.status === 'rejected';
    const canceled = state.status === 'canceled' && watch.temporalCancelAsked;
    const expected = failed ? 'fail' : canceled ? 'cancel' : 'return';
    if (step.how !== expected) fail(watch, `ended ${step.how} for ${state.status}`);
    if (watch.cancelAsked && !state.cancellation) fail(watch, 'a cancel left no record');
  }
  if (step.kind === 'readResource' && !step.input.mediaBuyId && !step.input.sent)
    fail(watch, 'a resource read with neither an id nor what the create sent');
  if (step.kind === 'continueAsNew' && (machine.terminal || watch.cancelAsked))
    fail(watch, 'continued as new after the end or a cancel');
  if (step.kind === 'continueAsNew' || step.kind === 'end') {
    // The workflow waits for its handlers before it ends or continues: every reconcile request has its answer.
    for (const ticket of watch.reconcileTickets ?? [])
      if (!machine.hasReconcileAnswer(ticket)) fail(watch, `reconcile request ${ticket} unanswered at ${step.kind}`);
    watch.reconcileTickets = [];
  }
}

/** The run continues as new: what arrives until then is carried, and a continued run carries the same again. */
function continueAsNew(random: () => number, driven: Driven, world: World, watch: Watch, trail: string[]): Driven {
  const { machine } = driven;
  const pending = [
    () => machine.receiveWebhook(webhook({ status: 'working', taskId: world.taskId })),
    () => machine.requestPoll(),
    () => machine.requestAdoption({ taskId: world.taskId, requestedBy: 'reconciliation' }),
  ];
  for (const fact of pending) if (random() < 0.5) fact();
  trail.push('carried');
  const carried = JSON.stringify(machine.carried());
  const continued = driven.continued();
  if (JSON.stringify(continued.machine.carried()) !== carried) fail(watch, 'continue-as-new lost something');
  continued.history.long = false;
  return continued;
}

/** What must hold of the state after every step and fact. */
function checkState(driven: Driven, watch: Watch): void {
  const { machine } = driven;
  const state = machine.state;
  if (watch.settled) {
    if (state.status !== watch.settled.status) fail(watch, `left terminal ${watch.settled.status} for ${state.status}`);
    if (canonicalJson(state.result ?? null) !== watch.settled.result) fail(watch, 'the accepted result changed');
  } else if (machine.terminal) {
    watch.settled = { status: state.status, result: canonicalJson(state.result ?? null) };
  }
  const terminalTransitions = state.transitions.filter(
    (t) => ['completed', 'failed', 'rejected', 'canceled'].includes(t.to) && t.from !== t.to,
  );
  if (terminalTransitions.length > 1) fail(watch, 'two terminal transitions');
  if (state.taskId?.startsWith('other-')) fail(watch, 'bound a misrouted task');
  if (state.result?.media_buy_id === 'mb_stolen') fail(watch, 'applied a misrouted result');
  if (state.pollCount < watch.pollCount) fail(watch, 'the poll count went down');
  // The resource is the truth: a completed create that knows its buy says so in its result, and a read of that same
  // buy is never a conflict.
  const buy = state.resource?.mediaBuyId;
  if (
    state.status === 'completed' &&
    state.task === 'create_media_buy' &&
    state.resource?.confirmedBy &&
    !state.cancellation
  )
    if (state.result?.media_buy_id !== buy)
      fail(watch, `completed knowing buy ${buy}, result names ${String(state.result?.media_buy_id)}`);
  if ((state.conflicts ?? []).some((conflict) => buy !== undefined && conflict.note.includes(`buy ${buy} is not`)))
    fail(watch, 'a read of its own buy recorded as a conflict');
  if (state.failure?.reason === 'call_failed' && state.resource?.state === 'unknown')
    fail(watch, 'failed call_failed while saying the seller may hold the buy');
  watch.pollCount = state.pollCount;
}

describe('operation machine: randomized steps', () => {
  const RUNS = 3_000;

  it(`keeps its invariants over ${RUNS} seeded random interleavings of facts and step results`, () => {
    const endings = new Map<string, number>();
    for (let seed = 1; seed <= RUNS; seed += 1) {
      const random = mulberry32(seed);
      const world: World = {
        taskId: `t-${seed}`,
        final: FINALS[seed % FINALS.length]!,
        result: { media_buy_id: `mb-${seed}`, packages: [{ package_id: 'p1' }] },
      };
      const read = random() < 0.25;
      const input = operationInput({
        ...(read ? { task: 'get_products', params: { brief: 'b' } } : {}),
        ...(random() < 0.5 ? { tenant: 'acme', notify: true } : {}),
        interaction: { deadlineMs: 3_600_000, maxRounds: 1 + Math.floor(random() * 3) },
        authDeadlineMs: 1_800_000,
        budgetMs: DAY,
      });
      let driven = drive(input, { now: 1_000 }, { long: false });
      const trail: string[] = [];
      const watch: Watch = {
        context: '',
        cancelAsked: false,
        temporalCancelAsked: false,
        cancelsAtSeller: 0,
        notified: new Set(),
        planned: new Set(),
        answeredRounds: new Set(),
        pollCount: 0,
      };
      let ended = false;
      for (let count = 0; count < 400 && !ended; count += 1) {
        watch.context = `seed ${seed}: ${trail.join(' → ')}`;
        // Past a few hundred steps, only time moves: the deadline must end it.
        if (count < 300) randomFacts(random, driven, world, watch, trail);
        else driven.clock.now += 3_600_000;
        checkState(driven, watch);
        const terminalBefore = driven.machine.terminal;
        const step = driven.machine.next();
        trail.push(
          step.kind === 'poll' ? `poll (${step.purpose})` : step.kind === 'wait' ? `wait (${step.for})` : step.kind,
        );
        watch.context = `seed ${seed}: ${trail.join(' → ')}`;
        checkStep(driven, step, watch, terminalBefore);
        if (step.kind === 'end') {
          ended = true;
          endings.set(
            `${driven.machine.state.status} ${step.how}`,
            (endings.get(`${driven.machine.state.status} ${step.how}`) ?? 0) + 1,
          );
          // The end is stable: asked again, the machine ends the same way.
          expect(driven.machine.next()).toEqual(step);
          break;
        }
        if (step.kind === 'continueAsNew') {
          driven = continueAsNew(random, driven, world, watch, trail);
          continue;
        }
        driven.machine.resolve(randomResult(random, driven, step, world, watch, trail));
        driven.clock.now += 1 + Math.floor(random() * 5_000);
        checkState(driven, watch);
      }
      if (!ended) fail(watch, 'did not end');
    }
    // Every way an operation ends was reached.
    expect([...endings.keys()].sort()).toEqual(
      expect.arrayContaining([
        'canceled cancel',
        'canceled return',
        'completed return',
        'failed fail',
        'rejected fail',
      ]),
    );
  });
});
