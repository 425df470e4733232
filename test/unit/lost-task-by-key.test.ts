/**
 * A lost call's task is looked up in the seller's task list by the call's key (`context_contains`). A seller whose own
 * list_tasks ignores AdCP's filters answers every task it has: adopting its first create would hand one task (and
 * its buy) to every lost call at that seller. A listed task is adopted only where the seller says it applied the
 * key filter, or where the row itself carries the key.
 */
import { taskCarryingKey } from '../../activities/recovery';
import type { TaskListPage } from '../../activities/seller-client';

const tasks = [
  { taskId: 'task_a', status: 'requires_approval', taskType: 'create_media_buy', createdAt: '2026-12-02T10:00:00Z' },
  { taskId: 'task_b', status: 'pending', taskType: 'create_media_buy', createdAt: '2026-12-02T10:00:01Z' },
];

test("a list that ignores AdCP's filters: no task is adopted by key, however few it lists", () => {
  const page: TaskListPage = { supported: true, tasks, rows: tasks.map((task) => ({ task_id: task.taskId })) };
  expect(taskCarryingKey(page, 'create_media_buy', 'key-b')).toEqual({ untrusted: 2 });
  const one: TaskListPage = { supported: true, tasks: [tasks[0]], rows: [{ task_id: 'task_a' }] };
  expect(taskCarryingKey(one, 'create_media_buy', 'key-b')).toEqual({ untrusted: 1 });
});

test('a list that says it applied context_contains is trusted', () => {
  const page: TaskListPage = { supported: true, tasks: [tasks[1]], filtersApplied: ['task_types', 'context_contains'] };
  expect(taskCarryingKey(page, 'create_media_buy', 'key-b')).toEqual({ match: tasks[1], untrusted: 0 });
});

test('a row that carries the key is adopted even from a list that ignores filters', () => {
  const page: TaskListPage = {
    supported: true,
    tasks,
    rows: [{ task_id: 'task_a' }, { task_id: 'task_b', request: { idempotency_key: 'key-b' } }],
  };
  expect(taskCarryingKey(page, 'create_media_buy', 'key-b')).toEqual({ match: tasks[1], untrusted: 0 });
});

test('no task listed: nothing adopted, nothing untrusted', () => {
  expect(taskCarryingKey({ supported: true, tasks: [] }, 'create_media_buy', 'key-b')).toEqual({ untrusted: 0 });
});
