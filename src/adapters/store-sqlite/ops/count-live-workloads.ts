import type { StoreDeps } from "../deps.ts";
import { LIVE_PHASES_SQL } from "./load-reconcile-snapshot.ts";

export interface WorkloadCount {
  readonly kind: string;
  readonly phase: string;
  readonly count: number;
}

// The partial index's own predicate (the chain of =, see load-reconcile-snapshot.ts), so the
// count walks the live rows only: a store with years of ended workloads is not scanned on
// every scrape (ended ones are counted as they end: openai4s_workload_ends_total).
const COUNT_LIVE_SQL = `SELECT kind, phase, count(*) AS count FROM workloads INDEXED BY workloads_live WHERE ${LIVE_PHASES_SQL.split(
  ",",
)
  .map((p) => `phase = ${p}`)
  .join(" OR ")} GROUP BY kind, phase`;

/** Workloads not yet ended, grouped by kind and phase, for /metrics. */
export function countLiveWorkloads(deps: StoreDeps): readonly WorkloadCount[] {
  return deps.db.$client.query<WorkloadCount, []>(COUNT_LIVE_SQL).all();
}
