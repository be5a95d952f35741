import { eq } from "drizzle-orm";
import type { StoreDeps } from "../deps.ts";
import { allocations } from "../schema.ts";

export function markAcknowledged(deps: StoreDeps, allocationId: string): void {
  deps.db
    .update(allocations)
    .set({ acknowledgedAt: deps.clock.now() })
    .where(eq(allocations.id, allocationId))
    .run();
}
