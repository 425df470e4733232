/**
 * The gzip PayloadCodec (see payload-codec.ts for why and for the data converter that uses it). Its own module so the
 * encryption codec can compose with it without an import cycle.
 */
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { type Payload, type PayloadCodec, METADATA_ENCODING_KEY, ValueError } from '@temporalio/common';
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
