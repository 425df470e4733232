/**
 * The payload codec (#9 item 15): large payloads are stored gzip-compressed under their own encoding, small ones
 * exactly as before (existing histories and the Web UI stay readable), and decode reads both.
 */
import { defaultPayloadConverter } from '@temporalio/common';
import { GZIP_ENCODING, GzipPayloadCodec } from '../../client/payload-codec';

const codec = new GzipPayloadCodec();
const encoding = (payload: { metadata?: Record<string, Uint8Array> | null }) =>
  new TextDecoder().decode(payload.metadata?.encoding);

test('a payload under the threshold passes through untouched, byte for byte', async () => {
  const payload = defaultPayloadConverter.toPayload({ status: 'completed', products: [{ product_id: 'p1' }] });
  const [encoded] = await codec.encode([payload]);
  expect(encoded).toBe(payload);
  expect(encoding(encoded)).toBe('json/plain');
});

test('a 2.5 MB catalogue is stored compressed under 2 MB and decodes to the same value', async () => {
  const products = Array.from({ length: 18_000 }, (_, i) => ({
    product_id: `prod-${i}`,
    name: `Video package ${i}`,
    description: `Pre-roll on property ${i % 97}, ${['desktop', 'mobile', 'ctv'][i % 3]}. `.repeat(2),
    rate: 10 + (i % 50) / 10,
  }));
  const payload = defaultPayloadConverter.toPayload({ status: 'completed', products });
  expect(payload.data!.byteLength).toBeGreaterThan(2 * 1024 * 1024);
  const [encoded] = await codec.encode([payload]);
  expect(encoding(encoded)).toBe(GZIP_ENCODING);
  expect(encoded.data!.byteLength).toBeLessThan(2 * 1024 * 1024);
  const [decoded] = await codec.decode([encoded]);
  expect(encoding(decoded)).toBe('json/plain');
  expect(defaultPayloadConverter.fromPayload(decoded)).toEqual({ status: 'completed', products });
});

test('payloads written before the codec existed decode as they are', async () => {
  const legacy = defaultPayloadConverter.toPayload({ snapshot: { status: 'working' } });
  const [decoded] = await codec.decode([legacy]);
  expect(decoded).toBe(legacy);
});
