/**
 * Large answers compressed on their way into Temporal (#9 item 15). Temporal refuses payloads over 2 MB, and a 2.5 MB
 * get_products catalogue is normal; JSON catalogues compress tenfold. Payloads from `GZIP_THRESHOLD_BYTES` up are
 * gzipped whole (the inner Payload, metadata included, as its protobuf bytes) under their own encoding; smaller ones
 * pass through untouched, so existing histories and the Web UI stay readable, and decode reads both.
 *
 * Every Worker and every Client of the orchestrator must use `dataConverter()`: a Client without it cannot read a
 * compressed result (it sees `binary/gzip` payloads).
 */
import type { DataConverter } from '@temporalio/common';
import { TENANT_PAYLOAD_CONVERTER_PATH, loadPayloadKeys, payloadCodecs } from './encryption-codec';

export { GZIP_ENCODING, GZIP_THRESHOLD_BYTES, GzipPayloadCodec } from './gzip-codec';

/**
 * The data converter of every orchestrator Worker and Client: the tenant payload converter, gzip for large payloads
 * and, when ADCP_PAYLOAD_KEYS is set, AES-256-GCM encryption after it with each tenant's data key
 * (client/encryption-codec.ts). The worker's workflow bundle must be built with the same converter
 * (workers/bundle-options.ts). Worker, gateway, CLI and clients must share the
 * same keys: one without them sees only ciphertext (`binary/encrypted` payloads) and cannot run or read operations.
 */
export function dataConverter(env: NodeJS.ProcessEnv = process.env): DataConverter {
  // The tenant payload converter marks each tenant's payloads, which the encryption codec keys per tenant.
  return { payloadConverterPath: TENANT_PAYLOAD_CONVERTER_PATH, payloadCodecs: payloadCodecs(loadPayloadKeys(env)) };
}
