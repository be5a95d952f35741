import { asc, eq } from "drizzle-orm";
import type { Allocation } from "../../../core/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toAllocation } from "../rows.ts";
import { allocations } from "../schema.ts";

/** A workload's attempts, oldest epoch first. */
export function listAllocations(deps: StoreDeps, workloadId: string): readonly Allocation[] {
  return deps.db
    .select()
    .from(allocations)
    .where(eq(allocations.workloadId, workloadId))
    .orderBy(asc(allocations.epoch))
    .all()
    .map(toAllocation);
}
