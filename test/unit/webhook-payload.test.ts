import { readFileSync } from 'node:fs';
import path from 'node:path';
import { WebhookPayloadError, parseWebhookPayload } from '../../protocol/webhook-payload';

function payloadError(body: unknown): WebhookPayloadError {
  try {
    parseWebhookPayload(body);
  } catch (err) {
    if (err instanceof WebhookPayloadError) return err;
    throw err;
  }
  throw new Error('parseWebhookPayload accepted the body');
}

describe('parseWebhookPayload: MCP webhook payloads', () => {
  test('3.x completion (as @adcp/sdk 6.11 sellers send it) keys on idempotency_key and keeps the media buy status', () => {
    const event = parseWebhookPayload({
      idempotency_key: 'evt_3f2a9c1b7d5e4a6f8b0c2d1e',
      task_id: 'task_7d1c',
      task_type: 'create_media_buy',
      status: 'completed',
      timestamp: '2026-04-22T10:30:00.000Z',
      protocol: 'media-buy',
      token: 'push-notification-token-echoed-back',
      result: {
        media_buy_id: 'ord_123',
        status: 'pending_creatives',
        confirmed_at: '2026-04-22T10:29:59.000Z',
        packages: [{ package_id: 'pkg_1' }],
      },
    });
    expect(event).toEqual({
      format: 'mcp',
      eventKey: 'idem:evt_3f2a9c1b7d5e4a6f8b0c2d1e',
      sellerIdempotencyKey: 'evt_3f2a9c1b7d5e4a6f8b0c2d1e',
      taskType: 'create_media_buy',
      domain: 'media-buy',
      sellerTimestamp: '2026-04-22T10:30:00.000Z',
      snapshot: {
        status: 'completed',
        taskId: 'task_7d1c',
        updatedAt: '2026-04-22T10:30:00.000Z',
        result: {
          media_buy_id: 'ord_123',
          status: 'pending_creatives',
          confirmed_at: '2026-04-22T10:29:59.000Z',
          packages: [{ package_id: 'pkg_1' }],
        },
      },
    });
  });

  test('3.1: operation_id and notification_id are read, and a notification_id is the dedupe key across re-emissions', () => {
    const fire = (idempotencyKey: string) =>
      parseWebhookPayload({
        idempotency_key: idempotencyKey,
        notification_id: 'ntf_media_buy_created_1',
        operation_id: 'adcp-create_media_buy-po-4711',
        task_id: 'task_7d1c',
        task_type: 'create_media_buy',
        status: 'completed',
        timestamp: '2026-04-22T10:30:00.000Z',
        result: { media_buy_id: 'ord_123' },
      });
    const first = fire('evt_first_fire_000000000001');
    const reEmitted = fire('evt_second_fire_00000000002');
    expect(first).toMatchObject({
      operationId: 'adcp-create_media_buy-po-4711',
      notificationId: 'ntf_media_buy_created_1',
      sellerIdempotencyKey: 'evt_first_fire_000000000001',
      eventKey: 'notification:ntf_media_buy_created_1',
    });
    // Same logical event under a new transport key: the same event for the workflow's dedupe set.
    expect(reEmitted.eventKey).toBe(first.eventKey);
  });

  test('3.1: a non-string operation_id or notification_id is refused, naming the field', () => {
    const base = {
      idempotency_key: 'evt_x_0000000000000001',
      task_id: 't',
      status: 'working',
      timestamp: '2026-04-22T10:30:00Z',
    };
    expect(payloadError({ ...base, operation_id: 42 }).field).toBe('operation_id');
    expect(payloadError({ ...base, notification_id: '' }).field).toBe('notification_id');
  });

  test('working with progress and a message', () => {
    const event = parseWebhookPayload({
      idempotency_key: 'evt_progress_0000000001',
      task_id: 'task_9',
      task_type: 'sync_creatives',
      status: 'working',
      timestamp: '2026-04-22T10:00:00Z',
      message: 'Transcoding creatives',
      context_id: 'ctx_1',
      result: { percentage: 40, current_step: 'transcode', total_steps: 3, step_number: 2 },
    });
    expect(event.snapshot).toMatchObject({
      status: 'working',
      taskId: 'task_9',
      contextId: 'ctx_1',
      message: 'Transcoding creatives',
      progress: { percentage: 40, currentStep: 'transcode', totalSteps: 3, stepNumber: 2 },
    });
  });

  test('rc.2 payload without idempotency_key keys on (task_id, status, timestamp) with the status as sent', () => {
    const body = {
      task_id: 'task_456',
      operation_id: 'op_abc',
      task_type: 'create_media_buy',
      domain: 'media-buy',
      status: 'input_required',
      timestamp: '2025-01-22T10:30:00Z',
      message: 'Approve the budget',
    };
    const event = parseWebhookPayload(body);
    expect(event.eventKey).toBe('tuple:task_456|input_required|2025-01-22T10:30:00Z');
    expect(event.sellerIdempotencyKey).toBeUndefined();
    expect(event.operationId).toBe('op_abc');
    expect(event.domain).toBe('media-buy');
    expect(event.snapshot).toMatchObject({
      status: 'input-required',
      rawStatus: 'input_required',
      message: 'Approve the budget',
    });
    // A redelivery is the same event; a later status change is not.
    expect(parseWebhookPayload({ ...body }).eventKey).toBe(event.eventKey);
    expect(parseWebhookPayload({ ...body, timestamp: '2025-01-22T10:31:00Z' }).eventKey).not.toBe(event.eventKey);
  });

  test('failure errors come from the result', () => {
    const event = parseWebhookPayload({
      idempotency_key: 'evt_failed_00000000001',
      task_id: 'task_f',
      task_type: 'create_media_buy',
      status: 'failed',
      timestamp: '2026-04-22T10:30:00Z',
      message: 'Budget below the floor',
      result: { errors: [{ code: 'BUDGET_TOO_LOW', message: 'Budget below the floor', field: 'packages[0].budget' }] },
    });
    expect(event.snapshot.status).toBe('failed');
    expect(event.snapshot.errors).toEqual([
      {
        code: 'BUDGET_TOO_LOW',
        message: 'Budget below the floor',
        field: 'packages[0].budget',
        recovery: 'correctable',
      },
    ]);
  });

  test('the envelope status and task_id win over the result', () => {
    const event = parseWebhookPayload({
      idempotency_key: 'evt_envelope_wins_0001',
      task_id: 'task_envelope',
      task_type: 'create_media_buy',
      status: 'completed',
      timestamp: '2026-04-22T10:30:00Z',
      result: { task_id: 'task_other', status: 'active', media_buy_id: 'mb_1' },
    });
    expect(event.snapshot.status).toBe('completed');
    expect(event.snapshot.taskId).toBe('task_envelope');
    expect(event.snapshot.result).toEqual({ task_id: 'task_other', status: 'active', media_buy_id: 'mb_1' });
  });

  test('an unknown status is kept, not guessed at', () => {
    const event = parseWebhookPayload({ task_id: 't1', status: 'pending_review', timestamp: '2026-01-01T00:00:00Z' });
    expect(event.snapshot).toMatchObject({ status: 'unknown', rawStatus: 'pending_review' });
    expect(event.eventKey).toBe('tuple:t1|pending_review|2026-01-01T00:00:00Z');
  });
});

