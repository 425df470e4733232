/**
 * Payloads encrypted at rest in Temporal (#12 item 4): request params, answers and state carry budgets, brand and
 * account data, so the Temporal service (and anyone reading its database or Web UI without the codec server) sees
 * only ciphertext. AES-256-GCM with a random 96-bit nonce per payload; the whole Payload (metadata included) is
 * encrypted as its protobuf bytes, and the key id travels in clear in `metadata["encryption-key-id"]`.
 *
 * Each tenant has its own data key. A payload the tenant payload converter marked (tenant-payload-converter.ts:
 * `adcp-tenant`, set from the value's top-level `tenant`) is encrypted with the data key of that tenant, derived from
 * the master key by HKDF-SHA256 (the tenant's name in the info); the tenant travels in clear in
 * `metadata["encryption-tenant"]` and is authenticated with the key id, so relabelling a payload breaks it. A payload
 * of no tenant is encrypted with the master key itself (the shared key; payloads written before tenants had keys are
 * these). Holding one tenant's data key opens that tenant's payloads only; the master keys open all.
 *
 * Rotation: master keys come from ADCP_PAYLOAD_KEYS (`id:base64,id:base64`, the last one newest, or
 * ADCP_PAYLOAD_KEY_ID to name the current one). New payloads use the current master key and the tenant keys derived
 * from it; any listed key decrypts, and derives the tenant keys of its own payloads. Drop an old key only when no
 * history that needs it is retained any more.
 *
 * Composes with the gzip codec: `payloadCodecs: [gzip, encryption]` compresses first, then encrypts (Temporal encodes
 * through the codecs in order and decodes in reverse).
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import {
  type DataConverter,
  type Payload,
  type PayloadCodec,
  METADATA_ENCODING_KEY,
  ValueError,
} from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { LRUCache } from 'lru-cache';
import { isTenantName } from '../protocol/tenancy';
import { GzipPayloadCodec } from './gzip-codec';
import { tenantOfPayload } from './tenant-payload-converter';

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const METADATA_ENCRYPTION_KEY_ID = 'encryption-key-id';
/** The tenant whose data key encrypted the payload (absent: the shared key). */
export const METADATA_ENCRYPTION_TENANT = 'encryption-tenant';

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const ENCODING_BYTES = encoder.encode(ENCRYPTED_ENCODING);
const TENANT_KEY_SALT = encoder.encode('adcp-orchestrator payload data keys');

/**
 * A tenant's data key under one master key: HKDF-SHA256 of the master key, with the tenant's name in the info. The
 * same in every worker, client and codec server that holds the master key, with nothing to store or distribute.
 */
export function tenantDataKey(masterKey: Uint8Array, tenant: string): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', masterKey, TENANT_KEY_SALT, encoder.encode(`tenant:${tenant}`), 32));
}

/** The payload's tenant as its encryption metadata names it (clear), or undefined for the shared key. */
export function encryptedTenantOf(payload: Payload): string | undefined {
  const bytes = payload.metadata?.[METADATA_ENCRYPTION_TENANT];
  return bytes ? decoder.decode(bytes) : undefined;
}

/** What the ciphertext authenticates beside itself: the key id, and the tenant for a tenant's payload. */
function additionalData(keyId: string, tenant: string | undefined): Uint8Array {
  return encoder.encode(tenant === undefined ? keyId : `${keyId}\u0000${tenant}`);
}

export interface PayloadKeys {
  /** Key id → 32-byte AES key. */
  keys: ReadonlyMap<string, Uint8Array>;
  /** The id new payloads are encrypted with. */
  currentKeyId: string;
}

/** Thrown when a payload cannot be decrypted: which key, and what to do. The message never holds key material. */
export class PayloadDecryptionError extends ValueError {}

const KEY_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/** ADCP_PAYLOAD_KEYS (and ADCP_PAYLOAD_KEY_ID); undefined when encryption is not configured. */
export function loadPayloadKeys(env: NodeJS.ProcessEnv = process.env): PayloadKeys | undefined {
  const raw = env.ADCP_PAYLOAD_KEYS?.trim();
  if (!raw) return undefined;
  const keys = new Map<string, Uint8Array>();
  let last: string | undefined;
  for (const [index, item] of raw.split(',').entries()) {
    const separator = item.indexOf(':');
    const id = item.slice(0, separator).trim();
    const material = item.slice(separator + 1).trim();
    if (separator < 0 || !KEY_ID_PATTERN.test(id))
      throw new ValueError(
        `ADCP_PAYLOAD_KEYS entry ${index + 1} must be "<key id>:<base64 of 32 bytes>"; the key id is 1-64 letters, digits, ".", "_" or "-".`,
      );
    const bytes = Buffer.from(material, 'base64');
    if (bytes.length !== 32 || bytes.toString('base64').replace(/=+$/, '') !== material.replace(/=+$/, ''))
      throw new ValueError(
        `ADCP_PAYLOAD_KEYS key "${id}" must be 32 bytes in base64 (generate one with \`openssl rand -base64 32\`).`,
      );
    if (keys.has(id)) throw new ValueError(`ADCP_PAYLOAD_KEYS lists key "${id}" twice.`);
    keys.set(id, new Uint8Array(bytes));
    last = id;
  }
  const currentKeyId = env.ADCP_PAYLOAD_KEY_ID?.trim() || last!;
  if (!keys.has(currentKeyId))
    throw new ValueError(
      `ADCP_PAYLOAD_KEY_ID "${currentKeyId}" is not one of the keys in ADCP_PAYLOAD_KEYS (${[...keys.keys()].join(', ')}).`,
    );
  return { keys, currentKeyId };
}

function isEncrypted(payload: Payload): boolean {
  const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
  return !!encoding && decoder.decode(encoding) === ENCRYPTED_ENCODING;
}

