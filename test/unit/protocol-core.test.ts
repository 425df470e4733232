import { idempotencyKeyFor } from '../../activities/idempotency';
import {
  TASK_STATUSES,
  assessCompletion,
  isTerminal,
  normaliseProgress,
  normaliseStatus,
  snapshotFromA2A,
  snapshotFromMcpToolResult,
  snapshotFromTasksGet,
  taskSpec,
  ProtocolViolation,
} from '../../protocol';
import { pollOffsets, planWait } from '../../workflows/operation/cadence';

describe('status', () => {
  test.each(TASK_STATUSES.map((s) => [s]))('%s is its own normal form', (status) => {
    expect(normaliseStatus(status)).toBe(status);
  });
  test.each([
    ['input_required', 'input-required'],
    ['pending_approval', 'submitted'],
    ['auth_required', 'auth-required'],
    [' Completed ', 'completed'],
  ])('alias %s -> %s', (raw, status) => expect(normaliseStatus(raw)).toBe(status));
  test('unknown strings and non-strings are not guessed', () => {
    expect(normaliseStatus('done')).toBeUndefined();
    expect(normaliseStatus(3)).toBeUndefined();
  });
  test('terminal: completed, failed, canceled, rejected', () => {
    expect(TASK_STATUSES.filter(isTerminal)).toEqual(['completed', 'failed', 'canceled', 'rejected']);
  });
});

describe('task catalog', () => {
  test('mutations carry idempotency keys; reads do not', () => {
    expect(taskSpec('create_media_buy')).toMatchObject({
      mutating: true,
      pushNotifications: true,
      defaultBudgetMs: 24 * 3600_000,
    });
    expect(taskSpec('update_media_buy').defaultBudgetMs).toBe(12 * 3600_000);
    expect(taskSpec('sync_creatives').defaultBudgetMs).toBe(48 * 3600_000);
    expect(taskSpec('get_products').mutating).toBe(false);
  });
  test('an unknown task is treated as a mutation (safe side)', () => {
    expect(taskSpec('brand_new_task').mutating).toBe(true);
  });
});

describe('idempotency keys', () => {
  test('stable per operation and step, distinct across them, UUID-shaped', () => {
    const a = idempotencyKeyFor('adcp-create_media_buy-po-1', 'call');
    expect(idempotencyKeyFor('adcp-create_media_buy-po-1', 'call')).toBe(a);
    expect(idempotencyKeyFor('adcp-create_media_buy-po-1', 'input-1')).not.toBe(a);
    expect(idempotencyKeyFor('adcp-create_media_buy-po-2', 'call')).not.toBe(a);
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(a).toMatch(/^[A-Za-z0-9_.:-]{16,255}$/);
  });
});

describe('progress spellings', () => {
  test.each([
    [
      { percentage: 40, current_step: 'review', total_steps: 5, step_number: 2 },
      { percentage: 40, currentStep: 'review', totalSteps: 5, stepNumber: 2 },
    ],
    [
      { progress: 75, step: 'trafficking' },
      { percentage: 75, currentStep: 'trafficking' },
    ],
    [{ progress: { percentage: 10 } }, { percentage: 10 }],
    [
      { total_steps: 4, step_number: 1 },
      { percentage: 25, totalSteps: 4, stepNumber: 1 },
    ],
  ])('%j', (payload, expected) => expect(normaliseProgress(payload)).toEqual(expected));
  test('nothing to read gives undefined', () => expect(normaliseProgress({ media_buy_id: 'x' })).toBeUndefined());
});