describe('parseWebhookPayload: A2A push notifications', () => {
  test('Task with artifacts: the last DataPart is the result', () => {
    const event = parseWebhookPayload({
      kind: 'task',
      id: 'task_a2a_1',
      contextId: 'ctx_a2a',
      status: { state: 'completed', timestamp: '2026-04-22T11:00:00Z' },
      artifacts: [
        {
          artifactId: 'art_1',
          name: 'media_buy',
          parts: [
            { kind: 'text', text: 'Media buy created' },
            { kind: 'data', data: { media_buy_id: 'mb_draft' } },
            { kind: 'data', data: { media_buy_id: 'mb_final', packages: [{ package_id: 'pkg_1' }] } },
          ],
        },
      ],
    });
    expect(event).toEqual({
      format: 'a2a',
      eventKey: 'tuple:task_a2a_1|completed|2026-04-22T11:00:00Z',
      sellerTimestamp: '2026-04-22T11:00:00Z',
      snapshot: {
        status: 'completed',
        taskId: 'task_a2a_1',
        contextId: 'ctx_a2a',
        updatedAt: '2026-04-22T11:00:00Z',
        result: { media_buy_id: 'mb_final', packages: [{ package_id: 'pkg_1' }] },
      },
    });
  });

  test('TaskStatusUpdateEvent: message text and data come from status.message.parts', () => {
    const event = parseWebhookPayload({
      kind: 'status-update',
      taskId: 'task_a2a_2',
      contextId: 'ctx_a2a',
      final: false,
      status: {
        state: 'input-required',
        timestamp: '2026-04-22T11:05:00Z',
        message: {
          kind: 'message',
          role: 'agent',
          messageId: 'msg_1',
          parts: [
            { kind: 'text', text: 'Approve the budget increase?' },
            { kind: 'data', data: { reason: 'APPROVAL_REQUIRED', budget: 50_000 } },
          ],
        },
      },
    });
    expect(event.format).toBe('a2a');
    expect(event.eventKey).toBe('tuple:task_a2a_2|input-required|2026-04-22T11:05:00Z');
    expect(event.snapshot).toMatchObject({
      status: 'input-required',
      taskId: 'task_a2a_2',
      contextId: 'ctx_a2a',
      message: 'Approve the budget increase?',
      result: { reason: 'APPROVAL_REQUIRED', budget: 50_000 },
    });
  });

  test('without a status timestamp the key is (task, state)', () => {
    const event = parseWebhookPayload({ id: 'task_3', status: { state: 'working' } });
    expect(event.eventKey).toBe('tuple:task_3|working|');
  });
});

