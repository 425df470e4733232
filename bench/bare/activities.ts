/** The bare baseline's one activity: the same @adcp/sdk ProtocolClient.callTool the orchestrator's activities use. */
import { ProtocolClient } from '@adcp/sdk/advanced';

export type BareSeller = Parameters<typeof ProtocolClient.callTool>[0];

/** How many products an answer carries (the caller checks it is not zero). */
export function productCount(body: unknown): number {
  const record = body as { products?: unknown; structuredContent?: { products?: unknown } } | undefined;
  const products = record?.structuredContent?.products ?? record?.products;
  return Array.isArray(products) ? products.length : 0;
}

export function createBareActivities(seller: BareSeller) {
  return {
    async callSeller(tool: string, params: Record<string, unknown>): Promise<number> {
      return productCount(await ProtocolClient.callTool(seller, tool, params));
    },
  };
}

export type BareActivities = ReturnType<typeof createBareActivities>;
