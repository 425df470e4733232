/**
 * The operation machine's steps, without a server: what it asks the workflow to do next, for the paths an operation
 * takes (sync answer, polls, webhooks, questions, credentials, cancels, the deadline, lost answers, continue-as-new).
 * The randomized interleavings of the same API are in operation-state.test.ts.
 */
import {
  BUY,
  DAY,
  OPERATION,
  answered,
  callWith,
  drive,
  expectStep,
  moved,
  operationInput,
  planFor,
  read,
  webhook,
} from '../harness/operation-machine';

describe('operation machine: what next', () => {
  it('a synchronous read is one local call, then the end', () => {
    const { machine } = drive(operationInput({ task: 'get_products', params: { brief: 'b' } }));
    const call = expectStep(machine, 'call');
    expect(call).toMatchObject({
      step: 'call',
      local: true,
      send: { planInput: { step: 'call', params: { brief: 'b' } } },
    });
    machine.resolve(answered({ status: 'completed', result: { products: [] } }));
    expect(machine.next()).toEqual({ kind: 'end', how: 'return', message: 'get_products at seller completed' });
    expect(machine.state.status).toBe('completed');
  });

  it('a mutation is planned once, called with its plan, then parked on the cadence until the task moves', () => {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    expect(plan.input).toMatchObject({ operationId: OPERATION, step: 'call' });
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    const call = expectStep(machine, 'call');
    expect(call).toMatchObject({ local: false, send: { plan: { step: 'call' } } });
    expect(machine.state.callInFlight?.step).toBe('call');
    machine.resolve(answered({ status: 'submitted', taskId: 't1' }));
    // Its quick polls first (2 to 62 s): a task that moves within them never involves the seller's task watcher.
    const polls = expectStep(machine, 'pollOnCadence');
    expect(polls).toMatchObject({
      until: 'quick-polls',
      plan: { firstPollAfterMs: 2_000, maxIntervalMs: 60_000 },
      input: { taskId: 't1', since: { status: 'submitted', progress: null }, account: { account_id: 'acc_1' } },
    });
    expect(polls.budgetMs).toBe(92_000);
    machine.resolve(moved({ status: 'completed', taskId: 't1', result: BUY }, 3));
    expect(machine.state).toMatchObject({ status: 'completed', pollCount: 3, readMethod: 'tasks/get' });
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
  });

  it('a call that names its task an MCP task: the reads of that task say so (MCP tasks/get first), and survive continue-as-new', () => {
    const driven = drive();
    const { machine } = driven;
    callWith(machine, {
      kind: 'answered',
      answer: { snapshot: { status: 'working', taskId: 'mcp-1' }, webhookRegistered: false, mcpTaskId: 'mcp-1' },
    });
    expect(machine.state.mcpTaskId).toBe('mcp-1');
    expect(expectStep(machine, 'pollOnCadence').input).toMatchObject({ taskId: 'mcp-1', mcpTask: true });
    const continued = driven.continued().machine;
    expect(continued.state.mcpTaskId).toBe('mcp-1');
  });

  it('a call that does not name its task an MCP task: its reads do not say so', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'working', taskId: 't1' }));
    expect(machine.state.mcpTaskId).toBeUndefined();
    expect(expectStep(machine, 'pollOnCadence').input.mcpTask).toBeUndefined();
  });

  it('working polls every few seconds for its window, then falls back to the submitted cadence', () => {
    const { machine, clock } = drive();
    callWith(machine, answered({ status: 'working', taskId: 't1' }));
    const first = expectStep(machine, 'pollOnCadence');
    expect(first).toMatchObject({ until: 'working-window', budgetMs: 120_000, plan: { maxIntervalMs: 5_000 } });
    clock.now += 120_000;
    machine.resolve({ kind: 'budgetRanOut', polls: 24 });
    expect(expectStep(machine, 'pollOnCadence')).toMatchObject({ until: 'deadline', plan: { maxIntervalMs: 60_000 } });
  });

  it('a webhook repeating the status the polls wait on is applied at once; a new status wakes them and stops them', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }, true));
    expectStep(machine, 'pollOnCadence');
    expect(machine.receiveWebhook(webhook({ status: 'submitted', taskId: 't1', message: 'queued' }))).toBe('applied');
    expect(machine.wakes()).toBe(false);
    expect(machine.state.message).toBe('queued');
    const progress = webhook({ status: 'working', taskId: 't1', progress: { percentage: 40 } });
    expect(machine.receiveWebhook(progress)).toBe('queued');
    expect(machine.receiveWebhook(progress)).toBe('duplicate');
    expect(machine.wakes()).toBe(true);
    expect(machine.woken()).toBe(true);
    machine.resolve({ kind: 'stopped' });
    expect(machine.state.status).toBe('working');
    expect(expectStep(machine, 'pollOnCadence').plan.maxIntervalMs).toBe(5_000);
  });

  it('the polls go on through a progress report of the status they wait on', () => {
    const { machine, history } = drive();
    callWith(machine, answered({ status: 'working', taskId: 't1' }));
    expectStep(machine, 'pollOnCadence');
    // Progress on a working task is a quiet repeat; one with another task's ID (refused) wakes and is applied.
    machine.receiveWebhook(webhook({ status: 'working', taskId: 'other' }));
    expect(machine.woken()).toBe(false);
    expect(machine.state.webhooksRefused).toBe(1);
    history.long = true;
    machine.receiveWebhook(webhook({ status: 'working', taskId: 't1', progress: { percentage: 50 } }));
    // History is long: the polls stop so the run can continue as new.
    expect(machine.woken()).toBe(true);
    machine.resolve({ kind: 'stopped' });
    expect(machine.next()).toEqual({ kind: 'continueAsNew' });
  });

  it('the deadline: the polls end at it, one last poll, then timed out with the last status', () => {
    const { machine, clock } = drive();
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
    expect(expectStep(machine, 'pollOnCadence').until).toBe('quick-polls');
    clock.now += 92_000;
    machine.resolve({ kind: 'budgetRanOut', polls: 5 });
    // The seller cannot list its tasks (the harness declines the registration): its own cadence to the deadline.
    expect(expectStep(machine, 'pollOnCadence')).toMatchObject({
      until: 'deadline',
      plan: { firstPollAfterMs: 30_000, initialIntervalMs: 60_000 },
    });
    // The server ended the polls early: the next poll would have come after the deadline.
    clock.now = 1_000 + DAY - 30_000;
    machine.resolve({ kind: 'budgetRanOut', polls: 1_400 });
    const pause = expectStep(machine, 'wait');
    expect(pause).toEqual({ kind: 'wait', for: 'seller', untilMs: 1_000 + DAY });
    clock.now = pause.untilMs;
    machine.resolve({ kind: 'timedOut' });
    expect(expectStep(machine, 'poll').purpose).toBe('last-before-deadline');
    machine.resolve(read({ status: 'submitted', taskId: 't1' }));
    expect(machine.state.failure?.reason).toBe('timed_out');
    expect(machine.state.failure?.message).toContain('last status submitted');
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'fail' });
  });

  it('input-required: the buyer is notified, the answer resumes the task on its own planned step', () => {
    const { machine } = drive(operationInput({ tenant: 'acme', notify: true }));
    callWith(machine, answered({ status: 'input-required', taskId: 't1', result: { reason: 'APPROVAL_REQUIRED' } }));
    const notify = expectStep(machine, 'notify');
    expect(notify.shielded).toBe(true);
    expect(notify.notification).toMatchObject({
      event: 'input_required',
      idempotency_key: `${OPERATION}:input_required:1`,
      input_request: { reason: 'APPROVAL_REQUIRED', round: 1 },
    });
    machine.resolve({ kind: 'notified' });
    const wait = expectStep(machine, 'wait');
    expect(wait.for).toBe('input');
    expect(() => machine.validateInput({ input: {} })).toThrow(/must not be empty/);
    machine.validateInput({ input: { approved: true } });
    expect(machine.provideInput({ input: { approved: true }, providedBy: 'ops' }, 'update-1')).toEqual({
      accepted: true,
      round: 1,
    });
    expect(() => machine.validateInput({ input: { approved: true } })).toThrow(/already being sent/);
    expect(machine.wakes()).toBe(true);
    machine.resolve({ kind: 'woke' });
    const plan = expectStep(machine, 'planCall');
    expect(plan.input).toMatchObject({ step: 'input-1', taskId: 't1', params: { approved: true } });
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.resolve(answered({ status: 'completed', taskId: 't1', result: BUY }));
    expect(expectStep(machine, 'notify').notification).toMatchObject({
      event: 'completed',
      resource: { media_buy_id: 'mb_1' },
    });
    machine.resolve({ kind: 'notified' });
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
  });

  it('input-required with no answer by its deadline fails input_timed_out; past the round limit, rounds exhausted', () => {
    const timedOut = drive(operationInput({ interaction: { deadlineMs: 60_000 } }));
    callWith(timedOut.machine, answered({ status: 'input-required', taskId: 't1' }));
    const wait = expectStep(timedOut.machine, 'wait');
    expect(wait.untilMs).toBe(timedOut.clock.now + 60_000);
    timedOut.clock.now = wait.untilMs;
    timedOut.machine.resolve({ kind: 'timedOut' });
    expect(timedOut.machine.state.failure?.reason).toBe('input_timed_out');

    const rounds = drive(operationInput({ interaction: { maxRounds: 1 } }));
    callWith(rounds.machine, answered({ status: 'input-required', taskId: 't1' }));
    expectStep(rounds.machine, 'wait');
    rounds.machine.provideInput({ input: { approved: true } });
    rounds.machine.resolve({ kind: 'woke' });
    callWith(rounds.machine, answered({ status: 'submitted', taskId: 't1' }));
    expectStep(rounds.machine, 'pollOnCadence');
    rounds.machine.resolve(moved({ status: 'input-required', taskId: 't1' }));
    expect(rounds.machine.next()).toMatchObject({ kind: 'end', how: 'fail' });
    expect(rounds.machine.state.failure?.reason).toBe('input_rounds_exhausted');
  });

  it('an answer the seller no longer waits for is not sent to its next question', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'working', taskId: 't1' }));
    expectStep(machine, 'pollOnCadence');
    machine.resolve(moved({ status: 'input-required', taskId: 't1' }));
    expectStep(machine, 'wait');
    machine.provideInput({ input: { approved: true } });
    // The seller moved on before the answer could be sent (approved elsewhere).
    machine.receiveWebhook(webhook({ status: 'working', taskId: 't1' }));
    machine.resolve({ kind: 'woke' });
    expectStep(machine, 'pollOnCadence');
    machine.resolve(moved({ status: 'input-required', taskId: 't1' }));
    expect(machine.state.inputRequest?.round).toBe(2);
    expect(expectStep(machine, 'wait').for).toBe('input');
    expect(machine.state.anomalies.map((a) => a.note).join(' ')).toMatch(/answer to round 1 was not sent/);
  });

  it('auth-required waits for refreshed credentials, then reads the task; without a refresh, auth_timed_out', () => {
    const { machine, clock } = drive();
    callWith(machine, answered({ status: 'auth-required', taskId: 't1' }));
    expectStep(machine, 'wait');
    expect(() => machine.validateCredentialsRefresh({ refreshedBy: '' })).toThrow(/refreshedBy/);
    machine.refreshCredentials({ refreshedBy: 'ops', principal: 'acme/ops' });
    machine.resolve({ kind: 'woke' });
    expect(expectStep(machine, 'poll').purpose).toBe('credentials');
    machine.resolve(read({ status: 'auth-required', taskId: 't1' }));
    const wait = expectStep(machine, 'wait');
    clock.now = wait.untilMs;
    machine.resolve({ kind: 'timedOut' });
    expect(machine.state.failure?.reason).toBe('auth_timed_out');
    expect(machine.state.audit?.map((entry) => entry.action)).toEqual(['credentials_refreshed']);
  });

  it('a cancel during the call waits for its answer, then cancels the buy it made at the seller', () => {
    const { machine } = drive(operationInput({ tenant: 'acme', notify: true }));
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.validateCancel({ requestedBy: 'ops', reason: 'pulled' });
    machine.requestCancel({ requestedBy: 'ops', reason: 'pulled', principal: 'acme/ops' });
    // A cancel never stops the call in flight.
    expect(machine.wakes()).toBe(false);
    machine.resolve(answered({ status: 'completed', taskId: 't1', result: BUY }));
    expect(machine.terminal).toBe(false);
    const cancel = expectStep(machine, 'cancelAtSeller');
    expect(cancel).toMatchObject({ shielded: true, input: { taskId: 't1', mediaBuyId: 'mb_1' } });
    machine.resolve({
      kind: 'toldSeller',
      outcome: { notified: true, note: 'canceled', resource: { mediaBuyId: 'mb_1', state: 'canceled' } },
    });
    expect(machine.state).toMatchObject({
      status: 'canceled',
      cancellation: { requestedBy: 'ops', principal: 'acme/ops', resource: { state: 'canceled' } },
    });
    // Canceled operations are not notified; canceled by update only, the workflow returns its state.
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
  });

  it('a cancel before the first call: no call is made', () => {
    const { machine } = drive();
    machine.requestCancel({ requestedBy: 'ops', reason: 'changed my mind' });
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
    expect(machine.state.cancellation?.sellerNote).toBe('no seller task existed yet');
  });

  it('a cancel through Temporal while parked interrupts the wait; the seller is told, shielded; the workflow ends canceled', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
    expectStep(machine, 'pollOnCadence');
    machine.resolve({ kind: 'interrupted' });
    const cancel = expectStep(machine, 'cancelAtSeller');
    expect(cancel.shielded).toBe(true);
    machine.resolve({ kind: 'failed', error: { code: 'TIMEOUT', message: 'no answer', recovery: 'transient' } });
    expect(machine.state.cancellation).toMatchObject({ requestedBy: 'temporal', sellerNotified: false });
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'cancel' });
  });

  it('a cancel through Temporal during the call: the answer is awaited, then what it started finishes shielded', () => {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.cancelledThroughTemporal();
    machine.resolve({ kind: 'failed', error: { code: 'IDEMPOTENCY_CONFLICT', message: 'x', recovery: 'correctable' } });
    const reconcile = expectStep(machine, 'reconcile');
    expect(reconcile.shielded).toBe(true);
    machine.resolve({ kind: 'found', outcome: { supported: true, note: 'nothing' } });
    // No new key after a cancel: the operation fails, then the cancel is recorded.
    expect(machine.state.failure?.reason).toBe('call_failed');
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'fail' });
  });

  it('a lost answer refused with IDEMPOTENCY_CONFLICT: reconciliation finds nothing, one new key', () => {
    const { machine } = drive();
    callWith(machine, {
      kind: 'failed',
      error: { code: 'IDEMPOTENCY_CONFLICT', message: 'x', recovery: 'correctable' },
    });
    expect(expectStep(machine, 'reconcile').input.step).toBe('call');
    machine.resolve({ kind: 'found', outcome: { supported: true, note: 'no task from that key' } });
    const replan = expectStep(machine, 'planCall');
    expect(replan.input.step).toBe('call#1');
    machine.resolve({ kind: 'planned', plan: planFor(replan.input) });
    expectStep(machine, 'call');
    machine.resolve(answered({ status: 'completed', taskId: 't2', result: BUY }));
    expect(machine.state.reconciliation?.[0]).toMatchObject({ outcome: 'not_found' });
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
  });

  it('a lost answer after a final webhook named the task: it completes with that result, nothing more to read', () => {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.receiveWebhook(webhook({ status: 'completed', taskId: 't1', result: BUY }));
    expect(machine.woken()).toBe(false);
    expect(machine.state.heldWebhooks).toBe(1);
    machine.resolve({ kind: 'failed', error: { code: 'TIMEOUT', message: 'lost', recovery: 'transient' } });
    // The task the webhook names is adopted and its held webhook applied: completed, nothing more to read.
    expect(machine.state).toMatchObject({ status: 'completed', taskId: 't1', result: BUY, heldWebhooks: 0 });
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
  });

  it('a lost answer after a webhook named the task: a read of that task confirms the held webhook', () => {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.receiveWebhook(webhook({ status: 'working', taskId: 't1' }));
    machine.woken();
    machine.resolve({ kind: 'failed', error: { code: 'TIMEOUT', message: 'lost', recovery: 'transient' } });
    expect(expectStep(machine, 'poll')).toMatchObject({ purpose: 'confirm-held', input: { taskId: 't1' } });
    machine.resolve(read({ status: 'completed', taskId: 't1', result: BUY }));
    expect(machine.state.status).toBe('completed');
  });

  it('held webhooks that name no task are applied unconfirmed, not held for ever', () => {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.receiveWebhook(webhook({ status: 'working' }));
    machine.resolve({ kind: 'failed', error: { code: 'TIMEOUT', message: 'lost', recovery: 'transient' } });
    expect(machine.state.status).toBe('working');
    expect(machine.state.heldWebhooks).toBe(0);
    // No task to poll: only a webhook, an adoption, a poll request or a cancel can move it now.
    expect(expectStep(machine, 'wait')).toMatchObject({ for: 'seller' });
  });

  it('an adoption during the call stops it and reads the adopted task', () => {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.requestAdoption({ taskId: 't9', requestedBy: 'reconciliation' });
    expect(machine.wakes()).toBe(true);
    expect(machine.woken()).toBe(true);
    machine.resolve({ kind: 'stopped' });
    expect(expectStep(machine, 'poll')).toMatchObject({ purpose: 'adopted', input: { taskId: 't9' } });
    expect(machine.state.reconciliation?.[0]).toMatchObject({ outcome: 'adopted', taskId: 't9' });
  });

  it('a final webhook during the call stops it: its answer adds nothing', () => {
    const { machine } = drive();
    const plan = expectStep(machine, 'planCall');
    machine.resolve({ kind: 'planned', plan: planFor(plan.input) });
    expectStep(machine, 'call');
    machine.receiveWebhook(webhook({ status: 'completed', taskId: 't1', result: BUY }, { operationId: OPERATION }));
    expect(machine.woken()).toBe(true);
    machine.resolve({ kind: 'stopped' });
    expect(machine.state.transitions.at(-1)?.note).toMatch(/stopped: the operation already ended completed/);
    expect(machine.next()).toMatchObject({ kind: 'end', how: 'return' });
  });

  it('a completion without its media_buy_id is read to be confirmed before it is believed', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'completed', taskId: 't1', result: { note: 'done' } }));
    expect(machine.terminal).toBe(false);
    expect(expectStep(machine, 'poll').purpose).toBe('confirm-provisional');
    machine.resolve(read({ status: 'completed', taskId: 't1', result: BUY }));
    expect(machine.state).toMatchObject({ status: 'completed', result: BUY });
  });

  it('a poll asked for is made at once; an answer too large fails the operation', () => {
    const { machine } = drive();
    callWith(machine, answered({ status: 'submitted', taskId: 't1' }));
    expectStep(machine, 'pollOnCadence');
    machine.requestPoll();
    expect(machine.wakes()).toBe(true);
    expect(machine.woken()).toBe(true);
    machine.resolve({ kind: 'stopped' });
    expect(expectStep(machine, 'poll').purpose).toBe('requested');

    const large = drive(operationInput({ task: 'get_products', params: {} }));
    callWith(large.machine, {
      kind: 'failed',
      error: { code: 'ANSWER_TOO_LARGE', message: '9 MB', recovery: 'terminal' },
    });
    expect(large.machine.state.failure?.reason).toBe('answer_too_large');
  });

  it('continue-as-new carries everything: a continued machine carries the same again and goes on', () => {
    const { machine, history, continued } = drive(operationInput({ tenant: 'acme', notify: true }));
    callWith(machine, answered({ status: 'input-required', taskId: 't1' }));
    expectStep(machine, 'notify');
    machine.resolve({ kind: 'notified' });
    expectStep(machine, 'wait');
    machine.receiveWebhook(webhook({ status: 'input-required', taskId: 't1' }));
    machine.provideInput({ input: { approved: true } });
    machine.requestPoll();
    machine.resolve({ kind: 'woke' });
    history.long = true;
    expectStep(machine, 'poll');
    machine.resolve(read({ status: 'input-required', taskId: 't1' }));
    expect(machine.next()).toEqual({ kind: 'continueAsNew' });
    const next = continued();
    expect(JSON.parse(JSON.stringify(next.machine.carried()))).toEqual(JSON.parse(JSON.stringify(machine.carried())));
    history.long = false;
    // The answer carried over is sent in the new run; the input_required notification is not sent again.
    expect(expectStep(next.machine, 'planCall').input.step).toBe('input-1');
  });

  it('asks for one step at a time, and refuses a result for a step it did not ask for', () => {
    const { machine } = drive();
    expectStep(machine, 'planCall');
    expect(() => machine.next()).toThrow(/has not been resolved/);
    expect(() => machine.resolve(answered({ status: 'submitted' }))).toThrow(/result answered for a planCall step/);
  });
});
