import { count } from "drizzle-orm";
import type { StoreDeps } from "../deps.ts";
import { workloads } from "../schema.ts";

export interface WorkloadCount {
  readonly kind: string;
  readonly phase: string;
  readonly count: number;
}

/** Workloads grouped by kind and phase, for /metrics: one indexed query whatever the total. */
export function countWorkloads(deps: StoreDeps): readonly WorkloadCount[] {
  return deps.db
    .select({ kind: workloads.kind, phase: workloads.phase, count: count() })
    .from(workloads)
    .groupBy(workloads.kind, workloads.phase)
    .all();
}
