/**
 * Bearer JWTs (#12 item 1) through a real express app: verified against a JWKS served over HTTP (createRemoteJWKSet)
 * and from a file; issuer, audience, exp and nbf checked with a small clock tolerance; a token presented twice is
 * accepted (bearer semantics), an expired one is refused with 401 and a `WWW-Authenticate` that says why.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express from 'express';
import { type JWK, SignJWT, exportJWK, generateKeyPair } from 'jose';
import { type Authentication, type JwtOptions, createAuthentication, createJwtVerifier } from '../../api/auth';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
let signing: KeyPair;
let stranger: KeyPair;
let jwk: JWK;
const servers: Server[] = [];
const ISSUER = 'https://idp.buyer.example/';
const AUDIENCE = 'adcp-orchestrator';

async function listen(app: express.Express): Promise<string> {
  const server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

let jwksUrl: string;
let jwksFetches = 0;
beforeAll(async () => {
  signing = await generateKeyPair('ES256');
  stranger = await generateKeyPair('ES256');
  jwk = { ...(await exportJWK(signing.publicKey)), kid: 'idp-2026', alg: 'ES256', use: 'sig' };
  const idp = express();
  idp.get('/.well-known/jwks.json', (_req, res) => {
    jwksFetches++;
    res.json({ keys: [jwk] });
  });
  jwksUrl = `${await listen(idp)}/.well-known/jwks.json`;
});
afterAll(async () => {
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** The gateway's shape: /healthz outside authentication, /v1 inside. */
async function gateway(authentication: Authentication): Promise<string> {
  const app = express();
  app.get('/healthz', (_req, res) => res.json({ status: 'ok' }));
  app.use('/v1', authentication.authenticate);
  app.get('/v1/whoami', (req, res) =>
    res.json({ id: req.principal!.id, tenant: req.principal!.tenant, roles: [...req.principal!.roles].sort() }),
  );
  return listen(app);
}

function token(
  claims: Record<string, unknown> = {},
  options: { key?: KeyPair; issuer?: string; audience?: string; expiresAt?: number; notBefore?: number } = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  let jwt = new SignJWT({ tenant: 'acme', roles: ['reader', 'approver'], ...claims })
    .setProtectedHeader({ alg: 'ES256', kid: 'idp-2026' })
    .setSubject('alice@buyer.example')
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt(now)
    .setExpirationTime(options.expiresAt ?? now + 300);
  if (options.notBefore !== undefined) jwt = jwt.setNotBefore(options.notBefore);
  return jwt.sign((options.key ?? signing).privateKey);
}

const jwtOptions = (overrides: Partial<JwtOptions> = {}): JwtOptions => ({
  jwksUrl,
  issuer: ISSUER,
  audience: AUDIENCE,
  clockToleranceSeconds: 30,
  ...overrides,
});

