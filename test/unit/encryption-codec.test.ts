/**
 * Payload encryption (#12 item 4): AES-256-GCM, key id in the metadata, new payloads under the newest key, older keys
 * still decrypt, an unknown key id fails saying which key and what to do; composes with gzip (compress, then encrypt).
 */
import { createDecipheriv, randomBytes } from 'node:crypto';
import { type Payload, defaultPayloadConverter } from '@temporalio/common';
import { decode, encode } from '@temporalio/common/lib/internal-non-workflow/codec-helpers';
import {
  ENCRYPTED_ENCODING,
  EncryptionPayloadCodec,
  METADATA_ENCRYPTION_KEY_ID,
  METADATA_ENCRYPTION_TENANT,
  PayloadDecryptionError,
  encryptedDataConverter,
  loadPayloadKeys,
  payloadCodecs,
  tenantDataKey,
} from '../../client/encryption-codec';
import { GZIP_ENCODING, GZIP_THRESHOLD_BYTES, dataConverter } from '../../client/payload-codec';
import { METADATA_TENANT, TenantPayloadConverter } from '../../client/tenant-payload-converter';

const key = () => randomBytes(32).toString('base64');
const text = (bytes: Uint8Array | null | undefined) => new TextDecoder().decode(bytes ?? new Uint8Array());
const params = { brand: { domain: 'acme.example' }, budget: { total: 125_000, currency: 'EUR' }, po_number: 'PO-4711' };

test('round trip: the stored payload is ciphertext under the current key, and decodes to the same value', async () => {
  const keys = loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k2026-05:${key()},k2026-11:${key()}` })!;
  expect(keys.currentKeyId).toBe('k2026-11'); // the last listed is the newest
  const codec = new EncryptionPayloadCodec(keys);
  const payload = defaultPayloadConverter.toPayload(params);
  const [encrypted] = await codec.encode([payload]);
  expect(text(encrypted!.metadata!.encoding)).toBe(ENCRYPTED_ENCODING);
  expect(text(encrypted!.metadata![METADATA_ENCRYPTION_KEY_ID])).toBe('k2026-11');
  const stored = Buffer.from(encrypted!.data!).toString('latin1');
  for (const secret of ['acme.example', 'PO-4711', '125000', 'json/plain']) expect(stored).not.toContain(secret);
  const [decoded] = await codec.decode([encrypted!]);
  expect(text(decoded!.metadata!.encoding)).toBe('json/plain');
  expect(defaultPayloadConverter.fromPayload(decoded!)).toEqual(params);
  // A fresh nonce each time: the same value never encrypts to the same bytes.
  const [again] = await codec.encode([payload]);
  expect(Buffer.from(again!.data!).equals(Buffer.from(encrypted!.data!))).toBe(false);
});

test('rotation: after a new key is added, payloads written under the old one still decrypt', async () => {
  const old = key();
  const before = new EncryptionPayloadCodec(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k1:${old}` })!);
  const [written] = await before.encode([defaultPayloadConverter.toPayload(params)]);
  const after = new EncryptionPayloadCodec(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k1:${old},k2:${key()}` })!);
  expect(defaultPayloadConverter.fromPayload((await after.decode([written!]))[0]!)).toEqual(params);
  const [fresh] = await after.encode([defaultPayloadConverter.toPayload(params)]);
  expect(text(fresh!.metadata![METADATA_ENCRYPTION_KEY_ID])).toBe('k2');
  // ADCP_PAYLOAD_KEY_ID picks the current key explicitly.
  expect(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k1:${old},k2:${key()}`, ADCP_PAYLOAD_KEY_ID: 'k1' })!.currentKeyId).toBe(
    'k1',
  );
});

test('an unknown key id fails clearly: which key, which are configured, what to do', async () => {
  const writer = new EncryptionPayloadCodec(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `retired:${key()}` })!);
  const [written] = await writer.encode([defaultPayloadConverter.toPayload(params)]);
  const reader = new EncryptionPayloadCodec(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `current:${key()}` })!);
  const failure = reader.decode([written!]);
  await expect(failure).rejects.toThrow(PayloadDecryptionError);
  await expect(failure).rejects.toThrow(
    /encrypted with key "retired", which is not configured \(configured: current\)\. Add that key back to ADCP_PAYLOAD_KEYS/,
  );
});

test('a tampered payload, or one relabelled with another key id, fails authentication', async () => {
  const keys = loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `a:${key()},b:${key()}` })!;
  const codec = new EncryptionPayloadCodec(keys);
  const [written] = await codec.encode([defaultPayloadConverter.toPayload(params)]);
  const flipped = new Uint8Array(written!.data!);
  flipped[20] ^= 1;
  await expect(codec.decode([{ ...written!, data: flipped }])).rejects.toThrow(/key "b" failed authentication/);
  const relabelled: Payload = {
    ...written!,
    metadata: { ...written!.metadata, [METADATA_ENCRYPTION_KEY_ID]: new TextEncoder().encode('a') },
  };
  await expect(codec.decode([relabelled])).rejects.toThrow(/key "a" failed authentication/);
});

