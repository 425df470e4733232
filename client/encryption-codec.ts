/**
 * Payloads encrypted at rest in Temporal (#12 item 4): request params, answers and state carry budgets, brand and
 * account data, so the Temporal service (and anyone reading its database or Web UI without the codec server) sees
 * only ciphertext. AES-256-GCM with a random 96-bit nonce per payload; the whole Payload (metadata included) is
 * encrypted as its protobuf bytes, and the key id travels in clear in `metadata["encryption-key-id"]`.
 *
 * Rotation: keys come from ADCP_PAYLOAD_KEYS (`id:base64,id:base64`, the last one newest, or ADCP_PAYLOAD_KEY_ID to
 * name the current one). New payloads use the current key; any listed key decrypts. Drop an old key only when no
 * history that needs it is retained any more.
 *
 * Composes with the gzip codec: `payloadCodecs: [gzip, encryption]` compresses first, then encrypts (Temporal encodes
 * through the codecs in order and decodes in reverse).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import {
  type DataConverter,
  type Payload,
  type PayloadCodec,
  METADATA_ENCODING_KEY,
  ValueError,
} from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { GzipPayloadCodec } from './gzip-codec';

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const METADATA_ENCRYPTION_KEY_ID = 'encryption-key-id';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const ENCODING_BYTES = encoder.encode(ENCRYPTED_ENCODING);

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
  constructor(private readonly payloadKeys: PayloadKeys) {
    for (const [id, key] of payloadKeys.keys) {
      if (key.byteLength !== 32)
        throw new ValueError(`Payload key "${id}" is ${key.byteLength} bytes; AES-256 needs 32.`);
    }
    if (!payloadKeys.keys.has(payloadKeys.currentKeyId))
      throw new ValueError(`The current payload key "${payloadKeys.currentKeyId}" is not among the keys.`);
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    const keyId = this.payloadKeys.currentKeyId;
    const key = this.payloadKeys.keys.get(keyId)!;
    return payloads.map((payload) => {
      const plaintext = temporal.api.common.v1.Payload.encode(payload).finish();
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      // The key id is authenticated too: a payload relabelled with another key id fails instead of decrypting oddly.
      cipher.setAAD(encoder.encode(keyId));
      const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      return {
        metadata: { [METADATA_ENCODING_KEY]: ENCODING_BYTES, [METADATA_ENCRYPTION_KEY_ID]: encoder.encode(keyId) },
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
      const key = this.payloadKeys.keys.get(keyId);
      if (!key) {
        throw new PayloadDecryptionError(
          `A payload is encrypted with key "${keyId}", which is not configured (configured: ${[...this.payloadKeys.keys.keys()].join(', ')}). ` +
            'Add that key back to ADCP_PAYLOAD_KEYS on every worker, client and codec server: keys retired from encryption must stay listed while histories that use them are kept.',
        );
      }
      const data = payload.data ?? new Uint8Array();
      if (data.byteLength < NONCE_BYTES + TAG_BYTES)
        throw new PayloadDecryptionError(
          `A payload encrypted with key "${keyId}" is truncated (${data.byteLength} bytes).`,
        );
      const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, NONCE_BYTES));
      decipher.setAAD(keyIdBytes);
      decipher.setAuthTag(data.subarray(data.byteLength - TAG_BYTES));
      let plaintext: Buffer;
      try {
        plaintext = Buffer.concat([
          decipher.update(data.subarray(NONCE_BYTES, data.byteLength - TAG_BYTES)),
          decipher.final(),
        ]);
      } catch {
        throw new PayloadDecryptionError(
          `A payload encrypted with key "${keyId}" failed authentication: it was altered, or ADCP_PAYLOAD_KEYS holds different key material under that id.`,
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
  return { payloadCodecs: payloadCodecs(loadPayloadKeys(env)) };
}
