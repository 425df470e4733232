/**
 * Answers over Temporal's 2 MB payload limit (#9 item 15). A 2.5 MB get_products catalogue is normal: it completes
 * with the whole catalogue, because payloads over 256 KiB are gzip-compressed by the payload codec. An answer still
 * too large once compressed fails the operation for good with ANSWER_TOO_LARGE, and the seller is called once.
 * Through a real Temporal server, with a small MCP seller written here.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import { type TestStack, registry, startTestStack } from '../harness/temporal';

/** A catalogue of about `bytes` of JSON, as varied as real product descriptions. */
function catalogue(bytes: number): Record<string, unknown>[] {
  const products: Record<string, unknown>[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const product = {
      product_id: `prod-${i}`,
      name: `Premium video package ${i} (${['news', 'sports', 'lifestyle', 'finance'][i % 4]})`,
      description:
        `Run-of-network pre-roll on property ${i % 97}, ${15 + (i % 4) * 15}s, ${['desktop', 'mobile', 'ctv'][i % 3]} inventory with brand-safety tier ${i % 5}. `.repeat(
          3,
        ),
      delivery_type: i % 2 ? 'guaranteed' : 'non_guaranteed',
      pricing_options: [
        { pricing_option_id: `po-${i}`, pricing_model: 'cpm', rate: 10 + (i % 50) / 10, currency: 'USD' },
      ],
      format_ids: [{ agent_url: 'https://creative.example', id: `video_${i % 7}` }],
    };
    size += JSON.stringify(product).length;
    products.push(product);
  }
  return products;
}

let server: Server;
let url: string;
let answer: () => Record<string, unknown>;
let calls = 0;
let stack: TestStack;

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    const mcp = new McpServer({ name: 'large-catalogue-seller', version: '1.0.0' });
    mcp.registerTool('get_products', { inputSchema: { brief: z.string().optional() } }, async () => {
      calls += 1;
      const structured = answer();
      return { content: [{ type: 'text', text: 'catalogue attached' }], structuredContent: structured };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => void transport.close());
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  stack = await startTestStack({ sellers: registry([{ id: 'catalogue', url, protocol: 'mcp' }]) });
});

afterAll(async () => {
  await stack?.close();
  server?.closeAllConnections();
  await new Promise<void>((resolve) => server?.close(() => resolve()));
});

test('a 2.5 MB get_products answer completes with the whole catalogue, and the seller is called once', async () => {
  const products = catalogue(2.5 * 1024 * 1024);
  answer = () => ({ status: 'completed', products });
  calls = 0;
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'catalogue',
    task: 'get_products',
    params: { brief: 'video' },
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('completed');
  const kept = (state.result as { products?: unknown[] } | undefined)?.products;
  expect(kept).toHaveLength(products.length);
  expect(kept).toEqual(products);
  expect(calls).toBe(1);
}, 120_000);

test('an answer too large even compressed fails with ANSWER_TOO_LARGE, and the seller is not called again for it', async () => {
  // Random bytes do not compress: 3 MB of them stay well over the limit.
  const blob = randomBytes(3 * 1024 * 1024).toString('base64');
  answer = () => ({ status: 'completed', products: [{ product_id: 'huge', description: blob }] });
  calls = 0;
  const { operationId } = await stack.orchestrator.start({
    sellerId: 'catalogue',
    task: 'get_products',
    params: { brief: 'everything' },
    idempotencyKey: randomUUID(),
  });
  const state = await stack.orchestrator.result(operationId);
  expect(state.status).toBe('failed');
  expect(JSON.stringify(state.errors ?? [])).toContain('ANSWER_TOO_LARGE');
  expect(calls).toBe(1);
}, 120_000);
