/**
 * The codec server (#12 item 4): the HTTP protocol Temporal's Web UI and CLI speak to see payloads the orchestrator
 * encrypted (and compressed). `POST /decode` and `POST /encode` take and answer `{"payloads": [{"metadata": {k:
 * base64}, "data": base64}]}`; the Web UI sends `X-Namespace` and, when "pass access token" is on, `Authorization`;
 * the CLI sends `--codec-auth` as `Authorization`.
 *
 * Decoding shows plaintext, so it needs the operator role (without it the UI shows ciphertext); encoding needs it
 * too by default, since it lets a caller produce payloads our workers trust. CORS admits only the configured Web UI
 * origins; preflight needs no credentials (browsers send none on it).
 *
 * Mount: `app.use('/codec', createCodecServer({...}))`, before the app's JSON parser and 404 handler.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Payload, PayloadCodec } from '@temporalio/common';
import type { z } from 'zod';
import type { Authentication, AuthEvent } from './auth/middleware';
import { requireRole } from './auth/middleware';
import type { Role } from './auth/principal';
import { CODEC_BODY_LIMIT_BYTES, jsonBody } from './body';
import { refuse as fail } from './problems';
import { codecPayloadsSchema as bodySchema } from './schemas';

export interface CodecServerOptions {
  /** The same codecs, in the same order, as the workers' and clients' data converter (`payloadCodecs()`). */
  codecs: PayloadCodec[];
  authentication: Authentication;
  /** Web UI origins allowed to call from a browser (ADCP_CODEC_CORS_ORIGINS); default the local dev server's UI. */
  corsOrigins?: string[];
  /** Namespaces served; a request whose X-Namespace is another one answers 403. Default: any. */
  namespaces?: string[];
  decodeRoles?: Role[];
  encodeRoles?: Role[];
  onEvent?: (event: AuthEvent) => void;
}

export const DEFAULT_WEB_UI_ORIGINS = ['http://127.0.0.1:8233', 'http://localhost:8233'];

type JsonPayload = z.infer<typeof bodySchema>['payloads'][number];

function fromJson(payload: JsonPayload): Payload {
  return {
    metadata: Object.fromEntries(
      Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, new Uint8Array(Buffer.from(value, 'base64'))]),
    ),
    data: new Uint8Array(Buffer.from(payload.data ?? '', 'base64')),
  };
}

function toJson(payload: Payload): { metadata: Record<string, string>; data: string } {
  return {
    metadata: Object.fromEntries(
      Object.entries(payload.metadata ?? {}).map(([key, value]) => [
        key,
        Buffer.from(value ?? new Uint8Array()).toString('base64'),
      ]),
    ),
    data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64'),
  };
}

export function createCodecServer(options: CodecServerOptions): Router {
  const origins = new Set(options.corsOrigins ?? DEFAULT_WEB_UI_ORIGINS);
  const router = express.Router();

  router.use((req, res, next) => {
    const origin = req.get('origin');
    if (origin && origins.has(origin)) {
      res.set({
        'Access-Control-Allow-Origin': origin,
        'Access-Control-Allow-Credentials': 'true',
        Vary: 'Origin',
      });
    } else if (origin) {
      res.vary('Origin');
    }
    if (req.method !== 'OPTIONS') return next();
    if (!origin || !origins.has(origin)) {
      fail(
        res,
        403,
        'ORIGIN_NOT_ALLOWED',
        `The origin "${origin ?? ''}" may not call the codec server (ADCP_CODEC_CORS_ORIGINS).`,
      );
      return;
    }
    res
      .status(204)
      .set({
        'Access-Control-Allow-Methods': 'POST, OPTIONS',
        'Access-Control-Allow-Headers': 'Content-Type, Authorization, X-Namespace',
        'Access-Control-Max-Age': '600',
      })
      .end();
  });

  const decodeRoles = options.decodeRoles ?? ['operator'];
  const encodeRoles = options.encodeRoles ?? ['operator'];

  const namespaceCheck = (req: Request, res: Response, next: NextFunction): void => {
    const namespace = req.get('x-namespace');
    if (options.namespaces && namespace !== undefined && !options.namespaces.includes(namespace)) {
      fail(res, 403, 'NAMESPACE_NOT_ALLOWED', `This codec server does not serve namespace "${namespace}".`);
      return;
    }
    next();
  };

  const handler =
    (direction: 'encode' | 'decode') =>
    async (req: Request, res: Response): Promise<void> => {
      if (!req.is(['application/json', 'application/*+json'])) {
        fail(res, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Send {"payloads": [...]} as application/json.');
        return;
      }
      const parsed = bodySchema.safeParse(req.body);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        fail(
          res,
          400,
          'INVALID_REQUEST',
          `${['payloads', ...(issue?.path ?? []).slice(1)].join('.')}: ${issue?.message ?? 'invalid'}`,
        );
        return;
      }
      let payloads = parsed.data.payloads.map(fromJson);
      try {
        if (direction === 'encode') for (const codec of options.codecs) payloads = await codec.encode(payloads);
        else for (const codec of [...options.codecs].reverse()) payloads = await codec.decode(payloads);
      } catch (error) {
        fail(res, 422, direction === 'decode' ? 'DECODE_FAILED' : 'ENCODE_FAILED', (error as Error).message);
        return;
      }
      res.set('Cache-Control', 'no-store').json({ payloads: payloads.map(toJson) });
    };

  const json = jsonBody({ limitBytes: CODEC_BODY_LIMIT_BYTES });

  const { authenticate } = options.authentication;
  const roleOptions = options.onEvent ? { onEvent: options.onEvent } : {};
  router.post('/decode', authenticate, requireRole(decodeRoles, roleOptions), namespaceCheck, json, handler('decode'));
  router.post('/encode', authenticate, requireRole(encodeRoles, roleOptions), namespaceCheck, json, handler('encode'));
  router.all(['/decode', '/encode'], (req, res) => {
    res.set('Allow', 'POST, OPTIONS');
    fail(res, 405, 'METHOD_NOT_ALLOWED', `${req.method} is not served here; use POST.`);
  });
  return router;
}