describe('parseWebhookPayload: malformed bodies', () => {
  test.each([
    ['not an object', null, 'body'],
    ['an array', [{ status: 'completed' }], 'body'],
    ['no status', { task_id: 'task_1', timestamp: '2026-01-01T00:00:00Z' }, 'status'],
    ['status of the wrong type', { task_id: 'task_1', status: 3 }, 'status'],
    ['MCP status without task_id', { status: 'completed', timestamp: '2026-01-01T00:00:00Z' }, 'task_id'],
    [
      'MCP with camelCase taskId',
      { status: 'completed', taskId: 'task_1', timestamp: '2026-01-01T00:00:00Z' },
      'task_id',
    ],
    ['A2A status without state', { id: 'task_1', status: { message: 'hi' } }, 'status.state'],
    ['A2A without id or taskId', { status: { state: 'completed' } }, 'id'],
    [
      'result that is not an object',
      { task_id: 't', status: 'completed', timestamp: '2026-01-01T00:00:00Z', result: 'ok' },
      'result',
    ],
    ['neither idempotency_key nor timestamp', { task_id: 't', status: 'completed' }, 'timestamp'],
    [
      'idempotency_key of the wrong type',
      { task_id: 't', status: 'completed', idempotency_key: 42 },
      'idempotency_key',
    ],
    [
      'idempotency_key with spaces',
      { task_id: 't', status: 'completed', idempotency_key: 'not a key' },
      'idempotency_key',
    ],
    ['timestamp of the wrong type', { task_id: 't', status: 'completed', timestamp: { at: 1 } }, 'timestamp'],
    ['A2A timestamp of the wrong type', { id: 't', status: { state: 'working', timestamp: 17 } }, 'status.timestamp'],
  ])('%s → WebhookPayloadError on %p', (_name, body, field) => {
    const error = payloadError(body);
    expect(error.field).toBe(field);
    expect(error.message).toMatch(/^Expected /);
  });

  test('the camelCase hint names the MCP spelling', () => {
    expect(payloadError({ status: 'completed', taskId: 'task_1' }).message).toContain('camelCase "taskId"');
  });
});

test('protocol/webhook-payload.ts stays importable from workflow code (no Node builtins, no packages)', () => {
  const source = readFileSync(path.resolve(__dirname, '../../protocol/webhook-payload.ts'), 'utf8');
  const imports = [...source.matchAll(/^import [^;]*? from '([^']+)';/gms)].map((match) => match[1]);
  expect(imports.length).toBeGreaterThan(0);
  for (const specifier of imports) expect(specifier).toMatch(/^\.\//);
});
