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

export interface OwnerUsageCount {
  /** The principal; null: the admin's own workloads. */
  readonly owner: string | null;
  readonly kind: string;
  readonly count: number;
  readonly cpus: number;
  readonly gpus: number;
}

const OWNER_USAGE_SQL = `SELECT owner, kind, count(*) AS count, coalesce(sum(cpus), 0) AS cpus,
  coalesce(sum(gpus), 0) AS gpus FROM workloads INDEXED BY workloads_live WHERE ${LIVE_PHASES_SQL.split(
    ",",
  )
    .map((p) => `phase = ${p}`)
    .join(" OR ")} GROUP BY owner, kind`;

/** Live workloads and what they hold, by owner and kind, for /metrics (live rows only). */
export function countLiveWorkloadsByOwner(deps: StoreDeps): readonly OwnerUsageCount[] {
  return deps.db.$client.query<OwnerUsageCount, []>(OWNER_USAGE_SQL).all();
}
