/**
 * Stored capabilities drive the wire version and the read strategy (#14 item 1): what the seller-capabilities
 * workflow keeps is turned into the order of read methods (no tools/list, no probing) and the SDK's envelope version,
 * and a stale store falls back to probing. Pure parts and the read strategy with a fake SellerClient; the same
 * against a real seller and a real Temporal server is test/integration/stored-capabilities.test.ts.
 */
import type { ReadMethod } from '../../contract/activities';
import { type StoredCapabilitiesLookup, withStoredWireVersion } from '../../activities/stored-capabilities';
import { SellerDescriptionCache, readTaskWithStrategy } from '../../activities/read-strategy';
import type { SellerAnswer, SellerClient, TaskCallRequest, TaskReadRequest } from '../../activities/seller-client';
import type { SellerConfig } from '../../config/sellers';
import {
  type SellerCapabilities,
  parseCapabilities,
  sdkAdcpVersionFor,
  storedCapabilitiesOf,
  storedReadMethods,
} from '../../protocol/capabilities';

const agent = { id: 'seller', url: 'http://seller.test/mcp', protocol: 'mcp' } as SellerConfig;
const context = () => ({ agent, token: 't', signal: new AbortController().signal });
const request = { task: 'create_media_buy', taskId: 'task-1' };

function capabilities(versions: string[], tools: string[]): SellerCapabilities {
  return parseCapabilities({ adcp: { supported_versions: versions }, supported_protocols: ['media_buy'] }, { tools });
}

function lookup(stored: SellerCapabilities | undefined): StoredCapabilitiesLookup & { asked: number } {
  return {
    asked: 0,
    async get() {
      this.asked += 1;
      return stored;
    },
  };
}

const working: SellerAnswer = { snapshot: { status: 'working', taskId: 'task-1' }, callError: false };
const unknownTool = (method: string): SellerAnswer => ({
  snapshot: {
    status: 'failed',
    message: `Unknown tool: ${method}`,
    errors: [{ code: 'INVALID_REQUEST', message: `Unknown tool: ${method}`, recovery: 'correctable' }],
  },
  callError: true,
});

function fakeSeller(tools: string[], answers: Partial<Record<ReadMethod, SellerAnswer>>) {
  const reads: TaskReadRequest[] = [];
  const calls: TaskCallRequest[] = [];
  let describes = 0;
  const seller: SellerClient = {
    callTask: async (call) => {
      calls.push(call);
      return working;
    },
    getTask: async () => working.snapshot,
    cancelTask: async () => ({ notified: false, note: '' }),
    listTasks: async () => ({ tasks: [], supported: false }),
    describe: async () => {
      describes += 1;
      return { tools, mcpTasks: false };
    },
    readTask: async (read) => {
      reads.push(read);
      return answers[read.method] ?? unknownTool(read.method);
    },
  };
  return { seller, reads, calls, methods: () => reads.map((read) => read.method), describes: () => describes };
}

describe('stored capabilities, pure', () => {
  test('the read methods in the order to try: the 3.1 name first for a 3.1 seller, the 3.0 name first otherwise', () => {
    const both = ['tasks/get', 'get_task_status', 'list_tasks', 'get_media_buys', 'create_media_buy'];
    expect(storedReadMethods(capabilities(['3.0', '3.1'], both))).toEqual([
      'get_task_status',
      'tasks/get',
      'list_tasks',
      'get_media_buys',
    ]);
    expect(storedReadMethods(capabilities(['3.0'], both))).toEqual([
      'tasks/get',
      'get_task_status',
      'list_tasks',
      'get_media_buys',
    ]);
    // Without a tool list the stored answer cannot tell how to read: probe.
    expect(storedReadMethods(parseCapabilities({ supported_protocols: ['media_buy'] }))).toBeUndefined();
    expect(storedReadMethods(undefined)).toBeUndefined();
  });

  test('the SDK envelope version: 3.1 for a 3.1 seller, the default for 3.0, rc.2 and unknown', () => {
    expect(sdkAdcpVersionFor(capabilities(['3.0', '3.1'], []))).toBe('3.1');
    expect(sdkAdcpVersionFor(capabilities(['3.0'], []))).toBeUndefined();
    expect(
      sdkAdcpVersionFor(parseCapabilities({ adcp: { supported_versions: ['3.1'] } }, { configuredVersion: 'rc.2' })),
    ).toBeUndefined();
    expect(sdkAdcpVersionFor(undefined)).toBeUndefined();
  });

  test('a memo that is not stored capabilities is ignored', () => {
    const stored = capabilities(['3.1'], ['get_task_status']);
    expect(storedCapabilitiesOf(JSON.parse(JSON.stringify(stored)))).toEqual(stored);
    expect(storedCapabilitiesOf(undefined)).toBeUndefined();
    expect(storedCapabilitiesOf({ ...stored, wireVersion: '9' })).toBeUndefined();
    expect(storedCapabilitiesOf({ ...stored, readMethods: 'tasks/get' })).toBeUndefined();
  });
});

