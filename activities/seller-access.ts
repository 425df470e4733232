/**
 * Which seller a call goes to, and with whose credential: the seller's configuration and the token of (tenant,
 * seller), resolved when the call is made, so no credential is ever in an activity's input or in history.
 */
import type { SellerConfig, SellerRegistry } from '../config/sellers';
import { configFailure } from './failures';

export interface SellerAccess {
  agent: SellerConfig;
  token: string | undefined;
}

/** The seller's configuration, or a ConfigError failure when the registry does not know it. */
export function sellerConfig(sellers: SellerRegistry, sellerId: string): SellerConfig {
  try {
    return sellers.get(sellerId);
  } catch (error) {
    throw configFailure((error as Error).message);
  }
}

/** The seller and the credential to call it with: the tenant's own for this seller when it has one. */
export function sellerAccess(
  sellers: SellerRegistry,
  sellerId: string,
  env: NodeJS.ProcessEnv,
  tenant?: string,
): SellerAccess {
  try {
    return { agent: sellers.get(sellerId), token: sellers.token(sellerId, env, tenant) };
  } catch (error) {
    throw configFailure((error as Error).message);
  }
}
