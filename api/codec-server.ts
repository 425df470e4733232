/**
 * The codec server (#12 item 4): the HTTP protocol Temporal's Web UI and CLI speak to see payloads the orchestrator
 * encrypted (and compressed). `POST /decode` and `POST /encode` take and answer `{"payloads": [{"metadata": {k:
 * base64}, "data": base64}]}`; the Web UI sends `X-Namespace` and, when "pass access token" is on, `Authorization`;
 * the CLI sends `--codec-auth` as `Authorization`.
 *
 * Decoding shows plaintext, so it needs the operator role (without it the UI shows ciphertext); encoding needs it
 * too by default, since it lets a caller produce payloads our workers trust. Each tenant's payloads are its own
 * (client/tenant-payload-converter.ts, encrypted with its data key): an operator decodes its tenant's payloads, and
 * gets any other payload back still encoded, as the Web UI then shows it; payloads of no tenant (the shared key) and
 * of every tenant are decoded for the admin role only. Encoding follows the same rule (403 otherwise). CORS admits
 * only the configured Web UI origins; preflight needs no credentials (browsers send none on it).
 *
 * The Temporal dev server's Web UI has no login, so it sends no credentials: on a gateway that runs on its
 * development key (loopback only, `npm start`), a request from a Web UI origin without credentials is the
 * development principal's (`webUiPrincipal`). Elsewhere the UI must pass an access token (a JWT the gateway
 * verifies) or sit behind an authenticating proxy.
 *
 * Mount: `app.use('/codec', createCodecServer({...}))`, before the app's JSON parser and 404 handler.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { METADATA_ENCODING_KEY, type Payload, type PayloadCodec } from '@temporalio/common';
import type { z } from 'zod';
import { ENCRYPTED_ENCODING, EncryptionPayloadCodec, encryptedTenantOf } from '../client/encryption-codec';
import { tenantOfPayload } from '../client/tenant-payload-converter';
import type { Authentication, AuthEvent } from './auth/middleware';
import { requireRole } from './auth/middleware';
import { type Principal, type Role, hasRole } from './auth/principal';
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
  /**
   * Who a request from a Web UI origin without credentials is: the development principal when the gateway runs on
   * its development key (the dev server's UI has no login). Absent: such a request is refused (401).
   */
  webUiPrincipal?: Principal;
}

/** Whether the principal may see (or produce) a payload of `tenant` (undefined: of no tenant, the shared key). */
function mayHandle(principal: Principal | undefined, tenant: string | undefined): boolean {
  if (!principal) return false;
  return hasRole(principal, 'admin') || (tenant !== undefined && tenant === principal.tenant);
}

const ENCRYPTED = Buffer.from(ENCRYPTED_ENCODING);

function isEncrypted(payload: Payload): boolean {
  const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
  return !!encoding && ENCRYPTED.equals(encoding);
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

  const encrypting = options.codecs.some((codec) => codec instanceof EncryptionPayloadCodec);
  const decodeRoles = options.decodeRoles ?? ['operator', 'admin'];
  const encodeRoles = options.encodeRoles ?? ['operator', 'admin'];

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
      const principal = req.principal;
      const payloads = parsed.data.payloads.map(fromJson);
      let answered: Payload[];
      try {
        if (direction === 'encode') {
          // Without encryption configured, encoding only compresses: nothing of a tenant's is at stake.
          const refused = encrypting
            ? payloads.findIndex((payload) => !mayHandle(principal, tenantOfPayload(payload)))
            : -1;
          if (refused >= 0) {
            const tenant = tenantOfPayload(payloads[refused]!);
            fail(
              res,
              403,
              'ENCODE_NOT_ALLOWED',
              `payloads.${refused} is ${tenant === undefined ? 'of no tenant' : `tenant "${tenant}"'s`}; principal "${principal?.id ?? '?'}" of tenant "${principal?.tenant ?? '?'}" may encode only its own tenant's payloads (the admin role encodes any).`,
            );
            return;
          }
          let encoded = payloads;
          for (const codec of options.codecs) encoded = await codec.encode(encoded);
          answered = encoded;
        } else {
          answered = [];
          for (const payload of payloads) {
            // Another tenant's ciphertext is not even decrypted: its tenant is in its clear metadata.
            if (isEncrypted(payload) && !mayHandle(principal, encryptedTenantOf(payload))) {
              answered.push(payload);
              continue;
            }
            let decoded = [payload];
            for (const codec of [...options.codecs].reverse()) decoded = await codec.decode(decoded);
            answered.push(decoded[0]!);
          }
        }
      } catch (error) {
        fail(res, 422, direction === 'decode' ? 'DECODE_FAILED' : 'ENCODE_FAILED', (error as Error).message);
        return;
      }
      res.set('Cache-Control', 'no-store').json({ payloads: answered.map(toJson) });
    };

  const json = jsonBody({ limitBytes: CODEC_BODY_LIMIT_BYTES });

  const { webUiPrincipal } = options;
  // The development principal for the dev server's Web UI (see above); credentials, when sent, are checked as ever.
  const authenticate: typeof options.authentication.authenticate = (req, res, next) => {
    const origin = req.get('origin');
    if (webUiPrincipal && !req.get('authorization') && origin && origins.has(origin)) {
      req.principal = webUiPrincipal;
      next();
      return;
    }
    return options.authentication.authenticate(req, res, next);
  };
  const roleOptions = options.onEvent ? { onEvent: options.onEvent } : {};
  router.post('/decode', authenticate, requireRole(decodeRoles, roleOptions), namespaceCheck, json, handler('decode'));
  router.post('/encode', authenticate, requireRole(encodeRoles, roleOptions), namespaceCheck, json, handler('encode'));
  router.all(['/decode', '/encode'], (req, res) => {
    res.set('Allow', 'POST, OPTIONS');
    fail(res, 405, 'METHOD_NOT_ALLOWED', `${req.method} is not served here; use POST.`);
  });
  return router;
}