test('payloads written before encryption was turned on still decode as they are', async () => {
  const codec = new EncryptionPayloadCodec(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k:${key()}` })!);
  const legacy = defaultPayloadConverter.toPayload({ status: 'working' });
  expect((await codec.decode([legacy]))[0]).toBe(legacy);
});

test('composes with gzip: a large answer is compressed, then encrypted, and decodes through both', async () => {
  const codecs = payloadCodecs(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k:${key()}` }));
  const products = Array.from({ length: 6_000 }, (_, i) => ({
    product_id: `prod-${i}`,
    name: `Video package ${i}`.repeat(3),
  }));
  const payload = defaultPayloadConverter.toPayload({ products });
  expect(payload.data!.byteLength).toBeGreaterThan(GZIP_THRESHOLD_BYTES);
  const [stored] = await encode(codecs, [payload]);
  expect(text(stored!.metadata!.encoding)).toBe(ENCRYPTED_ENCODING);
  // Compressed before encryption: ciphertext does not compress, so the order shows in the size.
  expect(stored!.data!.byteLength).toBeLessThan(payload.data!.byteLength / 3);
  const [inner] = await codecs[1]!.decode([stored!]);
  expect(text(inner!.metadata!.encoding)).toBe(GZIP_ENCODING);
  const [decoded] = await decode(codecs, [stored!]);
  expect(defaultPayloadConverter.fromPayload(decoded!)).toEqual({ products });
});

test('the data converter is gzip alone without ADCP_PAYLOAD_KEYS, and gzip + encryption with it', () => {
  expect(encryptedDataConverter({}).payloadCodecs).toHaveLength(1);
  expect(encryptedDataConverter({ ADCP_PAYLOAD_KEYS: `k:${key()}` }).payloadCodecs).toHaveLength(2);
});

test.each([
  ['k1', /entry 1 must be "<key id>:<base64 of 32 bytes>"/],
  [`k1:${randomBytes(16).toString('base64')}`, /key "k1" must be 32 bytes in base64/],
  [`k1:${key()},k1:${key()}`, /lists key "k1" twice/],
  ['bad id!:' + key(), /entry 1 must be/],
])('ADCP_PAYLOAD_KEYS=%s is refused', (value, message) => {
  expect(() => loadPayloadKeys({ ADCP_PAYLOAD_KEYS: value })).toThrow(message);
});

test('ADCP_PAYLOAD_KEY_ID must name a listed key', () => {
  expect(() => loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k1:${key()}`, ADCP_PAYLOAD_KEY_ID: 'k9' })).toThrow(
    /ADCP_PAYLOAD_KEY_ID "k9" is not one of the keys in ADCP_PAYLOAD_KEYS \(k1\)/,
  );
});

describe("each tenant's own data key (#25 item 6)", () => {
  const converter = new TenantPayloadConverter();
  const acmeState = { tenant: 'acme', status: 'submitted', params };

  test('the converter marks a value of a tenant; the codec encrypts it with that tenant key, not the master key', async () => {
    const keys = loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k1:${key()}` })!;
    const codec = new EncryptionPayloadCodec(keys);
    const marked = converter.toPayload(acmeState);
    expect(text(marked.metadata![METADATA_TENANT])).toBe('acme');
    expect(converter.toPayload({ status: 'working' }).metadata![METADATA_TENANT]).toBeUndefined();
    expect(converter.toPayload({ tenant: 'not a tenant name!' }).metadata![METADATA_TENANT]).toBeUndefined();

    const [encrypted] = await codec.encode([marked]);
    expect(text(encrypted!.metadata![METADATA_ENCRYPTION_TENANT])).toBe('acme');
    // The master key alone does not open it: it is the tenant's derived key that does.
    const data = encrypted!.data!;
    const open = (aesKey: Uint8Array, aad: string) => {
      const decipher = createDecipheriv('aes-256-gcm', aesKey, data.subarray(0, 12));
      decipher.setAAD(Buffer.from(aad));
      decipher.setAuthTag(data.subarray(data.byteLength - 16));
      return Buffer.concat([decipher.update(data.subarray(12, data.byteLength - 16)), decipher.final()]);
    };
    const master = keys.keys.get('k1')!;
    expect(() => open(master, 'k1\u0000acme')).toThrow();
    expect(() => open(tenantDataKey(master, 'globex'), 'k1\u0000acme')).toThrow();
    expect(open(tenantDataKey(master, 'acme'), 'k1\u0000acme').byteLength).toBeGreaterThan(0);
    const [decoded] = await codec.decode([encrypted!]);
    expect(converter.fromPayload(decoded!)).toEqual(acmeState);

    // Relabelled as another tenant's, it fails authentication.
    const relabelled = {
      ...encrypted!,
      metadata: { ...encrypted!.metadata, [METADATA_ENCRYPTION_TENANT]: new TextEncoder().encode('globex') },
    };
    await expect(codec.decode([relabelled])).rejects.toThrow(PayloadDecryptionError);
  });

  test('rotation: a new master key derives new tenant keys; payloads under the old one still decode', async () => {
    const old = key();
    const before = new EncryptionPayloadCodec(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k1:${old}` })!);
    const [written] = await before.encode([converter.toPayload(acmeState)]);
    const rotated = new EncryptionPayloadCodec(loadPayloadKeys({ ADCP_PAYLOAD_KEYS: `k1:${old},k2:${key()}` })!);
    const [again] = await rotated.encode([converter.toPayload(acmeState)]);
    expect(text(again!.metadata![METADATA_ENCRYPTION_KEY_ID])).toBe('k2');
    for (const payload of [written!, again!]) {
      const [decoded] = await rotated.decode([payload]);
      expect(converter.fromPayload(decoded!)).toEqual(acmeState);
    }
  });

  test('the data converter of clients and workers names the tenant payload converter', () => {
    for (const converterOptions of [dataConverter({}), encryptedDataConverter({ ADCP_PAYLOAD_KEYS: `k1:${key()}` })])
      expect(converterOptions.payloadConverterPath).toMatch(/tenant-payload-converter/);
  });
});
