/**
 * Error answers that carry no adcp_error, as real servers produce them: the MCP SDK's McpServer refusing a tools/call
 * before the tool runs (an isError result whose text is "MCP error <code>: ..."), and @adcp/sdk's comply_test_controller
 * answering its own ControllerError shape. Both must reach the operation with a code, a recovery class and their
 * detail (test/integration/interop-errors.test.ts drives the same answers from the SDK's example sellers).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { toMcpResponse } from '@adcp/sdk';
import { z } from 'zod';
import { classifyTransportFailure } from '../../activities/transport-errors';
import { parseErrors, parseMcpToolRefusal } from '../../protocol/errors';
import { snapshotFromFlatResponse, snapshotFromMcpToolResult } from '../../protocol/snapshot';

async function withServer<T>(run: (client: Client) => Promise<T>): Promise<T> {
  const server = new McpServer({ name: 'refusals', version: '1.0.0' });
  server.registerTool(
    'create_media_buy',
    { inputSchema: { start_time: z.string(), packages: z.array(z.object({ budget: z.number().min(0) })) } },
    async () => ({ content: [{ type: 'text', text: '{}' }], structuredContent: { media_buy_id: 'mb_1' } }),
  );
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  await server.connect(serverTransport);
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(clientTransport);
  try {
    return await run(client);
  } finally {
    await client.close();
    await server.close();
  }
}

describe('McpServer refusals answered as isError results', () => {
  test('arguments its input schema refuses: TRANSPORT_RPC_INVALID_PARAMS, correctable, the first failing path as field', async () => {
    const raw = await withServer((client) =>
      client.callTool({ name: 'create_media_buy', arguments: { packages: [{ budget: -1 }] } }),
    );
    expect(raw.isError).toBe(true);
    const snapshot = snapshotFromMcpToolResult(raw);
    expect(snapshot.status).toBe('failed');
    expect(snapshot.errors).toEqual([
      expect.objectContaining({
        code: 'TRANSPORT_RPC_INVALID_PARAMS',
        recovery: 'correctable',
        field: 'start_time',
        message: expect.stringMatching(/^Input validation error: .*start_time/s),
        details: expect.objectContaining({
          issues: [expect.stringMatching(/ at start_time$/), expect.stringMatching(/ at packages\[0\]\.budget$/)],
        }),
      }),
    ]);
  });

  test('a tool the server does not have: TRANSPORT_RPC_METHOD_NOT_FOUND, terminal, naming the tool', async () => {
    const raw = await withServer((client) => client.callTool({ name: 'sync_creatives', arguments: {} }));
    expect(snapshotFromMcpToolResult(raw).errors).toEqual([
      expect.objectContaining({
        code: 'TRANSPORT_RPC_METHOD_NOT_FOUND',
        recovery: 'terminal',
        message: 'Tool sync_creatives not found',
      }),
    ]);
  });

  test('any other isError text stays an unclassified terminal TOOL_ERROR (the tool may have run)', () => {
    for (const text of ['MCP error -32603: boom', 'Something went wrong']) {
      expect(parseMcpToolRefusal(text)).toBeUndefined();
      expect(snapshotFromMcpToolResult({ isError: true, content: [{ type: 'text', text }] }).errors).toEqual([
        { code: 'TOOL_ERROR', message: text, recovery: 'terminal' },
      ]);
    }
  });

  test('an adcp_error in the result still wins over the text', () => {
    const snapshot = snapshotFromMcpToolResult({
      isError: true,
      content: [{ type: 'text', text: 'MCP error -32602: Tool x not found' }],
      structuredContent: {
        adcp_error: { code: 'PRODUCT_NOT_FOUND', message: 'no such product', field: 'packages[0]' },
      },
    });
    expect(snapshot.errors).toEqual([
      expect.objectContaining({ code: 'PRODUCT_NOT_FOUND', recovery: 'correctable', field: 'packages[0]' }),
    ]);
  });
});

describe('the same refusals thrown as JSON-RPC errors (servers that do not wrap them in a tool result)', () => {
  test('a tool the server does not have: the same code and recovery as the tool-result form', () => {
    const thrown = classifyTransportFailure(new McpError(ErrorCode.InvalidParams, 'Tool sync_creatives not found'));
    expect(thrown).toMatchObject({ code: 'TRANSPORT_RPC_METHOD_NOT_FOUND', recovery: 'terminal' });
    expect(parseMcpToolRefusal('MCP error -32602: Tool sync_creatives not found')).toMatchObject({
      code: thrown.code,
      recovery: thrown.recovery,
    });
  });

  test('arguments refused stay TRANSPORT_RPC_INVALID_PARAMS, correctable', () => {
    const thrown = classifyTransportFailure(
      new McpError(ErrorCode.InvalidParams, 'Input validation error: Invalid arguments for tool x: Required at a'),
    );
    expect(thrown).toMatchObject({ code: 'TRANSPORT_RPC_INVALID_PARAMS', recovery: 'correctable' });
  });
});

describe('comply_test_controller ControllerError', () => {
  test('as @adcp/sdk sends it: the code, error_detail as the message, current_state in details', () => {
    const raw = toMcpResponse({
      success: false,
      error: 'INVALID_TRANSITION',
      error_detail: 'media buy cannot move from canceled to active',
      current_state: 'canceled',
    });
    const snapshot = snapshotFromMcpToolResult(raw);
    expect(snapshot).toMatchObject({ status: 'failed', message: 'media buy cannot move from canceled to active' });
    expect(snapshot.errors).toEqual([
      {
        code: 'INVALID_TRANSITION',
        message: 'media buy cannot move from canceled to active',
        recovery: 'correctable',
        details: { current_state: 'canceled' },
      },
    ]);
  });

  test.each([
    ['NOT_FOUND', 'correctable'],
    ['INVALID_PARAMS', 'correctable'],
    ['INVALID_STATE', 'correctable'],
    ['UNKNOWN_SCENARIO', 'terminal'],
    ['FORBIDDEN', 'terminal'],
    ['INTERNAL_ERROR', 'transient'],
    ['SOMETHING_NEW', 'terminal'],
  ])('%s is %s', (code, recovery) => {
    expect(parseErrors({ success: false, error: code })).toEqual([
      { code, message: `The seller's test controller answered ${code}.`, recovery },
    ]);
  });

  test('without isError, a ControllerError alone is still a failure; success answers and free-text errors are not read as one', () => {
    expect(snapshotFromFlatResponse({ success: false, error: 'NOT_FOUND', error_detail: 'no cr-1' })).toMatchObject({
      status: 'failed',
      errors: [{ code: 'NOT_FOUND', message: 'no cr-1' }],
    });
    expect(snapshotFromFlatResponse({ success: true, previous_state: 'a', current_state: 'b' }).status).toBe(
      'completed',
    );
    expect(parseErrors({ success: false, error: 'the upstream timed out' })).toEqual([]);
  });
});
