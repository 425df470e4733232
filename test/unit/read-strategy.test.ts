/**
 * How a seller's task is read (#9 items 6 and 7), with a fake SellerClient: which method is tried, in which order,
 * what is remembered, and that a missing method or a task the seller cannot see is `unreadable`, never a failed task.
 */
import type { ReadMethod } from '../../contract/activities';
import { SellerDescriptionCache, SellerRefusedReadForNow, readTaskWithStrategy } from '../../activities/read-strategy';
import {
  type SellerAnswer,
  type SellerClient,
  type SellerDescription,
  type TaskReadRequest,
  readAnswerFromMcp,
} from '../../activities/seller-client';
import type { SellerConfig } from '../../config/sellers';
import type { TaskSnapshot } from '../../protocol';

type Behaviour = SellerAnswer | Error;

function refused(
  code: string,
  message: string,
  recovery: 'transient' | 'correctable' | 'terminal' = 'correctable',
): SellerAnswer {
  return { snapshot: { status: 'failed', message, errors: [{ code, message, recovery }] }, callError: true };
}

function task(snapshot: TaskSnapshot): SellerAnswer {
  return { snapshot, callError: false };
}

function fakeSeller(description: SellerDescription | undefined, behaviours: Partial<Record<ReadMethod, Behaviour>>) {
  const reads: TaskReadRequest[] = [];
  let describes = 0;
  const seller: SellerClient = {
    callTask: async () => {
      throw new Error('not used');
    },
    getTask: async () => {
      throw new Error('not used');
    },
    cancelTask: async () => ({ notified: false, note: '' }),
    listTasks: async () => ({ tasks: [], supported: false }),
    describe: async () => {
      describes += 1;
      return description;
    },
    readTask: async (request) => {
      reads.push(request);
      const behaviour = behaviours[request.method] ?? refused('INVALID_REQUEST', `Unknown tool: ${request.method}`);
      if (behaviour instanceof Error) throw behaviour;
      return behaviour;
    },
  };
  return { seller, reads, methods: () => reads.map((read) => read.method), describes: () => describes };
}

const mcpAgent: SellerConfig = { id: 'seller', url: 'http://seller.test/mcp', protocol: 'mcp' } as SellerConfig;
const a2aAgent: SellerConfig = { id: 'a2a-seller', url: 'http://seller.test/a2a', protocol: 'a2a' } as SellerConfig;
const context = (agent: SellerConfig = mcpAgent) => ({ agent, token: 't', signal: new AbortController().signal });
const request = { task: 'create_media_buy', taskId: 'task-1' };

