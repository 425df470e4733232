/**
 * A seller's task read in its own words (issue 24, item 1): the record's status words mapped onto AdCP's nine, the
 * word kept verbatim, the result read where the seller keeps it and the objects the task made, with the adapter
 * learned from the tool list and from the first body.
 */
import {
  TASK_STATUSES,
  learnTaskRecordAdapter,
  mapTaskWord,
  mediaBuyIdOf,
  readTaskRecord,
  taskRecordAdapterForTools,
} from '../../protocol';

describe('status words', () => {
  test("AdCP's nine read the same in both vocabularies", () => {
    for (const status of TASK_STATUSES) {
      expect(mapTaskWord(status, 'adcp')).toBe(status);
      expect(mapTaskWord(status, 'seller-records')).toBe(status);
    }
  });

  test("a seller's own review is submitted (its own people decide), not input-required", () => {
    expect(mapTaskWord('requires_approval', 'seller-records')).toBe('submitted');
    expect(mapTaskWord('pending', 'seller-records')).toBe('submitted');
    expect(mapTaskWord('in_progress', 'seller-records')).toBe('working');
    expect(mapTaskWord('approved', 'seller-records')).toBe('completed');
  });

  test('a word no vocabulary knows maps to nothing (the reader keeps it as unknown)', () => {
    expect(mapTaskWord('escalated_to_legal', 'seller-records')).toBeUndefined();
    expect(mapTaskWord('requires_approval', 'adcp')).toBeUndefined();
  });
});

describe('the adapter', () => {
  test('is learned from the tool list: get_task beside complete_task, or get_task without an AdCP read', () => {
    expect(taskRecordAdapterForTools(['get_task', 'complete_task', 'list_tasks', 'tasks/get'])).toBe('seller-records');
    expect(taskRecordAdapterForTools(['get_task', 'create_media_buy'])).toBe('seller-records');
    expect(taskRecordAdapterForTools(['get_task', 'get_task_status'])).toBe('adcp');
    expect(taskRecordAdapterForTools(['tasks/get', 'create_media_buy'])).toBe('adcp');
  });

  test('is confirmed by the first body, and never moves back', () => {
    expect(learnTaskRecordAdapter({ status: 'working', result: {} })).toBe('adcp');
    expect(learnTaskRecordAdapter({ status: 'pending', response_data: {} })).toBe('seller-records');
    expect(learnTaskRecordAdapter({ status: 'submitted', associated_objects: [] })).toBe('seller-records');
    expect(learnTaskRecordAdapter({ status: 'requires_approval' })).toBe('seller-records');
    expect(learnTaskRecordAdapter({ status: 'completed', result: {} }, 'seller-records')).toBe('seller-records');
  });
});

describe('reading a record', () => {
  const record = {
    task_id: 'task_1',
    task_type: 'create_media_buy',
    status: 'requires_approval',
    created_at: '2026-12-01T10:00:00.000Z',
    updated_at: '2026-12-01T10:00:01.000Z',
    associated_objects: [],
  };

  test("the seller's review: submitted, its word kept", () => {
    const { snapshot, adapter } = readTaskRecord(record);
    expect(adapter).toBe('seller-records');
    expect(snapshot).toMatchObject({ status: 'submitted', rawStatus: 'requires_approval', taskId: 'task_1' });
    expect(snapshot.result).toBeUndefined();
  });

  test('approved in the admin flow: completed, no result, the buy named among its objects', () => {
    const { snapshot } = readTaskRecord(
      {
        ...record,
        status: 'approved',
        associated_objects: [{ type: 'media_buy', id: 'mb_1' }],
        object_type: 'media_buy',
        object_id: 'mb_1',
      },
      'seller-records',
    );
    expect(snapshot.status).toBe('completed');
    expect(snapshot.rawStatus).toBe('approved');
    expect(snapshot.result).toBeUndefined();
    expect(snapshot.objects).toEqual([{ type: 'media_buy', id: 'mb_1' }]);
    expect(mediaBuyIdOf(snapshot.objects)).toBe('mb_1');
  });

  test('completed through complete_task: the result is response_data', () => {
    const { snapshot } = readTaskRecord(
      { ...record, status: 'completed', response_data: { media_buy_id: 'mb_2' } },
      'seller-records',
    );
    expect(snapshot).toMatchObject({ status: 'completed', result: { media_buy_id: 'mb_2' } });
    expect(snapshot.rawStatus).toBeUndefined();
  });

  test('an unknown word is unknown, kept verbatim, and never a failure', () => {
    const { snapshot } = readTaskRecord({ ...record, status: 'Escalated' }, 'seller-records');
    expect(snapshot.status).toBe('unknown');
    expect(snapshot.rawStatus).toBe('Escalated');
    expect(snapshot.errors).toBeUndefined();
  });

  test("a failed record without AdCP errors carries the seller's error_message", () => {
    const { snapshot } = readTaskRecord(
      { ...record, status: 'failed', error_message: 'credit check failed' },
      'seller-records',
    );
    expect(snapshot.status).toBe('failed');
    expect(snapshot.errors).toEqual([
      { code: 'SELLER_TASK_FAILED', message: 'credit check failed', recovery: 'terminal' },
    ]);
  });

  test("an AdCP tasks/get body reads as before: result, then the last history entry's data", () => {
    expect(readTaskRecord({ task_id: 't', status: 'completed', result: { media_buy_id: 'mb' } }).snapshot).toEqual({
      status: 'completed',
      taskId: 't',
      result: { media_buy_id: 'mb' },
    });
    expect(
      readTaskRecord({ task_id: 't', status: 'completed', history: [{ data: { a: 1 } }, { data: { b: 2 } }] }).snapshot
        .result,
    ).toEqual({ b: 2 });
    expect(readTaskRecord({ task_id: 't', status: 'input_required' }).snapshot).toMatchObject({
      status: 'input-required',
      rawStatus: 'input_required',
    });
  });
});
