/**
 * Who knows each media buy a seller lists, and which buys no one or more than one knows: the comparison of the
 * orphan pass (docs/convergence.md), pure so that reconciliation's activities and its unit tests share it. A workflow
 * knows a buy when it indexes it (AdcpMediaBuyId); the claims come from a visibility search, one row per run.
 */

/** One workflow run that indexes a buy: its workflow, and the parent that started it as a child, if any. */
export interface BuyClaimRow {
  mediaBuyId: string;
  workflowId: string;
  parentWorkflowId?: string;
}

/** A buy more than one workflow knows (their workflow IDs). */
export interface MediaBuyClaim {
  mediaBuyId: string;
  owners: string[];
}

/**
 * The owners of each buy. Runs of one workflow count once (continue-as-new, a reopened operation), and an operation
 * run as a media buy's child counts with its parent: the buy's workflow and the create it ran are one owner.
 */
export function claimsFromRows(rows: Iterable<BuyClaimRow>): Map<string, string[]> {
  const known = new Map<string, Map<string, string | undefined>>();
  for (const row of rows) {
    const owners = known.get(row.mediaBuyId) ?? new Map<string, string | undefined>();
    if (!owners.has(row.workflowId) || row.parentWorkflowId !== undefined)
      owners.set(row.workflowId, row.parentWorkflowId);
    known.set(row.mediaBuyId, owners);
  }
  return new Map(
    [...known.entries()].map(([mediaBuyId, owners]) => [
      mediaBuyId,
      [...owners.entries()].filter(([, parent]) => !parent || !owners.has(parent)).map(([owner]) => owner),
    ]),
  );
}

/** The seller's listing against the claims: how many buys are known, the orphans, and the buys claimed twice. */
export function compareListing<Buy extends { mediaBuyId: string }>(
  listed: readonly Buy[],
  claims: ReadonlyMap<string, string[]>,
): { known: number; orphans: Buy[]; claimedTwice: MediaBuyClaim[] } {
  // A buy listed twice (a listing that shifted between pages) is one buy.
  const buys = [...new Map(listed.map((buy) => [buy.mediaBuyId, buy])).values()];
  const known = buys.filter((buy) => (claims.get(buy.mediaBuyId)?.length ?? 0) > 0);
  return {
    known: known.length,
    orphans: buys.filter((buy) => (claims.get(buy.mediaBuyId)?.length ?? 0) === 0),
    claimedTwice: known.flatMap((buy) => {
      const owners = claims.get(buy.mediaBuyId) ?? [];
      return owners.length > 1 ? [{ mediaBuyId: buy.mediaBuyId, owners: [...owners].sort() }] : [];
    }),
  };
}