describe('read strategy', () => {
  test('a seller with tasks/get is read with tasks/get, in one call', async () => {
    const fake = fakeSeller(
      { tools: ['tasks/get', 'get_products'], mcpTasks: false },
      { 'tasks/get': task({ status: 'working', taskId: 'task-1' }) },
    );
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      { ...request, readMethod: 'tasks/get' },
      new SellerDescriptionCache(),
    );
    expect(outcome).toEqual({ snapshot: { status: 'working', taskId: 'task-1' }, readMethod: 'tasks/get' });
    expect(fake.methods()).toEqual(['tasks/get']);
    expect(fake.describes()).toBe(0); // what worked last time is tried before asking for the tool list
  });

  test('a seller without tasks/get but with the 3.1 get_task_status is read with it, and tasks/get is not tried', async () => {
    const fake = fakeSeller(
      { tools: ['get_task_status', 'create_media_buy'], mcpTasks: false },
      { get_task_status: task({ status: 'submitted', taskId: 'task-1' }) },
    );
    const outcome = await readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache());
    expect(outcome.readMethod).toBe('get_task_status');
    expect(outcome.snapshot?.status).toBe('submitted');
    expect(fake.methods()).toEqual(['get_task_status']);
  });

  test('"Unknown tool: tasks/get" moves on to the next method instead of failing the task', async () => {
    const fake = fakeSeller(undefined, {
      'tasks/get': refused('INVALID_REQUEST', 'Unknown tool: tasks/get'),
      get_task_status: refused('INVALID_REQUEST', 'Unknown tool: get_task_status'),
      get_task: task({ status: 'completed', result: { media_buy_id: 'mb-1' } }),
    });
    const outcome = await readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache());
    expect(outcome.readMethod).toBe('get_task');
    expect(outcome.snapshot?.status).toBe('completed');
    expect(fake.methods()).toEqual(['tasks/get', 'get_task_status', 'get_task']);
  });

  test('a seller that only lists tasks is read through its list tool (list_tasks or tasks/list), filtered to the task', async () => {
    const fake = fakeSeller(
      { tools: ['tasks/list'], mcpTasks: false },
      { list_tasks: task({ status: 'working', taskId: 'task-1' }) },
    );
    const outcome = await readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache());
    expect(outcome.readMethod).toBe('list_tasks');
    expect(fake.reads[0]).toMatchObject({ method: 'list_tasks', listTool: 'tasks/list', taskId: 'task-1' });
  });

  test("MCP's own Tasks are used when the server advertises them and has no AdCP read tool", async () => {
    const fake = fakeSeller(
      { tools: ['create_media_buy'], mcpTasks: true },
      { 'mcp-tasks': task({ status: 'working', taskId: 'task-1' }) },
    );
    const outcome = await readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache());
    expect(outcome.readMethod).toBe('mcp-tasks');
    expect(fake.methods()).toEqual(['mcp-tasks']);
  });

  test('an MCP task the call named as one is read by MCP tasks/get first, though the description failed and is cached empty', async () => {
    const fake = fakeSeller(undefined, { 'mcp-tasks': task({ status: 'working', taskId: 'task-1' }) });
    const descriptions = new SellerDescriptionCache();
    const failing = {
      ...fake.seller,
      describe: async () => {
        throw new Error('tools/list: 503 Service Unavailable');
      },
    };
    // The failed description is cached: without the call's word, this seller's MCP tasks go unread for 10 minutes.
    expect(await descriptions.get(failing, context())).toBeUndefined();
    const outcome = await readTaskWithStrategy(failing, context(), { ...request, mcpTask: true }, descriptions);
    expect(outcome).toEqual({ snapshot: { status: 'working', taskId: 'task-1' }, readMethod: 'mcp-tasks' });
    expect(fake.methods()).toEqual(['mcp-tasks']);
  });

  test('an MCP task the call named as one is read by MCP tasks/get before what worked last time, though the description says no MCP Tasks', async () => {
    const fake = fakeSeller(
      { tools: ['tasks/get'], mcpTasks: false },
      {
        'tasks/get': refused('REFERENCE_NOT_FOUND', 'Task not found'),
        'mcp-tasks': task({ status: 'completed', taskId: 'task-1', result: { media_buy_id: 'mb-1' } }),
      },
    );
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      { ...request, readMethod: 'tasks/get', mcpTask: true },
      new SellerDescriptionCache(),
    );
    expect(outcome.readMethod).toBe('mcp-tasks');
    expect(outcome.snapshot?.result).toEqual({ media_buy_id: 'mb-1' });
    expect(fake.methods()).toEqual(['mcp-tasks']);
    expect(fake.describes()).toBe(0);
  });

  test('without the call saying so, a seller whose description lacks MCP Tasks is not read by MCP tasks/get', async () => {
    const fake = fakeSeller(
      { tools: ['create_media_buy'], mcpTasks: false },
      { 'mcp-tasks': task({ status: 'working', taskId: 'task-1' }) },
    );
    const outcome = await readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache());
    expect(outcome.readMethod).toBe('none');
    expect(fake.methods()).not.toContain('mcp-tasks');
  });

  test('an A2A seller ignores the MCP task mark: its reads stay A2A', async () => {
    const fake = fakeSeller(undefined, { 'a2a-native': task({ status: 'working', taskId: 'task-1' }) });
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(a2aAgent),
      { ...request, mcpTask: true },
      new SellerDescriptionCache(),
    );
    expect(outcome.readMethod).toBe('a2a-native');
    expect(fake.methods()).toEqual(['a2a-native']);
  });

  test('a create_media_buy whose buy is known is read from get_media_buys when nothing else works', async () => {
    const fake = fakeSeller(
      { tools: ['create_media_buy', 'get_media_buys'], mcpTasks: false },
      { get_media_buys: task({ status: 'completed', result: { media_buy_id: 'mb-1', media_buy_status: 'active' } }) },
    );
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      { ...request, mediaBuyId: 'mb-1' },
      new SellerDescriptionCache(),
    );
    expect(outcome.readMethod).toBe('get_media_buys');
    expect(fake.reads[0]).toMatchObject({ mediaBuyId: 'mb-1' });
  });

  test('get_media_buys is not used for an update (a buy that exists says nothing about the update)', async () => {
    const fake = fakeSeller({ tools: ['update_media_buy', 'get_media_buys'], mcpTasks: false }, {});
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      { ...request, task: 'update_media_buy', mediaBuyId: 'mb-1' },
      new SellerDescriptionCache(),
    );
    expect(fake.methods()).toEqual([]);
    expect(outcome.readMethod).toBe('none');
  });

  test('a seller with no way to read tasks gives `unreadable` with readMethod none, never a failed snapshot', async () => {
    const fake = fakeSeller({ tools: ['get_products', 'create_media_buy'], mcpTasks: false }, {});
    const outcome = await readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache());
    expect(outcome.snapshot).toBeUndefined();
    expect(outcome.readMethod).toBe('none');
    expect(outcome.unreadable?.code).toBe('TASK_UNREADABLE');
  });

  test('REFERENCE_NOT_FOUND for a task we hold is "cannot see it now": unreadable with the code as sent', async () => {
    const fake = fakeSeller(
      { tools: ['tasks/get'], mcpTasks: false },
      { 'tasks/get': refused('REFERENCE_NOT_FOUND', 'No task task-1 for this account') },
    );
    const outcome = await readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache());
    expect(outcome).toMatchObject({ readMethod: 'tasks/get', unreadable: { code: 'REFERENCE_NOT_FOUND' } });
    expect(outcome.snapshot).toBeUndefined();
  });

  test('the request account is passed on reads, for sellers that scope tasks by account', async () => {
    const account = { account_id: 'acct-7' };
    const fake = fakeSeller({ tools: ['tasks/get'], mcpTasks: false }, { 'tasks/get': task({ status: 'working' }) });
    await readTaskWithStrategy(fake.seller, context(), { ...request, account }, new SellerDescriptionCache());
    expect(fake.reads[0].account).toEqual(account);
  });

  test('a transient refusal of the read (RATE_LIMITED) is thrown to be retried, not turned into unreadable', async () => {
    const fake = fakeSeller(
      { tools: ['tasks/get'], mcpTasks: false },
      { 'tasks/get': refused('RATE_LIMITED', 'slow down', 'transient') },
    );
    await expect(
      readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache()),
    ).rejects.toBeInstanceOf(SellerRefusedReadForNow);
  });

  test('a transport failure is thrown (the activity classifies and retries it)', async () => {
    const fake = fakeSeller(
      { tools: ['tasks/get'], mcpTasks: false },
      { 'tasks/get': Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } }) },
    );
    await expect(readTaskWithStrategy(fake.seller, context(), request, new SellerDescriptionCache())).rejects.toThrow(
      'fetch failed',
    );
  });

  test('when the method that worked last time stops working, the next one is found and returned', async () => {
    const fake = fakeSeller(
      { tools: ['get_task_status'], mcpTasks: false },
      {
        'tasks/get': refused('INVALID_REQUEST', 'Unknown tool: tasks/get'),
        get_task_status: task({ status: 'working' }),
      },
    );
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      { ...request, readMethod: 'tasks/get' },
      new SellerDescriptionCache(),
    );
    expect(outcome.readMethod).toBe('get_task_status');
    expect(fake.methods()).toEqual(['tasks/get', 'get_task_status']);
  });

  test('the tool list is asked once per seller, then cached', async () => {
    const cache = new SellerDescriptionCache();
    const fake = fakeSeller({ tools: ['get_task'], mcpTasks: false }, { get_task: task({ status: 'working' }) });
    await readTaskWithStrategy(fake.seller, context(), request, cache);
    await readTaskWithStrategy(fake.seller, context(), request, cache);
    expect(fake.describes()).toBe(1);
  });

  test('A2A sellers: native tasks/get first, then the tasks/get skill of @adcp/sdk adapters', async () => {
    const fake = fakeSeller(undefined, {
      'a2a-native': new Error('A2A agent returned error: Method not found (Code: -32601)'),
      'a2a-skill': task({ status: 'working', taskId: 'task-1' }),
    });
    const outcome = await readTaskWithStrategy(fake.seller, context(a2aAgent), request, new SellerDescriptionCache());
    expect(outcome.readMethod).toBe('a2a-skill');
    expect(fake.methods()).toEqual(['a2a-native', 'a2a-skill']);
    expect(fake.describes()).toBe(0);
  });
});

describe('reading MCP read answers', () => {
  test('a 3.1 get_task_status answer parses like tasks/get (result, task_type as an open string)', () => {
    const answer = readAnswerFromMcp({
      structuredContent: {
        task_id: 'task-1',
        task_type: 'some_new_task',
        protocol: 'media-buy',
        status: 'completed',
        created_at: '2026-01-01T00:00:00Z',
        updated_at: '2026-01-01T00:01:00Z',
        result: { media_buy_id: 'mb-1' },
      },
    });
    expect(answer).toEqual({
      callError: false,
      snapshot: {
        status: 'completed',
        taskId: 'task-1',
        result: { media_buy_id: 'mb-1' },
        updatedAt: '2026-01-01T00:01:00Z',
      },
    });
  });

  test('an isError answer is a refused read (callError), with the seller code', () => {
    const answer = readAnswerFromMcp({ isError: true, content: [{ type: 'text', text: 'Unknown tool: tasks/get' }] });
    expect(answer.callError).toBe(true);
    expect(answer.snapshot.errors?.[0].message).toContain('Unknown tool');
  });
});
