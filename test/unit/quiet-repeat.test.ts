/**
 * isQuietRepeat (workflows/operation/observations.ts): the webhooks an operation applies in its signal handler while
 * the polls of a wait run, without waking the wait. The promise it makes: applying such a webhook changes nothing a
 * wait, the search attributes or the memo depend on, so it issues no command wherever it is applied. Checked here on
 * the named cases and on thousands of seeded random webhooks against the state machine itself.
 */
import type { TaskSnapshot, TaskStatus } from '../../protocol';
import type { OperationState, OperationStatus, WebhookDelivery } from '../../contract/operation';
import { Observations, isQuietRepeat } from '../../workflows/operation/observations';

const OPERATION = 'adcp-create_media_buy-k1';
const TASK = 't1';

function parked(status: TaskStatus = 'submitted'): Observations {
  const state: OperationState = {
    operationId: OPERATION,
    sellerId: 'seller',
    task: 'create_media_buy',
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
  const machine = new Observations(state, {
    task: 'create_media_buy',
    deadlineMs: 86_400_000,
    interactionDeadlineMs: 3_600_000,
    authDeadlineMs: 3_600_000,
    now: () => 5_000,
  });
  machine.applyCallAnswer({ status, taskId: TASK });
  return machine;
}

let keys = 0;
function delivery(snapshot: TaskSnapshot, extra: Partial<WebhookDelivery> = {}): WebhookDelivery {
  keys += 1;
  return { eventKey: `k${keys}`, snapshot, receivedAt: new Date(0).toISOString(), ...extra };
}

const quiet = (machine: Observations, waitedOn: OperationStatus, webhook: WebhookDelivery) =>
  isQuietRepeat(machine.state, machine.terminal, waitedOn, webhook);

/** What the workflow publishes (search attributes, memo fingerprint) and what its waits decide on. */
function published(machine: Observations): string {
  const { state } = machine;
  return JSON.stringify([
    state.status,
    state.taskId ?? null,
    state.inputRequest ?? null,
    state.authRequired ?? null,
    state.provisional ?? null,
    state.failure ?? null,
    state.outcome ?? null,
    state.resource ?? null,
    state.cancellation ?? null,
    state.transitionCount,
    state.heldWebhooks ?? 0,
    state.webhooksRefused ?? 0,
    machine.terminal,
  ]);
}

describe('isQuietRepeat', () => {
  it('takes a repeat of the status waited on, with or without the task named, a message or progress', () => {
    const machine = parked('submitted');
    expect(quiet(machine, 'submitted', delivery({ status: 'submitted', taskId: TASK, message: 'queued' }))).toBe(true);
    expect(quiet(machine, 'submitted', delivery({ status: 'submitted', progress: { percentage: 10 } }))).toBe(true);
    expect(
      quiet(machine, 'submitted', delivery({ status: 'submitted', taskId: TASK }, { operationId: OPERATION })),
    ).toBe(true);
  });

  it('refuses anything that can move the wait or what is published', () => {
    const machine = parked('submitted');
    const cases: WebhookDelivery[] = [
      delivery({ status: 'working', taskId: TASK }), // a new status
      delivery({ status: 'completed', taskId: TASK, result: { media_buy_id: 'mb_1' } }), // final
      delivery({ status: 'completed', taskId: TASK, result: { status: 'submitted', task_id: TASK } }), // wrapped
      delivery({ status: 'submitted', taskId: 'other' }), // another task: refused by the machine
      delivery({ status: 'submitted', taskId: TASK }, { operationId: 'adcp-other' }), // another operation
      delivery({ status: 'submitted', taskId: TASK, result: { media_buy_id: 'mb_1' } }), // names the buy (memo)
    ];
    for (const webhook of cases) expect(quiet(machine, 'submitted', webhook)).toBe(false);
    // The status the polls wait on is no longer the operation's.
    expect(quiet(machine, 'working', delivery({ status: 'working', taskId: TASK }))).toBe(false);
  });

  it('refuses when no task is bound (webhooks are held then), after the end, and while a completion is provisional', () => {
    const unbound = parked('submitted');
    unbound.state.taskId = undefined;
    expect(quiet(unbound, 'submitted', delivery({ status: 'submitted' }))).toBe(false);

    const ended = parked('submitted');
    ended.receiveWebhook(delivery({ status: 'failed', taskId: TASK }));
    expect(ended.terminal).toBe(true);
    expect(quiet(ended, 'failed', delivery({ status: 'failed', taskId: TASK }))).toBe(false);

    const provisional = parked('submitted');
    provisional.receiveWebhook(delivery({ status: 'completed', taskId: TASK })); // create without media_buy_id
    expect(provisional.state.provisional).toBeDefined();
    expect(quiet(provisional, 'submitted', delivery({ status: 'submitted', taskId: TASK }))).toBe(false);
  });

  it('never takes a question or an authentication request, even repeated', () => {
    const asking = parked('input-required');
    expect(quiet(asking, 'input-required', delivery({ status: 'input-required', taskId: TASK }))).toBe(false);
    const auth = parked('auth-required');
    expect(quiet(auth, 'auth-required', delivery({ status: 'auth-required', taskId: TASK }))).toBe(false);
  });

  it('on seeded random webhooks: every one it takes leaves what is published as it was, and is applied', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
    const statuses: TaskStatus[] = [
      'submitted',
      'working',
      'input-required',
      'auth-required',
      'completed',
      'failed',
      'rejected',
      'canceled',
      'unknown',
    ];
    let taken = 0;
    for (let round = 0; round < 3_000; round++) {
      const machine = parked(pick(['submitted', 'working', 'unknown'] as const));
      const waitedOn = machine.state.status;
      const snapshot: TaskSnapshot = {
        status: random() < 0.6 ? (waitedOn as TaskStatus) : pick(statuses),
        ...(random() < 0.7 ? { taskId: pick([TASK, TASK, 'other', '']) } : {}),
        ...(random() < 0.5 ? { message: `m${round}` } : {}),
        ...(random() < 0.3 ? { progress: { percentage: Math.floor(random() * 100) } } : {}),
        ...(random() < 0.2
          ? { result: pick([{ media_buy_id: 'mb_9' }, { note: 'x' }, { status: 'working', task_id: TASK }]) }
          : {}),
        ...(random() < 0.2 ? { updatedAt: new Date(random() < 0.5 ? 0 : 9_000).toISOString() } : {}),
      };
      const webhook = delivery(snapshot, random() < 0.2 ? { operationId: pick([OPERATION, 'adcp-other']) } : {});
      if (!quiet(machine, waitedOn, webhook)) continue;
      taken += 1;
      const before = published(machine);
      const applied = machine.state.webhooksApplied;
      const verdict = machine.receiveWebhook(webhook);
      expect(['applied', 'stale']).toContain(verdict);
      expect(machine.state.webhooksApplied).toBe(applied + 1);
      expect(published(machine)).toBe(before);
    }
    expect(taken).toBeGreaterThan(300);
  });
});
