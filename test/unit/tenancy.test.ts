/**
 * Tenancy's pure parts (#12 part B): tenant-scoped operation keys, per-tenant seller credentials and accounts in
 * agents.json, and the notification signing key's public half.
 */
import { ConfigError, TenantAccessError, parseAgentsFile } from '../../config/sellers';
import { generateNotificationJwk, notificationKeyFromJwk } from '../../config/notification-key';
import { isOperationId, operationIdFor } from '../../protocol';
import { isTenantName, maxCallerKeyLength, tenantScopedKey } from '../../protocol/tenancy';

const file = {
  agents: [
    { id: 'seller-a', url: 'https://a.example/mcp', protocol: 'mcp', token_env: 'SHARED_A' },
    { id: 'seller-b', url: 'https://b.example/mcp', protocol: 'mcp' },
  ],
  tenants: [
    {
      id: 'acme',
      notification_url: 'https://hooks.acme.example/adcp',
      sellers: { 'seller-a': { token_env: 'ACME_A', accounts: [{ account_id: 'acme-1' }] } },
    },
    { id: 'globex', sellers: { 'seller-a': { token_env: 'GLOBEX_A' }, 'seller-b': {} } },
  ],
};
const env = { SHARED_A: 'shared', ACME_A: 'acme-token', GLOBEX_A: 'globex-token' };

test('operation keys are scoped by tenant and stay valid operation IDs; without a tenant they are unchanged', () => {
  expect(tenantScopedKey(undefined, 'po-1')).toBe('po-1');
  expect(tenantScopedKey('acme', 'po-1')).toBe('acme:po-1');
  expect(tenantScopedKey('acme', 'po-1')).not.toBe(tenantScopedKey('globex', 'po-1'));
  expect(isOperationId(operationIdFor('create_media_buy', tenantScopedKey('acme', 'po-1')!))).toBe(true);
  expect(tenantScopedKey('acme', 'x'.repeat(maxCallerKeyLength('acme')))).toHaveLength(200);
  expect(tenantScopedKey('acme', 'x'.repeat(maxCallerKeyLength('acme') + 1))).toBeUndefined();
  expect(['acme', 'org_1.eu-west'].every(isTenantName)).toBe(true);
  expect(['', 'a:b', 'a b', 'a"', 'x'.repeat(65), 7].some(isTenantName)).toBe(false);
});

test('each tenant calls with its own credential; without a tenant, the seller`s own', () => {
  const sellerRegistry = parseAgentsFile(JSON.stringify(file), 'agents.json');
  expect(sellerRegistry.multiTenant).toBe(true);
  expect(sellerRegistry.token('seller-a', env, 'acme')).toBe('acme-token');
  expect(sellerRegistry.token('seller-a', env, 'globex')).toBe('globex-token');
  expect(sellerRegistry.token('seller-a', env)).toBe('shared');
  expect(sellerRegistry.token('seller-b', env, 'globex')).toBeUndefined();
  // A tenant without an entry for the seller never falls back to the shared credential.
  expect(() => sellerRegistry.token('seller-b', env, 'acme')).toThrow(TenantAccessError);
  expect(() => sellerRegistry.token('seller-a', env, 'initech')).toThrow(/Tenant "initech" has no access configured/);
  expect(() => sellerRegistry.token('seller-a', {}, 'acme')).toThrow(/ACME_A, which is not set/);
  expect(sellerRegistry.tenant('acme')?.notification_url).toBe('https://hooks.acme.example/adcp');
});

test("a tenant's account list is enforced, in any key order", () => {
  const sellerRegistry = parseAgentsFile(JSON.stringify(file), 'agents.json');
  expect(() => sellerRegistry.checkTenantAccess('seller-a', 'acme', { account_id: 'acme-1' })).not.toThrow();
  expect(() => sellerRegistry.checkTenantAccess('seller-a', 'acme', undefined)).not.toThrow();
  expect(() => sellerRegistry.checkTenantAccess('seller-a', 'acme', { account_id: 'globex-1' })).toThrow(
    expect.objectContaining({ field: 'params.account' }),
  );
  expect(() => sellerRegistry.checkTenantAccess('seller-a', 'globex', { account_id: 'anything' })).not.toThrow();
  expect(() => sellerRegistry.checkTenantAccess('seller-b', 'acme', undefined)).toThrow(
    expect.objectContaining({ field: 'agent_id' }),
  );
  expect(() => sellerRegistry.checkTenantAccess('seller-b', undefined, { account_id: 'x' })).not.toThrow();
});

test('the tenants list is checked: known sellers, unique ids, safe names', () => {
  const bad = (tenants: unknown[]) => () =>
    parseAgentsFile(JSON.stringify({ agents: file.agents, tenants }), 'agents.json');
  expect(bad([{ id: 'acme', sellers: { nope: {} } }])).toThrow(/names seller "nope", which agents does not list/);
  expect(bad([{ id: 'acme' }, { id: 'acme' }])).toThrow(/duplicate tenant "acme"/);
  expect(bad([{ id: 'a:b' }])).toThrow(ConfigError);
  expect(bad([{ id: 'acme', sellers: { 'seller-a': { token: 'secret-in-file' } } }])).toThrow(ConfigError);
});

test('the notification key publishes only its public half, tagged for webhook signing', () => {
  const key = notificationKeyFromJwk(generateNotificationJwk('k1'));
  expect(key.publicJwk).toMatchObject({ kid: 'k1', kty: 'OKP', crv: 'Ed25519', adcp_use: 'webhook-signing' });
  expect(key.publicJwk).not.toHaveProperty('d');
  expect(key.signerKey).toMatchObject({ keyid: 'k1', alg: 'ed25519' });
  expect(() => notificationKeyFromJwk({ kty: 'OKP', crv: 'Ed25519', x: 'x', kid: 'k' })).toThrow(ConfigError);
});
