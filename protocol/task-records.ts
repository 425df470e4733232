/**
 * How one seller's task read speaks, as data the operation keeps next to its read method: which words its status
 * uses (mapped onto AdCP's nine task statuses), where the task's result lives, and where the objects the task made are
 * named. AdCP's `tasks/get` answers `status` in AdCP's words with the result under `result`; some sellers answer their
 * own task record instead (`get_task`): words such as `pending`, `requires_approval` and `approved`, the result under
 * `response_data`, the media buy it made under `associated_objects`.
 *
 * A word no vocabulary knows is read as `unknown` and kept verbatim (`rawStatus`): it is never a failure and never
 * terminal. A seller word that says the work is done without carrying the result (`approved`) is `completed`; what was
 * made is then read from the resource the record names. Pure: the read activities, the workflows and tests import it.
 */
import { type TaskObject, type TaskSnapshot, snapshotFromTasksGet } from './snapshot';
import { type TaskStatus, normaliseStatus } from './status';
import { asRecord } from './records';

/** Whose words a task read uses: AdCP's (`tasks/get`, `get_task_status`), or a seller's own task records. */
export type TaskRecordAdapterName = 'adcp' | 'seller-records';

/** Where a task's result is, in the order to look: `history` is the data of the last history entry. */
export type ResultLocation = 'result' | 'response_data' | 'history';

/** Where a task names what it made: `[{type, id}]` under `associated_objects`, or `object_type` + `object_id`. */
export type ObjectLocation = 'associated_objects' | 'object_ref';

export interface TaskRecordAdapter {
  name: TaskRecordAdapterName;
  resultAt: readonly ResultLocation[];
  objectsAt: readonly ObjectLocation[];
}

export const TASK_RECORD_ADAPTERS: Readonly<Record<TaskRecordAdapterName, TaskRecordAdapter>> = {
  adcp: { name: 'adcp', resultAt: ['result', 'history'], objectsAt: ['associated_objects'] },
  'seller-records': {
    name: 'seller-records',
    resultAt: ['response_data', 'result', 'history'],
    objectsAt: ['associated_objects', 'object_ref'],
  },
};

/**
 * A seller's own task-record words, as AdCP statuses. `requires_approval` is the seller's own review (a person at the
 * seller decides), not a question for the buyer: AdCP gives the buyer no way to answer it, so it is `submitted`, not
 * `input-required`. `approved` says the work is done; the result comes from the resource the record names.
 */
const SELLER_RECORD_WORDS: Readonly<Record<string, TaskStatus>> = {
  pending: 'submitted',
  in_progress: 'working',
  requires_approval: 'submitted',
  approved: 'completed',
  completed: 'completed',
  failed: 'failed',
  rejected: 'rejected',
  canceled: 'canceled',
  cancelled: 'canceled',
};

/** The record's words that only a seller's own vocabulary uses (AdCP's nine and its aliases are not among them). */
function sellerOnlyWord(word: string): boolean {
  return normaliseStatus(word) === undefined && word in SELLER_RECORD_WORDS;
}

function wordOf(raw: unknown): string | undefined {
  return typeof raw === 'string' && raw.trim() !== '' ? raw.trim().toLowerCase() : undefined;
}

/**
 * A task status word in the adapter's vocabulary: AdCP's nine and their aliases first, then (for a seller's records)
 * its own words; undefined when the word is not known (the caller reads that as `unknown`, keeping the word).
 */
export function mapTaskWord(raw: unknown, adapter: TaskRecordAdapterName): TaskStatus | undefined {
  const adcp = normaliseStatus(raw);
  if (adcp) return adcp;
  const word = wordOf(raw);
  if (!word || adapter !== 'seller-records') return undefined;
  return SELLER_RECORD_WORDS[word];
}

/**
 * The adapter a seller's tool list implies: a `get_task` beside `complete_task`, or a `get_task` with neither AdCP
 * read (`tasks/get`, `get_task_status`), is a seller keeping its own records; anything else reads as AdCP.
 */
export function taskRecordAdapterForTools(tools: readonly string[]): TaskRecordAdapterName {
  const adcpRead = tools.includes('tasks/get') || tools.includes('get_task_status');
  if (tools.includes('get_task') && (tools.includes('complete_task') || !adcpRead)) return 'seller-records';
  return 'adcp';
}

