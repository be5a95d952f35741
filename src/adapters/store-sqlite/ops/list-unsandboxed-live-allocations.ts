import { and, asc, inArray, isNull, ne, or } from "drizzle-orm";
import type { StoreDeps } from "../deps.ts";
import { allocations } from "../schema.ts";

/**
 * Ids of live allocations (QUEUED, RUNNING, STOPPING) that were not recorded as launched in
 * the verified sandbox (0, or NULL: unknown), oldest first, at most `limit`. SUBMITTING
 * rows are left out: they are being submitted by this daemon right now, through its current
 * launch path, and the SESSION being prepared is one of them.
 */
export function listUnsandboxedLiveAllocations(deps: StoreDeps, limit: number): string[] {
  return deps.db
    .select({ id: allocations.id })
    .from(allocations)
    .where(
      and(
        inArray(allocations.phase, ["QUEUED", "RUNNING", "STOPPING"]),
        or(isNull(allocations.launchSandboxed), ne(allocations.launchSandboxed, 1)),
      ),
    )
    .orderBy(asc(allocations.createdAt), asc(allocations.id))
    .limit(limit)
    .all()
    .map((r) => r.id);
}