describe('snapshots', () => {
  test('MCP submitted answer', () => {
    const snapshot = snapshotFromMcpToolResult({
      content: [{ type: 'text', text: 'Task t submitted' }],
      structuredContent: { status: 'submitted', task_id: 'task_1', replayed: true },
    });
    expect(snapshot).toEqual({ status: 'submitted', taskId: 'task_1', message: 'Task t submitted', replayed: true });
  });
  test('MCP synchronous payload without status is completed, payload kept', () => {
    const snapshot = snapshotFromMcpToolResult({ content: [], structuredContent: { products: [{ product_id: 'p' }] } });
    expect(snapshot.status).toBe('completed');
    expect(snapshot.result).toEqual({ products: [{ product_id: 'p' }] });
  });
  test('a synchronous 3.x create_media_buy answers the media buy status: the task is completed, that status kept', () => {
    const snapshot = snapshotFromMcpToolResult({
      content: [],
      structuredContent: { media_buy_id: 'mb_1', status: 'pending_creatives', packages: [] },
    });
    expect(snapshot.status).toBe('completed');
    expect(snapshot.rawStatus).toBeUndefined();
    expect(snapshot.result).toEqual({ media_buy_id: 'mb_1', status: 'pending_creatives', packages: [] });
  });
  test('an unrecognised status on a task (with task_id) stays unknown', () => {
    const snapshot = snapshotFromMcpToolResult({ content: [], structuredContent: { task_id: 't1', status: 'queued' } });
    expect(snapshot).toMatchObject({ status: 'unknown', rawStatus: 'queued', taskId: 't1' });
  });
  test('MCP isError with adcp_error keeps code, field and suggestion', () => {
    const text = JSON.stringify({
      adcp_error: {
        code: 'VALIDATION_ERROR',
        message: 'bad',
        recovery: 'correctable',
        field: '/packages/0/budget',
        suggestion: 'raise it',
      },
    });
    const snapshot = snapshotFromMcpToolResult({ isError: true, content: [{ type: 'text', text }] });
    expect(snapshot.status).toBe('failed');
    expect(snapshot.errors?.[0]).toMatchObject({
      code: 'VALIDATION_ERROR',
      recovery: 'correctable',
      field: '/packages/0/budget',
      suggestion: 'raise it',
    });
  });
  test('an answer with neither structured content nor JSON breaks the protocol', () => {
    expect(() => snapshotFromMcpToolResult({ content: [{ type: 'text', text: 'hello' }] })).toThrow(ProtocolViolation);
    expect(() => snapshotFromMcpToolResult('nope')).toThrow(ProtocolViolation);
  });
  test('an unrecognised status is unknown, with the raw value kept', () => {
    expect(snapshotFromMcpToolResult({ structuredContent: { status: 'pondering', task_id: 't' } })).toMatchObject({
      status: 'unknown',
      rawStatus: 'pondering',
    });
  });
  test('tasks/get with result (3.0.6 peers)', () => {
    const snapshot = snapshotFromTasksGet({
      task_id: 't',
      status: 'completed',
      updated_at: '2026-01-01T00:00:00Z',
      result: { media_buy_id: 'ord_1' },
    });
    expect(snapshot).toMatchObject({
      status: 'completed',
      taskId: 't',
      result: { media_buy_id: 'ord_1' },
      updatedAt: '2026-01-01T00:00:00Z',
    });
  });
  test('tasks/get with progress and an error object', () => {
    const working = snapshotFromTasksGet({
      task_id: 't',
      status: 'working',
      progress: { percentage: 30, current_step: 'x' },
    });
    expect(working.progress).toEqual({ percentage: 30, currentStep: 'x' });
    const failed = snapshotFromTasksGet({
      task_id: 't',
      status: 'failed',
      error: { code: 'POLICY_VIOLATION', message: 'no' },
    });
    expect(failed.errors?.[0]).toMatchObject({ code: 'POLICY_VIOLATION', recovery: 'correctable' });
  });
  test('A2A Task: the last DataPart of the artifacts wins', () => {
    const snapshot = snapshotFromA2A({
      kind: 'task',
      id: 'a2a-1',
      contextId: 'ctx',
      status: { state: 'completed', timestamp: '2026-01-01T00:00:00Z' },
      artifacts: [
        {
          parts: [
            { kind: 'data', data: { media_buy_id: 'old' } },
            { kind: 'text', text: 'done' },
            { kind: 'data', data: { media_buy_id: 'new' } },
          ],
        },
      ],
    });
    expect(snapshot).toMatchObject({
      status: 'completed',
      taskId: 'a2a-1',
      contextId: 'ctx',
      result: { media_buy_id: 'new' },
    });
  });
  test('A2A status update: data from status.message.parts', () => {
    const snapshot = snapshotFromA2A({
      taskId: 'a2a-1',
      contextId: 'ctx',
      status: {
        state: 'input-required',
        message: {
          role: 'agent',
          parts: [
            { kind: 'text', text: 'Approve?' },
            { kind: 'data', data: { reason: 'APPROVAL_REQUIRED' } },
          ],
        },
      },
    });
    expect(snapshot).toMatchObject({
      status: 'input-required',
      message: 'Approve?',
      result: { reason: 'APPROVAL_REQUIRED' },
    });
  });
});

describe('completed is not always success', () => {
  test('warnings and failed creatives are partial', () => {
    const result = assessCompletion({
      creatives: [
        { creative_id: 'c1', action: 'created' },
        { creative_id: 'c2', action: 'failed', errors: [{ code: 'INVALID_FORMAT', message: 'no' }] },
      ],
    });
    expect(result.outcome).toBe('partial');
    expect(result.notes.join(' ')).toContain('c2');
  });
  test('not-yet-live deployments and pending approval are pending', () => {
    expect(
      assessCompletion({
        deployments: [{ platform: 'dsp', is_live: false, estimated_activation_duration_minutes: 30 }],
      }).outcome,
    ).toBe('pending');
    expect(assessCompletion({ media_buy_id: 'm', implementation_date: null }).outcome).toBe('pending');
  });
  test('a clean result is success', () =>
    expect(assessCompletion({ media_buy_id: 'm', packages: [] })).toEqual({ outcome: 'success', notes: [] }));
});

describe('polling cadence', () => {
  const offsetsSeconds = (plan: ReturnType<typeof planWait>, horizonMs: number) =>
    pollOffsets(plan, horizonMs).map((ms) => ms / 1000);

  test('submitted: quick polls doubling up to one a minute', () => {
    const plan = planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false });
    expect(offsetsSeconds(plan, 300_000)).toEqual([2, 6, 14, 30, 62, 122, 182, 242]);
  });
  test('with webhooks registered, backup polling slows to every 2 minutes', () => {
    const plan = planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: true });
    expect(plan.maxIntervalMs).toBe(120_000);
    expect(offsetsSeconds(plan, 600_000).slice(-3)).toEqual([246, 366, 486]);
  });
  test('working: about every 5 s, for what is left of the 120 s window', () => {
    const fresh = planWait({ status: 'working', workingForMs: 0, webhookRegistered: false });
    expect(offsetsSeconds(fresh, 30_000)).toEqual([1, 3, 7, 12, 17, 22, 27]);
    expect(fresh.windowMs).toBe(120_000);
    expect(planWait({ status: 'working', workingForMs: 100_000, webhookRegistered: false }).windowMs).toBe(20_000);
  });
  test('working for longer than 120 s falls back to the submitted cadence', () => {
    expect(planWait({ status: 'working', workingForMs: 121_000, webhookRegistered: false })).toEqual(
      planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false }),
    );
  });
  test('a 24-hour submitted wait is about 1,440 polls', () => {
    const polls = pollOffsets(
      planWait({ status: 'submitted', workingForMs: 0, webhookRegistered: false }),
      24 * 3_600_000,
    ).length;
    expect(polls).toBeGreaterThan(1_430);
    expect(polls).toBeLessThan(1_445);
  });
});