/**
 * The adapter a body shows, given the one believed so far: a `response_data` or `associated_objects` field, or a status
 * word only sellers' records use, selects the seller's records. A body never moves a seller back to AdCP's reading
 * (an AdCP-looking record is read the same way by both).
 */
export function learnTaskRecordAdapter(
  body: Record<string, unknown>,
  current: TaskRecordAdapterName = 'adcp',
): TaskRecordAdapterName {
  if (current === 'seller-records') return current;
  const word = wordOf(body.status);
  if ('response_data' in body || Array.isArray(body.associated_objects) || (word && sellerOnlyWord(word)))
    return 'seller-records';
  return current;
}

function resultIn(body: Record<string, unknown>, at: ResultLocation): Record<string, unknown> | undefined {
  switch (at) {
    case 'result':
      return asRecord(body.result);
    case 'response_data':
      return asRecord(body.response_data);
    case 'history': {
      if (!Array.isArray(body.history) || body.history.length === 0) return undefined;
      return asRecord(asRecord(body.history[body.history.length - 1])?.data);
    }
  }
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** The objects a task record names as made by the task, deduplicated, in the order the adapter looks. */
export function taskObjectsOf(body: Record<string, unknown>, adapter: TaskRecordAdapter): TaskObject[] {
  const objects: TaskObject[] = [];
  const add = (type: unknown, id: unknown) => {
    const typeText = text(type);
    const idText = text(id) ?? (typeof id === 'number' && Number.isFinite(id) ? String(id) : undefined);
    if (!typeText || !idText) return;
    if (!objects.some((object) => object.type === typeText && object.id === idText))
      objects.push({ type: typeText, id: idText });
  };
  for (const at of adapter.objectsAt) {
    if (at === 'associated_objects' && Array.isArray(body.associated_objects)) {
      for (const entry of body.associated_objects) {
        const object = asRecord(entry);
        if (object) add(object.type ?? object.object_type, object.id ?? object.object_id);
      }
    }
    if (at === 'object_ref') add(body.object_type, body.object_id);
  }
  return objects;
}

/** The media buy a task names among its objects, if it names one. */
export function mediaBuyIdOf(objects: readonly TaskObject[] | undefined): string | undefined {
  return objects?.find((object) => object.type === 'media_buy')?.id;
}

export interface TaskRecordReading {
  snapshot: TaskSnapshot;
  /** The adapter this body was read with (learned from it when it showed a seller's own record). */
  adapter: TaskRecordAdapterName;
}

/**
 * One task read body (`tasks/get`, `get_task_status`, a seller's `get_task`, a row of its task list) read with the
 * seller's adapter, learned further from the body itself. The status word is kept verbatim in `rawStatus` whenever it
 * is not AdCP's own; the result comes from where the adapter says it lives; the objects the record names ride along.
 */
export function readTaskRecord(
  body: Record<string, unknown>,
  adapterName: TaskRecordAdapterName = 'adcp',
): TaskRecordReading {
  const learned = learnTaskRecordAdapter(body, adapterName);
  const adapter = TASK_RECORD_ADAPTERS[learned];
  const base = snapshotFromTasksGet(body);
  const snapshot: TaskSnapshot = { ...base };
  const word = body.status;
  if (word !== undefined && word !== null) {
    const status = mapTaskWord(word, learned);
    snapshot.status = status ?? 'unknown';
    if (status === word) delete snapshot.rawStatus;
    else snapshot.rawStatus = String(word);
  }
  let result: Record<string, unknown> | undefined;
  for (const at of adapter.resultAt) {
    result = resultIn(body, at);
    if (result) break;
  }
  if (result && Object.keys(result).length > 0) snapshot.result = result;
  else delete snapshot.result;
  if (!snapshot.errors?.length && (snapshot.status === 'failed' || snapshot.status === 'rejected')) {
    const why = text(body.error_message) ?? text(body.error);
    if (why) snapshot.errors = [{ code: 'SELLER_TASK_FAILED', message: why, recovery: 'terminal' }];
  }
  const objects = taskObjectsOf(body, adapter);
  if (objects.length > 0) snapshot.objects = objects;
  return { snapshot, adapter: learned };
}