describe('the read strategy with stored capabilities', () => {
  test('a seller whose capabilities name only get_task_status is read with it first: no tools/list, nothing probed', async () => {
    const fake = fakeSeller(['get_task_status', 'create_media_buy'], { get_task_status: working });
    const stored = lookup(capabilities(['3.0'], ['get_task_status', 'create_media_buy']));
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      request,
      new SellerDescriptionCache(undefined, undefined, stored),
    );
    expect(outcome).toEqual({ snapshot: working.snapshot, readMethod: 'get_task_status' });
    expect(fake.methods()).toEqual(['get_task_status']);
    expect(fake.describes()).toBe(0);
  });

  test('a seller whose capabilities name only list_tasks is read by listing, first', async () => {
    const fake = fakeSeller(['list_tasks'], { list_tasks: working });
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      request,
      new SellerDescriptionCache(undefined, undefined, lookup(capabilities(['3.0'], ['list_tasks']))),
    );
    expect(outcome.readMethod).toBe('list_tasks');
    expect(fake.methods()).toEqual(['list_tasks']);
    expect(fake.reads[0].listTool).toBe('list_tasks');
    expect(fake.describes()).toBe(0);
  });

  test('a 3.1 seller offering both names is read with get_task_status, not tasks/get', async () => {
    const tools = ['tasks/get', 'get_task_status'];
    const fake = fakeSeller(tools, { 'tasks/get': working, get_task_status: working });
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      request,
      new SellerDescriptionCache(undefined, undefined, lookup(capabilities(['3.0', '3.1'], tools))),
    );
    expect(outcome.readMethod).toBe('get_task_status');
    expect(fake.methods()).toEqual(['get_task_status']);
  });

  test('stale capabilities (the stored method is gone): the read probes with the live tool list', async () => {
    const fake = fakeSeller(['tasks/get'], { 'tasks/get': working });
    const stored = lookup(capabilities(['3.0'], ['get_task_status']));
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      request,
      new SellerDescriptionCache(undefined, undefined, stored),
    );
    expect(outcome).toEqual({ snapshot: working.snapshot, readMethod: 'tasks/get' });
    expect(fake.methods()).toEqual(['get_task_status', 'tasks/get']);
    expect(fake.describes()).toBe(1);
  });

  test('no stored capabilities: the tool list decides, as before', async () => {
    const fake = fakeSeller(['get_task_status'], { get_task_status: working });
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      request,
      new SellerDescriptionCache(undefined, undefined, lookup(undefined)),
    );
    expect(outcome.readMethod).toBe('get_task_status');
    expect(fake.describes()).toBe(1);
  });

  test('what worked last time is still tried first, before any lookup', async () => {
    const fake = fakeSeller(['tasks/get'], { 'tasks/get': working });
    const stored = lookup(capabilities(['3.1'], ['get_task_status']));
    const outcome = await readTaskWithStrategy(
      fake.seller,
      context(),
      { ...request, readMethod: 'tasks/get' },
      new SellerDescriptionCache(undefined, undefined, stored),
    );
    expect(outcome.readMethod).toBe('tasks/get');
    expect(stored.asked).toBe(0);
  });
});

describe('the wire version from stored capabilities', () => {
  test('calls and reads to a 3.1 seller carry adcpVersion 3.1; to a 3.0 seller, none', async () => {
    for (const [versions, expected] of [
      [['3.0', '3.1'], '3.1'],
      [['3.0'], undefined],
    ] as const) {
      const fake = fakeSeller([], { 'tasks/get': working });
      const seller = withStoredWireVersion(fake.seller, lookup(capabilities([...versions], [])));
      await seller.callTask({ ...context(), task: 'get_products', args: {} });
      await seller.readTask({ ...context(), method: 'tasks/get', task: 'get_products', taskId: 't' });
      expect(fake.calls[0].adcpVersion).toBe(expected);
      expect(fake.reads[0].adcpVersion).toBe(expected);
    }
  });
});
