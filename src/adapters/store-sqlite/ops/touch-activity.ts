import { eq } from "drizzle-orm";
import type { StoreDeps } from "../deps.ts";
import { workloads } from "../schema.ts";

/**
 * Records user activity (exec, a task). Heartbeats must never call this: a live worker is
 * not a present user, and the reclaimer reads only this column.
 */
export function touchActivity(deps: StoreDeps, workloadId: string): void {
  deps.db
    .update(workloads)
    .set({ lastActiveAt: deps.clock.now() })
    .where(eq(workloads.id, workloadId))
    .run();
}
