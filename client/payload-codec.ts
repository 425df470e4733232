/**
 * Large answers compressed on their way into Temporal (#9 item 15). Temporal refuses payloads over 2 MB, and a 2.5 MB
 * get_products catalogue is normal; JSON catalogues compress tenfold. Payloads from `GZIP_THRESHOLD_BYTES` up are
 * gzipped whole (the inner Payload, metadata included, as its protobuf bytes) under their own encoding; smaller ones
 * pass through untouched, so existing histories and the Web UI stay readable, and decode reads both.
 *
 * Every Worker and every Client of the orchestrator must use `dataConverter()`: a Client without it cannot read a
 * compressed result (it sees `binary/gzip` payloads).
 */
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import {
  type DataConverter,
  type Payload,
  type PayloadCodec,
  METADATA_ENCODING_KEY,
  ValueError,
} from '@temporalio/common';
import { temporal } from '@temporalio/proto';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** The encoding of a compressed payload: its data is the gzipped protobuf of the original Payload. */
export const GZIP_ENCODING = 'binary/gzip';
/** Payloads at least this large are compressed. */
export const GZIP_THRESHOLD_BYTES = 256 * 1024;

const ENCODING_BYTES = new TextEncoder().encode(GZIP_ENCODING);
const textDecoder = new TextDecoder();

function isCompressed(payload: Payload): boolean {
  const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
  return !!encoding && textDecoder.decode(encoding) === GZIP_ENCODING;
}

export class GzipPayloadCodec implements PayloadCodec {
  constructor(private readonly thresholdBytes = GZIP_THRESHOLD_BYTES) {}

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(
      payloads.map(async (payload) => {
        if ((payload.data?.byteLength ?? 0) < this.thresholdBytes || isCompressed(payload)) return payload;
        const inner = temporal.api.common.v1.Payload.encode(payload).finish();
        return { metadata: { [METADATA_ENCODING_KEY]: ENCODING_BYTES }, data: new Uint8Array(await gzipAsync(inner)) };
      }),
    );
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(
      payloads.map(async (payload) => {
        if (!isCompressed(payload)) return payload;
        if (!payload.data) throw new ValueError('A gzip-compressed payload has no data.');
        const inner = temporal.api.common.v1.Payload.decode(new Uint8Array(await gunzipAsync(payload.data)));
        return { metadata: inner.metadata ?? {}, data: inner.data ?? new Uint8Array() } as Payload;
      }),
    );
  }
}

/** The data converter of every orchestrator Worker and Client. */
export function dataConverter(): DataConverter {
  return { payloadCodecs: [new GzipPayloadCodec()] };
}
