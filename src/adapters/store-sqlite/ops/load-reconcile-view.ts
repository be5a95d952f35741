import { and, eq, notInArray } from "drizzle-orm";
import { type Allocation, TERMINAL_PHASES } from "../../../core/models.ts";
import type { ReconcileItem } from "../../../core/ports/reconciler-store.ts";
import type { StoreDeps } from "../deps.ts";
import { toAllocation, toWorkload } from "../rows.ts";
import { allocations, workloads } from "../schema.ts";

/**
 * Every workload that is not terminal, with its current attempt: two queries whatever the
 * number of workloads, because the reconciler reads this once per tick.
 */
export function loadReconcileView(deps: StoreDeps): readonly ReconcileItem[] {
  const live = deps.db
    .select()
    .from(workloads)
    .where(notInArray(workloads.phase, [...TERMINAL_PHASES]))
    .all()
    .map(toWorkload);
  if (live.length === 0) return [];
  const currentRows = deps.db
    .select({ a: allocations })
    .from(allocations)
    .innerJoin(
      workloads,
      and(
        eq(allocations.workloadId, workloads.id),
        eq(allocations.epoch, workloads.executionEpoch),
      ),
    )
    .where(notInArray(workloads.phase, [...TERMINAL_PHASES]))
    .all();
  const byWorkload = new Map<string, Allocation>();
  for (const { a } of currentRows) byWorkload.set(a.workloadId, toAllocation(a));
  return live.map((workload) => ({ workload, current: byWorkload.get(workload.id) ?? null }));
}