export class EncryptionPayloadCodec implements PayloadCodec {
  /** Derived tenant keys by key id and tenant (HKDF costs a few microseconds; payloads of one tenant come in runs). */
  private readonly tenantKeys = new LRUCache<string, Uint8Array>({ max: 10_000 });

  constructor(private readonly payloadKeys: PayloadKeys) {
    for (const [id, key] of payloadKeys.keys) {
      if (key.byteLength !== 32)
        throw new ValueError(`Payload key "${id}" is ${key.byteLength} bytes; AES-256 needs 32.`);
    }
    if (!payloadKeys.keys.has(payloadKeys.currentKeyId))
      throw new ValueError(`The current payload key "${payloadKeys.currentKeyId}" is not among the keys.`);
  }

  /** The key a payload is encrypted with: the tenant's data key under `keyId`, or the master key itself. */
  private keyFor(keyId: string, master: Uint8Array, tenant: string | undefined): Uint8Array {
    if (tenant === undefined) return master;
    const cacheKey = `${keyId}\u0000${tenant}`;
    let key = this.tenantKeys.get(cacheKey);
    if (!key) this.tenantKeys.set(cacheKey, (key = tenantDataKey(master, tenant)));
    return key;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    const keyId = this.payloadKeys.currentKeyId;
    const master = this.payloadKeys.keys.get(keyId)!;
    return payloads.map((payload) => {
      const tenant = tenantOfPayload(payload);
      const plaintext = temporal.api.common.v1.Payload.encode(payload).finish();
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', this.keyFor(keyId, master, tenant), nonce);
      // The key id and the tenant are authenticated too: a relabelled payload fails instead of decrypting oddly.
      cipher.setAAD(additionalData(keyId, tenant));
      const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      return {
        metadata: {
          [METADATA_ENCODING_KEY]: ENCODING_BYTES,
          [METADATA_ENCRYPTION_KEY_ID]: encoder.encode(keyId),
          ...(tenant !== undefined ? { [METADATA_ENCRYPTION_TENANT]: encoder.encode(tenant) } : {}),
        },
        data: new Uint8Array(Buffer.concat([nonce, ciphertext, cipher.getAuthTag()])),
      };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => {
      // Payloads written before encryption was turned on stay readable.
      if (!isEncrypted(payload)) return payload;
      const keyIdBytes = payload.metadata?.[METADATA_ENCRYPTION_KEY_ID];
      if (!keyIdBytes)
        throw new PayloadDecryptionError(
          `An encrypted payload has no "${METADATA_ENCRYPTION_KEY_ID}" metadata; it cannot be decrypted.`,
        );
      const keyId = decoder.decode(keyIdBytes);
      const master = this.payloadKeys.keys.get(keyId);
      if (!master) {
        throw new PayloadDecryptionError(
          `A payload is encrypted with key "${keyId}", which is not configured (configured: ${[...this.payloadKeys.keys.keys()].join(', ')}). ` +
            'Add that key back to ADCP_PAYLOAD_KEYS on every worker, client and codec server: keys retired from encryption must stay listed while histories that use them are kept.',
        );
      }
      const tenant = encryptedTenantOf(payload);
      if (tenant !== undefined && !isTenantName(tenant))
        throw new PayloadDecryptionError(`A payload names an invalid tenant in "${METADATA_ENCRYPTION_TENANT}".`);
      const data = payload.data ?? new Uint8Array();
      if (data.byteLength < NONCE_BYTES + TAG_BYTES)
        throw new PayloadDecryptionError(
          `A payload encrypted with key "${keyId}" is truncated (${data.byteLength} bytes).`,
        );
      const decipher = createDecipheriv(
        'aes-256-gcm',
        this.keyFor(keyId, master, tenant),
        data.subarray(0, NONCE_BYTES),
      );
      decipher.setAAD(additionalData(keyId, tenant));
      decipher.setAuthTag(data.subarray(data.byteLength - TAG_BYTES));
      let plaintext: Buffer;
      try {
        plaintext = Buffer.concat([
          decipher.update(data.subarray(NONCE_BYTES, data.byteLength - TAG_BYTES)),
          decipher.final(),
        ]);
      } catch {
        throw new PayloadDecryptionError(
          `A payload encrypted with key "${keyId}"${tenant !== undefined ? ` for tenant "${tenant}"` : ''} failed authentication: it was altered, or ADCP_PAYLOAD_KEYS holds different key material under that id.`,
        );
      }
      const inner = temporal.api.common.v1.Payload.decode(plaintext);
      return { metadata: inner.metadata ?? {}, data: inner.data ?? new Uint8Array() } as Payload;
    });
  }
}

/** The codecs in Temporal's order: compress, then encrypt (when keys are configured). */
export function payloadCodecs(keys: PayloadKeys | undefined = loadPayloadKeys()): PayloadCodec[] {
  return keys ? [new GzipPayloadCodec(), new EncryptionPayloadCodec(keys)] : [new GzipPayloadCodec()];
}

/**
 * The data converter of every orchestrator Worker and Client once encryption is configured: gzip as before, plus
 * AES-256-GCM when ADCP_PAYLOAD_KEYS is set. Without it this is exactly `dataConverter()` from payload-codec.ts.
 */
export function encryptedDataConverter(env: NodeJS.ProcessEnv = process.env): DataConverter {
  return { payloadConverterPath: TENANT_PAYLOAD_CONVERTER_PATH, payloadCodecs: payloadCodecs(loadPayloadKeys(env)) };
}

/** The tenant payload converter's module, for DataConverter.payloadConverterPath and bundleWorkflowCode. */
export const TENANT_PAYLOAD_CONVERTER_PATH = require.resolve('./tenant-payload-converter');
