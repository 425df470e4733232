/**
 * Public keys imported once. Turning a JWK into a KeyObject (`jwkToPublicKey`) cost about as much as a third of the
 * signature check itself when it ran on every webhook; a seller signs thousands of webhooks with one key.
 */
import type { KeyObject } from 'node:crypto';
import { jwkToPublicKey, type AdcpJsonWebKey } from '@adcp/sdk/signing/server';
import { LRUCache } from 'lru-cache';

/** The JWK members node:crypto builds a public key from (`d` is never used: jwkToPublicKey strips it). */
const KEY_MATERIAL = ['kty', 'crv', 'x', 'y', 'n', 'e'] as const;

interface CachedKey {
  /** The kid and key material the KeyObject was built from, to notice a JWK object changed after it was cached. */
  members: readonly unknown[];
  key: KeyObject;
}

function membersOf(jwk: AdcpJsonWebKey): unknown[] {
  const record = jwk as unknown as Record<string, unknown>;
  return [jwk.kid, ...KEY_MATERIAL.map((name) => record[name])];
}

function sameMembers(jwk: AdcpJsonWebKey, members: readonly unknown[]): boolean {
  const record = jwk as unknown as Record<string, unknown>;
  if (jwk.kid !== members[0]) return false;
  for (let i = 0; i < KEY_MATERIAL.length; i++) if (record[KEY_MATERIAL[i]] !== members[i + 1]) return false;
  return true;
}

export interface VerificationKeyCacheOptions {
  /** Distinct (kid, key material) pairs kept; the least recently used goes first. Default 1,024. */
  maxEntries?: number;
}

/**
 * KeyObjects by JWK. The JWK objects our resolvers return are stable (config keys for the process's life, a fetched
 * JWKS until it is refetched), so a WeakMap finds them without building a lookup key; a JWK seen for the first time
 * (a refetch) is found by kid and key material in a bounded LRU map. Either way the key material is compared, so a
 * key rotated under the same kid, or a JWK object changed in place, is imported afresh and never meets a stale
 * KeyObject. A JWK that does not import throws (jwkToPublicKey's `request_signature_key_unknown`) and is not cached.
 */
export class VerificationKeyCache {
  private readonly byObject = new WeakMap<AdcpJsonWebKey, CachedKey>();
  private readonly byMaterial: LRUCache<string, KeyObject>;

  constructor(options: VerificationKeyCacheOptions = {}) {
    this.byMaterial = new LRUCache({ max: Math.max(1, options.maxEntries ?? 1024) });
  }

  /** Distinct keys held in the bounded map. */
  get size(): number {
    return this.byMaterial.size;
  }

  publicKeyFor(jwk: AdcpJsonWebKey): KeyObject {
    const cached = this.byObject.get(jwk);
    if (cached !== undefined && sameMembers(jwk, cached.members)) return cached.key;
    const members = membersOf(jwk);
    // JSON keeps members apart unambiguously whatever their types (a fetched JWKS is not schema-checked).
    const material = JSON.stringify(members);
    let key = this.byMaterial.get(material);
    if (key === undefined) {
      key = jwkToPublicKey(jwk);
      this.byMaterial.set(material, key);
    }
    this.byObject.set(jwk, { members, key });
    return key;
  }
}
