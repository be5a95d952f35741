import { eq } from "drizzle-orm";
import type { Allocation, SubmissionToken } from "../../../core/models.ts";
import type { StoreDeps } from "../deps.ts";
import { toAllocation } from "../rows.ts";
import { allocations } from "../schema.ts";

export function getAllocation(deps: StoreDeps, id: string): Allocation | null {
  const row = deps.db.select().from(allocations).where(eq(allocations.id, id)).get();
  return row ? toAllocation(row) : null;
}

export function findAllocationByToken(deps: StoreDeps, token: SubmissionToken): Allocation | null {
  const row = deps.db.select().from(allocations).where(eq(allocations.token, token)).get();
  return row ? toAllocation(row) : null;
}
