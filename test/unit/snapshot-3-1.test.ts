/**
 * AdCP 3.1 answers read as the orchestrator expects (#9 item 12): `media_buy_status` beside `status`, `replayed`,
 * `task_type` as an open string, `get_task_status` like `tasks/get`, and the 3.1 error codes.
 * Shapes from the 3.1.19 schemas (media-buy/create-media-buy-response.json, protocol/get-task-status-response.json).
 */
import { recoveryFor, isAuthError } from '../../protocol/errors';
import {
  snapshotFromFlatResponse,
  snapshotFromMcpToolResult,
  snapshotFromMediaBuy,
  snapshotFromTasksGet,
} from '../../protocol/snapshot';

describe('3.1 create/update answers', () => {
  test('a 3.1 synchronous create (status completed, media_buy_status active) completes and keeps media_buy_status', () => {
    const snapshot = snapshotFromFlatResponse({
      status: 'completed',
      media_buy_id: 'mb-1',
      media_buy_status: 'active',
      packages: [],
      adcp_version: '3.1',
    });
    expect(snapshot.status).toBe('completed');
    expect(snapshot.result).toEqual({ media_buy_id: 'mb-1', media_buy_status: 'active', packages: [] });
  });

  test('the 3.1 migration form (deprecated status and media_buy_status, both the media-buy status) is a completion keeping both', () => {
    const snapshot = snapshotFromFlatResponse({
      status: 'pending_creatives',
      media_buy_status: 'pending_creatives',
      media_buy_id: 'mb-1',
    });
    expect(snapshot.status).toBe('completed');
    expect(snapshot.result).toMatchObject({
      status: 'pending_creatives',
      media_buy_status: 'pending_creatives',
      media_buy_id: 'mb-1',
    });
  });

  test('an answer with only media_buy_status and no status is a completion', () => {
    const snapshot = snapshotFromMcpToolResult({
      structuredContent: { media_buy_id: 'mb-1', media_buy_status: 'paused' },
    });
    expect(snapshot).toMatchObject({ status: 'completed', result: { media_buy_status: 'paused' } });
  });

  test('a submitted 3.1 envelope stays submitted', () => {
    const snapshot = snapshotFromFlatResponse({
      status: 'submitted',
      task_id: 't-1',
      message: 'queued for IO signing',
    });
    expect(snapshot).toMatchObject({ status: 'submitted', taskId: 't-1' });
  });

  test('replayed: true is kept on the snapshot, from a call answer and from a task read', () => {
    expect(snapshotFromFlatResponse({ status: 'completed', media_buy_id: 'mb-1', replayed: true }).replayed).toBe(true);
    expect(
      snapshotFromTasksGet({
        task_id: 't-1',
        status: 'completed',
        task_type: 'create_media_buy',
        replayed: true,
        result: {},
      }).replayed,
    ).toBe(true);
  });

  test('a get_task_status answer with a task_type no enum knows parses like tasks/get', () => {
    const snapshot = snapshotFromTasksGet({
      task_id: 't-1',
      task_type: 'activate_signal_v2',
      protocol: 'signals',
      status: 'working',
      created_at: '2026-01-01T00:00:00Z',
      updated_at: '2026-01-01T00:00:05Z',
      progress: { percentage: 40 },
    });
    expect(snapshot).toMatchObject({ status: 'working', taskId: 't-1', updatedAt: '2026-01-01T00:00:05Z' });
    expect(snapshot.progress).toBeDefined();
  });
});

describe('a media buy read as the task that created it', () => {
  test('a buy that exists with a media_buy_id means the create completed, whatever its lifecycle status', () => {
    for (const lifecycle of ['pending_creatives', 'pending_start', 'active', 'paused', 'completed', 'canceled']) {
      expect(snapshotFromMediaBuy({ media_buy_id: 'mb-1', status: lifecycle }).status).toBe('completed');
    }
    expect(snapshotFromMediaBuy({ media_buy_id: 'mb-1', media_buy_status: 'active' }).result).toMatchObject({
      media_buy_id: 'mb-1',
    });
  });

  test('a buy the seller rejected reads as rejected', () => {
    expect(snapshotFromMediaBuy({ media_buy_id: 'mb-1', status: 'rejected' }).status).toBe('rejected');
  });
});

describe('3.1 error codes', () => {
  test('IDEMPOTENCY_IN_FLIGHT is transient: retry the same key after retry_after', () => {
    expect(recoveryFor('IDEMPOTENCY_IN_FLIGHT')).toBe('transient');
  });

  test('AUTH_MISSING is correctable, AUTH_INVALID terminal, and both are auth errors', () => {
    expect(recoveryFor('AUTH_MISSING')).toBe('correctable');
    expect(recoveryFor('AUTH_INVALID')).toBe('terminal');
    expect(isAuthError('AUTH_MISSING')).toBe(true);
    expect(isAuthError('AUTH_INVALID')).toBe(true);
  });

  test('other 3.1 codes have their enum recovery (CONFIGURATION_ERROR terminal, BILLING_OUT_OF_BAND terminal, SCOPE_INSUFFICIENT correctable)', () => {
    expect(recoveryFor('CONFIGURATION_ERROR')).toBe('terminal');
    expect(recoveryFor('BILLING_OUT_OF_BAND')).toBe('terminal');
    expect(recoveryFor('SCOPE_INSUFFICIENT')).toBe('correctable');
    expect(recoveryFor('AGENT_SUSPENDED')).toBe('terminal');
  });
});

describe('a seller refusing its own answer', () => {
  // What @adcp/sdk's createAdcpServer sends when its strict response validation rejects the handler's answer
  // (server/create-adcp-server.js "Response schema validation", validation/schema-errors.js).
  const refusal = {
    isError: true,
    content: [
      {
        type: 'text',
        text: "get_media_buy_delivery response failed schema validation at /media_buy_deliveries/0/by_package/0: must have required property 'pricing_model'",
      },
    ],
    structuredContent: {
      adcp_error: {
        code: 'VALIDATION_ERROR',
        recovery: 'correctable',
        message:
          "get_media_buy_delivery response failed schema validation at /media_buy_deliveries/0/by_package/0: must have required property 'pricing_model'",
        field: '/media_buy_deliveries/0/by_package/0',
        details: { tool: 'get_media_buy_delivery', side: 'response', issues: [] },
      },
    },
  };

  test("is not labelled the buyer's correctable error: terminal, marked as the seller's response", () => {
    const snapshot = snapshotFromMcpToolResult(refusal);
    expect(snapshot.status).toBe('failed');
    expect(snapshot.errors?.[0]).toMatchObject({
      code: 'VALIDATION_ERROR',
      recovery: 'terminal',
      details: { side: 'response', origin: 'seller-response' },
    });
  });

  test('a VALIDATION_ERROR about our request stays correctable', () => {
    const snapshot = snapshotFromMcpToolResult({
      isError: true,
      content: [],
      structuredContent: {
        adcp_error: {
          code: 'VALIDATION_ERROR',
          message: 'get_products request failed schema validation at /brief',
          details: { side: 'request' },
        },
      },
    });
    expect(snapshot.errors?.[0].recovery).toBe('correctable');
  });
});