async function call(base: string, bearer?: string) {
  const response = await fetch(`${base}/v1/whoami`, {
    headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` },
  });
  return {
    status: response.status,
    challenge: response.headers.get('www-authenticate'),
    body: (await response.json()) as any,
  };
}

describe('a JWT from a remote JWKS', () => {
  let base: string;
  beforeAll(async () => {
    base = await gateway(createAuthentication({ jwt: createJwtVerifier(jwtOptions()) }));
  });

  test('is accepted and maps sub, tenant and roles to the principal', async () => {
    const answer = await call(base, await token());
    expect(answer).toMatchObject({
      status: 200,
      body: { id: 'alice@buyer.example', tenant: 'acme', roles: ['approver', 'reader'] },
    });
    expect(jwksFetches).toBeGreaterThan(0);
  });

  test('a replayed token is accepted again (bearer semantics: valid until it expires)', async () => {
    const jwt = await token();
    expect((await call(base, jwt)).status).toBe(200);
    expect((await call(base, jwt)).status).toBe(200);
  });

  test('an expired token is refused with 401, error="invalid_token" and why', async () => {
    const now = Math.floor(Date.now() / 1000);
    const answer = await call(base, await token({}, { expiresAt: now - 120 }));
    expect(answer.status).toBe(401);
    expect(answer.challenge).toBe(
      'Bearer realm="adcp-orchestrator", error="invalid_token", error_description="The token has expired."',
    );
    expect(answer.body.error).toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringContaining('expired') });
  });

  test('a token that expired within the clock tolerance is still accepted; one not yet valid beyond it is not', async () => {
    const now = Math.floor(Date.now() / 1000);
    expect((await call(base, await token({}, { expiresAt: now - 10 }))).status).toBe(200);
    const early = await call(base, await token({}, { notBefore: now + 120 }));
    expect(early.status).toBe(401);
    expect(early.challenge).toContain("'nbf' claim");
  });

  test.each([
    ['another issuer', { issuer: 'https://evil.example/' }, "'iss' claim"],
    ['another audience', { audience: 'someone-else' }, "'aud' claim"],
  ])('a token for %s is refused', async (_name, options, reason) => {
    const answer = await call(base, await token({}, options));
    expect(answer.status).toBe(401);
    expect(answer.challenge).toContain(reason);
  });

  test('a token signed by a key not in the JWKS is refused', async () => {
    const answer = await call(base, await token({}, { key: stranger }));
    expect(answer.status).toBe(401);
    expect(answer.challenge).toContain('not signed by a key of the configured JWKS');
  });

  test('an unsigned token (alg "none") and a tampered payload are refused', async () => {
    const jwt = await token();
    const [header, payload, signature] = jwt.split('.');
    const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${payload}.`;
    expect((await call(base, unsigned)).status).toBe(401);
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    const tampered = `${header}.${Buffer.from(JSON.stringify({ ...claims, tenant: 'other' })).toString('base64url')}.${signature}`;
    expect((await call(base, tampered)).status).toBe(401);
  });

  test('a token without exp is refused', async () => {
    const jwt = await new SignJWT({ tenant: 'acme', roles: ['reader'] })
      .setProtectedHeader({ alg: 'ES256', kid: 'idp-2026' })
      .setSubject('alice')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .sign(signing.privateKey);
    const answer = await call(base, jwt);
    expect(answer.status).toBe(401);
    expect(answer.challenge).toContain("'exp' claim");
  });

  test('a token without a tenant claim is refused', async () => {
    const answer = await call(base, await token({ tenant: undefined }));
    expect(answer.status).toBe(401);
    expect(answer.challenge).toContain("no 'tenant' claim");
  });

  test('no credentials: 401 with a challenge but no error code (RFC 6750 §3.1); /healthz stays open', async () => {
    const answer = await call(base);
    expect(answer.status).toBe(401);
    expect(answer.challenge).toBe('Bearer realm="adcp-orchestrator"');
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  test('another scheme is refused', async () => {
    const response = await fetch(`${base}/v1/whoami`, { headers: { authorization: `Basic ${btoa('a:b')}` } });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toContain('Only the Bearer scheme');
  });
});

test('claims mapping is configurable: nested tenant, space-separated roles, role names of the identity provider', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'adcp-jwks-'));
  try {
    const file = path.join(dir, 'jwks.json');
    writeFileSync(file, JSON.stringify({ keys: [jwk] }));
    const verifier = createJwtVerifier(
      jwtOptions({
        jwksUrl: undefined,
        jwksFile: file,
        principalClaim: 'email',
        tenantClaim: 'org.id',
        rolesClaim: 'scope',
        roleMap: { 'adcp.approve': 'approver', 'adcp.operate': 'operator' },
      }),
    );
    const base = await gateway(createAuthentication({ jwt: verifier }));
    const jwt = await token({
      email: 'bob@buyer.example',
      org: { id: 'globex' },
      tenant: undefined,
      roles: undefined,
      scope: 'openid adcp.approve adcp.operate buyer',
    });
    expect(await call(base, jwt)).toMatchObject({
      status: 200,
      body: { id: 'bob@buyer.example', tenant: 'globex', roles: ['approver', 'buyer', 'operator'] },
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
